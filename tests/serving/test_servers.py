"""Servers: argv as rendered (SGLang cannot run here), the eval.server block validated, determinism recorded,
readiness that fails with the log's last line or a timeout."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from helpers import REPO

from agentrepro.errors import BadInput, Failure
from agentrepro.process import stop_tree
from agentrepro.schema import validate
from agentrepro.serving.servers import Server, ServerConfig, _wait_ready, determinism, sglang_argv, transformers_argv


def test_sglang_argv_has_seed_tensor_parallel_and_determinism():
    """SGLang is launched as the issue gives it, tensor parallel from the GPUs, deterministic inference when asked."""
    argv = sglang_argv(
        "/m", 31000, seed=7, tensor_parallel=4, deterministic=True, args=("--mem-fraction-static", "0.8")
    )
    assert argv == [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m",
        "--host",
        "127.0.0.1",
        "--port",
        "31000",
        "--random-seed",
        "7",
        "--tp-size",
        "4",
        "--enable-deterministic-inference",
        "--mem-fraction-static",
        "0.8",
    ]
    assert "--enable-deterministic-inference" not in sglang_argv("/m", 1, deterministic=False)


def test_transformers_argv_pins_the_model():
    """transformers serve gets the model directory as its forced model, the port, device and default seed."""
    argv = transformers_argv("/m", 8123, device="cpu", seed=5)
    assert argv[:5] == [sys.executable, "-m", "transformers.cli.transformers", "serve", "/m"]
    assert argv[argv.index("--port") + 1] == "8123" and argv[argv.index("--default-seed") + 1] == "5"


@pytest.mark.parametrize(
    "block,where",
    [
        ({"kind": "vllm"}, "eval.server.kind"),
        ({"kind": "url"}, "eval.server.url"),
        ({"kind": "transformers", "url": "http://h:1"}, "eval.server.url"),
        ({"concurency": 2}, "eval.server.concurency"),
    ],
)
def test_bad_server_block_names_the_key(block, where):
    """A bad eval.server block is BadInput naming the key, both in the run config reader and the manifest schema."""
    with pytest.raises(BadInput) as exc:
        ServerConfig.from_dict(block)
    assert exc.value.where == where
    manifest = yaml.safe_load((REPO / "manifests" / "frozenlake-cpu.yaml").read_text())
    manifest["eval"] = {**manifest["eval"], "engine": "served", "server": block}
    with pytest.raises(BadInput) as exc:
        validate(manifest, "manifest.schema.json", path="m.yaml")
    assert "eval.server" in str(exc.value)


def test_good_server_block_is_accepted_by_the_manifest_schema():
    """eval.engine served with a full eval.server block is a valid manifest."""
    manifest = yaml.safe_load((REPO / "manifests" / "frozenlake-cpu.yaml").read_text())
    manifest["eval"] = {
        **manifest["eval"],
        "engine": "served",
        "server": {
            "kind": "sglang",
            "deterministic_inference": True,
            "concurrency": 128,
            "max_tokens": 512,
            "args": ["--mem-fraction-static", "0.8"],
        },
    }
    validate(manifest, "manifest.schema.json", path="m.yaml")
    assert ServerConfig.from_dict(manifest["eval"]["server"]).args == ("--mem-fraction-static", "0.8")


@pytest.mark.parametrize(
    "kind,extra,temperature,expected",
    [
        ("sglang", {"deterministic_inference": True}, 1.0, True),
        ("sglang", {"deterministic_inference": False}, 0.0, False),
        ("transformers", {"concurrency": 8}, 0.0, True),
        ("transformers", {"concurrency": 1}, 1.0, True),
        ("transformers", {"concurrency": 8}, 1.0, False),
        ("transformers", {"concurrency": 1, "args": ("--continuous-batching",)}, 1.0, False),
        ("url", {"url": "http://h:1"}, 0.0, None),
    ],
)
def test_determinism_is_recorded(kind, extra, temperature, expected):
    """Whether seeds reproduce responses is recorded per server kind, concurrency and temperature."""
    record = determinism(ServerConfig(kind=kind, **extra), temperature=temperature)
    assert record["deterministic"] is expected and record["why"]


def test_server_that_exits_before_ready_fails_with_its_last_line(tmp_path):
    """A server process that dies during start-up is a Failure naming its exit status and last stderr line."""
    log = tmp_path / "server.stderr.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('CUDA out of memory', file=sys.stderr); sys.exit(3)"], stderr=err
        )
    proc.wait()
    server = Server(url="http://127.0.0.1:9", model="/m", provenance={"kind": "sglang"}, process=proc)
    with pytest.raises(Failure, match=r"exited with status 3 .*CUDA out of memory"):
        _wait_ready(server, 30, log)


def test_server_not_ready_in_time_fails(tmp_path):
    """A server that never answers /v1/models fails after the start-up timeout; it is then stopped by PID."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server = Server(url="http://127.0.0.1:9", model="/m", provenance={"kind": "transformers"}, process=proc)
    try:
        with pytest.raises(Failure, match="not ready after 1 s"):
            _wait_ready(server, 1, tmp_path / "none.log")
    finally:
        stop_tree(proc, grace_s=5)
    assert proc.poll() is not None


def test_server_option_picks_the_server(tmp_path):
    """--server takes transformers, sglang or a URL; anything else is bad input naming --server."""
    import argparse

    from agentrepro.cli.eval import add_model_arguments, server_config

    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    assert server_config(parser.parse_args(["--server", "transformers", "--concurrency", "3"])) == ServerConfig(
        kind="transformers", concurrency=3
    )
    assert (
        server_config(parser.parse_args(["--server", "sglang", "--no-deterministic-inference"])).deterministic_inference
        is False
    )
    assert server_config(parser.parse_args(["--server", "http://10.0.0.1:30000"])).url == "http://10.0.0.1:30000"
    with pytest.raises(BadInput) as exc:
        server_config(parser.parse_args(["--server", "vllm"]))
    assert exc.value.where == "--server"


# A server answering as transformers serve 5.17 does when pinned to a model directory: /health says ok,
# /v1/models lists only the (here empty) Hugging Face cache, never the directory.
FAKE_SERVE_5_17 = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"/health": {"status": sys.argv[2]}, "/v1/models": {"object": "list", "data": []}}.get(self.path)
        self.send_response(200 if body and body.get("status", "ok") == "ok" else 503 if body else 404)
        self.end_headers()
        self.wfile.write(json.dumps(body or {}).encode())

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


@pytest.mark.parametrize(
    "kind, health, becomes_ready",
    [
        ("transformers", "ok", True),  # ready though /v1/models does not list the model
        ("transformers", "unhealthy", False),  # /health 503 (its continuous-batching worker died)
        ("sglang", "ok", False),  # SGLang must list its --model-path on /v1/models
    ],
)
def test_readiness_of_a_server_that_does_not_list_its_model(tmp_path, kind, health, becomes_ready):
    """transformers serve before 5.24 never lists a pinned model directory on /v1/models; its /health decides."""
    from agentrepro.serving.servers import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", FAKE_SERVE_5_17, str(port), health])
    server = Server(url=f"http://127.0.0.1:{port}", model="/m", provenance={"kind": kind}, process=proc)
    try:
        if becomes_ready:
            _wait_ready(server, 30, tmp_path / "none.log")
        else:
            with pytest.raises(Failure, match="not ready after 3 s"):
                _wait_ready(server, 3, tmp_path / "none.log")
    finally:
        stop_tree(proc, grace_s=5)
