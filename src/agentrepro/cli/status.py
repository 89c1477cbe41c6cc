"""`agentrepro status STUDY [--root DIR] [--json] [--no-slurm]`: where a study stands.

Every job of the study's plan (freeze, warm starts, trainings, evaluations, analysis, report): done, running,
queued, stopped, unknown, failed or pending (agentrepro.jobs.progress), from the run directories' seals and
attempts and, for attempts under SLURM, `squeue`; a running training's step and last metrics; and the time left,
estimated from the finished jobs' durations. One screen for a person, or `--json` for scripts. Nothing is changed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agentrepro.jobs import progress
from agentrepro.layout import STUDY_HELP, locate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", help=STUDY_HELP)
    parser.add_argument("--root", type=Path, default=Path("."), help="directory holding manifests/ and runs/")
    parser.add_argument("--json", action="store_true", help="print JSON: every job, the counts and the time left")
    parser.add_argument("--no-slurm", action="store_true", help="do not ask squeue about jobs that ran under SLURM")


def run(args: argparse.Namespace) -> int:
    jobs = progress.study_status(args.study, args.root, slurm=not args.no_slurm)
    if args.json:
        print(json.dumps({"study": locate(args.study, args.root).name, **progress.as_json(jobs)}, indent=1))
    else:
        print(progress.table(locate(args.study, args.root).name, jobs))
    return 0
