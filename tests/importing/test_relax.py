"""`agentrepro import --format relax`: the per-turn records Relax's GraphGPO agent exports become one outcome row
per trajectory. The records are built as examples/graphgpo/rollout_agent.py writes them (the fields and their
meaning from tests/fixtures/frameworks/relax.outputs.json, the recorded facts about Relax's outputs); the
tasks here are FrozenLake games named by their panel ids, since the reader does not depend on the game."""

from __future__ import annotations

import hashlib
import json

from helpers import REPO, run_cli

from agentrepro.environments import task_panel

FACTS = json.loads((REPO / "tests" / "fixtures" / "frameworks" / "relax.outputs.json").read_text())[
    "agent_export_record"
]["fields"]


def turn_record(task: str, trajectory: str, turn: int, *, success: bool, turns: int, group: str = "g0") -> dict:
    """One line of $RELAX_OUTPUT_JSON, with every metadata field the agent writes (FACTS["metadata"])."""
    invalid = 1 if turn == 0 else 0
    metadata = {
        "task_id": task,
        "trajectory_id": trajectory,
        "rollout_group_id": group,
        "row_id": "graphgpo-row-v1:" + hashlib.sha256(json.dumps([task, group, trajectory, turn]).encode()).hexdigest(),
        "turn_id": f"turn_{turn:03d}",
        "turn_index": turn,
        "state_key": hashlib.sha256(f"{trajectory}{turn}".encode()).hexdigest(),
        "action": "go to desk 1",
        "next_state_key": "__GRAPHGPO_SUCCESS__" if success and turn == turns - 1 else "s",
        "is_action_valid": not invalid,
        "success": success,
        "terminal": turn == turns - 1,
        "truncated": not success and turn == turns - 1,
        "episode_return": 10.0 * success - 0.1,
    }
    assert sorted(metadata) == sorted(FACTS["metadata"])
    return {
        "name": f"turn_{turn:03d}",
        "messages": [{"role": "user", "content": "obs"}, {"role": "assistant", "content": "act"}],
        "reward": metadata["episode_return"],
        "metadata": metadata,
    }


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def relax(tmp_path, path, *more, out="out"):
    return run_cli(
        "import",
        path,
        "--format",
        "relax",
        "--env",
        "frozenlake",
        "--seeds",
        "10001-10004",
        "--out",
        tmp_path / out,
        "--method",
        "graphgpo",
        "--seed",
        "0",
        "--step",
        "150",
        *more,
        cwd=tmp_path,
    )


def test_each_trajectory_is_one_episode_with_its_success_return_and_turns(tmp_path):
    """Four tasks, one trajectory each of 1-4 turns (game paths under another root, ending in game.tw-pddl): four
    rows, each with the trajectory's success, episode_return and number of turns, traced to its first turn's line."""
    panel = task_panel("frozenlake", {}, range(10001, 10005))
    records = []
    for i, task in enumerate(panel):
        name = f"json_2.1.1/{task['task_id']}/game.tw-pddl"
        records += [turn_record(name, f"traj-{i}", t, success=i % 2 == 0, turns=i + 1) for t in range(i + 1)]
    path = write(tmp_path / "export.jsonl", records)
    result = relax(tmp_path, path)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(x) for x in (tmp_path / "out" / "outcomes.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["success"], r["reward"], r["turns"]) for r in rows] == [
        (t["task_id"], int(i % 2 == 0), 10.0 * (i % 2 == 0) - 0.1, i + 1) for i, t in enumerate(panel)
    ]
    assert {(r["method"], r["seed"], r["step"]) for r in rows} == {("graphgpo", 0, 150)}
    record = json.loads((tmp_path / "out" / "import.json").read_text())
    assert [s["line"] for s in record["sources"]] == [1, 2, 4, 7]  # each trajectory's first turn
    assert record["absent"] == {"tokens (0 written)": 4} and record["format"] == "relax"


def test_records_relax_would_refuse_or_that_name_no_run_are_one_line(tmp_path):
    """A trajectory whose turns disagree on success (Relax's eval logger refuses it too), a turn given twice, a
    metadata field of the wrong type, a task not on the panel, and no --step: one line each, exit 2, nothing written."""
    panel = task_panel("frozenlake", {}, range(10001, 10005))
    task = panel[0]["task_id"]
    cases = {
        "disagree": (
            [turn_record(task, "t", 0, success=True, turns=2), turn_record(task, "t", 1, success=False, turns=2)],
            "line 2: metadata.success: trajectory 't' has success True at line 1 and False here",
        ),
        "twice": (
            [turn_record(task, "t", 0, success=True, turns=1)] * 2,
            "line 2: turn 0 of trajectory 't' given twice",
        ),
        "type": (
            [
                {
                    **turn_record(task, "t", 0, success=True, turns=1),
                    "metadata": {
                        "trajectory_id": "t",
                        "task_id": task,
                        "success": "yes",
                        "episode_return": 1,
                        "turn_index": 0,
                    },
                }
            ],
            "line 1: metadata.success: expected true",
        ),
        "elsewhere": (
            [turn_record("valid_seen/other/trial_1/game.tw-pddl", "t", 0, success=True, turns=1)],
            "line 1: task_id: task 'valid_seen/other/trial_1' is not on the frozen panel",
        ),
        "nometa": ([{"name": "turn_000"}], "line 1: expected a turn record with a metadata object"),
    }
    for name, (records, said) in cases.items():
        result = relax(tmp_path, write(tmp_path / f"{name}.jsonl", records))
        assert result.returncode == 2 and said in result.stderr and f"{name}.jsonl" in result.stderr, (
            name,
            result.stderr,
        )
        assert len(result.stderr.strip().splitlines()) == 1
    path = write(tmp_path / "ok.jsonl", [turn_record(task, "t", 0, success=True, turns=1)])
    nostep = run_cli(
        "import",
        path,
        "--format",
        "relax",
        "--env",
        "frozenlake",
        "--seeds",
        "10001-10004",
        "--out",
        tmp_path / "out",
        "--method",
        "graphgpo",
        "--seed",
        "0",
        cwd=tmp_path,
    )
    assert nostep.returncode == 2 and "give --step (the run's)" in nostep.stderr
    assert not (tmp_path / "out").exists()


def test_a_twelve_run_relax_matrix_is_analysed_against_the_paper(tmp_path):
    """The shape of a Relax GraphGPO reproduction: four methods x three seeds, each run's exported turn records
    imported into its own folder, all twelve analysed together against the GraphGPO reference and reported. The
    outcomes are drawn here (a fixed generator at the paper's rates, 32 FrozenLake tasks standing in for the 128
    ALFWorld games); what is checked is the path, not a result: every run in the analysis, a verdict per method,
    and page 1 naming each imported file and what is not sealed."""
    import numpy as np

    rates = {"grpo": 0.7786, "gigpo": 0.9088, "graphgpo": 0.9271, "graph_only": 0.9167}
    panel = task_panel("frozenlake", {}, range(10001, 10033))
    rng = np.random.default_rng(7)
    folders = []
    for method, rate in rates.items():
        for seed in range(3):
            records = []
            for i, task in enumerate(panel):
                success, turns = bool(rng.random() < rate), int(rng.integers(1, 5))
                records += [
                    turn_record(task["task_id"], f"{method}-{seed}-{i}", t, success=success, turns=turns)
                    for t in range(turns)
                ]
            path = write(tmp_path / f"{method}-seed{seed}.jsonl", records)
            out = tmp_path / "imported" / f"{method}-seed{seed}"
            result = run_cli(
                "import",
                path,
                "--format",
                "relax",
                "--env",
                "frozenlake",
                "--seeds",
                "10001-10032",
                "--out",
                out,
                "--method",
                method,
                "--seed",
                seed,
                "--step",
                "150",
                "--study",
                "relax-matrix",
                cwd=tmp_path,
            )
            assert result.returncode == 0, result.stderr
            folders.append(out)
    analysis = tmp_path / "root" / "analysis" / "relax-matrix"
    analysed = run_cli(
        "analyze",
        "--outcomes",
        *(f / "outcomes.jsonl" for f in folders),
        "--reference",
        REPO / "manifests" / "references" / "graphgpo.yaml",
        "--tolerance-pp",
        "5",
        "--out",
        analysis,
    )
    assert analysed.returncode == 0, analysed.stderr
    doc = json.loads((analysis / "analysis.json").read_text())
    assert len(doc["tables"]["runs"]) == 12 and len(doc["provenance"]["imported"]) == 12
    assert sorted(v["method"] for v in doc["tables"]["verdicts"]) == sorted(rates)
    report = run_cli("report", "relax-matrix", "--root", tmp_path / "root", "--no-pdf")
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "root" / "reports" / "relax-matrix" / "report.html").read_text()
    first = page[page.index('<section id="summary">') : page.index('<section id="equivalence">')]
    assert "Imported, not sealed" in first and all(f"{m}-seed{s}.jsonl" in first for m in rates for s in range(3))
