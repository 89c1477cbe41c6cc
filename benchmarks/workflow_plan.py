"""How long Snakemake takes to plan each study (`snakemake -n`), as a ratio to the tiny test study.

    .venv/bin/python benchmarks/workflow_plan.py [--repeat 3]

Planning cost is paid by every `snakemake` call (dry runs, each SLURM job's inner snakemake); it grows
with the number of jobs. Baseline: tests/workflow/manifests/wf-tiny.yaml (12 jobs) planned in the same
run. Prints one row per study: jobs, median seconds, ratio to the baseline, and seconds per job.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "tests" / "workflow" / "manifests" / "wf-tiny.yaml"


def plan(workdir: Path, manifest: str) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            str(workdir),
            "-n",
            "--nolock",
            "--config",
            f"manifest={manifest}",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"snakemake -n failed for {manifest}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    total = re.search(r"^total\s+(\d+)$", proc.stdout, re.M)
    return elapsed, int(total.group(1)) if total else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "manifests").mkdir()
        shutil.copy(BASELINE, work / "manifests" / BASELINE.name)
        studies = [("wf-tiny (baseline)", work, "manifests/wf-tiny.yaml")]
        studies += [(p.stem, REPO, f"manifests/{p.name}") for p in sorted((REPO / "manifests").glob("*.yaml"))]
        rows = []
        for name, workdir, manifest in studies:
            times, jobs = [], 0
            for _ in range(args.repeat):
                seconds, jobs = plan(workdir, manifest)
                times.append(seconds)
            rows.append((name, jobs, statistics.median(times)))
    base = rows[0][2]
    print(f"{'study':28} {'jobs':>5} {'median_s':>9} {'ratio':>6} {'ms/job':>7}")
    for name, jobs, seconds in rows:
        print(f"{name:28} {jobs:5d} {seconds:9.2f} {seconds / base:6.2f} {1000 * seconds / max(jobs, 1):7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
