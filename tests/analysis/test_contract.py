"""The analysis → report contract is declared once: writers, report validator and docs all follow it."""

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from analysis_synth import make_study, outcome_rows, write_jsonl
from helpers import REPO

from agentrepro.analysis import contract, contract_docs
from agentrepro.analysis.study import analyze_outcomes, analyze_study
from agentrepro.report import figures, render
from agentrepro.report.load import _check


def _assert_follows_contract(out):
    """Every CSV header and every analysis.json row carry the declared columns in order."""
    analysis = json.loads((out / "analysis.json").read_text())
    assert list(analysis["tables"]) == contract.TABLE_NAMES
    for table in contract.TABLES:
        header = (out / table.file).read_text(encoding="utf-8").splitlines()[0].split(",")
        assert header[: len(table.names)] == table.names, table.name
        assert len(header) == len(table.names) or table.open, table.name
        for row in analysis["tables"][table.name]:
            assert list(row)[: len(table.names)] == table.names, table.name


def test_study_outputs_follow_the_contract(tmp_path):
    """A whole study (reference, claims, diagnostics, timings, metrics) writes exactly the declared columns."""
    make_study(tmp_path, reference="paper: P\nmetric: success_rate\nvalues:\n  graphgpo: {value: 0.8, checked: true}\n")
    _assert_follows_contract(analyze_study("toy", root=tmp_path))


def test_empty_tables_follow_the_contract(tmp_path):
    """Without reference, claims or run side files, the empty tables still carry every declared column."""
    paths = [
        write_jsonl(tmp_path / f"{m}.jsonl", outcome_rows("x", m, 0, 5, np.arange(20) % k == 0))
        for m, k in (("a", 2), ("b", 3))
    ]
    out = analyze_outcomes(paths, tmp_path / "out")
    _assert_follows_contract(out)
    for name in ("verdicts", "claims", "diagnostics", "overhead", "training"):
        assert pd.read_csv(out / f"{name}.csv").empty, name


def test_check_frame_refuses_columns_off_contract():
    """A table with a missing, reordered or undeclared column is refused; an open table may add sorted extras."""
    runs = contract.names("runs")
    contract.check_frame("runs", pd.DataFrame(columns=runs))
    for bad in (runs[:-1], [runs[1], runs[0], *runs[2:]], [*runs, "extra"]):
        with pytest.raises(RuntimeError, match="'runs': columns"):
            contract.check_frame("runs", pd.DataFrame(columns=bad))
    training = contract.names("training")
    contract.check_frame("training", pd.DataFrame(columns=[*training, "a_metric", "z_metric"]))
    with pytest.raises(RuntimeError, match="'training'"):
        contract.check_frame("training", pd.DataFrame(columns=[*training, "z_metric", "a_metric"]))


def test_docs_are_generated_from_the_declaration():
    """docs/formats.md and docs/internals.md hold the table lists the declaration generates (else: run --write)."""
    for rel, kinds in contract_docs.DOCS.items():
        text = (REPO / rel).read_text(encoding="utf-8")
        assert contract_docs.update(text, kinds, rel) == text, (
            f"{rel} is stale: run python -m agentrepro.analysis.contract_docs --write"
        )
        for table in contract.TABLES:
            assert f"`{table.file if not kinds else table.name}`" in text


def test_design_columns_lead_the_declared_ones():
    """docs/design.md §3.6 lists, for each of its files, the first declared columns in the declared order."""
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)\.csv` \| [^|]+ \| ([^|]+) \|$", design, re.M)
    assert len(rows) >= 6
    for name, columns in rows:
        listed = [re.sub(r"\s*\(.*\)", "", c).strip() for c in columns.split(",")]
        assert contract.names(name)[: len(listed)] == listed, name


def test_write_rewrites_a_stale_block(tmp_path):
    """`python -m agentrepro.analysis.contract_docs --write` replaces an out-of-date block and keeps the text around it."""
    for rel in contract_docs.DOCS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(
            f"before\n{contract_docs.BEGIN}\n| old |\n{contract_docs.END}\nafter\n", encoding="utf-8"
        )
    subprocess.run(
        [sys.executable, "-m", "agentrepro.analysis.contract_docs", "--write", "--root", str(tmp_path)], check=True
    )
    formats = (tmp_path / "docs/formats.md").read_text(encoding="utf-8")
    assert formats.startswith("before\n") and formats.endswith("after\n") and "| old |" not in formats
    assert "| `paired.csv` |" in formats and "mcnemar_p (p?)" in (tmp_path / "docs/internals.md").read_text(
        encoding="utf-8"
    )
    (tmp_path / "docs/formats.md").write_text("no block\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "agentrepro.analysis.contract_docs", "--write", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "docs/formats.md: no generated block" in result.stderr


def test_report_knows_every_kind_and_column_it_selects():
    """The report checks every declared kind, and its figure and table selections name declared columns."""
    for table in contract.TABLES:
        for column in table.columns:
            assert column.kind.rstrip("?") in contract.KINDS
            _check(column.kind, None)  # an unknown kind would raise
    assert set(render.TRAINING_METRICS) <= set(contract.names("training"))
    assert set(render.CONVERGENCE_METRICS) <= set(contract.names("convergence"))
    assert set(figures.DIAGNOSTIC_METRICS) <= set(contract.names("diagnostics"))
    with pytest.raises(ValueError, match="unknown column kind"):
        _check("percent", 1)
