"""`agentrepro node RUN_DIR --key KEY`: run one worker node of a training's Ray cluster on this node of its SLURM
allocation, joined to the training's head, until that head stops. A training over several nodes (`resources.nodes`,
backends/ray_nodes.py) starts it on each of its other nodes with `srun`; nobody else needs to. The node builds its
own launch (the backend's `run_worker_node`: in the job's image, with this node's GPUs) from the run's resolved
config. Exit 0 once the head has stopped, 1 on failure, 2 for bad input, 143 on SIGTERM (its container stopped
first)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from agentrepro import runconfig
from agentrepro.backends import get_backend
from agentrepro.errors import BadInput, read_from
from agentrepro.process import install_sigterm_handler

KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")  # what hooks/agentrepro_ray_head.py's job_key makes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="the training's run directory (its resolved_config.yaml)")
    parser.add_argument("--key", required=True, help="the training's Ray head, as its job names it")


def run(args: argparse.Namespace) -> int:
    if not KEY.match(args.key):
        raise BadInput(f"{args.key!r} is not the key of a job's Ray head", where="--key")
    install_sigterm_handler()  # scancel or the head's stop (srun passes SIGTERM on): the container stopped, not left
    config = runconfig.read_resolved_config(args.run_dir)
    with read_from(args.run_dir / runconfig.RESOLVED):
        get_backend(config["backend"]["name"]).run_worker_node(config, args.run_dir.resolve(), args.key)
    return 0
