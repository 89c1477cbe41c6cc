"""`agentrepro eval --model DIR --env E --seeds 10001-10008 --server transformers|sglang|URL --out OUT_DIR`.

Evaluates a Hugging Face model directory outside any study, through the served evaluator: OUT_DIR gets
`outcomes.jsonl` (docs/design.md §3.4; `study` from --study, `method` and `seed` the model directory's
name and 0 unless --method / --seed say otherwise, step 0 unless --step), `provenance.json` (the attempt,
with the server, its version and arguments, the sampling settings and whether the run was deterministic),
`logs/server.*.log` and `OUTPUTS.sha256`. The server is started and stopped by the command (a URL is used
as it is).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from agentrepro import attempts, outcomes, seal
from agentrepro.bounds import SEED, integer, number
from agentrepro.environments import task_panel, validate_params
from agentrepro.environments.cli import parse_params
from agentrepro.environments.seeds import parse_seed_ranges
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_jsonl, check_output_dir, make_dir
from agentrepro.layout import RunFiles
from agentrepro.runconfig import EvalConfig
from agentrepro.serving.chat import MODES
from agentrepro.serving.evaluate import evaluate_model
from agentrepro.serving.servers import KINDS, TIME_LIMITS_S, ServerConfig

URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a model directory outside a study (--model)")
    group.add_argument("--model", type=Path, help="Hugging Face model directory to evaluate (instead of --run)")
    group.add_argument("--env", help="environment name (frozenlake, sokoban, ...)")
    group.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE", help="environment parameter (repeatable)"
    )
    group.add_argument("--seeds", help="task seeds: numbers and inclusive ranges, e.g. 10001-10008")
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
    params = validate_params(args.env, parse_params(args.param, args.env))
    seeds = parse_seed_ranges(args.seeds)
    panel = task_panel(args.env, params, seeds)
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
