"""The report's printed values against the recount: what report.html shows from the analysis, formatted again from
the analysis recomputed from the outcomes (agentrepro.audit.recount).

The report marks every value it prints from analysis.json (agentrepro.report.marks): `<data data-at="PATH"
data-f="FORMAT">TEXT</data>`. `check_report_values(report_html, recomputed)` reads every mark, looks each PATH up in
the recomputed analysis.json object, formats it with FORMAT (agentrepro.analysis.format.FORMATS) and compares with
TEXT. A report edited after it was rendered and sealed again (nothing above the report checks its seal) shows here
as a printed value that the outcomes do not give. The report must also mark what a reader takes from it first
(HEADLINE: the bottom line, every verdict and every claim's result): a page that shows them unmarked cannot be checked.
Not checked: the figures (pictures), text the page composes itself (headings, badges' counts), and report.pdf.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from agentrepro.analysis import format as fmt
from agentrepro.audit.recount import RECOMPUTED, shown
from agentrepro.audit.tree import EXAMPLES

MISSING = object()
REPORT_HTML = "report.html"


class _Marks(HTMLParser):
    """(path, format, text) of every <data data-at=... data-f=...> element, in page order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.marks: list[tuple[str, str, str]] = []
        self._open: list[list] = []

    def handle_starttag(self, tag, attrs):
        if tag == "data":
            attrs = dict(attrs)
            self._open.append([attrs.get("data-at"), attrs.get("data-f"), ""])

    def handle_data(self, data):
        for entry in self._open:
            entry[2] += data

    def handle_endtag(self, tag):
        if tag == "data" and self._open:
            at, name, text = self._open.pop()
            if at is not None and name is not None:
                self.marks.append((at, name, text))


def marks(html: str) -> list[tuple[str, str, str]]:
    parser = _Marks()
    parser.feed(html)
    parser.close()
    return parser.marks


def lookup(doc: Any, path: str) -> Any:
    """The value at `path` (keys and list indices joined by `/`) of `doc`, or MISSING."""
    node = doc
    for part in path.split("/"):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


def formatted(name: str, values: list) -> str | None:
    """`values` printed by the formatter `name` (`seconds:<unit>` with its unit), or None for an unknown name."""
    base, _, unit = name.partition(":")
    if base not in fmt.FORMATS:
        return None
    if base == "seconds" and len(values) == 1:
        return fmt.seconds(values[0], unit or None)
    return fmt.FORMATS[base](*values)


def headline(doc: dict) -> set[str]:
    """The paths the report must mark: the bottom line, each verdict, each claim's holds/verdict."""
    tables = doc.get("tables") or {}
    wanted = {f"bottom_line/{i}" for i in range(len(doc.get("bottom_line") or []))}
    wanted |= {f"tables/verdicts/{i}/verdict" for i in range(len(tables.get("verdicts") or []))}
    for i, row in enumerate(tables.get("claims") or []):
        wanted.add(f"tables/claims/{i}/{'verdict' if row.get('verdict') is not None else 'statement'}")
    return wanted


def check_report_values(report_html: Path, recomputed: dict) -> list[str]:
    """Problems of the values report.html prints (see the module docstring)."""
    try:
        found_marks = marks(report_html.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return [f"{report_html}: unreadable ({type(exc).__name__})"]
    lines, seen = [], set()
    for at, name, text in found_marks:
        paths = at.split()
        seen.update(paths)
        values = [lookup(recomputed, p) for p in paths]
        if any(v is MISSING for v in values):
            lines.append(f"{report_html}: prints {text!r} for {at}, which the recomputed analysis does not have")
            continue
        expected = formatted(name, values)
        if expected is None:
            lines.append(f"{report_html}: prints {text!r} for {at} with an unknown format {name!r}")
        elif text != expected:
            lines.append(f"{report_html}: prints {shown(text)} for {at}, {RECOMPUTED}: {shown(expected)}")
    unmarked = sorted(headline(recomputed) - seen)
    if unmarked:
        more = f" and {len(unmarked) - EXAMPLES} more" if len(unmarked) > EXAMPLES else ""
        lines.append(
            f"{report_html}: does not show {', '.join(unmarked[:EXAMPLES])}{more} as values the audit can check "
            "(rendered by an older agentrepro, or edited)"
        )
    if len(lines) > EXAMPLES:
        lines = [
            *lines[:EXAMPLES],
            f"{report_html}: and {len(lines) - EXAMPLES} more printed value(s) that differ from the recomputation",
        ]
    return lines
