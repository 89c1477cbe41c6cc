"""`agentrepro train --config CONFIG.yaml --out RUN_DIR [--no-resume]`: one method x seed into a run directory.

Order (docs/design.md §3.3): check the config and its backend; write resolved_config.yaml (config + backend
defaults, with its config_sha256) and command.txt; open a provenance attempt (an earlier attempt that
never closed is recorded as killed); train (the backend resumes from its checkpoints unless
--no-resume); check that the outputs are there; close the attempt (ok, or failed with the reason);
seal the run directory (OUTPUTS.sha256, excluding eval/ and logs/, which have their own seals). Training state that
older checkpoints lost during training (`Backend.pruned_in_training`) is recorded in the attempt and
said on stderr.

A stale seal is removed before training starts, so a run killed half-way never looks finished.
Resuming a run directory that was trained from a different resolved config is refused.
`--from-warmstart DIR` (builtin backend): a fresh run takes the shared warm start in DIR (`agentrepro warmstart`)
as its step 0 instead of warm-starting itself (trainer/shared_warmstart.py); a resumed run must have come from it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentrepro import attempts, containers, runconfig, seal, tracking
from agentrepro.backends import checkpoints, get_backend
from agentrepro.backends.sources import record_run
from agentrepro.errors import BadInput, read_from
from agentrepro.fileio import check_output_dir, make_dir
from agentrepro.jobs import bookkeeping
from agentrepro.layout import RunFiles
from agentrepro.process import install_preemption_handler, install_sigterm_handler
from agentrepro.runconfig import config_sha256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="run config written by `agentrepro resolve`")
    parser.add_argument("--out", required=True, type=Path, help="run directory (runs/<study>/<method>/seed<k>/)")
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="start from scratch: remove this run's earlier outputs (provenance and logs are kept)",
    )
    parser.add_argument(
        "--from-warmstart",
        type=Path,
        metavar="DIR",
        help="start from the shared warm start in DIR (written by `agentrepro warmstart`; builtin backend)",
    )


def _how_it_starts(out: Path, *, resume: bool, from_warmstart: bool) -> str:
    """The attempt's start in words, as the report shows it: resumed, started over, or started afresh."""
    if bookkeeping.has_checkpoints(out):
        return (
            "resumed from the checkpoints of an earlier attempt"
            if resume
            else "started over (--no-resume: earlier outputs removed)"
        )
    return "started from the shared warm start's step 0" if from_warmstart else "started from scratch"


def run(args: argparse.Namespace) -> int:
    install_sigterm_handler()
    config = runconfig.load_run_config(args.config)
    with read_from(args.config):
        backend = get_backend(config["backend"]["name"])
        if backend.saves_on_preempt_signal:
            install_preemption_handler()  # SIGUSR1 before the time limit: save this step, stop, the retry resumes
        resolved = backend.resolve(config)
        backend.validate_config(resolved)
    resolved_sha = config_sha256(resolved)
    out: Path = make_dir(check_output_dir(args.out, option="--out"))

    resume = not args.no_resume
    start = _how_it_starts(out, resume=resume, from_warmstart=args.from_warmstart is not None)
    if args.from_warmstart is not None and not backend.shares_warmstart:
        raise BadInput(
            f"only the builtin backend starts from a shared warm start, this run's is {backend.name!r}",
            path=args.config,
            where="backend.name",
        )
    previous = runconfig.previous_config_sha(out)
    if resume and previous is not None and previous != resolved_sha and bookkeeping.has_checkpoints(out):
        raise BadInput(
            f"this run directory was trained from another resolved config (sha256 {previous}, now {resolved_sha}); "
            "pass --no-resume to start again or use a new directory",
            path=out / runconfig.RESOLVED,
        )
    if not resume:
        bookkeeping.clear_outputs(out)
    else:
        checkpoints.refuse_resume(out)  # checkpoints pruned after their evaluation cannot be resumed from
    (out / seal.OUTPUTS).unlink(missing_ok=True)

    record_run(resolved, out)  # the backend files this job runs, hashed before it runs them
    command = attempts.command_line()
    runconfig.write_resolved_config(out, resolved)
    bookkeeping.write_command(out, command)
    base = bookkeeping.provenance_base(config, resolved_sha)
    attempts.start_attempt(out, stage="train", command=command, base=base, extra={"how_started": start})
    containers.clear_records(out)  # this attempt's programs record which image they ran in (agentrepro.containers)
    with attempts.attempt_closed_on_error(
        out,
        verb="train",
        backend_name=backend.name or config["backend"]["name"],
        last_saved=lambda: backend.last_saved_step(out),
    ):
        if args.from_warmstart is not None:
            backend.start_from(
                out, args.from_warmstart, resolved
            )  # its step 0 becomes this run's; training resumes from it
            resume = True
        backend.train(resolved, out, resume=resume)
        bookkeeping.check_training_outputs(out, resolved)
        prompt = backend.prompt_record(resolved, out)
        during = backend.pruned_in_training(out)  # older checkpoints' training state
        pruned = checkpoints.training_summary(during)
    extra = ({"prompt": prompt} if prompt is not None else {}) | ({"pruned_in_training": pruned} if pruned else {})
    extra |= containers.attempt_extra(out)
    if (wandb_id := tracking.recorded(out)) is not None:
        extra["wandb_id"] = wandb_id  # the W&B run every attempt of this run logged to
    attempts.finish_attempt(out, status="ok", extra=extra or None)
    seal.write_outputs_manifest(out, exclude_dirs={RunFiles.EVAL, RunFiles.LOGS})
    if pruned and during is not None:
        print(
            f"agentrepro: training state of steps {', '.join(map(str, pruned['steps']))} pruned during training "
            f"({pruned['files']} files, {pruned['bytes'] / 1e9:.2f} GB; eval.keep_checkpoints), listed with their hashes in "
            f"{during.record}",
            file=sys.stderr,
        )
    return 0
