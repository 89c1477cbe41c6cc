"""The report against the recount: reports/<study> rendered again from the analysis recomputed from the outcomes
(agentrepro.audit.recount), and every value report.html prints formatted again from it.

`check_rendering(report_dir, tree, ...)` renders the report as `agentrepro report` does (agentrepro.report.render),
from the recomputed analysis, the hashes of the analysis files, the audit's own findings up to the analysis (the
result the appendix shows, agentrepro.audit.result) and the two settings the page records in its RENDERING meta
element (the paper and the PDF engine). report.html, provenance.html and every figure must equal that rendering byte
for byte, and the folder may hold nothing else but its seal, analysis.sha256 (audit/chain.py) and, where the page says
one was printed, report.pdf (`check_pdf`, below). So whatever a reader sees is checked, not only the marked values: a number
changed anywhere in the page, a mark re-pointed to another value, a style that hides one text and shows another, a
replaced figure and a stray file all differ from the rendering, whatever seal was written over them. Rendering is
deterministic for one agentrepro and matplotlib; a page rendered by another is reported as differing.

The report marks every value it prints from analysis.json (agentrepro.report.marks): `<data data-at="PATH"
data-f="FORMAT">TEXT</data>`. `check_report_values(report_html, recomputed)` reads every mark, looks each PATH up in
the recomputed analysis.json object, formats it with FORMAT (agentrepro.analysis.format.FORMATS) and compares with
TEXT. A report edited after it was rendered and sealed again (nothing above the report checks its seal) shows here
as a printed value that the outcomes do not give. The report must also mark what a reader takes from it first
(HEADLINE: the bottom line, every verdict and every claim's result): a page that shows them unmarked cannot be checked.
This check names the value that differs; the rendering above catches the rest of the page.

report.pdf cannot be printed again byte for byte (the engines stamp dates and differ by version), so `check_pdf` reads
its text (pypdf) and requires every value the page marks, as often as the page marks it. A value replaced in the PDF
is caught; the order of the values and text added beside them are not checked.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Set
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from agentrepro import layout
from agentrepro.analysis import format as fmt
from agentrepro.analysis.study import ANALYSIS_JSON, Analysis
from agentrepro.audit.recount import RECOMPUTED, shown, shown_pair
from agentrepro.audit.result import result_of
from agentrepro.audit.tree import EXAMPLES, SNAKEMAKE_MARKER, Tree
from agentrepro.errors import BadInput, Failure
from agentrepro.report.load import validate
from agentrepro.report.paged import PAPERS
from agentrepro.report.render import PROVENANCE_PAGE, RENDERING, render_report
from agentrepro.report.write import FIGURES, REPORT_HTML, REPORT_PDF, analysis_files
from agentrepro.seal import OUTPUTS

MISSING = object()
MAX_PAGE_BYTES = 256 * 2**20  # far above any page agentrepro renders (figures inline: a few MB)
MAX_RENDERING_CHARS = 1000  # the RENDERING meta element's content: two short settings
MAX_ENGINE_CHARS = 200  # a PDF engine's name and version, as the appendix prints it
SOFT_HYPHEN = "\u00ad"  # a break opportunity a PDF engine may leave in the text it extracts


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


class _Rendering(HTMLParser):
    """The content of every <meta name=RENDERING> element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "meta" and attrs.get("name") == RENDERING:
            self.found.append(attrs.get("content") or "")


def rendering_settings(html: str) -> tuple[dict | None, str]:
    """({"paper", "pdf_engine"} the page was rendered with, "") or (None, why they cannot be read)."""
    parser = _Rendering()
    parser.feed(html)
    parser.close()
    if len(parser.found) != 1:
        return None, (
            f"holds {len(parser.found)} <meta name={RENDERING}> elements, where a rendered page holds one: rendered by "
            "an older agentrepro, or edited (render it again: `agentrepro report`)"
        )
    content = parser.found[0]
    settings = None
    if len(content) <= MAX_RENDERING_CHARS:
        try:
            settings = json.loads(content)
        except ValueError:
            pass
    engine = settings.get("pdf_engine") if isinstance(settings, dict) else None
    if (
        not isinstance(settings, dict)
        or set(settings) != {"paper", "pdf_engine"}
        or settings["paper"] not in PAPERS
        or not (
            engine is None or (isinstance(engine, str) and len(engine) <= MAX_ENGINE_CHARS and engine.isprintable())
        )
    ):
        return None, (
            f"<meta name={RENDERING}> holds {shown(content)}, where a rendered page holds "
            f'{{"paper": one of {", ".join(PAPERS)}, "pdf_engine": a name or null}}'
        )
    return settings, ""


def first_difference(found: bytes, expected: bytes) -> str:
    """Where two texts first differ, in words: the line and, from shortly before, what each holds there."""
    a, b = found.decode("utf-8", "replace").splitlines(), expected.decode("utf-8", "replace").splitlines()
    line = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    was, now = shown_pair(a[line] if line < len(a) else "(the end)", b[line] if line < len(b) else "(the end)")
    return f"line {line + 1} holds {was}, the rendering: {now}"


def check_rendering(
    report_dir: Path,
    tree: Tree,
    *,
    analysis_dir: Path,
    recomputed: Analysis,
    audited: list[str],
    not_bundled: Set[Path] = frozenset(),
) -> list[str]:
    """reports/<study> against the report rendered again (see the module docstring). `audited`: the audit's
    findings for the study up to its analysis, which the appendix shows."""
    page = report_dir / REPORT_HTML
    if page not in tree.files:
        return [] if page in tree.links or page in not_bundled else [f"{page}: missing"]
    if page.stat().st_size > MAX_PAGE_BYTES:
        return [f"{page}: larger than any page agentrepro renders ({MAX_PAGE_BYTES} bytes): not read"]
    html = page.read_bytes()
    settings, why = rendering_settings(html.decode("utf-8", "replace"))
    if settings is None:
        return [f"{page}: {why}"]
    try:
        analysis = validate(
            json.loads(json.dumps(recomputed.document(), allow_nan=False)), analysis_dir / ANALYSIS_JSON
        )
        rendered, provenance, figures = render_report(
            analysis,
            audit=result_of(audited),
            files=analysis_files(analysis_dir),
            paper=settings["paper"],
            pdf_engine=settings["pdf_engine"],
        )
    except (BadInput, Failure, ValueError, TypeError, KeyError) as exc:  # a lock or analysis the audit flagged above
        return [
            f"{page}: cannot be rendered again from the recomputed analysis, so nothing in it can be vouched for: {exc}"
        ]
    expected = {
        REPORT_HTML: rendered.encode(),
        PROVENANCE_PAGE: provenance.encode(),
        **{f"{FIGURES}/{f.key}.png": f.png for f in figures},
    }
    beside = {OUTPUTS, layout.REPORT_ANALYSIS_RECORD} | ({REPORT_PDF} if settings["pdf_engine"] else set())
    found = []
    for rel, data in expected.items():
        path = report_dir / rel
        if path in tree.links or path in not_bundled:
            continue  # reported as a link, or left out of a bundle on purpose
        if path not in tree.files:
            found.append(f"{path}: missing: the report rendered again has it")
        elif rel != REPORT_HTML and path.stat().st_size > MAX_PAGE_BYTES:
            found.append(f"{path}: larger than anything agentrepro renders ({MAX_PAGE_BYTES} bytes): not read")
        elif (held := html if rel == REPORT_HTML else path.read_bytes()) != data:
            found.append(
                f"{path}: differs from the report rendered again from the recomputed analysis: "
                + (first_difference(held, data) if rel.endswith(".html") else "another picture")
                + " (edited after it was rendered, or rendered by another agentrepro or matplotlib)"
            )
    pdf = report_dir / REPORT_PDF
    if settings["pdf_engine"] and pdf not in tree.files | tree.links | set(not_bundled):
        found.append(f"{pdf}: missing: the page says it was printed by {settings['pdf_engine']}")
    elif settings["pdf_engine"] and pdf in tree.files:
        found += check_pdf(pdf, rendered)
    for path in sorted(tree.files):
        rel = path.relative_to(report_dir).as_posix()
        if rel == REPORT_PDF and rel not in beside:
            found.append(f"{path}: a stray file: the page says no report.pdf was printed from it")
        elif rel not in expected and rel not in beside and path.name != SNAKEMAKE_MARKER:
            found.append(
                f"{path}: a stray file: the report rendered again has no such file (added after it was rendered?)"
            )
    for path in sorted(tree.dirs):
        if path != report_dir / FIGURES:
            found.append(f"{path}: a stray folder: the report rendered again has no such folder")
    return found


def pdf_text(pdf: Path) -> tuple[str | None, str]:
    """(the text of every page, whitespace collapsed and compatibility characters such as ligatures folded, "") or
    (None, why it cannot be read)."""
    import pypdf  # heavy: only an audit of a printed report reads a PDF

    if pdf.stat().st_size > MAX_PAGE_BYTES:
        return None, f"larger than any report agentrepro prints ({MAX_PAGE_BYTES} bytes): not read"
    try:
        reader = pypdf.PdfReader(pdf)
        text = " ".join(page.extract_text() or "" for page in reader.pages)
    except (pypdf.errors.PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError, OSError) as exc:
        return None, f"unreadable as a PDF ({type(exc).__name__}: {shown(str(exc))})"
    return normalised(text), ""


def normalised(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).replace(SOFT_HYPHEN, "").split())


def check_pdf(pdf: Path, page: str) -> list[str]:
    """report.pdf against the page rendered again: every value the page marks must be in the PDF's text at least as
    often as the page marks it. Not their order (Chromium prints some blocks in another order than the page), nor
    text the PDF adds."""
    text, why = pdf_text(pdf)
    if text is None:
        return [f"{pdf}: {why}"]
    wanted = Counter(normalised(shown_text) for _, _, shown_text in marks(page))
    missing = [(value, n) for value, n in wanted.items() if value and text.count(value) < n]
    if not missing:
        return []
    value, n = missing[0]
    more = f", and {len(missing) - 1} other value(s)" if len(missing) > 1 else ""
    return [
        f"{pdf}: shows {shown(value)} {text.count(value)} time(s) where the report rendered again marks it {n} time(s)"
        f"{more}: printed from another page, or edited"
    ]
