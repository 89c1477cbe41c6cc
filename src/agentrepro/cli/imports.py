"""`agentrepro import RECORDS... --format plain|relax|lm-eval --env ENV [--param K=V] --seeds RANGE --out DIR
[--study NAME] [--method M --seed K --step N] [--metric NAME [--filter NAME] [--task-field FIELD]]`.

Evaluations the harness did not launch (agentrepro.importing) become outcome rows against a task panel frozen
from the same environment: DIR/outcomes.jsonl, which `agentrepro analyze --outcomes` reads as it reads any, and
DIR/import.json, the import's record: every source file with its SHA-256 and number of records, each outcome row's
source record (file and line), the panel, the method x seed matrix (partial when a pair is missing), the fields the
sources did not carry, and what is not sealed. DIR/OUTPUTS.sha256 seals both. Nothing is written unless every
record matches: a bad record is one line naming its file and line, exit 2. `agentrepro audit --import DIR` derives
the rows again from the files (importing.imported.check_import).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agentrepro import attempts, seal
from agentrepro.bounds import SEED, STEP
from agentrepro.environments.registry import add_panel_options, panel_of_options
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_json, atomic_write_jsonl, check_output_dir, make_dir
from agentrepro.importing import READERS, import_records, lmeval
from agentrepro.importing.imported import IMPORT_RECORD
from agentrepro.layout import SLUG_RE, RunFiles
from agentrepro.lockfile import lock_sha256, manifest_of, read_lock


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("records", nargs="+", type=Path, help="the evaluation records to import")
    parser.add_argument("--format", choices=sorted(READERS), required=True, help="the tool that wrote them")
    panel = parser.add_argument_group("the panel the records are matched to: --env and --seeds, or --panel LOCK")
    add_panel_options(panel, seeds_help="the panel's task seeds: numbers and ranges, e.g. 10001-10128")
    panel.add_argument(
        "--panel",
        type=Path,
        metavar="LOCK",
        help="a study's lock: its frozen task panel (an ALFWorld panel of games, with their task types) and env",
    )
    parser.add_argument("--study", default="imported", help="study name in the rows (default imported)")
    group = parser.add_argument_group("the run, for records that do not name it (relax; a plain file's missing column)")
    group.add_argument("--method", help="method name")
    group.add_argument("--seed", type=SEED, help="training seed")
    group.add_argument("--step", type=STEP, help="the training step evaluated")
    lmeval = parser.add_argument_group("lm-eval's samples (--format lm-eval)")
    lmeval.add_argument("--metric", help="the metric that is the success, 0 or 1 per document (acc, exact_match, ...)")
    lmeval.add_argument("--filter", help="the filter whose lines are read (needed where a file holds several)")
    lmeval.add_argument(
        "--task-field", help="the field of each sample's doc that names the panel's task (default task_id; a.b: nested)"
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory (outcomes.jsonl, import.json)")


def frozen_panel(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """({name, params, and with --panel the lock's path and hash}, the panel): frozen here from the environment's
    seeds, or the one a study's lock froze from its data (verified: a hand-edited lock is refused)."""
    if args.panel is not None:
        if args.env is not None or args.seeds is not None or args.param:
            raise BadInput("give either --panel LOCK or --env with --seeds, not both", where="--panel")
        lock = read_lock(args.panel)
        env = manifest_of(lock, args.panel)["env"]
        frozen = {"lock": str(args.panel), "lock_sha256": lock_sha256(lock)}
        return {"name": env["name"], "params": env.get("params") or {}, **frozen}, lock["task_panel"]
    for option in ("env", "seeds"):
        if getattr(args, option) is None:
            raise BadInput("required unless --panel LOCK gives the panel", where=f"--{option}")
    params, panel = panel_of_options(args.env, args.param, args.seeds)
    return {"name": args.env, "params": params}, panel


def run(args: argparse.Namespace) -> int:
    if not SLUG_RE.match(args.study):
        raise BadInput(f"expected a name of letters, digits and . _ -, got {args.study!r}", where="--study")
    out = check_output_dir(args.out, option="--out")
    env, panel = frozen_panel(args)
    files = [str(p) for p in args.records]
    if len({Path(p).resolve() for p in files}) < len(files):
        raise BadInput("a records file is given twice", where="RECORDS")
    given = {"method": args.method, "seed": args.seed, "step": args.step}
    options = {key: getattr(args, key) for key in lmeval.OPTIONS}
    for key, value in options.items():
        if value is not None and args.format != "lm-eval":
            raise BadInput("goes with --format lm-eval", where=f"--{key.replace('_', '-')}")
        if value is not None:
            given[key] = value
    rows, record = import_records(
        files, fmt=args.format, given=given, env=env, panel=panel, study=args.study, command=attempts.command_line()
    )
    matrix, missing = record["matrix"], record["partial"]
    seeds = {seed for by_seed in matrix.values() for seed in by_seed}
    make_dir(out)
    (out / seal.OUTPUTS).unlink(missing_ok=True)
    atomic_write_jsonl(out / RunFiles.OUTCOMES, rows)
    atomic_write_json(out / IMPORT_RECORD, record)
    seal.write_outputs_manifest(out)
    shown = f"; partial: no rows for {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}" if missing else ""
    print(
        f"{out / RunFiles.OUTCOMES}: {len(rows)} episode(s) of {len(matrix)} method(s) x {len(seeds)} seed(s) from "
        f"{len(files)} file(s){shown}"
    )
    return 0
