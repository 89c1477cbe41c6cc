"""`agentrepro warmstart --config CONFIG.yaml --out DIR`: the builtin trainer's warm start of one seed, once, for
every method of that seed that has the same warm-start settings (trainer/shared_warmstart.py).

CONFIG is the run config of any such method (from `agentrepro resolve`); only its warm-start part is used and
written to DIR/resolved_config.yaml, whose identity names DIR in the workflow
(runs/<study>/_warmstart/seed<k>-<id12>/, agentrepro.layout). Like `train` (docs/design.md §3.3): resolved config,
command.txt, a provenance attempt (with the lock hash, the resolved-config hash and the warm-start identity),
then the warm start with its step-0 evaluation (eval/step0/outcomes.jsonl, checked as `eval` checks outcomes),
then OUTPUTS.sha256 over all of it. A warm start has no intermediate checkpoint: every attempt starts it afresh
(earlier attempts stay in provenance.json). `agentrepro train --from-warmstart DIR` then starts a run from it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro import attempts, outcomes, runconfig, seal
from agentrepro.backends import get_backend
from agentrepro.errors import BadInput, read_from
from agentrepro.fileio import atomic_write_jsonl, check_output_dir, make_dir
from agentrepro.jobs import bookkeeping
from agentrepro.layout import RunFiles, outcomes_path
from agentrepro.process import install_sigterm_handler
from agentrepro.trainer.shared_warmstart import BUILTIN, identity, warmstart_config
from agentrepro.trainer.warmstart import make_warmstart

# What a new attempt removes first (provenance.json and logs/ are kept).
OUTPUT_NAMES = (
    RunFiles.RESOLVED_CONFIG,
    RunFiles.COMMAND,
    RunFiles.WARMSTART,
    RunFiles.CHECKPOINTS,
    RunFiles.EVAL,
    RunFiles.OUTPUTS,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, type=Path, help="the run config of a method of this seed (`agentrepro resolve`)"
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help="the warm start's directory (the workflow's: runs/<study>/_warmstart/seed<k>-<id12>/)",
    )


def run(args: argparse.Namespace) -> int:
    install_sigterm_handler()
    config = runconfig.load_run_config(args.config)
    if config["backend"]["name"] != BUILTIN:
        raise BadInput(
            f"only the builtin backend has a warm start, this config names {config['backend']['name']!r}",
            path=args.config,
            where="backend.name",
        )
    with read_from(args.config):
        backend = get_backend(BUILTIN)
        resolved = backend.resolve(config)
        backend.validate_config(resolved)
        ws_config = warmstart_config(resolved, path=args.config)
    out: Path = make_dir(check_output_dir(args.out, option="--out"))
    bookkeeping.clear_outputs(out, OUTPUT_NAMES)

    command = attempts.command_line()
    resolved_sha = runconfig.write_resolved_config(out, ws_config)
    bookkeeping.write_command(out, command)
    base = {**bookkeeping.provenance_base(ws_config, resolved_sha), "warmstart_identity": identity(ws_config)}
    attempts.start_attempt(out, stage="warmstart", command=command, base=base)
    with attempts.attempt_closed_on_error(out, verb="warmstart", backend_name=BUILTIN):
        rows = make_warmstart(ws_config, out)
        outcomes.check_rows(rows, config=ws_config, step=0, source=f"warm-start outcomes of {out}")
        atomic_write_jsonl(outcomes_path(out, 0), rows)
    successes = sum(r["success"] for r in rows)
    attempts.finish_attempt(out, status="ok", extra={"episodes": len(rows), "successes": successes})
    seal.write_outputs_manifest(out)
    print(f"{outcomes_path(out, 0)}: step 0: {successes}/{len(rows)} episodes succeeded")
    return 0
