"""Every validation error of docs/design.md §3.4, each naming the file and the offending keys."""

import pytest
from analysis_synth import outcome_rows, task_hash, write_jsonl

from agentrepro.analysis.load import read_outcomes
from agentrepro.analysis.validate import validate_outcomes
from agentrepro.errors import BadInput

PANEL = [{"task_id": f"t{i:03d}", "task_hash": task_hash(f"t{i:03d}"), "seed": i, "category": "x"} for i in range(4)]


def frame(tmp_path, runs):
    paths = [
        write_jsonl(tmp_path / f"{m}-{s}-{st}-{i}.jsonl", outcome_rows("s", m, s, st, succ))
        for i, (m, s, st, succ) in enumerate(runs)
    ]
    return read_outcomes(paths), paths


def test_valid_study_passes(tmp_path):
    """Two methods × two seeds on the same four tasks validate against the panel."""
    df, _ = frame(tmp_path, [(m, s, 5, [1, 0, 1, 1]) for m in "ab" for s in (0, 1)])
    validate_outcomes(df, PANEL, panel_source="lock.json")


def test_duplicate_key_names_both_lines(tmp_path):
    """A repeated (method, seed, step, task_id, episode) is reported with both places."""
    data = outcome_rows("s", "a", 0, 5, [1, 0, 1, 1])
    data.append(dict(data[1]))
    df = read_outcomes([write_jsonl(tmp_path / "o.jsonl", data)])
    with pytest.raises(BadInput, match=r"duplicated outcome key.*task_id='t001'.*line 2.*line 5"):
        validate_outcomes(df)


def test_missing_task_vs_panel(tmp_path):
    """A run lacking a panel task is an error naming the run, the file and the task."""
    df, paths = frame(tmp_path, [("a", 0, 5, [1, 0, 1, 1]), ("b", 0, 5, [1, 0, 1])])
    with pytest.raises(
        BadInput, match=r"method 'b' seed 0 step 5: 1 task\(s\) of the panel in lock.json missing: t003"
    ) as err:
        validate_outcomes(df, PANEL, panel_source="lock.json")
    assert str(paths[1]) in str(err.value)


def test_differing_task_sets_without_a_panel(tmp_path):
    """Without a lock, a task one method has and another lacks is an error naming both."""
    df, _ = frame(tmp_path, [("a", 0, 5, [1, 0, 1, 1]), ("b", 0, 5, [1, 0, 1])])
    with pytest.raises(BadInput, match=r"task sets differ between methods.*a/seed0.*t003"):
        validate_outcomes(df)


def test_seed_missing_for_one_method(tmp_path):
    """Seed 1 present for a and missing for b at the same step is an error."""
    df, _ = frame(tmp_path, [("a", 0, 5, [1, 1, 1, 1]), ("a", 1, 5, [1, 1, 1, 1]), ("b", 0, 5, [1, 1, 1, 1])])
    with pytest.raises(BadInput, match=r"seed\(s\) \[1\] missing for method 'b' at step 5 while a have them"):
        validate_outcomes(df)


def test_seed_missing_vs_manifest(tmp_path):
    """A seed the manifest lists but no run provides is an error even if every method lacks it."""
    df, _ = frame(tmp_path, [("a", 0, 5, [1, 1, 1, 1]), ("b", 0, 5, [1, 1, 1, 1])])
    with pytest.raises(BadInput, match=r"method 'a' has no outcomes for seed\(s\) \[2\]"):
        validate_outcomes(df, expected_seeds={"a": [0, 2], "b": [0, 2]})


def test_task_hash_not_matching_the_panel(tmp_path):
    """A task played with different content than the frozen panel is an error with file and line."""
    data = outcome_rows("s", "a", 0, 5, [1, 0, 1, 1])
    data[2]["task_hash"] = "f" * 64
    path = write_jsonl(tmp_path / "o.jsonl", data)
    with pytest.raises(BadInput, match=r"line 3: task_hash of task_id 't002' is f{64}, the panel in lock.json says"):
        validate_outcomes(read_outcomes([path]), PANEL, panel_source="lock.json")


def test_task_outside_the_panel_and_hash_drift_between_methods(tmp_path):
    """An unknown task_id (with a panel) and a task_hash that differs between methods (without) are errors."""
    data = outcome_rows("s", "a", 0, 5, [1, 0, 1, 1, 1])  # t004 is not in the panel
    with pytest.raises(BadInput, match="t004' is not in the task panel"):
        validate_outcomes(read_outcomes([write_jsonl(tmp_path / "x.jsonl", data)]), PANEL, panel_source="lock.json")
    b = outcome_rows("s", "b", 0, 5, [1, 0, 1, 1, 1])
    b[0]["task_hash"] = "0" * 64
    df = read_outcomes([write_jsonl(tmp_path / "x.jsonl", data), write_jsonl(tmp_path / "y.jsonl", b)])
    with pytest.raises(BadInput, match="task_id 't000' was played with different task_hash values"):
        validate_outcomes(df)
