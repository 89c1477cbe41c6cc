"""analysis.json is checked against the contract before anything is drawn."""

from __future__ import annotations

import json

import pytest

from agentrepro.errors import BadInput
from agentrepro.report.load import load_analysis, validate


def _write(tmp_path, obj):
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_synthetic_analysis_is_valid(tmp_path, analysis):
    """A file that follows the contract loads unchanged."""
    loaded = load_analysis(_write(tmp_path, analysis))
    assert loaded["tables"]["verdicts"] == analysis["tables"]["verdicts"]


def test_missing_table_is_named(tmp_path, analysis):
    """A missing table is a BadInput naming the file and tables.<name>."""
    del analysis["tables"]["overhead"]
    with pytest.raises(BadInput, match=r"analysis\.json: tables\.overhead: .*missing"):
        load_analysis(_write(tmp_path, analysis))


def test_rate_in_percent_is_refused(tmp_path, analysis):
    """A rate written as a percentage (78.9 instead of 0.789) names the row and column."""
    analysis["tables"]["runs"][3]["rate"] = 78.9
    with pytest.raises(BadInput, match=r"tables\.runs\[3\]\.rate: expected a fraction in \[0, 1\]"):
        load_analysis(_write(tmp_path, analysis))


def test_unknown_verdict_is_refused(tmp_path, analysis):
    """A verdict outside reproduced/not_reproduced/inconclusive names its row."""
    analysis["tables"]["verdicts"][1]["verdict"] = "close enough"
    with pytest.raises(BadInput, match=r"tables\.verdicts\[1\]\.verdict: expected one of reproduced"):
        validate(analysis, "analysis.json")


def test_missing_column_and_bad_parity_status(analysis):
    """A missing column and an unknown parity status are each named by key path."""
    bad = json.loads(json.dumps(analysis))
    del bad["tables"]["claims"][0]["holds"]
    with pytest.raises(BadInput, match=r"tables\.claims\[0\]\.holds"):
        validate(bad, "a.json")
    analysis["parity"][0]["status"] = "ok"
    with pytest.raises(BadInput, match=r"parity\[0\]\.status"):
        validate(analysis, "a.json")


def test_malformed_and_missing_files(tmp_path):
    """Malformed JSON names its line; a missing file says to run analyze first."""
    path = tmp_path / "analysis.json"
    path.write_text('{\n "study": }\n', encoding="utf-8")
    with pytest.raises(BadInput, match=r"line 2"):
        load_analysis(path)
    with pytest.raises(BadInput, match=r"file not found.*agentrepro analyze"):
        load_analysis(tmp_path / "nope.json")


def test_string_seed_becomes_int(analysis):
    """A paired seed written as "0" (CSV typing) is read as the seed 0; "all" stays."""
    analysis["tables"]["paired"][0]["seed"] = "0"
    out = validate(analysis, "a.json")
    assert out["tables"]["paired"][0]["seed"] == 0
    assert any(r["seed"] == "all" for r in out["tables"]["paired"])


def test_p_value_above_one_is_refused(tmp_path, analysis):
    """A p-value outside [0, 1] (a declared `p` column) names the file, row and column."""
    analysis["tables"]["paired"][2]["p_holm"] = 1.5
    with pytest.raises(BadInput, match=r"analysis\.json: tables\.paired\[2\]\.p_holm: expected a p-value in \[0, 1\]"):
        load_analysis(_write(tmp_path, analysis))


def test_further_columns_are_checked_when_present(analysis):
    """A column declared after the required ones may be absent, but when present its kind is checked."""
    assert "test" not in analysis["tables"]["paired"][0]
    validate(json.loads(json.dumps(analysis)), "a.json")
    analysis["tables"]["paired"][0]["test"] = 3
    with pytest.raises(BadInput, match=r"tables\.paired\[0\]\.test: expected a string"):
        validate(analysis, "a.json")


def test_every_declared_table_is_required(tmp_path, analysis):
    """Each table of the contract is required, and its absence names analysis.json and the table."""
    from agentrepro.analysis.contract import TABLE_NAMES

    for name in TABLE_NAMES:
        broken = json.loads(json.dumps(analysis))
        del broken["tables"][name]
        with pytest.raises(BadInput, match=rf"analysis\.json: tables\.{name}: expected table '{name}' \(missing"):
            load_analysis(_write(tmp_path, broken))


def test_source_parity_rows_are_checked(analysis):
    """provenance.source_parity rows (the Source parity section) load when well formed; a row without its placement
    and a difference without its pinned blob are each named by key path."""
    row = {
        "method": "gigpo@relax",
        "placement": "relax",
        "commit": "a" * 40,
        "workdir": "external/relax",
        "files": ["x.py"],
        "seeds": [0],
        "unrecorded": [],
        "status": "fail",
        "differences": [{"seed": 0, "job": "train", "path": "x.py", "pinned": "b" * 40, "ran": None}],
    }
    analysis["provenance"]["source_parity"] = [row]
    assert validate(json.loads(json.dumps(analysis)), "a.json")["provenance"]["source_parity"] == [row]
    bad = json.loads(json.dumps(analysis))
    del bad["provenance"]["source_parity"][0]["placement"]
    with pytest.raises(BadInput, match=r"provenance\.source_parity\[0\]\.placement: expected a string"):
        validate(bad, "a.json")
    del analysis["provenance"]["source_parity"][0]["differences"][0]["pinned"]
    with pytest.raises(BadInput, match=r"provenance\.source_parity\[0\]\.differences\[0\]: expected an object"):
        validate(analysis, "a.json")
