"""What `agentrepro report STUDY` writes: reports/STUDY/report.html, report.pdf, provenance.html (every hash and the
whole lock, linked from the report and left out of its printed pages), figures/*.png, sealed.

Reads analysis/STUDY/analysis.json only (plus the hashes of the files beside it), embeds the audit result its
caller gives (`agentrepro.audit.audit_result`: the study audited up to its analysis), records the hash of every
analysis file it was rendered from (analysis.sha256, the link of the audit's chain from the report to the
analysis), and prints the page to PDF (`--pdf-engine auto`, the
default: headless Chromium when one is found, else WeasyPrint; `--pdf-engine chromium` or a named
`--chromium` that is missing is exit 1). The engine and its version are said on stderr and recorded in the
report's appendix. Everything is written and sealed (OUTPUTS.sha256) in a temporary directory first and
moved into place at the end, so a failure (bad analysis.json: exit 2) leaves any earlier report untouched
and a finished report is never unsealed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agentrepro import layout
from agentrepro.errors import BadInput
from agentrepro.fileio import (
    atomic_write_bytes,
    atomic_write_text,
    check_output_dir,
    make_dir,
    make_temp_dir,
    sha256_file,
)
from agentrepro.layout import locate
from agentrepro.report.load import load_analysis
from agentrepro.report.pdf import Engine, choose_engine, html_to_pdf
from agentrepro.report.render import PROVENANCE_PAGE, render_report
from agentrepro.seal import sums_text, write_outputs_manifest

REPORT_HTML = "report.html"
FIGURES = "figures"  # figures/<key>.png: every figure the page embeds, as files (Snakemake's --report reads them)
REPORT_PDF = "report.pdf"


def analysis_files(directory: Path) -> dict[str, str]:
    """{path relative to the root's parent of analysis/: sha256} for every file of the analysis directory."""
    base = directory.parent.parent
    return {
        p.relative_to(base).as_posix(): sha256_file(p)
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def write_report(
    study: str,
    root: Path,
    *,
    audit: dict,
    pdf: bool = True,
    chromium: str | None = None,
    engine: str = "auto",
    paper: str = "a4",
) -> tuple[Path, Engine | None]:
    """Render and write reports/STUDY/; returns that directory and the PDF engine used (None: no PDF).

    `study`: a slug or the path of the study's manifest (`agentrepro.layout.locate`). `audit`: the result the
    appendix shows (`agentrepro.audit.audit_result(study, root)`).
    """
    home = locate(study, root)
    check_output_dir(home.reports)
    printer = choose_engine(engine, chromium) if pdf else None  # before any work: a missing engine is known now
    source = home.analysis
    analysis = load_analysis(source / "analysis.json")
    if analysis["study"] != home.name:
        raise BadInput(
            f"expected study {home.name!r}, found {analysis['study']!r}", path=source / "analysis.json", where="study"
        )
    files = analysis_files(source)
    html, provenance, figures = render_report(
        analysis,
        audit=audit,
        files=files,
        paper=paper,
        pdf_engine=printer.version if printer else None,
    )

    out = home.reports
    staging = make_temp_dir(out.parent, prefix=f".{home.name}.")
    try:
        atomic_write_text(staging / REPORT_HTML, html)
        atomic_write_text(
            staging / PROVENANCE_PAGE, provenance
        )  # every hash and the whole lock, linked from the report
        # the analysis this report shows, sealed with it: `agentrepro audit` checks the analysis still hashes so
        atomic_write_text(staging / layout.REPORT_ANALYSIS_RECORD, sums_text(files))
        make_dir(staging / FIGURES)  # always there (a Snakemake directory() output), even with no figure
        for f in figures:
            atomic_write_bytes(staging / FIGURES / f"{f.key}.png", f.png)
        if printer:
            html_to_pdf(staging / REPORT_HTML, staging / REPORT_PDF, printer)
        write_outputs_manifest(staging)  # relative paths: the seal stays valid after the rename
        for p in [staging, *staging.rglob("*")]:  # readable like any published page (mkstemp/mkdtemp give 0600/0700)
            p.chmod(0o755 if p.is_dir() else 0o644)
        if out.exists():
            old = out.with_name(f".{home.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            staging.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out, printer
