"""The chat server an evaluation uses: started and stopped by the evaluation itself, or a URL already running.

* `transformers`: `python -m transformers.cli.transformers serve DIR --device cpu|... --port P` (the
  `serving` extra), the model pinned so that every request names it by its path.
* `sglang`: `python -m sglang.launch_server --model-path DIR --port P --random-seed S --tp-size N`, N the
  GPUs of the run's resources; with `deterministic_inference` also `--enable-deterministic-inference`, the
  only setting under which SGLang honours per-request seeds (batch-invariant kernels).
* `url`: a server someone else runs; nothing is started or stopped.

A started server gets a free port on 127.0.0.1, its output goes to `<log_dir>/server.{stdout,stderr}.log`,
readiness is polled until `startup_timeout_s` (`ready` says how for each kind), and it is stopped by PID
with its whole process tree (process.py), also when the evaluation fails or is interrupted. `Server.provenance` (kind, program version, argv, URL, served model, determinism) goes into
the evaluation's provenance.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agentrepro.attempts import now
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import make_dir
from agentrepro.process import last_line, stop_tree
from agentrepro.serving.client import MIN_REPLY_BYTES, REQUEST_TIMEOUT_S, ServerError, parse_answer, read_bounded_sync

KINDS = ("transformers", "sglang", "url")
DEADLINE_S = (
    12 * 3600.0
)  # a whole evaluation (eval.server.deadline_s): 128 tasks x 5 turns on a CPU server take an hour or two
# The largest value of each time limit (workflow/schemas/manifest.schema.json states the same; the `eval` options use them).
TIME_LIMITS_S = {"startup_timeout_s": 86_400.0, "request_timeout_s": 86_400.0, "deadline_s": 7 * 86_400.0}
PACKAGE = {"transformers": "transformers", "sglang": "sglang"}


@dataclass(frozen=True)
class ServerConfig:
    """`eval.server` of a run config (or the `eval --server` option), validated by the manifest schema."""

    kind: str = "transformers"
    url: str | None = None  # kind url: the server's base URL
    model: str | None = None  # kind url: the served model name, when the server lists several
    device: str = "cpu"  # transformers: --device
    deterministic_inference: bool = True  # sglang: --enable-deterministic-inference
    concurrency: int = 8  # episodes in flight
    max_tokens: int = 256  # per turn, sent with every request
    startup_timeout_s: float = 600.0  # the server process until it answers
    request_timeout_s: float = REQUEST_TIMEOUT_S  # one chat request, from connecting to the last byte
    deadline_s: float = DEADLINE_S  # every episode of the evaluation
    args: tuple[str, ...] = ()  # further arguments for the server program, one word each

    @classmethod
    def from_dict(cls, block: dict[str, Any] | None, *, path: object = None) -> ServerConfig:
        block = dict(block or {})
        known = set(cls.__dataclass_fields__)
        for key in block:
            if key not in known:
                raise BadInput(
                    f"unknown key (expected one of: {', '.join(sorted(known))})", path=path, where=f"eval.server.{key}"
                )
        if block.get("kind", "transformers") not in KINDS:
            raise BadInput(
                f"expected one of {', '.join(KINDS)}, got {block['kind']!r}", path=path, where="eval.server.kind"
            )
        if (block.get("kind") == "url") != (block.get("url") is not None):
            raise BadInput("a url is given exactly when kind is url", path=path, where="eval.server.url")
        if "args" in block:
            block["args"] = tuple(block["args"])
        return cls(**block)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def transformers_argv(
    model_dir: str, port: int, *, device: str = "cpu", seed: int = 0, args: tuple[str, ...] = ()
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "transformers.cli.transformers",
        "serve",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        device,
        "--default-seed",
        str(seed),
        "--log-level",
        "warning",
        *args,
    ]


def sglang_argv(
    model_dir: str,
    port: int,
    *,
    seed: int = 0,
    tensor_parallel: int = 1,
    deterministic: bool = True,
    args: tuple[str, ...] = (),
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--random-seed",
        str(seed),
        "--tp-size",
        str(tensor_parallel),
    ]
    return argv + (["--enable-deterministic-inference"] if deterministic else []) + list(args)


def determinism(config: ServerConfig, *, temperature: float) -> dict[str, Any]:
    """Whether the same request seeds give the same responses again, and why (engine.py explains the seeds)."""
    if config.kind == "sglang":
        why = (
            "--enable-deterministic-inference: per-request seeds honoured"
            if config.deterministic_inference
            else "SGLang without --enable-deterministic-inference: batching changes results"
        )
        return {"deterministic": config.deterministic_inference, "why": why}
    if config.kind == "transformers":
        if temperature == 0:
            return {"deterministic": True, "why": "greedy decoding"}
        if "--continuous-batching" in config.args:
            return {
                "deterministic": False,
                "why": "sampling under --continuous-batching: per-request seeds not verified",
            }
        if config.concurrency == 1:
            return {
                "deterministic": True,
                "why": "one request at a time: the request seed sets torch's global generator",
            }
        return {
            "deterministic": False,
            "why": "transformers serve seeds one global generator per request; "
            f"{config.concurrency} requests in flight reseed it under each other",
        }
    return {"deterministic": None, "why": "a server the user runs: unknown"}


def program_version(kind: str) -> str | None:
    try:
        return importlib.metadata.version(PACKAGE[kind])
    except (KeyError, importlib.metadata.PackageNotFoundError):
        return None


@dataclass
class Server:
    url: str
    model: str
    provenance: dict[str, Any] = field(default_factory=dict)
    process: subprocess.Popen | None = None

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None


def served_models(url: str, timeout_s: float = 5.0) -> list[str]:
    """The model names a server lists on GET /v1/models; ServerError for an answer that is no such list."""
    where = f"{url.rstrip('/')}/v1/models"
    with httpx.stream("GET", where, timeout=timeout_s) as response:
        data = read_bounded_sync(response.iter_bytes(), MIN_REPLY_BYTES, where)
        response.raise_for_status()
    listed = parse_answer(data, where)
    models = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(models, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in models):
        raise ServerError(
            f'{where}: expected {{"data": [{{"id": <name>}}, ...]}}, got {data[:200].decode("utf-8", "replace")!r}'
        )
    return [m["id"] for m in models]


@contextlib.contextmanager
def serve(
    config: ServerConfig, model_dir: str | Path | None, *, log_dir: Path, seed: int = 0, tensor_parallel: int = 1
) -> Iterator[Server]:
    """The server of `config` for `model_dir`, ready; stopped (when started here) on leaving the block."""
    if config.kind == "url":
        yield _attach(config, model_dir)
        return
    if model_dir is None or not Path(model_dir).is_dir():
        raise BadInput("expected a Hugging Face model directory", path=model_dir, where="model")
    if program_version(config.kind) is None:
        extra = "serving" if config.kind == "transformers" else "sglang"
        raise Failure(f"{config.kind} is not installed here (pip install 'agentrepro[{extra}]')")
    model = str(Path(model_dir).resolve())
    port = free_port()
    argv = (
        transformers_argv(model, port, device=config.device, seed=seed, args=config.args)
        if config.kind == "transformers"
        else sglang_argv(
            model,
            port,
            seed=seed,
            tensor_parallel=tensor_parallel,
            deterministic=config.deterministic_inference,
            args=config.args,
        )
    )
    url = f"http://127.0.0.1:{port}"
    make_dir(log_dir)
    err_path = log_dir / "server.stderr.log"
    header = f"=== agentrepro {now()}: {shlex.join(argv)}\n"
    with (
        open(log_dir / "server.stdout.log", "a", encoding="utf-8") as out,
        open(err_path, "a", encoding="utf-8") as err,
    ):
        out.write(header)
        err.write(header)
        out.flush()
        err.flush()
        try:
            process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise Failure(f"cannot start the {config.kind} server ({argv[0]}): {exc}") from exc
    server = Server(
        url=url,
        model=model,
        process=process,
        provenance={
            "kind": config.kind,
            "version": program_version(config.kind),
            "argv": argv,
            "url": url,
            "model": model,
            "pid": process.pid,
        },
    )
    try:
        _wait_ready(server, config.startup_timeout_s, err_path)
        yield server
    finally:
        stop_tree(process)


def ready(server: Server) -> bool:
    """Whether a started server answers for its model now.

    transformers serve loads its pinned model before it listens, so `GET /health` answering 200 means ready.
    Its `GET /v1/models` is no test: through transformers 5.23 it lists only the Hugging Face cache, never
    a model directory it was started on (5.17 answered 500 there with no cache), and lists a pinned model from
    5.24 on. SGLang lists its `--model-path` on `/v1/models`.
    """
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError, ServerError):
        if server.provenance["kind"] == "transformers":
            response = httpx.get(f"{server.url}/health", timeout=5.0)
            return response.status_code == 200 and response.json().get("status") == "ok"
        return server.model in served_models(server.url)
    return False


def _wait_ready(server: Server, timeout_s: float, err_path: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if not server.alive():
            assert server.process is not None  # a server without a process of ours is always alive
            tail = last_line(err_path)
            raise Failure(
                f"the {server.provenance['kind']} server exited with status {server.process.returncode} before it was "
                f"ready; see {err_path}" + (f" (last line: {tail})" if tail else "")
            )
        if ready(server):
            return
        if time.monotonic() > deadline:
            raise Failure(f"the {server.provenance['kind']} server was not ready after {timeout_s:g} s; see {err_path}")
        time.sleep(0.5)


def _attach(config: ServerConfig, model_dir: str | Path | None) -> Server:
    url = config.url
    if url is None:
        raise BadInput("missing: the base URL of the server to evaluate with", where="eval.server.url")
    try:
        listed = served_models(url)
    except (httpx.HTTPError, ServerError) as exc:
        raise ServerError(
            f"{config.url}: no OpenAI-compatible server answers GET /v1/models ({type(exc).__name__}: {exc})"
        ) from None
    wanted = config.model or (str(Path(model_dir).resolve()) if model_dir is not None else None)
    if wanted is None and len(listed) == 1:
        model = listed[0]  # neither a model directory nor a name given: the one model the server serves
    elif wanted in listed:
        model = wanted
    else:
        raise BadInput(
            f"the server at {config.url} serves {listed}, not {wanted!r} (name the served model in eval.server.model)",
            where="eval.server.model",
        )
    return Server(
        url=url,
        model=model,
        provenance={"kind": "url", "version": None, "argv": None, "url": config.url, "model": model},
    )
