"""`agentrepro report STUDY --root DIR` as a user runs it (subprocess), including on the real analyze output."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from helpers import REPO, require_executable, run_cli
from report_synthetic import STUDY, write_analysis_dir, write_outcomes

from agentrepro.audit import audit_result
from agentrepro.errors import BadInput
from agentrepro.report.write import write_report
from agentrepro.seal import verify_outputs, write_outputs_manifest


@pytest.fixture
def root(tmp_path, analysis):
    write_analysis_dir(tmp_path, analysis)
    return tmp_path


@pytest.mark.chromium
def test_report_writes_html_pdf_and_seal(rendered):
    """Exit 0 (fixture `rendered` runs the verb); HTML, PDF and figures exist, and OUTPUTS.sha256 vouches for them."""
    out, root = rendered, rendered.parent.parent
    assert (out / "report.pdf").read_bytes().startswith(b"%PDF-")
    seal = (out / "OUTPUTS.sha256").read_text()
    for name in ("report.html", "report.pdf", "figures/forest.png", "figures/diagnostics.png"):
        assert f"  {name}\n" in seal
    assert verify_outputs(out / "OUTPUTS.sha256") == []
    assert not [p for p in (root / "reports").iterdir() if p.name.startswith(".")]  # no staging left behind


def test_bad_analysis_is_exit_2_and_writes_nothing(root, analysis):
    """An off-contract analysis.json: exit 2, one line naming the file and key, no reports/ directory."""
    analysis["tables"]["methods"][0]["pooled_rate"] = 81.2
    (root / "analysis" / STUDY / "analysis.json").write_text(json.dumps(analysis))
    result = run_cli("report", STUDY, "--root", root, "--no-pdf")
    assert result.returncode == 2
    assert "analysis.json: tables.methods[0].pooled_rate" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (root / "reports" / STUDY).exists()


def test_missing_chromium_is_exit_1_and_keeps_the_old_report(root):
    """With no Chromium the PDF fails loudly (exit 1) and an earlier report is left as it was."""
    old = root / "reports" / STUDY
    old.mkdir(parents=True)
    (old / "report.html").write_text("earlier report")
    write_outputs_manifest(old)
    before = (old / "OUTPUTS.sha256").read_text()
    result = run_cli("report", STUDY, "--root", root, "--chromium", "/nonexistent/chromium")
    assert result.returncode == 1
    assert "/nonexistent/chromium" in result.stderr and "AGENTREPRO_CHROMIUM" in result.stderr
    assert (root / "reports" / STUDY / "OUTPUTS.sha256").read_text() == before
    assert not (root / "reports" / STUDY / "report.pdf").exists()


def test_letter_paper_and_named_engine_from_the_command_line(tmp_path):
    """`--pdf-engine weasyprint --paper letter` prints on US Letter; `--pdf-engine chromium` with no Chromium on
    PATH is exit 1 with the way to install it (before anything is rendered)."""
    from agentrepro.report.load import COLUMNS

    analysis = {
        "study": "s",
        "title": "Letter study",
        "settings": {"tolerance_pp": 3, "alpha": 0.05},
        "notes": [],
        "parity": [],
        "tables": {name: [] for name in COLUMNS},
        "provenance": {"lock": None, "runs": []},
    }
    write_analysis_dir(tmp_path, analysis)
    result = run_cli("report", "s", "--root", tmp_path, "--pdf-engine", "weasyprint", "--paper", "letter")
    assert result.returncode == 0, result.stderr
    assert "report.pdf (letter) printed by WeasyPrint" in result.stderr
    info = subprocess.run(
        [require_executable("pdfinfo", "pdfinfo"), tmp_path / "reports" / "s" / "report.pdf"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"Page size:\s+612 x 792 pts \(letter\)", info), info
    env = {"PATH": os.path.dirname(sys.executable), "AGENTREPRO_CHROMIUM": ""}
    result = run_cli("report", "s", "--root", tmp_path, "--pdf-engine", "chromium", env=env)
    assert result.returncode == 1 and "apt-get install -y chromium" in result.stderr


def test_unknown_study_and_mismatch(root):
    """A study without analysis, a path-like study, and an analysis of another study are BadInput (exit 2)."""
    with pytest.raises(BadInput, match=r"analysis/other/analysis\.json: file not found"):
        write_report("other", root, audit=audit_result("other", root), pdf=False)
    with pytest.raises(BadInput, match="slug"):
        write_report("../x", root, audit=audit_result("../x", root), pdf=False)
    shutil.copytree(root / "analysis" / STUDY, root / "analysis" / "renamed")
    with pytest.raises(BadInput, match="expected study 'renamed'"):
        write_report("renamed", root, audit=audit_result("renamed", root), pdf=False)
    assert not (root / "reports").exists()


def test_figures_directory_exists_without_figures(tmp_path):
    """A study with nothing to draw still gets reports/<study>/figures/ (Snakemake declares it as output)."""
    from agentrepro.report.load import COLUMNS

    analysis = {
        "study": "s",
        "title": None,
        "settings": {"tolerance_pp": 3, "alpha": 0.05},
        "notes": [],
        "parity": [],
        "tables": {name: [] for name in COLUMNS},
        "provenance": {"lock": None, "runs": []},
    }
    write_analysis_dir(tmp_path, analysis)
    out, engine = write_report("s", tmp_path, audit=audit_result("s", tmp_path), pdf=False)
    assert engine is None and (out / "figures").is_dir() and not any((out / "figures").iterdir())
    assert (out / "report.html").stat().st_mode & 0o044 == 0o044  # readable by others, like a published page


def test_report_from_real_analyze(tmp_path):
    """Outcomes → `agentrepro analyze` (the real producer) → `agentrepro report`: verdicts and claims shown."""
    paths = write_outcomes(tmp_path, study=STUDY, n_tasks=32, steps=(0, 150))
    out = tmp_path / "analysis" / STUDY
    result = run_cli(
        "analyze",
        "--outcomes",
        *paths,
        "--reference",
        REPO / "manifests/references/graphgpo.yaml",
        "--claim",
        "graphgpo > gigpo",
        "--claim",
        "graphgpo == gigpo +- 5 pp",
        "--out",
        out,
    )
    assert result.returncode == 0, result.stderr
    result = run_cli("report", STUDY, "--root", tmp_path, "--no-pdf")
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "reports" / STUDY / "report.html").read_text()
    analysis = json.loads((out / "analysis.json").read_text())
    assert {v["method"] for v in analysis["tables"]["verdicts"]} == {"grpo", "gigpo", "graphgpo", "graph_only"}
    verdicts = html[html.index('<table class="verdicts">') : html.index('<section id="claims">')]
    for v in analysis["tables"]["verdicts"]:
        assert f"{100 * v['paper']:.1f}%" in verdicts and v["reason"].replace("<", "&lt;")[:40] in verdicts
    assert "graphgpo &gt; gigpo" in html
    # the equivalence claim comes first, before the verdicts against the paper, with the analysis' verdict
    equivalence = html[html.index('<section id="equivalence">') : html.index('<section id="verdicts">')]
    (head,) = [c for c in analysis["tables"]["claims"] if c["kind"] == "equivalence" and c["seed"] == "all"]
    assert "graphgpo == gigpo +- 5 pp" in equivalence and head["verdict"].replace("_", " ") in equivalence
    assert (
        html.index('<section id="summary">')
        < html.index('<section id="equivalence">')
        < html.index('<table class="verdicts">')
    )
    provenance = (tmp_path / "reports" / STUDY / "provenance.html").read_text()
    for name in ("analysis.json", "runs.csv", "outcomes.parquet"):
        assert f"analysis/{STUDY}/{name}" in provenance  # its hash is listed on the provenance page the appendix links
