"""Forgeries of the report that reseal: report.html edited so that every mark still agrees with the recount, then
reports/<study> sealed again (nothing sits above the report's seal). Only the audit's rendering of the report again
from the recomputed analysis (agentrepro.audit.report.check_rendering) can catch them: a mark re-pointed to another
value that reads the same, a style that hides a checked value and shows another, a number the page composes itself,
a forged bottom line, a swapped figure, a stray file, and a page whose rendering settings are missing or hostile.
Each must fail `audit` with a line naming the forged file, on disk and in a bundle whose every checksum is remade;
so must a report.pdf printed from an edited page, or one that is no PDF.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers import run_cli, tar_members
from hostile_kit import forge_bundle, record
from markupsafe import escape

from agentrepro.audit import audit_bundle, audit_result, audit_study, write_bundle
from agentrepro.audit.report import MAX_RENDERING_CHARS, marks
from agentrepro.fileio import sha256_bytes
from agentrepro.report.pdf import choose_engine, html_to_pdf
from agentrepro.report.render import RENDERING
from agentrepro.report.write import write_report
from agentrepro.seal import OUTPUTS, write_outputs_manifest

REPORT = Path("reports/demo")
RENDERED_AGAIN = "differs from the report rendered again"


@pytest.fixture
def study(frozen_study, tmp_path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(frozen_study, root, symlinks=True)
    assert audit_study("demo", root) == []  # the control: every case below fails only by its forgery
    return root


def _edit_page(root: Path, edit) -> None:
    page = root / REPORT / "report.html"
    before = page.read_text(encoding="utf-8")
    after = edit(before)
    assert after != before, "the forgery changed nothing"
    page.write_text(after, encoding="utf-8")


def _repoint(text: str) -> str:
    """The first percentage mark shows a second one's text, its data-at pointed at that second value: every mark
    still formats to what it shows."""
    found = re.findall(r'<data data-at="([^"]+)" data-f="pct">([^<]*)</data>', text)
    (at, shown), (other_at, other) = next((a, b) for a in found for b in found if a[1] != b[1] and a[0] != b[0])
    mark = f'<data data-at="{at}" data-f="pct">{shown}</data>'
    return text.replace(mark, f'<data data-at="{other_at}" data-f="pct">{other}</data>', 1)


def _hide_and_show(text: str) -> str:
    """The first bottom-line sentence kept (its mark checks) but hidden by a style, a forged one shown after it."""
    start = text.index('<data data-at="bottom_line/0"')
    end = text.index("</data>", start) + len("</data>")
    hidden = text[start:end].replace("<data ", '<data style="display:none" ', 1)
    return text[:start] + hidden + "<span>Every verdict reproduced.</span>" + text[end:]


def _style_sheet(text: str) -> str:
    """A rule added to the page's own style sheet that hides every checked verdict."""
    return text.replace("</style>", "data[data-f=verdict]{visibility:hidden}</style>", 1)


def _unmarked_number(text: str) -> str:
    """A number the page composes itself (the final step in the header), not a marked value."""
    return re.sub(r"final step (\d+)", lambda m: f"final step {int(m.group(1)) + 10}", text, count=1)


def _swap_figures(root: Path) -> None:
    """Two figures exchanged, in the page and as files."""
    page = root / REPORT / "report.html"
    text = page.read_text(encoding="utf-8")
    images = re.findall(r"data:image/png;base64,[A-Za-z0-9+/=]+", text)
    first, second = next((a, b) for a in images for b in images if a != b)
    page.write_text(text.replace(first, "\0").replace(second, first).replace("\0", second), encoding="utf-8")
    figures = sorted((root / REPORT / "figures").glob("*.png"))
    a, b = figures[0].read_bytes(), figures[1].read_bytes()
    figures[0].write_bytes(b)
    figures[1].write_bytes(a)


def _rendering_meta(content: str | None, copies: int = 1):
    def edit(text: str) -> str:
        found = re.search(rf'<meta name="{RENDERING}" content="[^"]*">', text)
        assert found, "the page holds no rendering settings to forge"
        meta = found.group(0)
        forged = "" if content is None else f'<meta name="{RENDERING}" content="{content}">' * copies
        return text.replace(meta, forged, 1)

    return edit


PAGE_FORGERIES = [
    ("a mark re-pointed to another value", _repoint, RENDERED_AGAIN),
    ("a checked value hidden, a forged one shown", _hide_and_show, RENDERED_AGAIN),
    ("the style sheet hides the verdicts", _style_sheet, RENDERED_AGAIN),
    ("a number the page composes changed", _unmarked_number, RENDERED_AGAIN),
    ("the rendering settings removed", _rendering_meta(None), "0 <meta name=agentrepro-rendering> elements"),
    (
        "the rendering settings twice",
        _rendering_meta("{&quot;paper&quot;: &quot;a4&quot;, &quot;pdf_engine&quot;: null}", 2),
        "2 <meta",
    ),
    (
        "a paper no renderer knows",
        _rendering_meta("{&quot;paper&quot;: &quot;a0&quot;, &quot;pdf_engine&quot;: null}"),
        "one of a4, letter",
    ),
    (
        "a PDF engine that is a list",
        _rendering_meta("{&quot;paper&quot;: &quot;a4&quot;, &quot;pdf_engine&quot;: [1]}"),
        "a name or null",
    ),
    ("settings of a megabyte", _rendering_meta("x" * (MAX_RENDERING_CHARS * 1000)), "a name or null"),
    ("settings that are no JSON", _rendering_meta("{&quot;paper"), "a name or null"),
]


@pytest.mark.parametrize(("case", "edit", "says"), PAGE_FORGERIES, ids=[c[0] for c in PAGE_FORGERIES])
def test_a_resealed_page_forgery_fails_the_audit(study, case, edit, says):
    """The page edited, its folder sealed again: the audit names report.html and what differs; the marks alone
    (the values the page marks, formatted again) would not have found the first four."""
    _edit_page(study, edit)
    write_outputs_manifest(study / REPORT)
    problems = audit_study("demo", study)
    page = str(study / REPORT / "report.html")
    assert any(p.startswith(page) and says in p for p in problems), problems
    record("forgeries", f"report.html:{case}")


def test_the_marks_alone_agree_with_a_repointed_page(study):
    """Why the rendering is needed: after the re-pointing every mark still formats to the text it shows."""
    from agentrepro.audit.recount import recompute
    from agentrepro.audit.report import check_report_values

    _edit_page(study, _repoint)
    recomputed, problems = recompute("demo", study, study / "analysis" / "demo")
    assert recomputed is not None and problems == []
    assert check_report_values(study / REPORT / "report.html", recomputed.document()) == []
    assert marks((study / REPORT / "report.html").read_text())  # the page still carries its marks


@pytest.mark.parametrize(
    ("forge", "named", "says"),
    [
        (_swap_figures, "figures/", "another picture"),
        (lambda r: (r / REPORT / "notes.txt").write_text("x"), "notes.txt", "a stray file"),
        (lambda r: (r / REPORT / "figures" / "extra.png").write_bytes(b"\x89PNG"), "figures/extra.png", "a stray file"),
        (lambda r: (r / REPORT / "report.pdf").write_bytes(b"%PDF-1.7\n"), "report.pdf", "no report.pdf was printed"),
        (lambda r: (r / REPORT / "provenance.html").write_text("<p>all good</p>"), "provenance.html", RENDERED_AGAIN),
        (lambda r: (r / REPORT / "figures" / "forest.png").unlink(), "figures/forest.png", "missing"),
    ],
    ids=[
        "figures swapped",
        "stray file",
        "stray figure",
        "a PDF the page says was not printed",
        "provenance page",
        "figure removed",
    ],
)
def test_a_resealed_folder_forgery_fails_the_audit(study, forge, named, says):
    """Files of reports/<study> swapped, added or removed, the folder sealed again: named, with what is wrong."""
    forge(study)
    write_outputs_manifest(study / REPORT)
    problems = audit_study("demo", study)
    assert any(str(study / REPORT / named) in p and says in p for p in problems), problems
    record("forgeries", f"reports:{named}")


def test_a_forged_page_in_a_bundle_with_every_checksum_remade_fails(study, tmp_path):
    """The bundle of the study, its report.html forged, the report's seal and BUNDLE.sha256 remade: `audit --bundle`
    exits 1 naming the page."""
    bundle = tmp_path / "b.tar.gz"
    write_bundle("demo", bundle, study)
    members = tar_members(bundle)
    page = (REPORT / "report.html").as_posix()
    members[page] = _hide_and_show(members[page].decode("utf-8")).encode("utf-8")
    seal = (REPORT / OUTPUTS).as_posix()
    prefix = REPORT.as_posix() + "/"
    members[seal] = "".join(
        f"{sha256_bytes(data)}  {name.removeprefix(prefix)}\n"
        for name, data in sorted(members.items())
        if name.startswith(prefix) and name != seal
    ).encode()
    forged = forge_bundle(members, tmp_path / "forged.tar.gz")
    assert any(page in p and RENDERED_AGAIN in p for p in audit_bundle(forged)), audit_bundle(forged)
    result = run_cli("audit", "--bundle", forged)
    assert result.returncode == 1 and RENDERED_AGAIN in result.stdout, result.stdout + result.stderr
    record("forgeries", "bundle:report.html")


def test_rendering_settings_are_read_back_as_written():
    """The meta element's content as the template writes it (escaped into an attribute) reads back as the two
    settings, whatever the engine's name holds."""
    from agentrepro.audit.report import rendering_settings
    from agentrepro.report.render import rendering

    engine = 'WeasyPrint 66 "quoted" <b> & more'
    page = f'<meta name="{RENDERING}" content="{escape(rendering("letter", engine))}">'
    assert rendering_settings(page) == ({"paper": "letter", "pdf_engine": engine}, "")


@pytest.fixture
def printed(study) -> Path:
    """The study's report printed again with WeasyPrint (the engine every install has), audited clean."""
    write_report("demo", study, audit=audit_result("demo", study), engine="weasyprint")
    assert audit_study("demo", study) == []
    return study


def test_a_pdf_printed_from_an_edited_page_fails_the_audit(printed, tmp_path):
    """report.pdf replaced by the print of a page whose first percentage was edited, the folder sealed again: the
    audit reads the PDF's text and names the value it lacks."""
    page = printed / REPORT / "report.html"
    text = page.read_text(encoding="utf-8")
    found = re.search(r'data-f="pct">([^<]+)</data>', text)
    assert found
    edited = tmp_path / "edited.html"
    edited.write_text(text[: found.start(1)] + "99.9%" + text[found.end(1) :], encoding="utf-8")
    html_to_pdf(edited, printed / REPORT / "report.pdf", choose_engine("weasyprint", None))
    write_outputs_manifest(printed / REPORT)
    problems = audit_study("demo", printed)
    pdf = str(printed / REPORT / "report.pdf")
    assert any(p.startswith(pdf) and repr(found.group(1).replace("\xa0", " ")) in p for p in problems), problems


@pytest.mark.parametrize("content", [b"", b"%PDF-1.7\n" + b"\0" * 100, b"not a pdf at all"])
def test_a_pdf_that_is_no_pdf_is_one_line(printed, content):
    """Bytes that are no PDF in place of report.pdf, sealed again: one line naming it, no traceback."""
    (printed / REPORT / "report.pdf").write_bytes(content)
    write_outputs_manifest(printed / REPORT)
    problems = audit_study("demo", printed)
    assert any(p.startswith(str(printed / REPORT / "report.pdf")) for p in problems), problems
    record("forgeries", "report.pdf:not a pdf")
