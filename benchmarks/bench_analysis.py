"""Benchmark of `agentrepro analyze` on 1,000 runs × 1,000 tasks (4 methods × 250 seeds, one step).

Phases, each timed with time.perf_counter, with peak RSS (ru_maxrss) after the run:
  1. write the 1,000 outcomes.jsonl files (setup, not part of the analysis);
  2. baseline: json.loads of every line (what any reader must at least do);
  3. the full `analyze_outcomes` (read + schema checks + validation + every table + paired bootstrap with
     2,000 replicates over tasks + writing and sealing the outputs);
  4. the paired table alone on the in-memory frame, and the bootstrap against a naive loop (ratio).
Run: .venv/bin/python benchmarks/bench_analysis.py [--seeds 250] [--tasks 1000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from agentrepro.analysis.bootstrap import bootstrap_means
from agentrepro.analysis.load import read_outcomes
from agentrepro.analysis.study import analyze_outcomes
from agentrepro.analysis.tables import paired_table

METHODS = ("grpo", "gigpo", "graphgpo", "graph_only")


def write_files(root: Path, seeds: int, tasks: int) -> list[Path]:
    rng = np.random.default_rng(0)
    hashes = [hashlib.sha256(f"t{t}".encode()).hexdigest() for t in range(tasks)]
    paths = []
    for i, m in enumerate(METHODS):
        for s in range(seeds):
            succ = (rng.random(tasks) < 0.6 + 0.08 * i).astype(int)
            path = root / f"{m}-{s}.jsonl"
            path.write_text(
                "".join(
                    json.dumps(
                        {
                            "study": "bench",
                            "method": m,
                            "seed": s,
                            "step": 150,
                            "task_id": f"t{t:04d}",
                            "task_hash": hashes[t],
                            "category": "c",
                            "episode": 0,
                            "success": int(succ[t]),
                            "reward": float(succ[t]),
                            "turns": 5,
                            "tokens": 300,
                        }
                    )
                    + "\n"
                    for t in range(tasks)
                )
            )
            paths.append(path)
    return paths


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=250)
    parser.add_argument("--tasks", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t_write, paths = timed(lambda: write_files(root, args.seeds, args.tasks))
        t_parse, _ = timed(lambda: sum(len([json.loads(line) for line in open(p)]) for p in paths))
        t_full, _out = timed(
            lambda: analyze_outcomes(paths, root / "out", tolerance_pp=3, claims=["graphgpo > grpo", "gigpo > grpo"])
        )
        df = read_outcomes(paths)
        t_paired, _ = timed(lambda: paired_table(df, list(METHODS), rng=np.random.default_rng(0), n_boot=2000))
        d = np.random.default_rng(1).normal(size=(6, args.tasks))
        t_boot, _ = timed(lambda: bootstrap_means(d, np.random.default_rng(2), 2000))
        rng = np.random.default_rng(3)
        t_naive, _ = timed(
            lambda: [[d[k, rng.integers(0, args.tasks, args.tasks)].mean() for _ in range(200)] for k in range(6)]
        )
        t_naive *= 2000 / 200  # scaled to the same 2,000 replicates
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    runs = len(METHODS) * args.seeds
    print(f"runs x tasks: {runs} x {args.tasks} ({runs * args.tasks:,} outcome rows)")
    print(f"setup: writing the files               {t_write:8.2f} s")
    print(f"baseline: json.loads of every line       {t_parse:8.2f} s")
    print(f"analyze_outcomes (everything, written)   {t_full:8.2f} s   = {t_full / t_parse:.1f} x baseline")
    print(f"paired table incl. bootstrap (in memory) {t_paired:8.2f} s")
    print(
        f"bootstrap 6 pairs x 2000 reps            {t_boot:8.3f} s   naive loop {t_naive:.2f} s (x{t_naive / t_boot:.0f} slower)"
    )
    print(f"peak RSS                                 {peak_mb:8.0f} MiB")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
