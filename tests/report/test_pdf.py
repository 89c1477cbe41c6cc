"""report.pdf is the report's page printed by each engine: every section, whole values, a running header (pdftotext)."""

from __future__ import annotations

import builtins
import re
import subprocess

import pytest
from helpers import require_executable
from pdfcheck import broken_values, pdf_text

from agentrepro.errors import Failure
from agentrepro.report.paged import header_text
from agentrepro.report.pdf import choose_engine, html_to_pdf
from agentrepro.report.render import sections

ENGINES = [pytest.param("chromium", marks=pytest.mark.chromium), "weasyprint"]


@pytest.fixture(scope="module", params=ENGINES)
def engine(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def pdf(printed, engine):
    return printed(engine) / "report.pdf"


def test_pdf_has_every_section_in_order(pdf, analysis_template):
    """Every section heading of the HTML appears in the PDF text, in the same order, with the verdicts."""
    text = pdf_text(pdf)
    positions = [0]  # each heading after the one before (the reviewer's summary names later sections too)
    for _, title in sections(analysis_template):
        found = text.find(title, positions[-1])
        assert found >= 0, f"{title!r} missing, or not after the sections before it"
        positions.append(found)
    for v in analysis_template["tables"]["verdicts"]:
        assert f"{100 * v['ours']:.1f}%" in text


def test_pdf_shows_hostile_text_literally(pdf):
    """The escaped task name prints as the literal text in the PDF."""
    assert "<script>alert(1)</script>" in pdf_text(pdf)


def test_title_method_names_and_intervals_are_whole(pdf, analysis_template):
    """The title is one line, and each row of the verdict and method tables is one line holding its method name
    and every interval and value whole (none split across lines or columns)."""
    assert broken_values(pdf, analysis_template) == []
    assert len(analysis_template["tables"]["verdicts"]) == 3 and analysis_template["tables"]["methods"]


def test_the_check_finds_a_value_that_is_not_whole(pdf, analysis):
    """Control: an interval the PDF does not hold in one piece, or another title, is reported."""
    analysis["title"] = "Another study"
    analysis["tables"]["verdicts"][0]["ci90_lo"] -= 0.1
    assert [p.split(":")[0] for p in broken_values(pdf, analysis)] == [
        "title",
        analysis["tables"]["verdicts"][0]["method"],
    ]


def test_every_page_has_the_running_header_and_its_number(pdf, analysis_template):
    """Each page starts with the study and lock hash and ends with 'page i of n'; A4 by default."""
    pages = pdf_text(pdf).split("\f")[:-1]
    header = header_text(analysis_template["study"], analysis_template["provenance"]["lock_sha256"])
    assert len(pages) > 5
    for i, page in enumerate(pages, 1):
        assert header in page and f"page {i} of {len(pages)}" in page, (i, page[:200])
    info = subprocess.run(
        [require_executable("pdfinfo", "pdfinfo"), str(pdf)], capture_output=True, text=True, check=True
    ).stdout
    assert "(A4)" in info


def test_the_engine_is_said_and_recorded(pdf, engine):
    """The appendix names the engine and version that printed the PDF; stderr says it (and why, under auto)."""
    name = {"chromium": "Chromium", "weasyprint": "WeasyPrint"}[engine]
    assert re.search(rf"report\.pdf is this page printed by {name} \d+\.\d+", pdf_text(pdf))
    stderr = (pdf.parents[2] / "stderr.txt").read_text()
    assert f"printed by {name} " in stderr
    assert ("no Chromium found" in stderr) == (engine == "weasyprint")
    assert "RuntimeWarning" not in stderr  # WeasyPrint ignored nothing of the page's HTML or CSS


@pytest.mark.parametrize("engine_name", ENGINES)
def test_page_that_is_not_self_contained_is_refused(tmp_path, engine_name):
    """Printing a page that requests the network raises Failure instead of writing a PDF."""
    if engine_name == "chromium":
        require_executable("chromium", "chromium")
    page = tmp_path / "p.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/x.png"></body></html>')
    with pytest.raises(Failure, match=r"not self-contained.*127.0.0.1"):
        html_to_pdf(page, tmp_path / "p.pdf", choose_engine(engine_name))
    assert not (tmp_path / "p.pdf").exists()


def test_weasyprint_says_what_it_ignored(tmp_path):
    """CSS that WeasyPrint cannot apply is a RuntimeWarning naming it, and the PDF is still written."""
    page = tmp_path / "p.html"
    page.write_text("<html><head><style>p { frobnicate: 3 }</style></head><body><p>x</p></body></html>")
    with pytest.warns(RuntimeWarning, match="WeasyPrint .*frobnicate"):
        html_to_pdf(page, tmp_path / "p.pdf", choose_engine("weasyprint"))
    assert (tmp_path / "p.pdf").read_bytes().startswith(b"%PDF-")


def test_weasyprint_without_its_libraries_names_them(monkeypatch):
    """When Pango cannot be loaded, choosing WeasyPrint fails with the Debian packages to install."""
    real_import = builtins.__import__

    def no_pango(name, *args, **kwargs):
        if name == "weasyprint":
            raise OSError("cannot load library 'libpango-1.0-0'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pango)
    with pytest.raises(Failure, match=r"libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0"):
        choose_engine("weasyprint")
