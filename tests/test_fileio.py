"""Tests for the shared file primitives: atomic writes, canonical hashing, line-numbered JSONL, safe YAML."""

import json
import os

import pytest

from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_json, atomic_write_text, canonical_json, sha256_json
from agentrepro.reading import iter_jsonl, load_yaml, read_jsonl


def test_canonical_json_ignores_key_order_and_whitespace():
    """Two dicts with the same content in different order hash the same; a changed value does not."""
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert sha256_json({"b": 1, "a": 2}) == sha256_json({"a": 2, "b": 1})
    assert sha256_json({"a": 2}) != sha256_json({"a": 3})


def test_canonical_json_refuses_nan():
    """NaN has no canonical JSON form, so hashing it is an error rather than a silent 'NaN' token."""
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_atomic_write_leaves_old_file_when_serialisation_fails(tmp_path):
    """A write that fails half-way keeps the previous content and leaves no temporary file behind."""
    target = tmp_path / "out.json"
    atomic_write_json(target, {"ok": 1})
    with pytest.raises(Failure, match=r"out.json: bad: computed value inf is not a finite number"):
        atomic_write_json(target, {"bad": float("inf")})
    assert json.loads(target.read_text()) == {"ok": 1}
    assert os.listdir(tmp_path) == ["out.json"]


def test_atomic_write_creates_parents(tmp_path):
    """Parent directories are created on demand."""
    atomic_write_text(tmp_path / "a" / "b" / "c.txt", "x")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "x"


def test_jsonl_error_names_line(tmp_path):
    """A malformed JSONL line is reported with its file and line number; blank lines are skipped."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2\n')
    rows = iter_jsonl(path)
    assert next(rows) == (1, {"a": 1})
    with pytest.raises(BadInput, match=r"rows.jsonl: line 3: malformed JSON"):
        next(rows)


def test_read_jsonl_missing_file(tmp_path):
    """A missing file is BadInput naming the path, not a bare FileNotFoundError."""
    with pytest.raises(BadInput, match=r"nope.jsonl: file not found"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_yaml_syntax_error_names_line(tmp_path):
    """A YAML syntax error names the file and the line of the problem."""
    path = tmp_path / "m.yaml"
    path.write_text("study: x\nmethods:\n  grpo: {estimator: grpo\nseeds: [0]\n")
    with pytest.raises(BadInput, match=r"m.yaml: line \d+, column \d+: YAML syntax error"):
        load_yaml(path)


def test_yaml_is_loaded_safely(tmp_path):
    """Python object tags are refused (safe_load), so a manifest cannot execute code."""
    path = tmp_path / "m.yaml"
    path.write_text("x: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(BadInput, match="could not determine a constructor"):
        load_yaml(path)


def test_load_json_names_file_and_line(tmp_path):
    """load_json: a missing file gives the caller's message, malformed JSON the file and line."""
    from agentrepro.reading import load_json

    with pytest.raises(BadInput, match=r"x.json: run freeze first"):
        load_json(tmp_path / "x.json", missing="run freeze first")
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "a": 1,\n  oops\n}\n')
    with pytest.raises(BadInput, match=r"bad.json: line 3: malformed JSON"):
        load_json(bad)
    bad.write_text('{"a": [1, 2]}')
    assert load_json(bad) == {"a": [1, 2]}


def test_a_path_that_cannot_be_written_is_bad_input_found_by_writing(tmp_path):
    """Writing where no file can be (`/proc/x`, which `os.access` allows root) is one BadInput naming the path."""
    from agentrepro.fileio import make_dir

    for target in ("/proc/agentrepro-x", "/proc/agentrepro-x/y/z.json"):
        with pytest.raises(BadInput, match=r"^/proc/agentrepro-x.*: cannot write here \("):
            atomic_write_json(target, {"a": 1})
    with pytest.raises(BadInput, match=r"^/proc/agentrepro-x: cannot write here \("):
        make_dir("/proc/agentrepro-x")


def test_a_full_disk_while_writing_is_a_failure_and_leaves_nothing(tmp_path):
    """An OS error of the machine while writing (no space left) is a Failure naming the file; no temporary file stays."""
    import errno

    from agentrepro.fileio import atomic_binary

    target = tmp_path / "out.bin"
    with pytest.raises(Failure, match=r"out.bin: writing failed \(No space left on device\)"):
        with atomic_binary(target) as fh:
            fh.write(b"x")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert os.listdir(tmp_path) == []


def test_an_os_error_about_another_file_passes_unchanged(tmp_path):
    """An OS error the writing block raises about a file it reads is not reported as a write error of the target."""
    from agentrepro.fileio import atomic_binary

    with pytest.raises(FileNotFoundError):
        with atomic_binary(tmp_path / "out.bin"):
            open(tmp_path / "missing-source")
    assert os.listdir(tmp_path) == []
