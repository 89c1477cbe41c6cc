"""The RL step of the shipped GPU study (manifests/vagen-sokoban.yaml) as the workflow runs it, broken down.

    PYTHONPATH=src python3 benchmarks/bench_study_step.py [--model qwen2.5-0.5b|tiny] [--method ppo_concat]
        [--new-tokens 6] [--steps 3] [--eval-tasks 128] [--device cuda] [--profile] [--json out.json]
        [--answers sampled|canonical] [--fresh-prompts] [--unpacked]

The run config is the study's own: its env params (Sokoban 6x6, one box, up to 3 actions a turn, free_think
prompts), its `train` block and the method's settings, 5 turns, 128 trajectories (16 groups x 8), resolved by
the builtin backend as `agentrepro train` resolves it (so the defaults are what users get: `auto` update
precision, kernels and pass budget), with `model.path` a random-weight Qwen2 of Qwen2.5-0.5B's shape and a
ChatML chat template (`agentrepro.serving.tiny.build`; its tokenizer knows 512 tokens, the model's vocabulary
is Qwen's 151,936, so a random model seldom samples its end token and turns run to `--new-tokens`).
`--new-tokens` sets `train.max_new_tokens` (the study leaves it at the trainer's default of 6).

Measured, each the median over `--steps` steps after one untimed step (`first_step`: its time and rollout parts,
which include compiling and capturing the decode step; a fresh TORCHINDUCTOR_CACHE_DIR makes the compile a cold one):
* job start-up: importing the trainer (torch, transformers) and building the Trainer (model load, engine);
* the RL step from timings.jsonl (rollout, advantage, update, step_total; `steps`: each step's), and inside the
  rollout, with a device sync around each: the prefills, the decode loops, the environment and the prompts (chat template) per turn;
  how many times the engine allocated its buffers and captured its decode graph;
* generated tokens per step and per rollout second; the pass budget `auto` chose and the peak GPU memory;
* one checkpoint write (`Trainer._save`: weights, optimizer, RNG), as the training step makes it: the time the step
  waits (`checkpoint_blocked_s`: the copy to host memory) and until the file is written, then the same for a second
  save (`..._again_s`), which reuses the pinned host buffers the first one made; its file's bytes (not
  the step-0 checkpoint's beside it, which the trainer writes at start, weights only) and the bytes of its parts,
  and evaluating it on `--eval-tasks` tasks
  (`trainer.evaluate.evaluate_run`, what the workflow's eval job runs) once the model is loaded;
* how many concat chat turns extended their row and how many re-rendered the history (`history_last_step`);
  `--fresh-prompts` prefills every prompt whole instead (the baseline), `--answers canonical` answers each turn
  with the tokens of one fixed text (`CanonicalAnswer`) instead of the random model's samples; `--unpacked` trains
  each turn's row on its own (the baseline of trainer/packing.py); the update's rows and attended tokens;
* `--profile`: cProfile of one more step, the 25 functions with the most cumulative time.
* `--torch-profile`: torch.profiler over one more step, the 25 operators with the most device time and the 25
  with the most host time (`key_averages`), and the step's parts as the host saw them (`record_function` ranges).
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


class Clock:
    """Seconds and calls per label, each timed between device syncs (so GPU work lands on the part that queued it)."""

    def __init__(self, sync):
        self.sync, self.seconds, self.calls = sync, defaultdict(float), defaultdict(int)

    def wrap(self, owner, name: str, label: str) -> None:
        real = getattr(owner, name)

        def timed(*args, **kwargs):
            self.sync()
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[label] += time.perf_counter() - t0
                self.calls[label] += 1

        setattr(owner, name, timed)

    def take(self) -> dict:
        out = {k: round(v, 4) for k, v in self.seconds.items()} | {f"{k}_calls": v for k, v in self.calls.items()}
        self.seconds.clear(), self.calls.clear()
        return out


class CanonicalAnswer:
    """A sampler that answers every turn with the tokens of one fixed text (up to `new_tokens`, then <eos>), tokenized
    as the tokenizer would: what a trained model mostly does, and a random one almost never (its tokens seldom
    re-tokenize as generated, so every concat chat prompt re-renders the history; `--answers canonical` measures
    the other case)."""

    TEXT = (
        "<think>The box is left of the goal and I stand left of the box, so pushing right moves it onto the goal. "
        "Nothing blocks the way: the cells to the right are empty floor and the wall is further down. "
    ) * 8 + "</think><answer>Right</answer>"

    def __init__(self, codec, new_tokens: int):
        import torch

        ids = codec.tokenizer(self.TEXT, add_special_tokens=False)["input_ids"][: max(new_tokens - 1, 0)]
        self.ids = torch.tensor([*ids, codec.eos])

    def __call__(self, logits, trajs, turn, position):
        token = self.ids[min(position, len(self.ids) - 1)]
        return token.expand(logits.shape[0]).to(logits.device)


def storage_bytes(tensors) -> int:
    """Bytes of the storages under `tensors`, each counted once (tied weights share one), as torch.save writes them."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def study_config(args, model_dir: str) -> dict:
    """The run config of `args.method` seed 0 of the shipped study, as `agentrepro resolve` writes it."""
    manifest = yaml.safe_load((REPO / "manifests" / "vagen-sokoban.yaml").read_text())
    train = {**manifest["train"], **(manifest["methods"][args.method] or {})}
    train.update(
        steps=1000,
        device=args.device,
        max_new_tokens=args.new_tokens,
        progress=False,
        checkpoint_every=1000,  # no checkpoint inside the timed steps: the write is timed on its own
    )
    for setting in args.train:
        key, _, value = setting.partition("=")
        train[key] = yaml.safe_load(value)
    evaluation = {**manifest["eval"], "tasks": args.eval_tasks, "checkpoint": "last"}
    return {
        "study": manifest["study"],
        "method": args.method,
        "seed": 0,
        "backend": manifest["backend"],
        "model": {"name": manifest["model"]["name"], "path": model_dir},
        "env": manifest["env"],
        "train": train,
        "eval": evaluation,
        "resources": manifest["resources"],
    }


def torch_profile(torch, trainer, sync, cuda) -> dict:
    """torch.profiler over one step: the operators with the most device and host time, as table lines; the
    step's parts (rollout, row packing, the old log-probs pass, advantages, update) are named ranges."""
    import agentrepro.trainer.loop as loop

    def ranged(name, fn):
        def run(*a, **k):
            with torch.profiler.record_function(f"step.{name}"):
                return fn(*a, **k)

        return run

    parts = ("rollout", "pack_turn_rows", "batched_token_stats", "training_targets", "update", "metrics_row")
    real = {name: getattr(loop, name) for name in parts}
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    try:
        for name, fn in real.items():
            setattr(loop, name, ranged(name, fn))
        with torch.profiler.profile(activities=activities) as prof:
            trainer.train_step()
            sync()
    finally:
        for name, fn in real.items():
            setattr(loop, name, fn)
    averages = prof.key_averages()
    tables = {"host": averages.table(sort_by="cpu_time_total", row_limit=25, max_name_column_width=60)}
    if cuda:
        tables["device"] = averages.table(sort_by="device_time_total", row_limit=25, max_name_column_width=60)
    return {k: v.splitlines() for k, v in tables.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--unpacked",
        action="store_true",
        help="train each turn's row on its own (no trainer/packing.py: the baseline of the packed rows)",
    )
    parser.add_argument("--model", default="qwen2.5-0.5b", help="agentrepro.serving.tiny shape")
    parser.add_argument("--method", default="ppo_concat")
    parser.add_argument("--new-tokens", type=int, default=6)
    parser.add_argument("--steps", type=int, default=3, help="timed RL steps (after one untimed)")
    parser.add_argument("--eval-tasks", type=int, default=128)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--torch-profile", action="store_true")
    parser.add_argument(
        "--answers",
        choices=("sampled", "canonical"),
        default="sampled",
        help="sampled (the random model's tokens) or canonical (every turn the tokens of one fixed answer)",
    )
    parser.add_argument(
        "--fresh-prompts",
        action="store_true",
        help="prefill each concat chat prompt whole (rollout reuse_history=False, the baseline of the kept history)",
    )
    parser.add_argument(
        "--train",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a train setting over the study's (YAML value)",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    import torch

    import agentrepro.trainer.loop as loop
    from agentrepro.backends.builtin.backend import BuiltinBackend
    from agentrepro.runconfig import resolve_config
    from agentrepro.serving import tiny
    from agentrepro.trainer import checkpoint as ckpt
    from agentrepro.trainer import decode, dialogue, rollout
    from agentrepro.trainer.evaluate import evaluate_run

    imports_s = time.perf_counter() - t0
    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    out: dict = {
        "args": vars(args),
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "startup": {"python_to_main_s": round(t0 - STARTED, 3), "imports_s": round(imports_s, 3)},
    }
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = str(tiny.build(Path(tmp) / "model", shape=args.model, max_tokens=8192))
        backend = BuiltinBackend()
        config = study_config(args, model_dir)
        # a tree from before Backend.resolve: the defaults merged as it did
        config = (
            backend.resolve(config) if hasattr(backend, "resolve") else resolve_config(config, backend.default_config())
        )
        out["resolved_train"] = {
            k: config["train"][k]
            for k in ("update_precision", "update_kernels", "micro_batch_tokens", "warmstart", "rollout_engine", "mode")
        }
        run_dir = Path(tmp) / "run"
        t0 = time.perf_counter()
        trainer = loop.Trainer(config, run_dir, resume=False)
        sync()
        out["startup"]["trainer_s"] = round(time.perf_counter() - t0, 3)

        clock = Clock(sync)
        clock.wrap(decode.StaticDecoder, "prefill", "prefill")
        clock.wrap(decode.StaticDecoder, "allocate", "allocate")
        clock.wrap(decode.StaticRows, "generate", "generate")  # prefill + decode loop + copies back
        clock.wrap(rollout, "_step_env", "environment")
        if hasattr(dialogue, "prompts"):  # the chat prompts of a turn in one batch
            clock.wrap(rollout, "prompts", "chat_prompt")
        else:
            clock.wrap(dialogue.ChatDialogue, "prompt", "chat_prompt")
        captures = defaultdict(int)
        real_graph = torch.cuda.CUDAGraph

        class CountedGraph(real_graph):  # type: ignore[misc,valid-type]
            def __init__(self, *a, **k):
                captures["graphs"] += 1
                super().__init__(*a, **k)

        torch.cuda.CUDAGraph = CountedGraph
        shapes = []
        real_update = loop.update

        def spy(policy, optimizer, scheduler, batch, *rest):
            shapes.append([batch.attention_mask.shape[0], int(batch.attention_mask.sum())])
            return real_update(policy, optimizer, scheduler, batch, *rest)

        loop.update = spy
        histories = []
        real_rollout = loop.rollout

        def played(*a, **k):
            if args.fresh_prompts:
                k["reuse_history"] = False
            ro = real_rollout(*a, **k)
            histories.append(ro.extra.get("history"))
            return ro

        loop.rollout = played
        if args.unpacked:
            loop.pack_turn_rows = lambda ro, pad: ro
        if args.answers == "canonical":
            answer = CanonicalAnswer(trainer.codec, args.new_tokens)
            loop.Sampler = lambda *_: answer
        steps = []
        for _ in range(args.steps + 1):
            trainer.train_step()
            steps.append(clock.take() | {"graph_captures": captures.pop("graphs", 0)})
        sync()
        timings = [json.loads(x) for x in (run_dir / "timings.jsonl").read_text().splitlines()]
        out["first_step"] = {"step_total": round(timings[0]["step_total"], 4), "rollout_parts": steps[0]}
        timings, steps = timings[1:], steps[1:]
        metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        med = lambda rows, key: round(statistics.median(r.get(key, 0.0) for r in rows), 4)  # noqa: E731
        out["step"] = {k: med(timings, k) for k in ("rollout", "token_stats", "advantage", "update", "step_total")}
        out["steps"] = [{k: round(v, 4) for k, v in row.items() if isinstance(v, float)} for row in timings]
        out["rollout_parts"] = {k: med(steps, k) for k in sorted({k for s in steps for k in s})}
        generated = [b["tokens_generated"] - a["tokens_generated"] for a, b in itertools.pairwise(metrics)]
        out["generated_tokens_per_step"] = statistics.median(generated)
        out["generated_tokens_per_rollout_s"] = round(out["generated_tokens_per_step"] / out["step"]["rollout"], 1)
        out["history_last_step"] = histories[-1]  # concat chat turns that extended their row, or were re-rendered
        out["micro_batch_tokens"] = metrics[-1].get("micro_batch_tokens", config["train"]["micro_batch_tokens"])
        out["update_rows_attended_tokens"] = shapes[-1]
        out["gpu_peak_mem_gb"] = max((m["gpu_peak_mem_gb"] or 0.0) for m in metrics)
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            trainer.train_step()
            sync()
            profile.disable()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(25)
            out["profile_top25"] = text.getvalue().splitlines()[-40:]
            clock.take()
        if args.torch_profile:
            out["torch_profile"] = torch_profile(torch, trainer, sync, cuda)
            clock.take()

        sync()
        t0 = time.perf_counter()
        if hasattr(trainer, "writer"):  # the step's save: it waits for the copy to host memory, a thread writes
            trainer._save(background=True)
            out["checkpoint_blocked_s"] = round(time.perf_counter() - t0, 3)
            trainer.writer.wait()
        else:
            trainer._save()
        sync()
        out["checkpoint_write_s"] = round(time.perf_counter() - t0, 3)
        if hasattr(trainer, "writer"):  # a later save, into the host buffers the first one made
            t0 = time.perf_counter()
            trainer._save(background=True)
            out["checkpoint_blocked_again_s"] = round(time.perf_counter() - t0, 3)
            trainer.writer.wait()
            out["checkpoint_write_again_s"] = round(time.perf_counter() - t0, 3)
        out["checkpoint_bytes"] = ckpt.checkpoint_path(run_dir, trainer.step).stat().st_size
        out["checkpoint_part_bytes"] = {
            "model": storage_bytes(trainer.policy.state_dict().values()),
            "optimizer": storage_bytes(
                t for state in trainer.optimizer.state.values() for t in state.values() if torch.is_tensor(t)
            ),
        }
        torch.cuda.CUDAGraph = real_graph
        trainer_step = trainer.step
        del trainer
        if cuda:
            torch.cuda.empty_cache()
        t0 = time.perf_counter()
        rows = evaluate_run(config, run_dir, trainer_step)
        sync()
        out["eval"] = {
            "tasks": len(rows),
            "seconds_with_model_load": round(time.perf_counter() - t0, 3),
            "success": sum(r["success"] for r in rows),
            "parts": clock.take(),
        }
    print(json.dumps({k: v for k, v in out.items() if k not in ("profile_top25", "torch_profile")}, indent=1))
    if args.profile:
        print("\n".join(out["profile_top25"]))
    for table in out.get("torch_profile", {}).values():
        print("\n".join(table))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
