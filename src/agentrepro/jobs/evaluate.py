"""`agentrepro eval --run RUN_DIR --step N`: evaluate one checkpoint into eval/step<N>/outcomes.jsonl.

With `eval.engine: served` in the run config, the served evaluator (agentrepro.serving) plays the panel
through a chat server instead of the backend (the checkpoint as a Hugging Face directory: `--checkpoint
DIR`, or `checkpoints/hf/step<N>/`), so every backend's checkpoints are scored by one evaluator; the
server's record goes into the attempt. `agentrepro eval --model DIR ...` evaluates a model directory
outside a study (serving/cli.py).

The backend named in the run's resolved_config.yaml plays the frozen task panel with checkpoint N; every
row is checked (outcomes.py, docs/design.md §3.4) before outcomes.jsonl is written atomically. eval/step<N>/ has
its own provenance.json (attempts) and OUTPUTS.sha256, so evaluations of different checkpoints can run
at the same time, and a re-evaluation never touches the training seal. The attempt records the hash of
the run's OUTPUTS.sha256 when the run is sealed, binding the outcomes to the training outputs. An evaluation by
the backend itself records the hashes of its backend's source files as it starts (eval/step<N>/backend_sources.json,
agentrepro.backends.sources), as training does.
Once the outcomes are written, checkpoint N is pruned as `eval.keep_checkpoints` says (backends/checkpoints.py:
by default its training state goes and its Hugging Face copy stays), recorded in eval/step<N>/pruned.json
before the seal; an evaluation that fails prunes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro import attempts, containers, outcomes, runconfig, seal
from agentrepro.backends import checkpoints, get_backend
from agentrepro.backends.sources import record_run
from agentrepro.bounds import STEP
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_jsonl, make_dir, sha256_file
from agentrepro.layout import RunFiles
from agentrepro.layout import eval_dir as evaluation_dir
from agentrepro.process import install_sigterm_handler
from agentrepro.runconfig import EvalConfig, config_sha256
from agentrepro.serving import cli as serving_cli
from agentrepro.serving.evaluate import evaluate_run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", type=Path, help="run directory written by `agentrepro train`")
    parser.add_argument("--step", type=STEP, help="checkpoint step to evaluate (0 = before training)")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="eval.engine served: the checkpoint's Hugging Face directory (default RUN_DIR/checkpoints/hf/step<N>/)",
    )
    serving_cli.add_model_arguments(parser)


def run(args: argparse.Namespace) -> int:
    install_sigterm_handler()
    if (args.run is None) == (args.model is None):
        raise BadInput("give either --run RUN_DIR --step N or --model DIR", where="--run/--model")
    if args.model is not None:
        return serving_cli.run_model(args)
    if args.step is None:
        raise BadInput("required with --run", where="--step")
    run_dir: Path = args.run
    if not run_dir.is_dir():
        raise BadInput("run directory not found", path=run_dir)
    if args.step < 0:
        raise BadInput(f"expected a non-negative step, got {args.step}", where="--step")
    config = runconfig.read_resolved_config(run_dir)
    try:
        backend = get_backend(config["backend"]["name"])
    except BadInput as exc:
        raise BadInput(str(exc), path=run_dir / runconfig.RESOLVED) from None
    eval_dir = make_dir(evaluation_dir(run_dir, args.step))
    (eval_dir / seal.OUTPUTS).unlink(missing_ok=True)

    run_seal = run_dir / seal.OUTPUTS
    command = attempts.command_line()
    base = {
        "study": config["study"],
        "method": config["method"],
        "seed": config["seed"],
        "step": args.step,
        "backend": config["backend"]["name"],
        "lock_sha256": (config.get("lock") or {}).get("sha256"),
        "resolved_config_sha256": config_sha256(config),
        "run_outputs_sha256": sha256_file(run_seal) if run_seal.is_file() else None,
        "packages": attempts.package_versions(),
    }
    attempts.start_attempt(eval_dir, stage="eval", command=command, base=base)
    containers.clear_records(eval_dir)  # programs run in a container record which image they ran in
    with attempts.attempt_closed_on_error(eval_dir, verb="eval", backend_name=config["backend"]["name"]):
        served = EvalConfig.of(config).served
        if served:
            rows, record = evaluate_run(
                config,
                run_dir,
                args.step,
                log_dir=eval_dir / RunFiles.LOGS,
                checkpoint=args.checkpoint,
                exported=backend.checkpoint(config, run_dir, args.step).hf,
                time_limits=serving_cli.time_limits(args),
            )
        else:  # the backend's own code plays the panel: what it runs is recorded, as for training
            record_run(config, eval_dir)
            rows, prompt = backend.evaluate(run_dir, args.step), backend.prompt_record(config, run_dir)
            record = {"engine": config["backend"]["name"], "prompt": prompt} if prompt is not None else None
        source = "served evaluator" if served else f"{config['backend']['name']} backend"
        outcomes.check_rows(rows, config=config, step=args.step, source=f"{source} outcomes of {eval_dir}")
        atomic_write_jsonl(eval_dir / RunFiles.OUTCOMES, rows)
        pruned = checkpoints.prune(
            config,
            run_dir,
            backend.checkpoint(config, run_dir, args.step),  # eval.keep_checkpoints
            outcomes=eval_dir / RunFiles.OUTCOMES,
        )
    successes = sum(r["success"] for r in rows)
    extra = {"episodes": len(rows), "successes": successes} | ({"evaluator": record} if record else {})
    extra |= (
        {"pruned": {"keep": pruned["keep"], "files": len(pruned["removed"]), "bytes": pruned["removed_bytes"]}}
        if pruned
        else {}
    )
    extra |= containers.attempt_extra(eval_dir)
    attempts.finish_attempt(eval_dir, status="ok", extra=extra)
    seal.write_outputs_manifest(eval_dir)
    print(f"{eval_dir / RunFiles.OUTCOMES}: {successes}/{len(rows)} episodes succeeded")
    return 0
