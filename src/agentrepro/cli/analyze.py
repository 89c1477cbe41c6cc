"""`agentrepro analyze STUDY [--root DIR]` or `agentrepro analyze --outcomes FILE... [--reference REF.yaml]
[--tolerance-pp 3] [--claim "a > b" | "a == b ± 3pp"]... [--partial] --out DIR`: statistics, verdicts, diagnostics and overhead (docs/design.md §3.6)."""

from __future__ import annotations

import argparse

from agentrepro.analysis.study import Settings, analyze_outcomes, analyze_study
from agentrepro.bounds import STEP, number
from agentrepro.errors import BadInput
from agentrepro.fileio import check_output_dir
from agentrepro.layout import STUDY_HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "study", nargs="?", help=f"{STUDY_HELP}; reads its lock and runs/STUDY/, writes analysis/STUDY/"
    )
    parser.add_argument("--root", default=".", help="directory holding manifests/, runs/ and analysis/ (default: .)")
    parser.add_argument(
        "--outcomes", nargs="+", metavar="FILE", help="analyse these outcomes.jsonl files instead of a study"
    )
    parser.add_argument("--reference", metavar="REF.yaml", help="paper values to compare with (with --outcomes)")
    parser.add_argument(
        "--tolerance-pp",
        type=number(0, 100, low_open=True),
        default=Settings.tolerance_pp,
        help="equivalence margin in percentage points (default %(default)s)",
    )
    parser.add_argument(
        "--alpha",
        type=number(0, 1, low_open=True, high_open=True),
        default=Settings.alpha,
        help="significance level (default %(default)s)",
    )
    parser.add_argument(
        "--claim",
        action="append",
        default=[],
        metavar='"a > b"',
        help='declared claim, repeatable: "a > b", "a < b", or an equivalence "a == b ± 3pp" (also "+- 3 pp"); '
        "method names may carry @backend",
    )
    parser.add_argument("--final-step", type=STEP, help="step compared with the paper (default: the last shared step)")
    parser.add_argument(
        "--partial",
        action="store_true",
        help="accept a method x seed matrix with gaps (with --outcomes: imported runs that do not cover every "
        "pair); the notes and the report list them",
    )
    parser.add_argument("--out", metavar="DIR", help="output directory (required with --outcomes)")


def run(args: argparse.Namespace) -> int:
    if args.outcomes:
        if args.study:
            raise BadInput("give either STUDY or --outcomes, not both")
        if not args.out:
            raise BadInput("--out DIR is required with --outcomes")
        check_output_dir(args.out, option="--out")
        out = analyze_outcomes(
            args.outcomes,
            args.out,
            reference=args.reference,
            tolerance_pp=args.tolerance_pp,
            claims=args.claim,
            alpha=args.alpha,
            final_step=args.final_step,
            partial=args.partial,
        )
    else:
        if not args.study:
            raise BadInput("give a STUDY or --outcomes FILE... --out DIR")
        if args.reference or args.claim or args.out or args.partial:
            raise BadInput(
                "--reference, --claim, --partial and --out go with --outcomes; a study takes them from its manifest "
                "and runs every seed of every method"
            )
        out = analyze_study(args.study, root=args.root)
    print(out)
    return 0
