"""`agentrepro command MANIFEST --method M --seed K [--eval-step N]`: the programs a job would run, for review.

Prints, in order, every external program of the train job of method M x seed K (data preparation, the
launch), or with --eval-step the evaluation of checkpoint N, as `Backend.launches()` lists them
(backends/launch.py), each with `Launch.shown()`: `cd DIR && NAME=value ... argv`, every word quoted.
Then the sbatch flags the job gets under `snakemake --profile slurm` (planning.slurm_request: partition, runtime,
memory, CPUs, constraint, qos, nodes, GPUs and their model, the signal before the time limit). After the train job's
programs it prints the job's demand table (agentrepro.preflight: Ray worker ports, CPUs, GPUs, batch sizes,
hard-coded ports, each beside the manifest value it must fit). Nothing runs. It reads the
manifest, not the lock, so a study can be reviewed before it is frozen: a placeholder (`TODO-...`) is shown as it is. The job itself runs inside `agentrepro train` / `agentrepro eval`
on runs/<study>/<method>/seed<k>/ (relative to the current directory, as the workflow runs them).
`snakemake -n -p` shows the same text (`StudyPlan.shown`) as each train job's message.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro import preflight
from agentrepro.bounds import SEED
from agentrepro.planning import RETRIES, StudyPlan, slurm_request


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, help="the study manifest (placeholders allowed)")
    parser.add_argument("--method", required=True, help="a method of the study")
    parser.add_argument("--seed", required=True, type=SEED, help="a seed of the study")
    parser.add_argument(
        "--eval-step",
        type=SEED,
        default=None,
        metavar="N",
        help="show the evaluation of checkpoint N instead of the train job",
    )


def run(args: argparse.Namespace) -> int:
    plan = StudyPlan.load(args.manifest)
    print(plan.shown(args.method, args.seed, args.eval_step))
    per_method = plan.method_resources if args.eval_step is None else plan.method_eval_resources
    resources = per_method[args.method][0]
    print(
        f"\n# under `snakemake --profile slurm` the job is submitted with: sbatch {' '.join(slurm_request(resources))}"
    )
    for retry in RETRIES:
        if resources.get(retry.key):
            print(f"# each retry asks {resources[retry.key]} {retry.unit} more (resources.{retry.field})")
    if args.eval_step is None:  # what the train job will demand of its node (agentrepro.preflight)
        job = preflight.job_demands(plan, args.method, args.seed)
        print("\n# what the job will demand (agentrepro preflight):\n" + preflight.table(job))
    return 0
