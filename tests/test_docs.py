"""The user documentation holds together: every relative link of README.md and docs/ reaches a file (and, for a
page, its heading), and the README stays short enough for a newcomer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
README_MAX_LINES = 160
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:


def _outside_fences(text: str):
    """The lines of `text` outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation (backticks included) dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page, repeated headings numbered as GitHub numbers them (-1, -2, ...)."""
    seen: dict[str, int] = {}
    for line in _outside_fences(page.read_text(encoding="utf-8")):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            seen[base] = seen.get(base, -1) + 1
    return {base if n == 0 else f"{base}-{n}" for base, count in seen.items() for n in range(count + 1)}


def links(page: Path) -> list[str]:
    """The link and image targets of a page's prose (fenced code blocks and code spans hold none)."""
    return [
        m.group(1)
        for line in _outside_fences(page.read_text(encoding="utf-8"))
        for m in LINK.finditer(CODE_SPAN.sub("``", line))
    ]


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file, or whose heading in a Markdown page, does not exist."""
    broken = []
    for target in links(page):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    """Each relative link or image of README.md and docs/ names an existing file, and an existing heading of a page."""
    assert broken_links(page) == []


def test_the_link_check_finds_a_broken_link(tmp_path):
    """The check reports a missing file, a missing heading and a link to an existing heading as it should."""
    (tmp_path / "other.md").write_text("# Title\n\n## A `code` heading (with: punctuation)\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-with-punctuation) [gone](missing.md) [bad](other.md#nope)\n"
        "`[in code](missing2.md)` [web](https://example.org/x)\n```\n[fenced](missing3.md)\n```\n",
        encoding="utf-8",
    )
    problems = broken_links(page)
    assert len(problems) == 2
    assert problems[0].startswith("missing.md: no file") and problems[1].startswith("other.md#nope: no heading")


def test_the_readme_stays_short():
    """README.md is a newcomer's page: under 160 lines, the reference material lives in docs/."""
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"
