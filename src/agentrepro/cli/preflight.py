"""`agentrepro preflight MANIFEST [--method M] [--seed K]`: the demand table of each job (one per method when every
seed demands the same), then each job's resources against its SLURM partition's limits (sinfo, where the manifest
names a partition), exit 2 after listing every violation, one per line (agentrepro.preflight computes them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentrepro.bounds import SEED
from agentrepro.errors import BadInput
from agentrepro.planning import StudyPlan
from agentrepro.preflight import partition_problems, study_demands, tables


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, help="the study manifest (placeholders allowed: nothing is resolved)")
    parser.add_argument("--method", action="append", help="only this method (repeatable; default: every method)")
    parser.add_argument("--seed", action="append", type=SEED, help="only this seed (repeatable; default: every seed)")


def run(args: argparse.Namespace) -> int:
    plan = StudyPlan.load(args.manifest)
    manifest = plan.document
    for method in args.method or []:
        if method not in manifest["methods"]:
            raise BadInput(
                f"not a method of the study (methods: {', '.join(manifest['methods'])})",
                path=args.manifest,
                where="--method",
            )
    for seed in args.seed or []:
        if seed not in manifest["seeds"]:
            raise BadInput(
                f"not a seed of the study (seeds: {', '.join(map(str, manifest['seeds']))})",
                path=args.manifest,
                where="--seed",
            )
    jobs = study_demands(plan, methods=args.method, seeds=args.seed)
    print("\n\n".join(tables(jobs)))
    lines = [line for job in jobs for line in job.violations(args.manifest)]
    scheduled, notes = partition_problems(plan)  # against the SLURM partition's limits, where sinfo answers
    lines += scheduled
    for note in notes:
        print(f"agentrepro preflight: {note}", file=sys.stderr)
    for line in dict.fromkeys(lines):
        print(f"agentrepro preflight: error: {line}", file=sys.stderr)
    return 2 if lines else 0
