"""The builtin trainer: a tiny (or local) causal LM trained by multi-turn RL on the text environments.

Modules, in the order a step runs: config (every hyperparameter), context (run config -> env, tokenizer,
codec), tokenizer, policy, warmstart, rollout, credit (advantages per token), update (PPO-clip), checkpoint,
loop (the training loop), evaluate (outcome rows). The Backend adapter is agentrepro.backends.builtin.backend.
Importing this package does not import torch; its modules do.
"""
