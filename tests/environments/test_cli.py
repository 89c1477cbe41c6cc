"""`agentrepro env show | replay | play` run as subprocesses, checked against the reference fixtures."""

from __future__ import annotations

import json

import pytest
from helpers import FIXTURES, run_cli


def load(name: str) -> list[dict]:
    """Records of one VAGEN fixture file (one JSON object per line)."""
    with open(FIXTURES / "vagen" / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def param_args(record: dict) -> list[str]:
    """A fixture record's params as repeated `--param name=JSON` arguments."""
    args = []
    for key, value in record["params"].items():
        if key != "env":
            args += ["--param", f"{key}={json.dumps(value)}"]
    return args


def ok(proc) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_show_json_matches_reference_map():
    """`env show --json` prints the reference's grid and observation (a retried Sokoban seed)."""
    rec = next(r for r in load("sokoban_maps_min1to5.jsonl") if r["retries"] >= 2)
    out = ok(run_cli("env", "show", "--env", "sokoban", "--seed", rec["seed"], *param_args(rec), "--json"))
    obj = json.loads(out)
    assert (obj["seed"], obj["grid"], obj["observation"], obj["state_key"]) == (
        rec["seed"],
        rec["grid"],
        rec["obs_str"],
        rec["grid"],
    )
    assert obj["solution"] == rec["bfs_solution"] and obj["task_id"] == f"sokoban-{rec['seed']}"
    assert len(obj["task_hash"]) == 64


def test_show_seeds_ranges_dump_one_line_per_seed():
    """`--seeds 0-9,10001-10003` prints 13 JSON lines in order, each grid equal to the reference's."""
    maps = {r["seed"]: r for r in load("frozenlake_maps.jsonl")}
    out = ok(run_cli("env", "show", "--env", "frozenlake", "--seeds", "0-9,10001-10003"))
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["seed"] for r in rows] == [*range(10), 10001, 10002, 10003]
    checked = [r for r in rows if r["seed"] in maps]
    assert len(checked) >= 5
    for row in checked:
        assert row["grid"] == maps[row["seed"]]["grid"] and row["observation"] == maps[row["seed"]]["obs_str"]


def test_show_text_prints_observation():
    """Without --json, `env show` prints the observation text a model would see."""
    rec = load("frozenlake_maps.jsonl")[0]
    assert ok(run_cli("env", "show", "--env", "frozenlake", "--seed", rec["seed"])) == rec["obs_str"]


def test_replay_responses_matches_reference(tmp_path):
    """`env replay --responses` reproduces a reference replay turn by turn and stops at done."""
    rec = next(r for r in load("sokoban_replays.jsonl") if r["kind"] == "bfs_solution")
    path = tmp_path / "responses.jsonl"
    extra = ["<observation>o</observation><think>t</think><answer>up</answer><prediction>p</prediction>"]
    path.write_text("".join(json.dumps(t["response"]) + "\n" for t in rec["turns"]) + json.dumps(extra[0]) + "\n")
    out = ok(
        run_cli(
            "env", "replay", "--env", "sokoban", "--seed", rec["seed"], *param_args(rec), "--responses", path, "--json"
        )
    )
    turns = [json.loads(line) for line in out.splitlines()]
    assert len(turns) == len(rec["turns"])  # the extra response after `done` is not played
    for got, want in zip(turns, rec["turns"]):
        assert (
            got["grid"],
            got["observation"],
            got["reward"],
            got["done"],
            got["success"],
            got["actions"],
            got["valid"],
        ) == (
            want["grid"],
            want["obs_str"],
            want["reward"],
            want["done"],
            want["success"],
            want["executed_actions"],
            want["action_is_valid"],
        )


def test_replay_episodes_in_one_call(tmp_path):
    """`env replay --episodes` replays many FrozenLake episodes in one process, one output line each."""
    recs = load("frozenlake_replays.jsonl")[:12]
    path = tmp_path / "episodes.jsonl"
    path.write_text(
        "".join(json.dumps({"seed": r["seed"], "responses": [t["response"] for t in r["turns"]]}) + "\n" for r in recs)
    )
    out = ok(run_cli("env", "replay", "--env", "frozenlake", "--episodes", path))
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["seed"] for r in results] == [r["seed"] for r in recs]
    for got, rec in zip(results, recs):
        assert [(t["reward"], t["done"], t["success"], t["actions"], t["valid"], t["grid"]) for t in got["turns"]] == [
            (t["reward"], t["done"], t["success"], t["executed_actions"], t["action_is_valid"], t["grid"])
            for t in rec["turns"]
        ]


@pytest.mark.parametrize(
    "content,needle",
    [
        ('"<think></think><answer>up</answer>"\n{"not": "a string"}\n', "line 2"),
        ('"ok"\n[1, 2\n', "line 2"),
    ],
)
def test_replay_bad_responses_file_is_exit_2_with_line_and_no_output(tmp_path, content, needle):
    """A malformed responses file stops with exit 2, naming the file and line, before printing any turn."""
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    proc = run_cli("env", "replay", "--env", "frozenlake", "--seed", 0, "--responses", path, "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert str(path) in proc.stderr and needle in proc.stderr


def test_bad_params_and_episode_lines_are_exit_2(tmp_path):
    """Unknown or ill-typed parameters and malformed episode lines are one-line errors naming the key/line."""
    proc = run_cli("env", "show", "--env", "sokoban", "--seed", 0, "--param", "dim_rooms=[6,6]")
    assert proc.returncode == 2 and "--param dim_rooms" in proc.stderr
    path = tmp_path / "episodes.jsonl"
    path.write_text('{"seed": 1, "responses": []}\n{"seed": "two", "responses": []}\n')
    proc = run_cli("env", "replay", "--env", "sokoban", "--episodes", path)
    assert proc.returncode == 2 and "line 2" in proc.stderr and "seed" in proc.stderr and proc.stdout == ""


def test_show_system_prompt_is_the_environments_own():
    """`env show --system-prompt` prints the game's own guide; a format it has no prompt for is exit 2."""
    out = ok(run_cli("env", "show", "--env", "sokoban", "--seed", 0, "--system-prompt"))
    assert out.startswith("You are a Sokoban solver.") and "FrozenLake" not in out
    proc = run_cli("env", "show", "--env", "frozenlake", "--seed", 0, "--param", "prompt_format=free_wm")
    assert proc.returncode == 2 and "--param prompt_format" in proc.stderr and "'free_think', 'wm'" in proc.stderr


def test_play_reads_piped_stdin():
    """`env play` plays typed answers from stdin: a bare action list is wrapped, and solving ends the game."""
    rec = next(r for r in load("frozenlake_replays.jsonl") if r["kind"] == "bfs_solution")
    plan = rec["action_sequence"]
    lines = ["Jump", *(", ".join(plan[i : i + 5]) for i in range(0, len(plan), 5)), "up"]
    proc = run_cli("env", "play", "--env", "frozenlake", "--seed", rec["seed"], input="\n".join(lines) + "\n")
    out = ok(proc)
    assert "You are a FrozenLake solver." in out
    assert "valid False" in out  # the unknown word 'Jump' is an invalid turn, not a crash
    assert out.rstrip().endswith("total reward 1.02") and "solved after" in out


def test_seeds_expands_the_lite_validation_directive():
    """`env seeds` prints the reference's Sokoban validation order; a bad directive is exit 2 naming it."""
    spec = next(r for r in load("seed_lists.jsonl") if r["id"] == "Sokoban-val")
    out = ok(run_cli("env", "seeds", "--name", "Sokoban", "--n-envs", 256, "--directive", "[10001, 10256, 1]"))
    obj = json.loads(out)
    assert obj["seeds"] == spec["seeds"] and obj["rng_payload"] == spec["rng_payload"]
    proc = run_cli("env", "seeds", "--name", "Sokoban", "--n-envs", 3, "--directive", "[1, 2")
    assert proc.returncode == 2 and "--directive" in proc.stderr
