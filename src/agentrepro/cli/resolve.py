"""`agentrepro resolve LOCK --method M --seed K -o FILE`: write the run config of one method x seed."""

from __future__ import annotations

import argparse

from agentrepro.bounds import SEED
from agentrepro.fileio import atomic_write_yaml, check_output_file
from agentrepro.lockfile import read_lock
from agentrepro.manifest.resolve import run_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lock", help="the study's lock (manifests/<study>.lock.json)")
    parser.add_argument("--method", required=True, help="a method of the study")
    parser.add_argument("--seed", required=True, type=SEED, help="a seed of the study")
    parser.add_argument(
        "-o", "--output", required=True, help="where to write the config (runs/<study>/<method>/seed<k>/config.yaml)"
    )


def run(args: argparse.Namespace) -> int:
    check_output_file(args.output, option="-o", make_parents=True)  # Snakemake and scripts expect the run folder made
    lock = read_lock(args.lock)  # refuses a lock edited by hand
    config = run_config(lock, args.method, args.seed, lock_path=args.lock)
    atomic_write_yaml(args.output, config)
    print(f"{args.output}: {config['study']} {args.method} seed {args.seed} (lock {config['lock']['sha256'][:12]})")
    return 0
