"""A real external trainer in miniature, driven by the `command` backend in the tests.

`train --run DIR --steps N [--resume true|false] [--note TEXT]`: one "step" per iteration; after each
step it rewrites metrics.jsonl and timings.jsonl atomically and saves checkpoints/step<N>.json; with
--resume true it continues after the last checkpoint. MINI_SLEEP (seconds per step) makes it slow
enough to be killed; MINI_FAIL_AT=<step> makes it exit 3 at that step. --note is written verbatim to
DIR/note.txt (the quoting test reads it back).

`eval --run DIR --step N --out FILE`: plays the frozen task panel of DIR/resolved_config.yaml with the
checkpoint of step N and writes one outcome row per task (docs/design.md §3.4). Success is a deterministic
function of (task, step) that becomes likelier with the step: a stand-in for a policy that learns.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import yaml


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def last_checkpoint(run: Path) -> int:
    steps = [int(p.stem[4:]) for p in (run / "checkpoints").glob("step*.json")]
    return max(steps, default=0)


def train(args) -> int:
    run = Path(args.run)
    (run / "checkpoints").mkdir(parents=True, exist_ok=True)
    print(f"mini_trainer pid {os.getpid()}", flush=True)
    if args.note is not None:
        atomic_write(run / "note.txt", args.note)
    if "MINI_NOTE_ENV" in os.environ:  # an env value rendered from a placeholder (no shell quoting involved)
        atomic_write(run / "note_env.txt", os.environ["MINI_NOTE_ENV"])
    start = last_checkpoint(run) if args.resume == "true" else 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()] if start else []
    metrics = [m for m in metrics if m["step"] <= start]
    sleep = float(os.environ.get("MINI_SLEEP", "0"))
    fail_at = int(os.environ.get("MINI_FAIL_AT", "-1"))
    weight = json.loads((run / "checkpoints" / f"step{start}.json").read_text())["weight"] if start else 0.0
    for step in range(start + 1, args.steps + 1):
        if step == fail_at:
            print(f"mini_trainer: simulated crash at step {step}", file=sys.stderr)
            return 3
        time.sleep(sleep)
        weight += args.lr
        metrics.append(
            {
                "step": step,
                "env_steps": 10 * step,
                "episodes": 4 * step,
                "reward_mean": weight,
                "train_success_rate": min(1.0, step / args.steps),
                "lr": args.lr,
            }
        )
        atomic_write(run / "metrics.jsonl", "".join(json.dumps(m) + "\n" for m in metrics))
        atomic_write(
            run / "timings.jsonl",
            "".join(
                json.dumps({"step": m["step"], "rollout": 0.01, "update": 0.01, "step_total": 0.02}) + "\n"
                for m in metrics
            ),
        )
        atomic_write(run / "checkpoints" / f"step{step}.json", json.dumps({"step": step, "weight": weight}))
    return 0


def evaluate(args) -> int:
    run = Path(args.run)
    config = yaml.safe_load((run / "resolved_config.yaml").read_text())
    if args.step and not (run / "checkpoints" / f"step{args.step}.json").is_file():
        print(f"mini_trainer: no checkpoint for step {args.step}", file=sys.stderr)
        return 4
    steps = max(1, config["train"]["steps"])
    rows = []
    for task in config["eval"]["task_panel"]:
        draw = int(hashlib.sha256(f"{task['task_id']}/{config['seed']}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        success = int(draw < 0.2 + 0.6 * args.step / steps)
        rows.append(
            {
                "study": config["study"],
                "method": config["method"],
                "seed": config["seed"],
                "step": args.step,
                "task_id": task["task_id"],
                "task_hash": task["task_hash"],
                "category": task["category"],
                "episode": 0,
                "success": success,
                "reward": float(success),
                "turns": 3,
                "tokens": 42,
            }
        )
    if os.environ.get("MINI_BAD_ROW"):
        rows[0]["success"] = 2
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(Path(args.out), "".join(json.dumps(r) + "\n" for r in rows))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--run", required=True)
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--lr", type=float, default=0.1)
    t.add_argument("--resume", default="true")
    t.add_argument("--note")
    e = sub.add_parser("eval")
    e.add_argument("--run", required=True)
    e.add_argument("--step", type=int, required=True)
    e.add_argument("--out", required=True)
    args = parser.parse_args()
    return train(args) if args.cmd == "train" else evaluate(args)


if __name__ == "__main__":
    raise SystemExit(main())
