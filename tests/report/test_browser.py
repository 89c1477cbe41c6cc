"""report.html in headless Chromium (DevTools over a pipe): loads clean, offline, with every part shown."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import require_executable
from report_synthetic import HOSTILE

from agentrepro.errors import Failure
from agentrepro.report.browser import Chromium, find_chromium

pytestmark = pytest.mark.chromium


@pytest.fixture(scope="module")
def page_info(rendered, tmp_path_factory):
    """What the browser saw: console errors, requests, DOM facts and a screenshot of the first screen."""
    with Chromium() as browser:
        page = browser.open(rendered / "report.html")
        info = {
            "errors": page.console_errors(),
            "requests": page.requests(),
            "verdict_rows": page.evaluate("document.querySelectorAll('table.verdicts tbody tr').length"),
            "verdict_top": page.evaluate("document.querySelector('table.verdicts').getBoundingClientRect().top"),
            "summary_top": page.evaluate("document.querySelector('table.summary-table').getBoundingClientRect().top"),
            "bottom_line": page.evaluate(
                "[document.querySelector('#bottom-line').getBoundingClientRect().bottom, "
                "document.querySelector('#bottom-line p').innerText]"
            ),
            "equivalence_rows": page.evaluate("document.querySelectorAll('table.equivalence tbody tr').length"),
            "figures": page.evaluate(
                "[...document.querySelectorAll('figure img')].map(i => [i.closest('figure').id, i.complete && i.naturalWidth > 0])"
            ),
            "scripts": page.evaluate("document.scripts.length"),
            "text": page.evaluate("document.body.innerText"),
            "headings": page.evaluate("[...document.querySelectorAll('h2')].map(h => h.textContent)"),
        }
        shot = page.screenshot()
    path = Path(os.environ.get("AGENTREPRO_ARTIFACTS", tmp_path_factory.mktemp("shots"))) / "report-first-screen.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(shot)
    info["screenshot"] = path
    return info


def test_loads_without_console_errors_or_network(page_info):
    """No console error, exception or dialog, and the only request is the file itself (figures are data:)."""
    assert page_info["errors"] == []
    assert page_info["requests"], "the browser recorded no request at all: the network log is not working"
    assert all(u.startswith(("file:", "data:")) for u in page_info["requests"]), page_info["requests"]


def test_bottom_line_on_the_first_screen_then_summary_equivalence_and_verdicts(page_info, analysis_template):
    """The bottom line ends within the first 900 px, in the analysis' own words; the contents, the reviewer's summary,
    the equivalence claims and then the verdicts follow it, a row per claim row and per compared value."""
    bottom, text = page_info["bottom_line"]
    assert 0 < bottom < 900 < page_info["verdict_top"] and page_info["summary_top"] > bottom
    assert text == " ".join(analysis_template["bottom_line"]) and text.startswith("Compared: 4 method(s)")
    assert page_info["headings"][:5] == [
        "Bottom line",
        "Contents",
        "Reviewer's summary",
        "Equivalence claims",
        "Verdicts against the paper",
    ]
    claims = analysis_template["tables"]["claims"]
    assert page_info["equivalence_rows"] == sum(1 for c in claims if c.get("kind") == "equivalence") > 0
    assert page_info["verdict_rows"] == len(analysis_template["tables"]["verdicts"])


def test_every_figure_is_displayed(page_info):
    """Every figure's image decoded (naturalWidth > 0), one per expected figure."""
    figures = dict(page_info["figures"])
    assert set(figures) == {
        f"fig-{k}"
        for k in (
            "forest",
            "paired",
            "categories",
            "learning_curves",
            "training_curves",
            "diagnostics",
            "overhead",
            "convergence",
        )
    }
    assert all(figures.values()), figures


def test_hostile_task_name_is_text_not_script(page_info):
    """'<script>alert(1)</script>' is shown as text; no script element exists and no dialog opened."""
    assert HOSTILE in page_info["text"]
    assert page_info["scripts"] == 0
    assert not any(e.startswith("dialog") for e in page_info["errors"])


def test_screenshot_saved(page_info):
    """A PNG of the first screen is saved for a person to look at."""
    data = page_info["screenshot"].read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000


def test_checks_can_fail(tmp_path):
    """The same probes catch a console error, a script dialog and a network request on a bad page."""
    require_executable("chromium", "chromium")
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<html><body><img src="http://127.0.0.1:9/x.png"><script>console.error("boom"); alert(1)</script></body></html>'
    )
    with Chromium() as browser:
        page = browser.open(bad)
        errors, requests = page.console_errors(), page.requests()
    assert any("boom" in e for e in errors)
    assert any(e.startswith("dialog (alert)") for e in errors)
    assert "http://127.0.0.1:9/x.png" in requests


def test_missing_chromium_is_a_clear_failure(monkeypatch):
    """No Chromium on PATH is a Failure that says how to install it, not a skip."""
    monkeypatch.delenv("AGENTREPRO_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(Failure, match="apt-get install -y chromium"):
        find_chromium()
    with pytest.raises(Failure, match="not found"):
        find_chromium("/nonexistent/chromium")
    assert shutil.which("chromium") is None
