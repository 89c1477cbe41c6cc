"""A real `transformers serve` on a tiny random Qwen2 built here evaluates FrozenLake and Sokoban tasks in both
modes through `agentrepro eval`; outcomes are checked against the schema and the panel (CI requires this:
AGENTREPRO_REQUIRE=transformers-serve)."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import psutil
import pytest
from helpers import require, run_cli

from agentrepro import outcomes, runconfig
from agentrepro.environments import task_panel
from agentrepro.errors import BadInput
from agentrepro.seal import verify_outputs
from agentrepro.serving import tiny
from agentrepro.serving.client import ChatClient, Retry, ServerError
from agentrepro.serving.servers import ServerConfig, serve, served_models

pytestmark = [pytest.mark.serving, pytest.mark.slow]
FAST = ["--max-tokens", "12", "--max-turns", "2"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A random-weight Qwen2 with an offline-trained tokenizer and a chat template (sampling on)."""
    have = all(importlib.util.find_spec(m) is not None for m in ("fastapi", "uvicorn", "openai"))
    require("transformers-serve", have, "the serving extra (fastapi, uvicorn, openai) is not installed")
    return tiny.build(tmp_path_factory.mktemp("tiny") / "tiny-qwen2")


@pytest.fixture(scope="module")
def live_server(tiny_model, tmp_path_factory):
    """One transformers serve for the tests that attach to a URL, stopped by PID at the end."""
    with serve(
        ServerConfig(kind="transformers", startup_timeout_s=300),
        tiny_model,
        log_dir=tmp_path_factory.mktemp("server-logs"),
    ) as server:
        yield server
    assert (
        not psutil.pid_exists(server.process.pid) or psutil.Process(server.process.pid).status() == psutil.STATUS_ZOMBIE
    )


def read_rows(out):
    return [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]


def check(rows, env, seeds, *, method, step=0, study="adhoc"):
    """The rows pass the outcome checks against the environment's own panel of `seeds`."""
    panel = task_panel(env, {}, seeds)
    outcomes.check_rows(
        rows,
        config={"study": study, "method": method, "seed": 0, "eval": {"task_panel": panel}},
        step=step,
        source="test",
    )
    assert all(1 <= r["turns"] <= 2 and r["tokens"] >= r["turns"] for r in rows)


def test_server_is_pinned_to_the_model_and_recorded(tiny_model, live_server):
    """The started server serves exactly the model directory, records program, version and argv, and refuses other names."""
    record = live_server.provenance
    assert record["kind"] == "transformers" and record["version"] and record["argv"][4] == str(tiny_model.resolve())
    assert served_models(live_server.url) == [str(tiny_model.resolve())]

    async def ask():
        client = ChatClient(live_server.url, "another-model", retry=Retry(attempts=1))
        try:
            await client.chat([{"role": "user", "content": "x"}], temperature=0, top_p=1, max_tokens=2, seed=0)
        finally:
            await client.aclose()

    with pytest.raises(ServerError, match="HTTP 400"):
        asyncio.run(ask())


@pytest.mark.parametrize(
    "env,mode,seeds,temperature",
    [
        ("frozenlake", "concat", "10001-10002", "1.0"),
        ("frozenlake", "non_concat", "10004-10005", "0"),
        ("sokoban", "concat", "10001-10002", "0.7"),
        ("sokoban", "non_concat", "10003-10004", "0"),
    ],
)
def test_eval_model_against_the_server(tiny_model, live_server, tmp_path, env, mode, seeds, temperature):
    """eval --model --server URL plays both games in both modes, greedy and sampled; rows keep the panel's task hashes."""
    out = tmp_path / "out"
    result = run_cli(
        "eval",
        "--model",
        tiny_model,
        "--env",
        env,
        "--seeds",
        seeds,
        "--server",
        live_server.url,
        "--out",
        out,
        "--mode",
        mode,
        "--temperature",
        temperature,
        *FAST,
    )
    assert result.returncode == 0, result.stderr
    lo, hi = map(int, seeds.split("-"))
    check(read_rows(out), env, range(lo, hi + 1), method="tiny-qwen2")
    attempt = json.loads((out / "provenance.json").read_text())["attempts"][-1]
    record = attempt["evaluator"]
    assert attempt["status"] == "ok" and record["mode"] == mode and record["server"]["kind"] == "url"
    assert record["server"]["deterministic"] is None and record["sampling"]["temperature"] == float(temperature)
    assert record["sampling"]["max_tokens"] == 12 and record["sampling"]["max_turns"] == 2
    assert verify_outputs(out / "OUTPUTS.sha256") == []


def test_eval_run_with_served_engine(tiny_model, live_server, tmp_path):
    """eval --run with eval.engine served scores a Hugging Face checkpoint on the run's frozen panel, into eval/step<N>/."""
    panel = task_panel("frozenlake", {}, [10001, 10002])
    config = {
        "study": "st",
        "method": "grpo",
        "seed": 1,
        "backend": {"name": "command", "command": "true", "eval_command": "true"},
        "env": {"name": "frozenlake", "params": {}},
        "train": {"mode": "non_concat", "max_turns": 2},
        "eval": {
            "engine": "served",
            "server": {"kind": "url", "url": live_server.url, "max_tokens": 12},
            "task_panel": panel,
            "episodes_per_task": 1,
        },
    }
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runconfig.write_resolved_config(run_dir, config)
    missing = run_cli("eval", "--run", run_dir, "--step", 3)
    assert missing.returncode == 2 and "checkpoints/hf/step3" in missing.stderr
    result = run_cli("eval", "--run", run_dir, "--step", 3, "--checkpoint", tiny_model)
    assert result.returncode == 0, result.stderr
    rows = read_rows(run_dir / "eval" / "step3")
    outcomes.check_rows(rows, config=config, step=3, source="test")
    attempt = json.loads((run_dir / "eval" / "step3" / "provenance.json").read_text())["attempts"][-1]
    assert attempt["evaluator"]["mode"] == "non_concat" and attempt["evaluator"]["server"]["model"] == str(
        tiny_model.resolve()
    )


def test_sampling_without_do_sample_is_refused(tmp_path):
    """temperature > 0 through transformers serve with a generation config lacking do_sample is bad input (never silently greedy)."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "generation_config.json").write_text(json.dumps({"temperature": 0.7}))
    result = run_cli(
        "eval",
        "--model",
        model,
        "--env",
        "frozenlake",
        "--seeds",
        "10001",
        "--out",
        tmp_path / "o",
        "--temperature",
        "0.7",
    )
    assert result.returncode == 2 and "generation_config.json" in result.stderr and "do_sample" in result.stderr


def test_served_outcomes_are_played_again_on_a_sample_of_tasks(tiny_model, tmp_path):
    """`audit --re-eval` of outcomes a chat server produced: a server of the recorded kind started again on the run's
    Hugging Face checkpoint plays a sample of the panel's tasks with the same request seeds (sampled here, one request
    at a time), row for row as recorded; a server the user runs (a URL) is said not to repeat its outcomes. Turns of
    up to 256 tokens let the random model's sampled end of turn (about 1 in 512 a token) make the rows differ."""
    import shutil

    from agentrepro.audit.reeval import TaskSample, replay

    panel = task_panel("frozenlake", {}, range(10001, 10005))
    config = {
        "study": "st",
        "method": "grpo",
        "seed": 1,
        "backend": {"name": "command", "command": "true", "eval_command": "true"},
        "env": {"name": "frozenlake", "params": {}},
        "train": {"mode": "concat", "max_turns": 2},
        "eval": {
            "engine": "served",
            "server": {"kind": "transformers", "max_tokens": 256, "concurrency": 1, "startup_timeout_s": 300},
            "temperature": 1.0,
            "task_panel": panel,
            "episodes_per_task": 1,
        },
    }
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_model, run_dir / "checkpoints" / "hf" / "step3")
    runconfig.write_resolved_config(run_dir, config)
    result = run_cli("eval", "--run", run_dir, "--step", 3, timeout=600)
    assert result.returncode == 0, result.stderr
    recorded = read_rows(run_dir / "eval" / "step3")
    assert len({r["tokens"] for r in recorded}) > 1  # rows a request's other seed would change
    positions = TaskSample(2, 5).positions(len(panel))
    assert positions is not None and positions[0] > 0  # not the panel's first tasks: each keeps its position's seeds
    replayed = replay(config, run_dir, 3, positions, log_dir=tmp_path / "logs")
    assert replayed == [recorded[i] for i in positions]

    served_elsewhere = {**config, "eval": {**config["eval"], "server": {"kind": "url", "url": "http://127.0.0.1:9"}}}
    with pytest.raises(BadInput, match=r"does not repeat them \(a server the user runs: unknown\)"):
        replay(served_elsewhere, run_dir, 3, positions, log_dir=tmp_path / "logs")
