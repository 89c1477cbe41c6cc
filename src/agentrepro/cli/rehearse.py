"""`agentrepro rehearse LOCK|MANIFEST --method M --seed K [--out DIR] [--timeout-s S] [--after-s S]`: run one framework job
on this machine (a login node, a CPU partition) as its train job will run, offline, up to its first use of the GPUs,
and print how each program ended (agentrepro/jobs/rehearse.py does the work). Exit 0 when the job reached the GPUs or
every program ended, 1 otherwise; 2 for bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro.bounds import SEED
from agentrepro.errors import BadInput
from agentrepro.jobs.rehearse import rehearse
from agentrepro.lockfile import read_lock
from agentrepro.planning import StudyPlan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "manifest", type=Path, help="the study's lock (manifests/<study>.lock.json) or, before freezing, its manifest"
    )
    parser.add_argument("--method", required=True, help="a method of the study")
    parser.add_argument("--seed", required=True, type=SEED, help="a seed of the study")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the rehearsal's folder (default: rehearsals/<study>/<method>/seed<k>; an earlier rehearsal's is cleared)",
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="stop the job after this long (default 1800)")
    parser.add_argument(
        "--after-s",
        type=float,
        default=60.0,
        help="once a process reached the GPUs, how long the job may take to end by itself (default 60)",
    )


def run(args: argparse.Namespace) -> int:
    lock = read_lock(args.manifest) if args.manifest.name.endswith(".lock.json") else None
    plan = StudyPlan.load(args.manifest) if lock is None else StudyPlan(lock["manifest"], args.manifest)
    if args.method not in plan.methods:
        raise BadInput(
            f"not a method of the study (methods: {', '.join(plan.methods)})", path=args.manifest, where="--method"
        )
    if args.seed not in plan.seeds:
        seeds = ", ".join(map(str, plan.seeds))
        raise BadInput(f"not a seed of the study (seeds: {seeds})", path=args.manifest, where="--seed")
    for name in ("timeout_s", "after_s"):
        if not 0 < getattr(args, name) < 7 * 86400:
            raise BadInput("expected a positive number of seconds below a week", where="--" + name.replace("_", "-"))
    out = args.out or Path("rehearsals") / plan.document["study"] / args.method / f"seed{args.seed}"
    result = rehearse(
        plan, args.method, args.seed, out, timeout_s=args.timeout_s, after_s=args.after_s, lock=lock,
        lock_path=args.manifest,
    )  # fmt: skip
    print(result.table())
    if result.train_said:
        print(f"\nthe train job ended with status {result.train_exit}: {result.train_said}")
    if result.memory_note():
        print(f"\n{result.memory_note()}")
    network = "no network (--network none)" if result.contained else "on the host: offline by its environment only"
    verdict = "holds" if result.holds else "does not hold"
    print(f"\nrehearsal {verdict}: {result.seconds:g} s, {network}; records in {result.folder}")
    return 0 if result.holds else 1
