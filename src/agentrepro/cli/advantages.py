"""`agentrepro advantages`: add advantages to step rows (docs/design.md §3.5).

    agentrepro advantages --estimator E [options] IN.jsonl -o OUT.jsonl
    agentrepro advantages --cases CASES.jsonl -o OUT.jsonl

IN may be `-` (stdin) and OUT `-` (stdout). Rows come out in input order with `advantage` added and,
where the estimator defines them, `advantage_episode`, `advantage_step`, `episode_score`, `step_return`,
`graph_reward`, `distance`. A malformed row stops the command (exit 2) naming its line; nothing is written.

`--cases` replays parity cases: each input line is an object `{"params": {"estimator": ..., options...},
"rows": [step rows], ...}` (the format of the reference fixtures); each output line is the same object
with every row extended as above, so a whole fixture file is checked in one call.
`--diagnostics FILE` writes the graph diagnostics and component timings as JSON (one object per case).
"""

from __future__ import annotations

import argparse

from agentrepro.algorithms import ESTIMATORS, StepBatch, UnknownEstimator, estimate
from agentrepro.algorithms.spec import SPECS, all_options, option_help
from agentrepro.bounds import number
from agentrepro.errors import BadInput
from agentrepro.fileio import (
    STDIO,
    atomic_write_json,
    check_output_file,
    input_name,
    iter_input_jsonl,
    json_text,
    write_output_text,
)
from agentrepro.seal import refuse_study_file

STEP_ROW_SPECS = tuple(s for s in SPECS if s.step_rows)
OPTIONS = all_options(STEP_ROW_SPECS)
"""The flags: every option of an estimator that works on step rows (declared in algorithms/spec.py)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="IN.jsonl", help="step rows, one JSON object per line (- for stdin)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.jsonl", help="output rows (- for stdout)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--estimator", help="; ".join(f"{s.name}: {s.help}" for s in STEP_ROW_SPECS))
    mode.add_argument("--cases", action="store_true", help="IN holds parity cases {params, rows} (see above)")
    for option in OPTIONS:
        kind = number(option.low, option.high) if option.type is float else option.type  # `--gamma nan` names the flag
        parser.add_argument(
            "--" + option.name.replace("_", "-"),
            dest=option.name,
            type=kind,
            default=None,
            choices=option.choices or None,
            help=option_help(option, STEP_ROW_SPECS),
        )
    parser.add_argument("--diagnostics", metavar="FILE.json", help="write graph diagnostics and timings here")


def _check_options(name, options, source, where=None):
    try:
        ESTIMATORS.resolve(name, options)
    except UnknownEstimator as exc:
        raise BadInput(str(exc), path=source, where=where) from None
    except ValueError as exc:
        raise BadInput(str(exc), path=source, where=where) from None


def _compute(rows, source, name, options):
    batch = StepBatch.from_rows(rows, source=source)
    return estimate(batch, name, **options)


def _extend(rows, result) -> list[dict]:
    return [{**row, **extra} for row, extra in zip(rows, result.rows())]


def _report(result) -> dict:
    return {
        "estimator": result.estimator,
        "options": result.options,
        "rows": len(result.advantage),
        "diagnostics": result.diagnostics,
        "group_diagnostics": result.group_diagnostics,
        "timings": result.timings,
    }


def run(args: argparse.Namespace) -> int:
    options = {o.name: getattr(args, o.name) for o in OPTIONS if getattr(args, o.name) is not None}
    source = input_name(args.input)
    if args.output != STDIO:
        refuse_study_file(check_output_file(args.output, option="-o"), option="-o")
    if args.diagnostics:
        refuse_study_file(check_output_file(args.diagnostics, option="--diagnostics"), option="--diagnostics")
    out_lines: list[str] = []
    reports: list[dict] = []
    if args.cases:
        if options:
            raise BadInput(
                f"--cases takes the options from each case's params; do not also give --{next(iter(options)).replace('_', '-')}"
            )
        for number, case in iter_input_jsonl(args.input):
            where = f"line {number}"
            if (
                not isinstance(case, dict)
                or not isinstance(case.get("params"), dict)
                or not isinstance(case.get("rows"), list)
            ):
                raise BadInput(
                    "a case must be an object with 'params' (object) and 'rows' (list)", path=source, where=where
                )
            params = dict(case["params"])
            name = params.pop("estimator", None)
            if not isinstance(name, str):
                raise BadInput("params.estimator must be a string", path=source, where=where)
            _check_options(name, params, source, f"{where}: params")
            result = _compute(case["rows"], f"{source}: {where}: rows", name, params)
            out_lines.append(json_text({**case, "rows": _extend(case["rows"], result)}, path=args.output))
            reports.append({"line": number, "case": case.get("case"), **_report(result)})
    else:
        _check_options(args.estimator, options, None)
        numbered = list(iter_input_jsonl(args.input))
        result = _compute(numbered, source, args.estimator, options)
        out_lines = [json_text(r, path=args.output) for r in _extend([row for _, row in numbered], result)]
        reports.append(_report(result))
    text = "".join(line + "\n" for line in out_lines)
    write_output_text(args.output, text)
    if args.diagnostics:
        atomic_write_json(args.diagnostics, reports if args.cases else reports[0])
    return 0
