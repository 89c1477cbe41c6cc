"""One seed of a study's methods from one shared warm start, through the verbs the workflow runs.

    python benchmarks/shared_warmstart.py OUT [--manifest manifests/frozenlake-cpu.yaml] [--seed 0]
        [--methods grpo,gigpo] [--steps N] [--device cpu|cuda] [--workers N]

Writes each method's run config from the manifest (its train block with the method's overrides; `--steps` and
`--device` replace train.steps and train.device; the eval block without `every`, on eval.tasks seeds from
eval.first_seed), then runs `agentrepro warmstart` once, `agentrepro train --from-warmstart` for every method
(`--workers` at a time) and `agentrepro eval` of steps 0 and N. Prints one JSON line per method: warm-start steps
and validation success, step-0 and final successes, the exact McNemar p of final against step 0, and whether the
run's step-0 checkpoint and step-0 outcomes are the warm start's bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def verb(*args) -> None:
    subprocess.run([sys.executable, "-m", "agentrepro", *map(str, args)], check=True, stdout=subprocess.DEVNULL)


def config_of(manifest: dict, method: str, seed: int, steps: int | None, device: str | None) -> dict:
    train = {**manifest["train"], **(manifest["methods"][method] or {}), "progress": False}
    train.update({k: v for k, v in (("steps", steps), ("device", device)) if v is not None})
    return {
        "study": manifest["study"],
        "method": method,
        "seed": seed,
        "backend": manifest["backend"],
        "model": manifest["model"],
        "env": manifest["env"],
        "train": train,
        "eval": {k: v for k, v in manifest["eval"].items() if k != "every"},
    }


def successes(path: Path) -> list[int]:
    return [json.loads(line)["success"] for line in path.read_text().splitlines()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--manifest", type=Path, default=REPO / "manifests" / "frozenlake-cpu.yaml")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default="grpo,gigpo")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--device")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    from scipy.stats import binomtest

    manifest = yaml.safe_load(args.manifest.read_text())
    methods = args.methods.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    for method in methods:
        (args.out / f"{method}.yaml").write_text(
            yaml.safe_dump(config_of(manifest, method, args.seed, args.steps, args.device))
        )
    warm = args.out / "_warmstart" / f"seed{args.seed}"
    started = time.perf_counter()
    verb("warmstart", "--config", args.out / f"{methods[0]}.yaml", "--out", warm)
    warm_s = time.perf_counter() - started
    steps = yaml.safe_load((args.out / f"{methods[0]}.yaml").read_text())["train"]["steps"]

    def run(method: str) -> dict:
        run_dir = args.out / method
        t0 = time.perf_counter()
        verb("train", "--config", args.out / f"{method}.yaml", "--out", run_dir, "--from-warmstart", warm)
        train_s = time.perf_counter() - t0
        for step in (0, steps):
            verb("eval", "--run", run_dir, "--step", step)
        a, b = (
            successes(run_dir / "eval" / "step0" / "outcomes.jsonl"),
            successes(run_dir / "eval" / f"step{steps}" / "outcomes.jsonl"),
        )
        up, down = sum(y > x for x, y in zip(a, b)), sum(x > y for x, y in zip(a, b))
        record = json.loads((run_dir / "warmstart.json").read_text())
        digest = [hashlib.sha256((d / "checkpoints" / "step0.pt").read_bytes()).hexdigest() for d in (run_dir, warm)]
        return {
            "method": method,
            "seed": args.seed,
            "device": args.device or manifest["train"].get("device", "cpu"),
            "warmstart_steps": record["steps"],
            "warmstart_val": record.get("val_success"),
            "warmstart_s": round(warm_s, 1),
            "step0": sum(a),
            "final": sum(b),
            "n": len(a),
            "up": up,
            "down": down,
            "mcnemar_p": binomtest(up, up + down).pvalue if up + down else 1.0,
            "train_s": round(train_s, 1),
            "step0_checkpoint_is_the_warm_starts": digest[0] == digest[1],
            "step0_outcomes_are_the_warm_starts": a == successes(warm / "eval" / "step0" / "outcomes.jsonl"),
        }

    with ThreadPoolExecutor(args.workers) as pool:
        for row in pool.map(run, methods):
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
