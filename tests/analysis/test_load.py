"""Reading outcome files: schema errors name file, line and key; empty files are errors."""

import json

import pytest
from analysis_synth import outcome_rows, write_jsonl

from agentrepro.analysis.load import read_outcomes, read_steps_jsonl
from agentrepro.errors import BadInput


def rows():
    return outcome_rows("s", "m", 0, 5, [1, 0, 1])


def test_reads_rows_with_types_and_origin(tmp_path):
    """Rows come back typed, with the file and line each came from."""
    path = write_jsonl(tmp_path / "o.jsonl", rows())
    df = read_outcomes([path])
    assert df["success"].tolist() == [1, 0, 1] and df["_line"].tolist() == [1, 2, 3]
    assert df["seed"].dtype.kind == "i" and set(df["_file"]) == {str(path)}


def test_empty_file_is_an_error(tmp_path):
    """An empty outcomes file never becomes a smaller denominator."""
    path = tmp_path / "o.jsonl"
    path.write_text("\n")
    with pytest.raises(BadInput, match="empty outcomes file") as err:
        read_outcomes([path])
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("success", 2, "'success'"),
        ("success", True, "'success'"),
        ("seed", "0", "'seed'"),
        ("task_hash", "abc", "'task_hash'"),
        ("reward", "x", "'reward'"),
        ("episode", -1, "'episode'"),
    ],
)
def test_schema_errors_name_line_and_key(tmp_path, key, value, message):
    """A bad value on line 2 is reported with the file, 'line 2' and the key."""
    data = rows()
    data[1][key] = value
    path = write_jsonl(tmp_path / "o.jsonl", data)
    with pytest.raises(BadInput) as err:
        read_outcomes([path])
    text = str(err.value)
    assert str(path) in text and "line 2" in text and message in text


def test_missing_key_and_malformed_json(tmp_path):
    """A missing required key and a broken JSON line are both located."""
    data = rows()
    del data[2]["category"]
    path = write_jsonl(tmp_path / "o.jsonl", data)
    with pytest.raises(BadInput, match=r"line 3.*category"):
        read_outcomes([path])
    path.write_text(json.dumps(rows()[0]) + "\n{oops\n")
    with pytest.raises(BadInput, match="line 2"):
        read_outcomes([path])


def test_step_files_need_an_integer_step(tmp_path):
    """metrics/timings rows without an integer step are rejected with their line."""
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": "2"}\n')
    with pytest.raises(BadInput, match="line 2"):
        read_steps_jsonl(path)


def test_fast_and_exact_paths_read_the_same_rows(tmp_path):
    """A file with a blank line (exact path) reads the same rows, with true line numbers, as without (Arrow path)."""
    data = outcome_rows("s", "m", 0, 5, [1, 0, 1, 1])
    data[1]["reward"] = 0.5
    fast = write_jsonl(tmp_path / "fast.jsonl", data)
    slow = tmp_path / "slow.jsonl"
    lines = fast.read_text().splitlines()
    slow.write_text(lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n")
    a, b = read_outcomes([fast]), read_outcomes([slow])
    cols = [c for c in a.columns if c not in ("_file", "_line")]
    assert a[cols].equals(b[cols])
    assert a["_line"].tolist() == [1, 2, 3, 4] and b["_line"].tolist() == [1, 3, 4, 5]
