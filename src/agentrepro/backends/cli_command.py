"""`agentrepro command MANIFEST --method M --seed K [--eval-step N]`: the programs a job would run, for review.

Prints, in order, every external program of the train job of method M x seed K (data preparation, the
launch), or with --eval-step the evaluation of checkpoint N, as `Backend.launches()` lists them
(backends/launch.py), each with `Launch.shown()`: `cd DIR && NAME=value ... argv`, every word quoted.
Nothing runs. It reads the manifest, not the lock, so a study can be reviewed before it is frozen: a
placeholder (`TODO-...`) is shown as it is. The job itself runs inside `agentrepro train` / `agentrepro eval`
on runs/<study>/<method>/seed<k>/ (relative to the current directory, as the workflow runs them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro.backends.jobs import planned_launches
from agentrepro.bounds import SEED
from agentrepro.manifest.loading import load_manifest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, help="the study manifest (placeholders allowed)")
    parser.add_argument("--method", required=True, help="a method of the study")
    parser.add_argument("--seed", required=True, type=SEED, help="a seed of the study")
    parser.add_argument("--eval-step", type=SEED, default=None, metavar="N",
                        help="show the evaluation of checkpoint N instead of the train job")


def run(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.manifest)
    name, run_dir, launches = planned_launches(manifest, args.manifest, args.method, args.seed, args.eval_step)
    job = f"the evaluation of step {args.eval_step}" if args.eval_step is not None else "the train job"
    print(f"# {args.manifest}: {args.method} seed {args.seed}, {job} (backend {name}, run directory {run_dir})")
    if not launches:
        print(f"# the {name} backend lists no external program for this job (Backend.launches is empty): "
              f"`agentrepro {'eval' if args.eval_step is not None else 'train'}` does the work itself")
    for number, launch in enumerate(launches, start=1):
        print(f"# {number}. {launch.purpose}")
        print(launch.shown())
    return 0
