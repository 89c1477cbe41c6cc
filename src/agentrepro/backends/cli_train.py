"""`agentrepro train --config CONFIG.yaml --out RUN_DIR [--no-resume]`: one method x seed into a run directory.

Order (docs/design.md §3.3): check the config and its backend; write resolved_config.yaml (config + backend
defaults, with its config_sha256) and command.txt; open a provenance attempt (an earlier attempt that
never closed is recorded as killed); train (the backend resumes from its checkpoints unless
--no-resume); check that the outputs are there; close the attempt (ok, or failed with the reason);
seal the run directory (OUTPUTS.sha256, excluding eval/ and logs/, which have their own seals).

A stale seal is removed before training starts, so a run killed half-way never looks finished.
Resuming a run directory that was trained from a different resolved config is refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro import rundir
from agentrepro.backends import rundirs
from agentrepro.backends.base import get_backend
from agentrepro.backends.process import install_sigterm_handler
from agentrepro.errors import BadInput


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="run config written by `agentrepro resolve`")
    parser.add_argument("--out", required=True, type=Path, help="run directory (runs/<study>/<method>/seed<k>/)")
    parser.add_argument("--no-resume", action="store_true",
                        help="start from scratch: remove this run's earlier outputs (provenance and logs are kept)")


def run(args: argparse.Namespace) -> int:
    install_sigterm_handler()
    config = rundirs.load_run_config(args.config)
    try:
        backend = get_backend(config["backend"]["name"])
        resolved = rundirs.resolve_config(config, backend.default_config())
        backend.validate_config(resolved)
    except BadInput as exc:
        if exc.path is not None:
            raise
        raise BadInput(str(exc), path=args.config) from None
    resolved_sha = rundirs.config_sha256(resolved)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise BadInput("exists and is not a directory", path=out)
    out.mkdir(parents=True, exist_ok=True)

    resume = not args.no_resume
    previous = rundirs.previous_config_sha(out)
    if resume and previous is not None and previous != resolved_sha and rundirs.has_checkpoints(out):
        raise BadInput(f"this run directory was trained from another resolved config (sha256 {previous}, now {resolved_sha}); "
                       "pass --no-resume to start again or use a new directory", path=out / rundirs.RESOLVED)
    if not resume:
        rundirs.clear_outputs(out)
    (out / rundir.OUTPUTS).unlink(missing_ok=True)

    command = rundirs.command_line()
    rundirs.write_resolved_config(out, resolved)
    rundirs.write_command(out, command)
    base = rundirs.provenance_base(config, resolved_sha)
    rundir.start_attempt(out, stage="train", command=command, base=base)
    with rundirs.attempt_closed_on_error(out, verb="train", backend_name=backend.name or config["backend"]["name"]):
        backend.train(resolved, out, resume=resume)
        rundirs.check_training_outputs(out, resolved)
    rundir.finish_attempt(out, status="ok")
    rundir.write_outputs_manifest(out, exclude_dirs={"eval", "logs"})
    return 0
