"""`agentrepro eval --run RUN_DIR --step N`: evaluate one checkpoint into eval/step<N>/outcomes.jsonl.

With `eval.engine: served` in the run config, the served evaluator (agentrepro.serving) plays the panel
through a chat server instead of the backend (the checkpoint as a Hugging Face directory: `--checkpoint
DIR`, or `checkpoints/hf/step<N>/`), so every backend's checkpoints are scored by one evaluator; the
server's record goes into the attempt. `agentrepro eval --model DIR ...` evaluates a model directory
outside a study (below: the model mode).

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
import re
from pathlib import Path
from typing import Any

from agentrepro import attempts, containers, outcomes, runconfig, seal
from agentrepro.backends import checkpoints, get_backend
from agentrepro.backends.sources import record_run
from agentrepro.bounds import SEED, STEP, integer, number
from agentrepro.environments.registry import add_panel_options, panel_of_options
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_jsonl, check_output_dir, make_dir, sha256_file
from agentrepro.layout import RunFiles
from agentrepro.layout import eval_dir as evaluation_dir
from agentrepro.process import install_sigterm_handler
from agentrepro.runconfig import EvalConfig, config_sha256
from agentrepro.serving.chat import MODES
from agentrepro.serving.evaluate import evaluate_model, evaluate_run
from agentrepro.serving.servers import KINDS, TIME_LIMITS_S, ServerConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", type=Path, help="run directory written by `agentrepro train`")
    parser.add_argument("--step", type=STEP, help="checkpoint step to evaluate (0 = before training)")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="eval.engine served: the checkpoint's Hugging Face directory (default RUN_DIR/checkpoints/hf/step<N>/)",
    )
    add_model_arguments(parser)


def run(args: argparse.Namespace) -> int:
    install_sigterm_handler()
    if (args.run is None) == (args.model is None):
        raise BadInput("give either --run RUN_DIR --step N or --model DIR", where="--run/--model")
    if args.model is not None:
        return run_model(args)
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
        record: dict[str, Any] | None  # what evaluated: the served evaluator's record, or the backend's prompt
        if served:
            rows, record = evaluate_run(
                config,
                run_dir,
                args.step,
                log_dir=eval_dir / RunFiles.LOGS,
                checkpoint=args.checkpoint,
                exported=backend.checkpoint(config, run_dir, args.step).hf,
                time_limits=time_limits(args),
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


# --- the model mode: `agentrepro eval --model DIR --env E --seeds 10001-10008 --server transformers|sglang|URL --out OUT_DIR`.
#
# Evaluates a Hugging Face model directory outside any study, through the served evaluator: OUT_DIR gets
# `outcomes.jsonl` (docs/design.md §3.4; `study` from --study, `method` and `seed` the model directory's
# name and 0 unless --method / --seed say otherwise, step 0 unless --step), `provenance.json` (the attempt,
# with the server, its version and arguments, the sampling settings and whether the run was deterministic),
# `logs/server.*.log` and `OUTPUTS.sha256`. The server is started and stopped by the command (a URL is used
# as it is).

URL = re.compile(r"^https?://[^\s/]+(/\S*)?\Z")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a model directory outside a study (--model)")
    group.add_argument("--model", type=Path, help="Hugging Face model directory to evaluate (instead of --run)")
    add_panel_options(group, seeds_help="task seeds: numbers and inclusive ranges, e.g. 10001-10008")
    group.add_argument(
        "--server",
        default="transformers",
        help=f"{' | '.join(k for k in KINDS if k != 'url')} | a URL (default transformers)",
    )
    group.add_argument("--out", type=Path, help="output directory (outcomes.jsonl, provenance.json, logs/)")
    group.add_argument("--study", default="adhoc", help="study name in the rows (default adhoc)")
    group.add_argument("--method", help="method name in the rows (default: the model directory's name)")
    group.add_argument("--seed", type=SEED, default=0, help="seed in the rows (default 0)")
    group.add_argument("--mode", choices=MODES, default="concat", help="dialogue mode (default concat)")
    group.add_argument("--temperature", type=number(0, 100), default=0.0, help="0 = greedy (default)")
    group.add_argument("--top-p", type=number(0, 1, low_open=True), default=1.0)
    group.add_argument(
        "--max-tokens", type=integer(1, 1_000_000), default=256, help="tokens per response (default 256)"
    )
    group.add_argument("--max-turns", type=integer(1, 1000), default=5, help="turns per episode (default 5)")
    group.add_argument("--episodes", type=integer(1, 1000), default=1, help="episodes per task (default 1)")
    group.add_argument("--concurrency", type=integer(1, 4096), default=8, help="episodes in flight (default 8)")
    group.add_argument("--sample-seed", type=SEED, default=0, help="base of every request's seed (default 0)")
    group.add_argument("--device", default="cpu", help="transformers serve --device (default cpu)")
    group.add_argument("--gpus", type=integer(1, 64), default=1, help="sglang tensor parallel size (default 1)")
    group.add_argument(
        "--no-deterministic-inference",
        action="store_true",
        help="sglang: leave --enable-deterministic-inference off (per-request seeds then not honoured)",
    )
    group.add_argument(
        "--startup-timeout",
        type=number(1, TIME_LIMITS_S["startup_timeout_s"]),
        default=ServerConfig.startup_timeout_s,
        help="seconds for the server to become ready (default %(default)g)",
    )
    add_time_limits(parser)


def add_time_limits(parser: argparse.ArgumentParser) -> None:
    """--request-timeout and --deadline: with --model, and with --run (over eval.server's) for a served evaluation."""
    group = parser.add_argument_group("time limits of a served evaluation (a hung or slow server fails the attempt)")
    group.add_argument(
        "--request-timeout",
        type=number(1, TIME_LIMITS_S["request_timeout_s"]),
        default=None,
        metavar="S",
        help=f"seconds one chat request may take, connecting to last byte (default eval.server.request_timeout_s, "
        f"else {ServerConfig.request_timeout_s:g})",
    )
    group.add_argument(
        "--deadline",
        type=number(1, TIME_LIMITS_S["deadline_s"]),
        default=None,
        metavar="S",
        help=f"seconds the whole evaluation may take (default eval.server.deadline_s, else {ServerConfig.deadline_s:g})",
    )


def time_limits(args: argparse.Namespace) -> dict[str, float]:
    """The time limits the command line sets (none given: none)."""
    given = {"request_timeout_s": args.request_timeout, "deadline_s": args.deadline}
    return {k: v for k, v in given.items() if v is not None}


def server_config(args: argparse.Namespace) -> ServerConfig:
    common = dict(
        concurrency=args.concurrency,
        max_tokens=args.max_tokens,
        startup_timeout_s=args.startup_timeout,
        **time_limits(args),
    )
    if URL.match(args.server):
        return ServerConfig(kind="url", url=args.server, **common)
    if args.server not in KINDS or args.server == "url":
        raise BadInput(f"expected transformers, sglang or an http(s) URL, got {args.server!r}", where="--server")
    return ServerConfig(
        kind=args.server, device=args.device, deterministic_inference=not args.no_deterministic_inference, **common
    )


def run_model(args: argparse.Namespace) -> int:
    for option in ("env", "seeds", "out"):
        if getattr(args, option) is None:
            raise BadInput("required with --model", where=f"--{option}")
    model: Path = args.model
    if not (model / "config.json").is_file():
        raise BadInput("expected a Hugging Face model directory (config.json not found)", path=model, where="--model")
    server = server_config(args)
    out = check_output_dir(args.out, option="--out")
    params, panel = panel_of_options(args.env, args.param, args.seeds)
    identity = {"study": args.study, "method": args.method or model.resolve().name, "seed": args.seed}
    step = args.step if args.step is not None else 0
    evaluation = EvalConfig(
        temperature=args.temperature,
        top_p=args.top_p,
        sample_seed=args.sample_seed,
        max_turns=args.max_turns,
        episodes_per_task=args.episodes,
    )
    make_dir(out)
    (out / seal.OUTPUTS).unlink(missing_ok=True)
    attempts.start_attempt(
        out,
        stage="eval",
        command=attempts.command_line(),
        base={
            **identity,
            "step": step,
            "model_dir": str(model.resolve()),
            "env": args.env,
            "env_params": params,
            "packages": attempts.package_versions(),
        },
    )
    with attempts.attempt_closed_on_error(out, verb="eval", backend_name="served"):
        rows, record = evaluate_model(
            model,
            identity=identity,
            step=step,
            env_name=args.env,
            env_params=params,
            panel=panel,
            evaluation=evaluation,
            mode=args.mode,
            server=server,
            log_dir=out / RunFiles.LOGS,
            tensor_parallel=args.gpus,
        )
        config = {**identity, "eval": {"task_panel": panel, "episodes_per_task": args.episodes}}
        outcomes.check_rows(rows, config=config, step=step, source=f"served evaluation of {model}")
        atomic_write_jsonl(out / RunFiles.OUTCOMES, rows)
    successes = sum(r["success"] for r in rows)
    attempts.finish_attempt(
        out, status="ok", extra={"episodes": len(rows), "successes": successes, "evaluator": record}
    )
    seal.write_outputs_manifest(out)
    print(f"{out / RunFiles.OUTCOMES}: {successes}/{len(rows)} episodes succeeded")
    return 0
