"""Evaluation of one checkpoint on the study's fixed task panel: one outcome row per episode (docs/design.md §3.4).

The panel is `eval.task_panel` of the run config (frozen in the lock) or, without one, the seeds
`eval.first_seed .. + eval.tasks`. Every task is re-described by the environment and its hash compared
with the panel's, so a row is only written for the task that was frozen. `eval.temperature` 0 is greedy
decoding; above 0, sampling from a generator seeded by (`eval.sample_seed`, run seed, step, episode),
so the same checkpoint always gives the same outcomes (`eval.top_p` < 1: nucleus sampling). `eval.max_turns`
overrides the training turn limit. Episodes use the environment's own rewards.
Step 0 is the policy after the warm start (before any RL update). Episodes decode on the engine training rollouts
use (`train.rollout_engine`: on CUDA the static engine for Qwen2-family models, trainer/decode.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from agentrepro import outcomes
from agentrepro.trainer import checkpoint as ckpt
from agentrepro.trainer.context import RunSpec
from agentrepro.trainer.decode import engine_for
from agentrepro.trainer.policy import build_policy, run_device
from agentrepro.trainer.rollout import Sampler, rollout


def panel_of(spec: RunSpec) -> list[dict[str, Any]]:
    """The frozen panel, checked against the environment's own task descriptions (hash for hash)."""
    return outcomes.frozen_panel(spec.env_name, spec.env_params, spec.eval)


def evaluate_policy(
    policy, spec: RunSpec, codec, panel: list[dict[str, Any]], step: int, device, engine=None
) -> list[dict[str, Any]]:
    """Outcome rows of `policy` on `panel` (episodes_per_task each); `engine`: the static rollout engine to decode on
    (trainer/decode.py), as training rollouts do."""
    ev, cfg = spec.eval, spec.train
    temperature = float(ev.temperature)
    episodes = int(ev.episodes_per_task)
    rows = []
    seeds = [int(t["seed"]) for t in panel]
    bar = tqdm(
        range(episodes),
        desc=f"eval {spec.method} seed{spec.seed} step{step}",
        unit="episode x panel",
        disable=not cfg.progress,
    )
    for episode in bar:
        key = np.random.SeedSequence([int(ev.sample_seed), spec.seed, step, episode]).generate_state(1)[0]
        generator = torch.Generator().manual_seed(int(key))
        envs = [spec.make_env(training=False) for _ in panel]
        ro = rollout(
            policy,
            envs,
            seeds,
            list(range(len(panel))),
            codec,
            Sampler(temperature, generator, float(ev.top_p)),
            mode=cfg.mode,
            max_turns=int(cfg.max_turns if ev.max_turns is None else ev.max_turns),
            max_new_tokens=cfg.max_new_tokens,
            device=device,
            bf16=cfg.bf16,
            engine=engine,
        )
        for i, task in enumerate(panel):
            turns = ro.traj_turns(i)
            rows.append(
                outcomes.row(
                    {"study": spec.study, "method": spec.method, "seed": spec.seed},
                    step,
                    task,
                    episode=episode,
                    success=any(t.success for t in turns),
                    reward=sum(t.reward for t in turns),
                    turns=len(turns),
                    tokens=sum(t.end - t.start for t in turns),
                    category=spec.env_name,
                )
            )
        bar.set_postfix(success=f"{sum(r['success'] for r in rows) / len(rows):.3f}")
    return rows


def evaluate_run(config: dict[str, Any], run_dir: str | Path, step: int) -> list[dict[str, Any]]:
    """Load checkpoint `step` of `run_dir` and evaluate it on the panel."""
    spec = RunSpec.from_config(config)
    device = run_device(spec.train)
    tokenizer = ckpt.load_tokenizer(run_dir)
    codec = spec.make_codec(tokenizer)
    policy = build_policy(spec.model, tokenizer, spec.seed)
    policy.load_state_dict(ckpt.load_checkpoint(run_dir, step)["model"])
    policy.to(device).eval()
    engine = engine_for(spec.train.rollout_engine, policy, device, spec.train.bf16)  # the training rollouts' engine
    return evaluate_policy(policy, spec, codec, panel_of(spec), step, device, engine)
