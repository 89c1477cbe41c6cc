"""Every reader of the package, fed hostile files: each refuses with one BadInput naming the file, never a traceback.

A valid document of each contract gets one leaf replaced by a hostile value (a lone surrogate, a control
character, nesting past the bound, an integer beyond 64 bits, NaN or infinity), bytes that are not UTF-8
spliced in anywhere, or (YAML) a key line repeated. The reader must raise BadInput whose message starts
with the file's path; any other exception fails the test with its traceback.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hostile_kit import (
    NOT_UTF8,
    any_value,
    duplicate_key_line,
    mutate_bytes,
    record,
    splice_json,
    splice_yaml,
    step_rows,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrepro.errors import BadInput

EXAMPLES = int(os.environ.get("AGENTREPRO_HOSTILE_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
INDEX = st.integers(min_value=0, max_value=10**6)

STEP_ROWS = step_rows(2)
OUTCOME = {
    "study": "demo",
    "method": "grpo",
    "seed": 0,
    "step": 10,
    "task_id": "t0",
    "task_hash": "a" * 64,
    "category": "pick",
    "episode": 0,
    "success": 1,
    "reward": 1.0,
    "turns": 3,
    "tokens": 40,
}
REFERENCE = {
    "paper": "test",
    "metric": "success_rate",
    "values": {"gigpo": {"value": 0.5, "std": 0.01, "seeds": 2, "source": "table 1", "checked": False}},
}


def _readers(frozen_study: Path, analysis_doc: dict) -> dict:
    """name → (file name, format, valid document, function reading the file)."""
    from study_kit import BASE

    from agentrepro.algorithms import StepBatch
    from agentrepro.analysis.load import read_outcomes, read_steps_jsonl
    from agentrepro.analysis.reference import load_reference
    from agentrepro.attempts import read_provenance
    from agentrepro.cli.env import read_episodes, read_responses
    from agentrepro.lockfile import read_lock
    from agentrepro.manifest.loading import check_manifest
    from agentrepro.reading import iter_jsonl, load_json, load_yaml
    from agentrepro.report.load import load_analysis
    from agentrepro.runconfig import load_run_config

    run = frozen_study / "runs" / "demo" / "grpo" / "seed0"
    return {
        "manifest": ("demo.yaml", "yaml", BASE, lambda p: check_manifest(load_yaml(p), path=p)),
        "reference": ("ref.yaml", "yaml", REFERENCE, load_reference),
        "run_config": ("config.yaml", "yaml", yaml.safe_load((run / "config.yaml").read_text()), load_run_config),
        "lock": ("demo.lock.json", "json", load_json(frozen_study / "manifests" / "demo.lock.json"), read_lock),
        "provenance": (
            "provenance.json",
            "json",
            load_json(run / "provenance.json"),
            lambda p: read_provenance(p.parent),
        ),
        "analysis": ("analysis.json", "json", analysis_doc, load_analysis),
        "step_rows": ("rows.jsonl", "jsonl", STEP_ROWS, lambda p: StepBatch.from_rows(iter_jsonl(p), source=str(p))),
        "outcomes": ("outcomes.jsonl", "jsonl", [OUTCOME, {**OUTCOME, "task_id": "t1"}], lambda p: read_outcomes([p])),
        "metrics": (
            "metrics.jsonl",
            "jsonl",
            [{"step": 1, "reward_mean": 0.5}, {"step": 2, "reward_mean": 0.6}],
            read_steps_jsonl,
        ),
        "responses": (
            "responses.jsonl",
            "jsonl",
            ["<answer>Up</answer>", "<answer>Left</answer>"],
            lambda p: read_responses(str(p)),
        ),
        "episodes": (
            "episodes.jsonl",
            "jsonl",
            [{"seed": 3, "responses": ["<answer>Up</answer>"]}],
            lambda p: read_episodes(str(p)),
        ),
    }


def _text(fmt: str, doc, index: int, value) -> str:
    if fmt == "yaml":
        return splice_yaml(doc, index, value)
    if fmt == "json":
        return splice_json(doc, index, value)
    line = index % len(doc)  # JSONL: the hostile value goes into one line
    return "".join(
        (splice_json(row, index, value, indent=None) if i == line else splice_json(row, 0, _same(row), indent=None))
        + "\n"
        for i, row in enumerate(doc)
    )


class _same:
    """A 'hostile' value that is the leaf itself (leaves the line as it was)."""

    def __init__(self, row):
        import json

        from hostile_kit import leaves

        first = leaves(row)[0]
        value = row
        for key in first:
            value = value[key]
        self.json_text = json.dumps(value)


def _refuses(read, path: Path, klass: str, target: str) -> None:
    try:
        read(path)
    except BadInput as exc:
        ok = str(exc).startswith(str(path))
        record(klass, target, ok)
        assert ok, f"the message does not start with the file: {exc}"
        return
    record(klass, target, False)
    pytest.fail(f"{target}: a hostile file was accepted: {path.read_bytes()[:300]!r}")


READERS = [
    "manifest",
    "reference",
    "run_config",
    "lock",
    "provenance",
    "analysis",
    "step_rows",
    "outcomes",
    "metrics",
    "responses",
    "episodes",
]


@pytest.mark.parametrize("reader", READERS)
@SETTINGS
@given(value=any_value(), index=INDEX)
def test_hostile_value_is_refused_naming_the_file(frozen_study, analysis_doc, reader, value, index):
    """A hostile value anywhere in a valid document is refused with BadInput starting with the file's path."""
    name, fmt, doc, read = _readers(frozen_study, analysis_doc)[reader]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(_text(fmt, doc, index, value), encoding="utf-8", errors="surrogatepass")
        _refuses(read, path, value.klass, f"reader:{reader}")


@pytest.mark.parametrize("reader", READERS)
@SETTINGS
@given(junk=NOT_UTF8, position=INDEX, index=INDEX)
def test_bytes_that_are_not_utf8_are_refused_with_the_line(frozen_study, analysis_doc, reader, junk, position, index):
    """Bytes that are not UTF-8, spliced anywhere into a valid file, are refused naming the file and the line."""
    name, fmt, doc, read = _readers(frozen_study, analysis_doc)[reader]
    from hostile_kit import Hostile

    plain = _text(fmt, doc, 0, Hostile("none", "none", '"x"', '"x"')).encode()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(mutate_bytes(plain, position, junk))
        _refuses(read, path, "encoding", f"reader:{reader}")


@pytest.mark.parametrize("reader", ["manifest", "reference", "run_config"])
@SETTINGS
@given(index=INDEX)
def test_duplicate_yaml_keys_are_refused(frozen_study, analysis_doc, reader, index):
    """A YAML key given twice in one mapping is refused (the last would silently win), naming the file and line."""
    name, _fmt, doc, read = _readers(frozen_study, analysis_doc)[reader]
    text = duplicate_key_line(yaml.safe_dump(doc, sort_keys=False), index)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        _refuses(read, path, "duplicates_and_aliases", f"reader:{reader}")


def test_seal_lines_that_are_not_text_are_refused(tmp_path):
    """OUTPUTS.sha256 with a byte that is not UTF-8 or a control character is refused naming the seal and line."""
    from agentrepro.seal import read_outputs_manifest

    for junk in (b"\xff", b"\x01"):
        seal = tmp_path / "OUTPUTS.sha256"
        seal.write_bytes(b"a" * 64 + b"  x.txt\n" + b"b" * 64 + b"  y" + junk + b".txt\n")
        with pytest.raises(BadInput, match=r"OUTPUTS.sha256: line 2"):
            read_outputs_manifest(seal)
        record("encoding", "reader:seal")
