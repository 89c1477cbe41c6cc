"""Evaluation through an OpenAI-compatible chat server: one evaluator for every backend.

* `chat`: the messages of one episode as the reference's agent loop writes them (concat / non_concat).
* `client`: chat requests with explicit sampling parameters, a seed, retries and a failure record.
* `engine`: many episodes in flight against one server; outcome rows exactly as the builtin evaluator's.
* `servers`: the servers an evaluation starts and stops itself (transformers serve, SGLang) or a given URL.
"""
