"""`agentrepro report STUDY [--root DIR] [--no-pdf] [--pdf-engine E] [--paper P]`: the study's HTML and PDF report,
written and sealed by agentrepro.report.write."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentrepro.audit import audit_result
from agentrepro.layout import STUDY_HELP
from agentrepro.report.paged import PAPERS
from agentrepro.report.pdf import ENGINES
from agentrepro.report.write import write_report
from agentrepro.seal import OUTPUTS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", help=f"{STUDY_HELP}; reads analysis/STUDY/, writes reports/STUDY/")
    parser.add_argument("--root", default=".", help="directory holding analysis/ and reports/ (default: .)")
    parser.add_argument(
        "--chromium",
        default=None,
        help="Chromium executable for the PDF (default: $AGENTREPRO_CHROMIUM or chromium on PATH)",
    )
    parser.add_argument(
        "--pdf-engine",
        choices=ENGINES,
        default="auto",
        help="chromium: print the page with headless Chromium (error if missing); weasyprint: print it with "
        "WeasyPrint (no browser); auto (default): Chromium if found or named, else WeasyPrint",
    )
    parser.add_argument("--paper", choices=tuple(PAPERS), default="a4", help="page size of the PDF (default: a4)")
    parser.add_argument("--no-pdf", action="store_true", help="write only the HTML")


def run(args: argparse.Namespace) -> int:
    out, printer = write_report(
        args.study,
        Path(args.root),
        audit=audit_result(args.study, args.root),
        pdf=not args.no_pdf,
        chromium=args.chromium,
        engine=args.pdf_engine,
        paper=args.paper,
    )
    names = ["report.html"] + ([] if printer is None else ["report.pdf"]) + [OUTPUTS]
    print("\n".join(str(out / n) for n in names))
    if printer is None:
        print("agentrepro report: --no-pdf given: no report.pdf written", file=sys.stderr)
    else:
        why = " (no Chromium found)" if printer.name == "weasyprint" and args.pdf_engine == "auto" else ""
        print(f"agentrepro report: report.pdf ({args.paper}) printed by {printer.version}{why}", file=sys.stderr)
    return 0
