"""The `agentrepro` command: one sub-command per verb, each in its own module, agentrepro/cli/<verb>.py.

A verb module provides `add_arguments(parser)` and `run(args) -> int`, and calls the part that owns the work. Modules are imported only when
their verb is used, so `agentrepro --help` and light verbs stay fast (no torch import).
Exit status: 0 success, 2 bad input (one line on stderr), 1 failure (docs/design.md §3.7), 130 interrupted, 143
terminated (SIGTERM, where the verb turns it into an exception).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from agentrepro import __version__
from agentrepro.errors import BadInput, Failure
from agentrepro.process import Terminated
from agentrepro.reading import check_string

# verb -> one-line help; the verb's module is agentrepro/cli/<verb>.py (`module_of`)
VERBS: dict[str, str] = {
    "freeze": "resolve a study manifest into an immutable lock",
    "audit": "check that runs, analysis and report match the lock",
    "bundle": "pack everything a reviewer needs into one archive",
    "resolve": "write the resolved config of one method x seed",
    "warmstart": "the builtin trainer's warm start of one seed, shared by its methods",
    "train": "train one method x seed into a run directory",
    "node": "run a worker node of a training over several SLURM nodes (the training's job starts it on each)",
    "eval": "evaluate one checkpoint of a run on the frozen task panel",
    "command": "show the programs a job would run (before or after freezing)",
    "preflight": "check what each job will demand (Ray ports, CPUs, GPUs, batch sizes) before queueing",
    "images": "prepare the study's container images on this host before its jobs run",
    "rehearse": "run one framework job offline on this machine up to its first use of the GPUs",
    "status": "where a study stands: every job done, running, failed or pending, and the time left",
    "import": "turn evaluation records other tools wrote into outcome rows (not sealed)",
    "analyze": "paired statistics, verdicts, diagnostics and overhead",
    "report": "render the HTML and PDF report of a study",
    "advantages": "add advantages to step rows (JSONL)",
    "gae": "token-level (masked) GAE over sequences (JSONL)",
    "env": "show, replay and play the text environments",
}


MODULES = {"import": "imports"}  # a verb that is a Python keyword lives under another name


def module_of(verb: str) -> str:
    """Where a verb lives: agentrepro/cli/<verb>.py, its arguments and its run, calling the part that owns the work."""
    return f"{__name__}.{MODULES.get(verb, verb)}"


def build_parser(verbs: dict[str, str] = VERBS, argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrepro", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"agentrepro {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    # Only the verb being run is imported; the others are listed with their help line.
    wanted = next((a for a in (argv or []) if not a.startswith("-")), None)
    for verb, help_line in verbs.items():
        p = sub.add_parser(verb, help=help_line, description=help_line)
        if verb == wanted:
            module = importlib.import_module(module_of(verb))
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv, start=1):  # bytes that are not UTF-8 arrive as lone surrogates (surrogate escapes)
        option = (
            arg.split("=", 1)[0]
            if arg.startswith("-")
            else (argv[i - 2] if i > 1 and argv[i - 2].startswith("-") else None)
        )
        try:
            check_string(arg, where=f"argument {i}" + (f" ({option[:40]})" if option else ""))
        except BadInput as exc:
            print(f"agentrepro: error: {exc}: give UTF-8 text without control characters", file=sys.stderr)
            return 2
    parser = build_parser(argv=argv)
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except BadInput as exc:
        print(f"agentrepro {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    except Failure as exc:
        print(f"agentrepro {args.verb}: failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"agentrepro {args.verb}: interrupted", file=sys.stderr)
        return 130
    except Terminated as exc:  # a verb that turns SIGTERM into an exception and keeps no attempt record of its own
        print(f"agentrepro {args.verb}: terminated ({exc})", file=sys.stderr)
        return 143


if __name__ == "__main__":
    raise SystemExit(main())
