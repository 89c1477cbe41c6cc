"""`agentrepro advantages` run as a subprocess: fixture parity, options, row order and bad input."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli
from parity_fixtures import STEP_FILES, compare_case, load_cases

# success in 1 turn against failure in 3 turns, episode rewards [10, 0] (the review's counterexample)
COUNTER = [
    {
        "group": "g",
        "traj": "win",
        "turn": 0,
        "state": "s0",
        "next_state": "success",
        "reward": 10.0,
        "episode_reward": 10.0,
        "valid": True,
        "success": True,
    },
    *(
        {
            "group": "g",
            "traj": "lose",
            "turn": k,
            "state": f"s{k}",
            "next_state": f"s{k + 1}",
            "reward": 0.0,
            "episode_reward": 0.0,
            "valid": True,
            "success": False,
        }
        for k in range(3)
    ),
]


def _write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", STEP_FILES)
def test_cli_cases_match_every_fixture_line(fixtures_dir, tmp_path, name):
    """One CLI call per fixture file reproduces every line (all settings) within 1e-4 relative."""
    out = tmp_path / "out.jsonl"
    diag = tmp_path / "diag.json"
    proc = run_cli("advantages", "--cases", fixtures_dir / "advantages" / name, "-o", out, "--diagnostics", diag)
    assert proc.returncode == 0, proc.stderr
    cases = load_cases(fixtures_dir, name)
    got = _read(out)
    assert len(got) == len(cases)
    problems = []
    for case, ours in zip(cases, got):
        assert ours["case"] == case["case"] and ours["params"] == case["params"]
        problems += compare_case(case, ours["rows"])[0]
    assert not problems, "\n".join(problems[:20])
    reports = json.loads(diag.read_text())
    graph = [r for r in reports if r["estimator"] in ("graphgpo", "graph_only")]
    assert graph and all(r["diagnostics"]["nodes"] > 0 and "shortest_paths" in r["timings"] for r in graph)


def test_cli_episode_stats_rows_vs_trajectories(tmp_path):
    """Counterexample via the CLI: rows gives [1.5, −0.5 ×3] (the reference), trajectories gives ±1/√2."""
    src = _write_rows(tmp_path / "in.jsonl", COUNTER)
    results = {}
    for stats in ("rows", "trajectories"):
        out = tmp_path / f"{stats}.jsonl"
        proc = run_cli("advantages", "--estimator", "grpo", "--episode-stats", stats, src, "-o", out)
        assert proc.returncode == 0, proc.stderr
        results[stats] = [r["advantage"] for r in _read(out)]
    # rows: scores [10, 0, 0, 0], mean 2.5, sample std 5 -> (10 − 2.5)/5 = 1.5 and −0.5
    assert results["rows"] == pytest.approx([1.5, -0.5, -0.5, -0.5], rel=1e-5)
    # trajectories: values [10, 0], mean 5, std 7.0711 -> ±0.7071 whatever the trajectory lengths
    assert results["trajectories"] == pytest.approx([0.5**0.5, -(0.5**0.5)] + [-(0.5**0.5)] * 2, rel=1e-5)


def test_cli_preserves_row_order_and_input_fields(tmp_path):
    """Rows come out in input order (here: reversed, interleaved), with every input field kept."""
    rows = list(reversed(COUNTER))
    src = _write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    proc = run_cli("advantages", "--estimator", "graphgpo", "--omega", "0.5", src, "-o", out)
    assert proc.returncode == 0, proc.stderr
    got = _read(out)
    assert [{k: r[k] for k in rows[0]} for r in got] == rows
    # s0 → success gives d(s0) = 1 = d_max; s1..s3 cannot reach the goal, so d = d_max + 1 = 2
    assert [r["distance"] for r in got] == [2.0, 2.0, 2.0, 0.0]
    assert all(set(r) >= {"advantage", "advantage_episode", "advantage_step", "graph_reward"} for r in got)


def test_cli_malformed_row_exits_2_naming_line_and_writes_nothing(tmp_path):
    """A bad row stops the command with exit 2, the file and line in one stderr line, and no output file."""
    lines = [json.dumps(r) for r in COUNTER]
    lines[2] = lines[2].replace('"valid": true', '"valid": "yes"')
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    proc = run_cli("advantages", "--estimator", "gigpo", src, "-o", out)
    assert proc.returncode == 2
    assert f"{src}: line 3: field 'valid'" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()
    src.write_text(lines[0] + "\n{not json\n")
    proc = run_cli("advantages", "--estimator", "grpo", src, "-o", out)
    assert proc.returncode == 2 and "line 2" in proc.stderr and not out.exists()


def test_cli_unknown_estimator_and_inapplicable_option_exit_2(tmp_path):
    """Unknown estimator names list the known ones; ppo (needs a critic) and options an estimator does not take are refused."""
    src = _write_rows(tmp_path / "in.jsonl", COUNTER)
    proc = run_cli("advantages", "--estimator", "dqn", src, "-o", tmp_path / "o.jsonl")
    assert proc.returncode == 2 and "known: gigpo, graph_only, graphgpo, grpo, ppo" in proc.stderr
    proc = run_cli("advantages", "--estimator", "ppo", src, "-o", tmp_path / "o.jsonl")
    assert proc.returncode == 2 and "needs a critic" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("advantages", "--estimator", "grpo", "--omega", "0.1", src, "-o", tmp_path / "o.jsonl")
    assert proc.returncode == 2 and "omega" in proc.stderr


def test_cli_reads_stdin_writes_stdout():
    """`-` streams rows from stdin to stdout."""
    text = "".join(json.dumps(r) + "\n" for r in COUNTER)
    proc = run_cli("advantages", "--estimator", "grpo", "-", "-o", "-", input=text)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["advantage"] for x in proc.stdout.splitlines()] == pytest.approx(
        [1.5, -0.5, -0.5, -0.5], rel=1e-5
    )


def test_cli_missing_file_and_help(tmp_path):
    """A missing input exits 2 naming the file; --help documents every docs/design.md §3.5 option."""
    missing = tmp_path / "nope.jsonl"
    proc = run_cli("advantages", "--estimator", "grpo", missing, "-o", tmp_path / "o.jsonl")
    assert proc.returncode == 2 and str(missing) in proc.stderr
    proc = run_cli("advantages", "--help")
    assert proc.returncode == 0
    for flag in (
        "--norm",
        "--gamma",
        "--omega",
        "--step-weight",
        "--episode-weight",
        "--invalid-penalty",
        "--episode-stats",
        "--reward-form",
        "--cases",
    ):
        assert flag in proc.stdout


def test_cli_cases_bad_case_names_line(tmp_path):
    """In --cases mode a bad row is named by the case's line and the row index within it."""
    case = {"case": "x", "params": {"estimator": "grpo"}, "rows": [dict(COUNTER[0], turn=-1)]}
    src = tmp_path / "cases.jsonl"
    src.write_text(json.dumps(case) + "\n")
    proc = run_cli("advantages", "--cases", src, "-o", tmp_path / "o.jsonl")
    assert proc.returncode == 2 and f"{src}: line 1: rows: row 0: field 'turn'" in proc.stderr, proc.stderr
