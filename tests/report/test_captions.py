"""The Snakemake report captions (workflow/report/*.rst) are valid RST, and every caption a rule names exists."""

from __future__ import annotations

import re

import docutils.core
import docutils.utils
import pytest
from helpers import REPO

CAPTIONS = REPO / "workflow" / "report"


@pytest.mark.parametrize("path", sorted(CAPTIONS.glob("*.rst")), ids=lambda p: p.name)
def test_caption_is_valid_rst(path):
    """docutils parses the caption with no warning (a broken caption breaks `snakemake --report`)."""
    settings = {"report_level": docutils.utils.Reporter.WARNING_LEVEL, "halt_level": 5, "warning_stream": False}
    doctree = docutils.core.publish_doctree(path.read_text(encoding="utf-8"), settings_overrides=settings)
    problems = [m.astext() for m in doctree.findall() if m.tagname == "system_message"]
    assert problems == []
    assert doctree.astext().strip()


def test_every_referenced_caption_exists():
    """Each `caption="../report/X.rst"` in workflow/rules/*.smk, and the Snakefile's `report:`, point to a file here."""
    referenced = {
        m
        for smk in (REPO / "workflow" / "rules").glob("*.smk")
        for m in re.findall(r'caption\s*=\s*"\.\./report/([^"]+)"', smk.read_text(encoding="utf-8"))
    }
    referenced |= set(
        re.findall(r'^report:\s*"workflow/report/([^"]+)"', (REPO / "Snakefile").read_text(encoding="utf-8"), re.M)
    )
    assert referenced, "no rule references a caption: the Snakemake report hook is gone"
    assert sorted(r for r in referenced if not (CAPTIONS / r).is_file()) == []
