"""Supervised warm start on BFS demonstrations (Env.solve), stopped at a validation success target.

Real studies start RL from a pretrained instruct model (the builtin backend turns the warm start off for a
`model.path` model unless the manifest asks for it); a tiny model from scratch cannot learn FrozenLake
by RL within a CPU budget, so the builtin trainer first imitates the environment's shortest-path solver:
each demonstration plays the BFS path in turns of `warmstart_actions_per_turn` actions, laid out exactly
like a rollout of the configured mode (same tokens, same loss mask on the demonstrated actions and
<eos>). Training stops as soon as greedy success on the validation seeds (disjoint from the training and
evaluation seeds) reaches `warmstart_target`, so that RL has room to improve. It depends only on the run
seed and the warm-start settings, never on the RL method: every method of a seed starts from the same
weights. Its passes take at most `train.micro_batch_tokens` padded tokens (auto on CUDA: trainer/memory.py), the
gradients accumulated to the whole batch's token mean. Its record (steps, validation curve, the pass budget) is
written to warmstart.json. `make_warmstart` makes a warm start of
its own, shared by the methods of a seed (trainer/shared_warmstart.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentrepro.fileio import atomic_write_json
from agentrepro.trainer import checkpoint as ckpt
from agentrepro.trainer.context import RunSpec
from agentrepro.trainer.dialogue import Codec
from agentrepro.trainer.evaluate import evaluate_run
from agentrepro.trainer.memory import auto_pass_tokens
from agentrepro.trainer.policy import build_policy, run_device
from agentrepro.trainer.rollout import Sampler, rollout
from agentrepro.trainer.shared_warmstart import RECORD
from agentrepro.trainer.step_record import device_memory
from agentrepro.trainer.update import masked_mean, micro_batches, token_stats


def demonstration_rows(
    env, seed: int, codec: Codec, mode: str, actions_per_turn: int
) -> list[tuple[list[int], list[int]]]:
    """(ids, loss mask) rows of one solved episode: one row (concat) or one row per turn (non_concat, or a chat model)."""
    obs, info = env.reset(int(seed))
    dialogue = codec.dialogue(env, mode, obs, info)
    path = env.solve()
    turns = [path[i : i + actions_per_turn] for i in range(0, len(path), actions_per_turn)]
    one_row = mode == "concat" and not codec.chat
    rows: list[tuple[list[int], list[int]]] = []
    ids, mask = [codec.bos], [0]
    for k, actions in enumerate(turns):
        prompt = dialogue.prompt()
        target = codec.demo(actions)
        if not one_row and k > 0:
            ids, mask = [codec.bos], [0]
        ids = ids + prompt + target
        mask = mask + [0] * len(prompt) + [1] * len(target)
        if not one_row:
            rows.append((ids, mask))
        response = codec.render(target[:-1])
        obs, _, done, info = env.step(response)
        if done:
            break
        dialogue.step(response, obs, info)
    if one_row:
        rows.append((ids, mask))
    return rows


def collate(rows: list[tuple[list[int], list[int]]], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (ids, attention, loss mask), each (rows, tokens)."""
    width = max(len(r[0]) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros(ids.shape, dtype=torch.float32)
    for i, (r, m) in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        attn[i, : len(r)] = 1
        mask[i, : len(m)] = torch.tensor(m, dtype=torch.float32)
    return ids, attn, mask


def greedy_success(policy, spec, codec: Codec, seeds: list[int], device) -> float:
    """Greedy success rate, one episode per seed, with the environment's own rewards."""
    envs = [spec.make_env(training=False) for _ in seeds]
    result = rollout(
        policy,
        envs,
        seeds,
        list(range(len(seeds))),
        codec,
        Sampler(0.0, None),
        mode=spec.train.mode,
        max_turns=spec.train.max_turns,
        max_new_tokens=spec.train.max_new_tokens,
        device=device,
        bf16=spec.train.bf16,
    )
    solved = {t.traj for t in result.turns if t.success}
    return len(solved) / len(seeds)


def warm_start(policy, spec, codec: Codec, device, *, progress: bool = False) -> dict[str, Any]:
    """Train `policy` in place on demonstrations until the validation target; returns the record."""
    cfg = spec.train
    record: dict[str, Any] = {
        "enabled": cfg.warmstart,
        "target": cfg.warmstart_target,
        "steps": 0,
        "curve": [],
        "demonstration": f"BFS shortest path (Env.solve), {cfg.warmstart_actions_per_turn} actions per turn",
    }
    if not cfg.warmstart:
        return record
    started = time.perf_counter()
    rng = np.random.default_rng([spec.seed, 0x5747])  # warm-start demonstrations: a stream of their own
    val_seeds = list(range(cfg.warmstart_val_first_seed, cfg.warmstart_val_first_seed + cfg.warmstart_val_seeds))
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.warmstart_lr)
    env = spec.make_env(training=False)
    policy.eval()
    rate = greedy_success(policy, spec, codec, val_seeds, device)
    record["curve"].append({"step": 0, "val_success": rate})
    budget = cfg.micro_batch_tokens
    if budget == 0 and device.type == "cuda":  # auto (trainer/memory.py), sized after the first validation rollouts
        available, total = device_memory(device)
        budget = auto_pass_tokens(policy, cfg, available=available, total=total, warmstart=True)
    record["micro_batch_tokens"] = budget
    step = 0
    while rate < cfg.warmstart_target and step < cfg.warmstart_max_steps:
        seeds = rng.integers(cfg.train_first_seed, cfg.train_first_seed + cfg.train_num_seeds, size=cfg.warmstart_batch)
        rows = [
            r for s in seeds for r in demonstration_rows(env, int(s), codec, cfg.mode, cfg.warmstart_actions_per_turn)
        ]
        ids, attn, mask = collate(rows, codec.pad)
        policy.train()
        optimizer.zero_grad(set_to_none=True)
        denom = mask.sum().clamp(min=1).to(device)  # each pass's share of the whole batch's token mean
        loss = torch.zeros((), device=device)
        for idx, cols in micro_batches(attn, torch.arange(len(rows)), budget):
            part = mask[idx, :cols]
            logp, _, _ = token_stats(
                policy,
                ids[idx, :cols],
                attn[idx, :cols],
                with_values=False,
                with_entropy=False,
                device=device,
                bf16=cfg.bf16,
                where=part,
            )
            term = -masked_mean(logp, part.to(device), denom)
            term.backward()
            loss += term.detach()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grad_clip)
        optimizer.step()
        policy.eval()
        step += 1
        if step % cfg.warmstart_eval_every == 0 or step == cfg.warmstart_max_steps:
            rate = greedy_success(policy, spec, codec, val_seeds, device)
            record["curve"].append({"step": step, "val_success": rate, "loss": float(loss.detach())})
    record.update(
        steps=step, val_success=rate, reached=rate >= cfg.warmstart_target, wall_s=time.perf_counter() - started
    )
    return record


def make_warmstart(config: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """Warm-start into `out` and evaluate step 0 (a shared warm start, trainer/shared_warmstart.py); returns the step-0
    outcome rows (not yet written). It does what a run that warm-starts itself does before its first RL step, in the
    same order, so the weights are the same bytes."""
    spec = RunSpec.from_config(config)
    device = run_device(spec.train)
    ckpt.seed_global_rng(spec.seed)  # as a run that warm-starts itself does (loop.Trainer)
    tokenizer = spec.build_tokenizer()
    codec = spec.make_codec(tokenizer)
    policy = build_policy(spec.model, tokenizer, spec.seed).to(device)
    policy.eval()
    ckpt.save_tokenizer(out, tokenizer)
    record = warm_start(policy, spec, codec, device)
    atomic_write_json(out / RECORD, record)
    counters = {
        "env_steps": 0,
        "episodes": 0,
        "tokens_generated": 0,
        "tokens_trained": 0,
        "wall_s": record.get("wall_s", 0.0),
    }
    # the global torch state goes with the weights; a run's own generators start from its seed (loop.Trainer)
    ckpt.save_checkpoint(out, 0, policy=policy, rng={"torch_cpu": torch.get_rng_state()}, counters=counters)
    return evaluate_run(config, out, 0)
