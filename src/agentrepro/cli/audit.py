"""`agentrepro audit STUDY [--root DIR] [--require STAGE] [--re-eval [--tasks N [--tasks-seed S]]]` or
`agentrepro audit --bundle FILE.tar.gz [--require STAGE] [--allowed-signers FILE] [--re-eval [--tasks N ...]]`, or
`agentrepro audit --import DIR` (an `agentrepro import` folder, agentrepro.importing.check_import).

Prints one line per problem (each naming its path) and exits 1 if there is any; prints one summary
line and what was checked, and exits 0 when everything matches the lock. A bundle's short digest and its
signature (verified whenever present; against `--allowed-signers` when given, which then requires one) are printed too. `--require` says how far the study must have got
(default `report`: every planned run and evaluation, the analysis and the report); a study audited before
its analysis exists says so explicitly with `--require runs`. `--re-eval` plays each run's final checkpoint again
and compares the outcomes row by row (audit/reeval.py): the outcomes themselves, not only their hashes, checked;
`--tasks N` plays N tasks drawn at random (the line of each run names them and the seed that draws them again).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro.audit.bundle import add_max_file_option, max_file_bytes, verify_bundle
from agentrepro.audit.card import Findings, verdict_card
from agentrepro.audit.code import code_differences
from agentrepro.audit.failures import failures_of
from agentrepro.audit.reeval import TaskSample, kept_checkpoints, re_evaluate
from agentrepro.audit.result import STAGES, coverage
from agentrepro.audit.study import audit_study
from agentrepro.bounds import MAX_TASKS, SEED, integer
from agentrepro.errors import BadInput
from agentrepro.importing import check_import
from agentrepro.importing.imported import IMPORT_RECORD, UNSEALED
from agentrepro.layout import STUDY_HELP, locate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", nargs="?", help=STUDY_HELP)
    parser.add_argument(
        "--root", default=".", help="root directory holding manifests/, runs/, analysis/, reports/ (default: .)"
    )
    parser.add_argument("--bundle", metavar="FILE", help="verify a bundle written by `agentrepro bundle`, offline")
    parser.add_argument(
        "--import",
        dest="imported",
        metavar="DIR",
        help="check an `agentrepro import` folder: its seal, each source file's hash, every row derived again",
    )
    parser.add_argument(
        "--allowed-signers",
        metavar="FILE",
        help="with --bundle: the bundle must be signed by a principal of this OpenSSH allowed-signers file "
        "(`ssh-keygen -Y verify`); without it a signature is checked only for the key it names",
    )
    parser.add_argument(
        "--require",
        choices=STAGES,
        default="report",
        help="the last stage whose outputs must all exist: lock, runs (every planned run and evaluation), "
        "analysis, report (default); outputs of later stages are checked whenever they exist",
    )
    add_max_file_option(
        parser, "--bundle: refuse, before extracting it, a member larger than this (what `bundle` packs)"
    )
    parser.add_argument(
        "--re-eval",
        action="store_true",
        help="play each run's final checkpoint again on the frozen panel and compare outcome by outcome "
        "(the builtin backend's checkpoints, and Hugging Face checkpoints a chat server evaluated, where the study "
        "or bundle holds them)",
    )
    parser.add_argument(
        "--tasks",
        type=integer(1, MAX_TASKS),
        help="with --re-eval: N tasks of the panel drawn at random, the same for every run (default: all)",
    )
    parser.add_argument(
        "--tasks-seed",
        type=SEED,
        help="with --tasks: the seed of the draw, to play a sample again (default: drawn afresh and printed)",
    )


def run(args: argparse.Namespace) -> int:
    if sum(x is not None for x in (args.study, args.bundle, args.imported)) != 1:
        raise BadInput("give one of a STUDY, --bundle FILE or --import DIR", where="arguments")
    if args.imported is not None:
        return run_import(args)
    if args.allowed_signers and not args.bundle:
        raise BadInput("--allowed-signers goes with --bundle FILE", where="arguments")
    if args.tasks is not None and not args.re_eval:
        raise BadInput("--tasks goes with --re-eval", where="arguments")
    if args.tasks_seed is not None and args.tasks is None:
        raise BadInput("--tasks-seed goes with --tasks", where="arguments")
    sample = TaskSample.drawn(args.tasks, args.tasks_seed) if args.tasks is not None else None
    if args.bundle:
        verified = verify_bundle(
            args.bundle,
            require=args.require,
            max_file_bytes=max_file_bytes(args),
            allowed_signers=args.allowed_signers,
            re_eval=args.re_eval,
            sample=sample,
        )
        subject, problems, differences = args.bundle, verified.problems, verified.differences
        failures, replay, kept = verified.failures, verified.re_evaluation, verified.kept
        signature: str | None = verified.signature
        if verified.digest:
            print(f"bundle digest {verified.digest}; {verified.signature}")
    else:
        home = locate(args.study, args.root)
        if not home.manifest.is_file() and not home.lock.is_file():
            raise BadInput(f"no manifest or lock for study {args.study!r}", path=home.manifest)
        subject, problems = args.study, audit_study(args.study, args.root, require=args.require)
        differences = code_differences(args.study, args.root)
        failures = failures_of(args.study, args.root) if not problems else []
        replay, kept, signature = None, kept_checkpoints(args.study, args.root), None
        if args.re_eval:
            replay = re_evaluate(args.study, args.root, sample=sample)
            problems += replay.problems
    for line in replay.lines if replay else []:
        print(f"re-evaluation: {line}")
    for problem in problems:
        print(problem)
    for line in differences:
        print(f"differs from the lock: {line}")
    for line in failures:
        print(f"the study's own failure: {line}")
    found = Findings(len(problems), len(differences), len(failures), kept, signature, replay)
    for line in verdict_card(found):
        print(f"card: {line}")
    if problems:
        print(f"audit {subject}: {len(problems)} problem(s)")
        return 1
    scope = "" if args.require == "report" else f" (required up to: {args.require})"
    own = f"; the study itself reports {len(failures)} failure(s), above: results, not tampering" if failures else ""
    print(f"audit {subject}: OK: the lock, the manifest and every planned and sealed output match{scope}{own}")
    print(f"checked: {coverage(args.require)}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    """`audit --import DIR`: what can be checked of outcomes the harness did not produce, and what cannot."""
    if args.re_eval or args.allowed_signers:
        raise BadInput("--re-eval and --allowed-signers do not go with --import (no checkpoint, no bundle)")
    folder = Path(args.imported)
    if not (folder / IMPORT_RECORD).is_file():
        raise BadInput(f"no {IMPORT_RECORD}: not a folder `agentrepro import` wrote", path=folder)
    problems = check_import(folder)
    for problem in problems:
        print(problem)
    for reason in UNSEALED:
        print(f"not sealed: {reason}")
    if problems:
        print(f"audit {folder}: {len(problems)} problem(s)")
        return 1
    print(f"audit {folder}: OK: every source file is as imported and every outcome row follows from its record")
    return 0
