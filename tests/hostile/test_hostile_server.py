"""The served evaluator against a real HTTP server on localhost that hangs, lies, floods and misbehaves.

Each case runs `agentrepro eval --model DIR --server URL` (in-process, and a few as a subprocess) against
fake_openai.FakeServer: a server fault is exit 1 with one line naming the URL and what was wrong, the failed
attempt in provenance.json says the same, and no outcomes are written or sealed. A well-behaved server
gives exit 0, so the cases fail for the reason they name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import FakeServer
from helpers import run_cli
from hostile_kit import invoke, record

from agentrepro.reading import load_json

SEEDS = "10001-10002"


@pytest.fixture
def model_dir(tmp_path) -> Path:
    """A stand-in model directory (the served evaluator only names it: the fake server 'serves' it)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}\n")
    return folder


def _eval(server: FakeServer, model: Path, out: Path, *extra, subprocess: bool = False) -> tuple[int, str]:
    argv = [
        "eval",
        "--model",
        model,
        "--env",
        "frozenlake",
        "--seeds",
        SEEDS,
        "--server",
        server.url,
        "--out",
        out,
        "--max-tokens",
        "8",
        "--max-turns",
        "2",
        "--concurrency",
        "2",
        *extra,
    ]
    if subprocess:
        done = run_cli(*argv, timeout=300)
        return done.returncode, done.stderr + done.stdout
    return invoke(*argv)


def _failed_cleanly(out: Path, status: int, message: str, *names: str) -> None:
    """Exit 1, one line naming `names`, the attempt recorded as failed with the same reason, nothing written or sealed."""
    lines = message.strip().splitlines()
    assert status == 1 and len(lines) == 1 and "Traceback" not in message, message
    assert all(name in lines[0] for name in names), lines[0]
    attempt = load_json(out / "provenance.json")["attempts"][-1]
    assert attempt["status"] == "failed" and all(name in attempt["reason"] for name in names), attempt
    assert not (out / "outcomes.jsonl").exists() and not (out / "OUTPUTS.sha256").exists()


def test_a_well_behaved_fake_server_evaluates(model_dir, tmp_path):
    """The fake server answering well: exit 0, rows written and sealed (so the faults below are the cases' own)."""
    with FakeServer("ok", model=str(model_dir.resolve())) as server:
        status, message = _eval(server, model_dir, tmp_path / "out")
    assert status == 0, message
    rows = [json.loads(line) for line in (tmp_path / "out" / "outcomes.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["tokens"] == 3 * r["turns"] for r in rows)
    assert load_json(tmp_path / "out" / "provenance.json")["attempts"][-1]["evaluator"]["time_limits_s"] == {
        "request": 300.0,
        "deadline": 43200.0,
    }


@pytest.mark.parametrize("behaviour", ["hang", "drip"])
def test_a_server_that_never_finishes_an_answer_fails_at_the_request_timeout(model_dir, tmp_path, behaviour):
    """A server that accepts and never answers, or answers a byte a second: the request timeout fires, and says so."""
    with FakeServer(behaviour, model=str(model_dir.resolve())) as server:
        status, message = _eval(server, model_dir, tmp_path / "out", "--request-timeout", "2")
        assert server.requests <= 2  # one per episode in flight: a timed-out request is not sent again
    _failed_cleanly(tmp_path / "out", status, message, server.url, "request timeout of 2 s", "--request-timeout")
    record("server", f"served:{behaviour}")


def test_a_slow_server_fails_at_the_deadline_and_says_which_limit_fired(model_dir, tmp_path):
    """Each answer inside the request timeout, the whole evaluation past --deadline: the deadline is named."""
    with FakeServer("slow", model=str(model_dir.resolve())) as server:
        status, message = _eval(server, model_dir, tmp_path / "out", "--request-timeout", "30", "--deadline", "2")
    _failed_cleanly(tmp_path / "out", status, message, "deadline of 2 s", "2 episodes", "--deadline")
    assert "request timeout" not in message
    record("server", "served:slow")


def _served_run(tmp_path: Path, url: str, server: dict) -> Path:
    """A run directory whose resolved config evaluates through the served engine at `url` (eval.server += `server`)."""
    from agentrepro import runconfig
    from agentrepro.environments import task_panel

    config = {
        "study": "st",
        "method": "grpo",
        "seed": 1,
        "backend": {"name": "command", "command": "true", "eval_command": "true"},
        "env": {"name": "frozenlake", "params": {}},
        "train": {"mode": "concat", "max_turns": 2},
        "eval": {
            "engine": "served",
            "server": {"kind": "url", "url": url, "max_tokens": 8, **server},
            "task_panel": task_panel("frozenlake", {}, [10001, 10002]),
            "episodes_per_task": 1,
        },
    }
    run = tmp_path / "run"
    run.mkdir()
    runconfig.write_resolved_config(run, config)
    return run


def test_a_study_evaluation_takes_its_time_limits_from_eval_server_and_the_options(model_dir, tmp_path):
    """`eval --run`: eval.server.request_timeout_s fires against a hung server; --request-timeout replaces it (subprocess)."""
    with FakeServer("hang", model=str(model_dir.resolve())) as server:
        run = _served_run(tmp_path, server.url, {"request_timeout_s": 2})
        done = run_cli("eval", "--run", run, "--step", 0, "--checkpoint", model_dir, timeout=300)
        _failed_cleanly(run / "eval" / "step0", done.returncode, done.stderr, "request timeout of 2 s")
        done = run_cli(
            "eval", "--run", run, "--step", 0, "--checkpoint", model_dir, "--request-timeout", "1", timeout=300
        )
        _failed_cleanly(run / "eval" / "step0", done.returncode, done.stderr, "request timeout of 1 s")


LIES = {
    "tokens=1e30": "usage.completion_tokens",
    "tokens=2.9": "usage.completion_tokens",
    "tokens=-7": "usage.completion_tokens",
    'tokens="7"': "usage.completion_tokens",
    "tokens=true": "usage.completion_tokens",
    "tokens=null": "usage.completion_tokens",
    "tokens=99999": "an integer in [0, 8]",
    "tokens=123456789012345678901234567890": "usage.completion_tokens",
    "body=not json": "not JSON",
    'body={"choices": [], "usage": {"completion_tokens": 1}}': "choices",
    'body={"choices": [{"message": {"content": 5}}], "usage": {"completion_tokens": 1}}': "choices[0].message.content",
    'body={"choices": [{"message": {"content": "x"}}]}': "usage",
    "body=[1, 2]": "(answer)",
    'body={"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": NaN}}': "not JSON",
    'body={"choices": ["x"], "usage": {"completion_tokens": 1}}': "choices[0]",
    'body={"choices": [{"message": {"content": "x"}, "finish_reason": 3}], "usage": {"completion_tokens": 1}}': "finish_reason",
}


@pytest.mark.parametrize("behaviour", list(LIES))
def test_a_lying_answer_is_the_servers_fault_and_nothing_is_sealed(model_dir, tmp_path, behaviour):
    """completion_tokens 1e30, 2.9, -7, a string, above max_tokens; bodies that are not chat completions: exit 1, named."""
    with FakeServer(behaviour, model=str(model_dir.resolve())) as server:
        status, message = _eval(server, model_dir, tmp_path / "out")
    _failed_cleanly(tmp_path / "out", status, message, server.url, LIES[behaviour])
    record("server", "served:lies")


@pytest.mark.parametrize("behaviour", ["flood", "huge"])
def test_a_flood_is_refused_at_its_bound_before_it_fills_memory(model_dir, tmp_path, behaviour):
    """An endless answer, or a 3 MiB one for 8 tokens, is refused once it passes the reply bound (1 MiB here)."""
    with FakeServer(behaviour, model=str(model_dir.resolve())) as server:
        status, message = _eval(server, model_dir, tmp_path / "out")
    _failed_cleanly(tmp_path / "out", status, message, server.url, "passed 1,048,576 bytes")
    record("server", f"served:{behaviour}")


@pytest.mark.parametrize("listing", ["[]", '{"data": 5}', '{"data": [{"name": "m"}]}', "NaN", "<html>"])
def test_a_model_listing_that_is_no_listing_is_the_servers_fault(model_dir, tmp_path, listing):
    """GET /v1/models answering a list, a number, entries without ids or HTML: exit 1 naming the URL, no traceback."""
    with FakeServer(f"models={listing}", model=str(model_dir.resolve())) as server:
        status, message = _eval(server, model_dir, tmp_path / "out")
    _failed_cleanly(tmp_path / "out", status, message, server.url, "/v1/models")
    record("server", "served:models")


@pytest.mark.parametrize(
    "behaviour, extra, named",
    [
        ("hang", ["--request-timeout", "2"], "request timeout"),
        ("slow", ["--deadline", "2"], "deadline of 2 s"),
        ("tokens=-7", [], "usage.completion_tokens"),
        ("flood", [], "passed 1,048,576 bytes"),
    ],
)
def test_server_faults_as_a_subprocess(model_dir, tmp_path, behaviour, extra, named):
    """As a user runs it: a hung, lying or flooding server ends `agentrepro eval` with exit 1 and one line."""
    with FakeServer(behaviour, model=str(model_dir.resolve())) as server:
        status, message = _eval(server, model_dir, tmp_path / "out", *extra, subprocess=True)
    _failed_cleanly(tmp_path / "out", status, message, named)
