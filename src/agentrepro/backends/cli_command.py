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

from agentrepro.backends import runconfig
from agentrepro.backends.base import get_backend
from agentrepro.backends.launch import Launch
from agentrepro.bounds import SEED
from agentrepro.errors import BadInput
from agentrepro.layout import Study
from agentrepro.manifest.loading import load_manifest
from agentrepro.manifest.resolve import run_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, help="the study manifest (placeholders allowed)")
    parser.add_argument("--method", required=True, help="a method of the study")
    parser.add_argument("--seed", required=True, type=SEED, help="a seed of the study")
    parser.add_argument("--eval-step", type=SEED, default=None, metavar="N",
                        help="show the evaluation of checkpoint N instead of the train job")


def planned_launches(manifest_file: Path, method: str, seed: int, eval_step: int | None = None) -> tuple[str, Path, list[Launch]]:
    """(backend name, run directory, launches) of one job of a manifest, as `train`/`eval` would run it."""
    manifest = load_manifest(manifest_file)
    # The run config `resolve` would write from the lock; the lock's own parts (panel, file hashes) are not there yet.
    draft = {"manifest": manifest, "study": manifest["study"], "resolved": {"files": {}}, "task_panel": []}
    config = run_config(draft, method, seed, lock_path=manifest_file)
    config["lock"] = {"path": "(not frozen)", "sha256": "(not frozen)"}
    backend = get_backend(config["backend"]["name"])
    config = runconfig.resolve_config(config, backend.default_config())
    try:
        backend.validate_config(config)
    except BadInput as exc:
        raise (exc if exc.path is not None else BadInput(str(exc), path=manifest_file)) from None
    if eval_step is not None and eval_step not in backend.checkpoint_steps(config):
        raise BadInput(f"step {eval_step} is not an evaluated step of this study "
                       f"({', '.join(map(str, backend.checkpoint_steps(config)))})", path=manifest_file, where="--eval-step")
    run_dir = Study(manifest["study"], manifest_file).run_dir(method, seed)
    return backend.name or config["backend"]["name"], run_dir, backend.launches(config, run_dir, eval_step=eval_step)


def run(args: argparse.Namespace) -> int:
    name, run_dir, launches = planned_launches(args.manifest, args.method, args.seed, args.eval_step)
    job = f"the evaluation of step {args.eval_step}" if args.eval_step is not None else "the train job"
    print(f"# {args.manifest}: {args.method} seed {args.seed}, {job} (backend {name}, run directory {run_dir})")
    if not launches:
        print(f"# the {name} backend runs no external program: it works inside `agentrepro "
              f"{'eval' if args.eval_step is not None else 'train'}` itself")
    for number, launch in enumerate(launches, start=1):
        print(f"# {number}. {launch.purpose}")
        print(launch.shown())
    return 0
