"""A second training framework in miniature, run by the `command` backend in the cross-backend test study.

tests/workflow/manifests/wf-xbackend.yaml holds `grpo` (the builtin backend) and `grpo@command` (this
script), so that one study compares the same method on two backends, as a port is compared with its
reference code. Under its other name it trains and evaluates with the harness's builtin trainer: the run
config it is given (resolved_config.yaml of the command backend) is resolved again over the builtin
backend's defaults, as `agentrepro train` would for a builtin run.

    python second_framework.py train --config CONFIG --run RUN_DIR --resume true|false
    python second_framework.py eval --config CONFIG --run RUN_DIR --step N --out OUTCOMES
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro.backends.builtin.backend import BuiltinBackend
from agentrepro.fileio import atomic_write_jsonl
from agentrepro.reading import load_yaml


def builtin_config(path: str) -> dict:
    """The command backend's run config as the builtin trainer takes it (same study, method, seed, panel)."""
    config = {**load_yaml(path), "backend": {"name": "builtin"}}
    return BuiltinBackend().resolve(config)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    train = sub.add_parser("train")
    train.add_argument("--resume", choices=("true", "false"), required=True)
    evaluate = sub.add_parser("eval")
    evaluate.add_argument("--step", type=int, required=True)
    evaluate.add_argument("--out", required=True)
    for verb in (train, evaluate):
        verb.add_argument("--config", required=True)
        verb.add_argument("--run", required=True)
    args = parser.parse_args()
    from agentrepro.trainer.evaluate import evaluate_run
    from agentrepro.trainer.loop import train as train_loop

    config = builtin_config(args.config)
    if args.verb == "train":
        train_loop(config, Path(args.run), resume=args.resume == "true")
    else:
        atomic_write_jsonl(Path(args.out), evaluate_run(config, Path(args.run), args.step))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
