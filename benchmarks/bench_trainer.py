"""Speed of the builtin trainer's pieces on this machine, as ratios against baselines measured in the same run.

    .venv/bin/python benchmarks/bench_trainer.py [--trajectories 128] [--repeats 3]

One torch thread. The policy is the default tiny-qwen2 (d64, 2 layers) after a short warm start (so episodes
look like those of RL). Measured, each the median of --repeats:
* rollout (concat, 128 trajectories): batched KV-cache decoding vs recomputing every prefix (baseline);
* rollout: non-concat vs concat;
* one update (forward + backward over the rollout): tiny-qwen2 with SDPA vs tiny-gpt2 with eager attention;
* env steps/s and generated tokens/s of one full RL step (rollout + advantages + update).
Prints a Markdown table; numbers go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    import tempfile

    from agentrepro.trainer.config import TrainConfig
    from agentrepro.trainer.context import RunSpec
    from agentrepro.trainer.loop import Trainer
    from agentrepro.trainer.policy import ModelSpec, build_policy
    from agentrepro.trainer.rollout import Sampler, rollout
    from agentrepro.trainer.update import TrainBatch, update

    groups = max(1, args.trajectories // 8)
    config = {
        "study": "bench",
        "method": "grpo",
        "seed": 0,
        "env": {"name": "frozenlake", "params": {}},
        "model": {"name": "tiny-qwen2", "config": {"d_model": 64, "n_layers": 2, "n_heads": 4}},
        "train": {"progress": False, "groups": groups, "group_size": 8, "warmstart_target": 0.3, "steps": 1000},
    }
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(config, tmp, resume=False)
        spec: RunSpec = trainer.spec
        seeds = [10001 + i // 8 for i in range(groups * 8)]
        envs = [spec.make_env(training=True) for _ in seeds]

        def play(mode="concat", kv_cache=True, policy=None):
            return rollout(
                policy or trainer.policy,
                envs,
                seeds,
                [i // 8 for i in range(len(seeds))],
                trainer.codec,
                Sampler(1.0, torch.Generator().manual_seed(0)),
                mode=mode,
                max_turns=5,
                max_new_tokens=6,
                device=torch.device("cpu"),
                kv_cache=kv_cache,
            )

        rows = []
        cached = _median_time(lambda: play(), args.repeats)
        nocache = _median_time(lambda: play(kv_cache=False), args.repeats)
        rows.append(("rollout concat: KV cache vs recompute prefix", cached, nocache))
        non_concat = _median_time(lambda: play(mode="non_concat"), args.repeats)
        rows.append(("rollout: non-concat vs concat", non_concat, cached))

        ro = play()
        adv = torch.randn(ro.input_ids.shape, generator=torch.Generator().manual_seed(0)) * ro.loss_mask
        cfg = TrainConfig()

        def one_update(policy):
            opt = torch.optim.AdamW(policy.parameters(), lr=1e-9)
            update(
                policy,
                opt,
                torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0),
                TrainBatch(ro.input_ids, ro.attention_mask, ro.loss_mask.float(), adv, None),
                cfg,
                torch.Generator().manual_seed(0),
                torch.device("cpu"),
            )

        qwen = build_policy(spec.model, trainer.tokenizer, 0)
        gpt2 = build_policy(
            ModelSpec.from_dict({"name": "tiny-gpt2", "config": {"d_model": 64, "n_layers": 2, "n_heads": 4}}),
            trainer.tokenizer,
            0,
        )
        gpt2.lm.set_attn_implementation("eager")  # the baseline: transformers' eager attention
        rows.append(
            (
                "update: tiny-qwen2 SDPA vs tiny-gpt2 eager",
                _median_time(lambda: one_update(qwen), args.repeats),
                _median_time(lambda: one_update(gpt2), args.repeats),
            )
        )

        before = dict(trainer.counters)
        t0 = time.perf_counter()
        steps = args.repeats
        for _ in range(steps):
            trainer.train_step()
        elapsed = time.perf_counter() - t0
        env_steps = trainer.counters["env_steps"] - before["env_steps"]
        tokens = trainer.counters["tokens_generated"] - before["tokens_generated"]

    print(f"| measurement ({args.trajectories} trajectories, 1 thread) | this (s) | baseline (s) | speed-up |")
    print("|---|---|---|---|")
    for name, this, base in rows:
        print(f"| {name} | {this:.3f} | {base:.3f} | {base / this:.2f}x |")
    print(
        f"\nfull RL step: {elapsed / steps:.2f} s/step, {env_steps / elapsed:.0f} env steps/s, {tokens / elapsed:.0f} generated tokens/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
