"""A trainer that runs inside the test image (standard library only), driven by the `command` backend in
tests/workflow/test_container_study.py.

    python3 image_trainer.py train --run RUN_DIR --steps N
    python3 image_trainer.py eval --run RUN_DIR --step N --out OUTCOMES --identity STUDY METHOD SEED --panel PANEL_JSON

`train` writes metrics.jsonl and checkpoints/step<k>.json for steps 1..N, and image.txt: the variant named by the
image's /etc/agentrepro-image, or `host` where there is none (so the file says where the trainer ran). `eval` writes one
outcome row per task of the panel; success is `succeeds(task_id, seed, step)`, a deterministic stand-in for a
policy that the test recomputes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path


def succeeds(task_id: str, seed: int, step: int) -> int:
    draw = int(hashlib.sha256(f"{task_id}/{seed}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return int(draw < 0.25 + 0.25 * step)


def train(run: Path, steps: int) -> None:
    (run / "checkpoints").mkdir(parents=True, exist_ok=True)
    rows = [
        {"step": step, "reward_mean": 0.1 * step, "train_success_rate": 0.25 * step} for step in range(1, steps + 1)
    ]
    for row in rows:
        (run / "checkpoints" / f"step{row['step']}.json").write_text(json.dumps(row))
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    marker = Path("/etc/agentrepro-image")
    (run / "image.txt").write_text(marker.read_text() if marker.is_file() else "host\n")


def evaluate(step: int, out: Path, study: str, method: str, seed: int, panel: list[dict]) -> None:
    rows = [
        {
            "study": study,
            "method": method,
            "seed": seed,
            "step": step,
            "task_id": task["task_id"],
            "task_hash": task["task_hash"],
            "category": task["category"],
            "episode": 0,
            "success": succeeds(task["task_id"], seed, step),
            "reward": float(succeeds(task["task_id"], seed, step)),
            "turns": 1,
            "tokens": 8,
        }
        for task in panel
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    t = sub.add_parser("train")
    t.add_argument("--run", required=True, type=Path)
    t.add_argument("--steps", required=True, type=int)
    e = sub.add_parser("eval")
    e.add_argument("--run", required=True, type=Path)
    e.add_argument("--step", required=True, type=int)
    e.add_argument("--out", required=True, type=Path)
    e.add_argument("--identity", nargs=3, required=True, metavar=("STUDY", "METHOD", "SEED"))
    e.add_argument("--panel", required=True, type=json.loads)
    args = parser.parse_args()
    if args.verb == "train":
        train(args.run, args.steps)
    else:
        study, method, seed = args.identity
        evaluate(args.step, args.out, study, method, int(seed), args.panel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
