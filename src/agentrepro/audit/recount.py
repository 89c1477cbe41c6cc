"""The recount: what a study says it measured, recomputed from its raw outcomes and compared, value by value.

Seals and recorded hashes prove that nothing changed after it was written; they cannot prove that what was
written follows from the outcomes (an edited outcome whose seals and recorded hashes were all recomputed passes
them). The analysis is deterministic, so the audit recomputes it (`agentrepro.analysis.study.study_analysis`, the
very code `analyze` runs) and compares:

* `check_counts`: the counts each evaluation's provenance records (`episodes`, `successes` of its last attempt that
  ended ok) against the rows of its outcomes.jsonl;
* `check_analysis_files`: every file of analysis/<study>/: each cell of each CSV, every value of analysis.json (its
  tables, verdicts, claims, bottom line, notes, parity checks, certificate and provenance) and every row of
  outcomes.parquet, against the recomputation;
* `check_report_values` (report.py): every value report.html prints from the analysis, against the recomputation.

Numbers agree when equal within a relative 1e-9 (another machine's floating point may differ in the last bits);
everything else must be equal. Each disagreement is one line naming the file, where in it, what it says and what
the outcomes give; at most EXAMPLES per file, then a count of the rest.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from agentrepro.analysis import contract
from agentrepro.analysis.load import COLUMNS
from agentrepro.analysis.study import ANALYSIS_JSON, OUTCOMES_PARQUET, Analysis, study_analysis
from agentrepro.audit.tree import EXAMPLES, Tree, load_object
from agentrepro.errors import BadInput, Failure
from agentrepro.layout import RunFiles
from agentrepro.reading import read_jsonl

REL_TOL, ABS_TOL = 1e-9, 1e-12
RECOMPUTED = "recomputed from the outcomes"


def same(a: Any, b: Any) -> bool:
    """Equal values; numbers (not booleans) within REL_TOL / ABS_TOL."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if numbers:
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def shown(value: Any) -> str:
    """A value in a problem line: floats to 6 significant digits, long text cut."""
    if isinstance(value, float):
        return f"{value:.6g}"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 100 else text[:97] + "..."


def shown_pair(was: Any, now: Any) -> tuple[str, str]:
    """Both values for a problem line; of two long texts, from shortly before where they start to differ."""
    if isinstance(was, str) and isinstance(now, str) and max(len(was), len(now)) > 100:
        start = next((i for i, (x, y) in enumerate(zip(was, now)) if x != y), min(len(was), len(now)))
        start = max(0, start - 30)
        lead = "..." if start else ""
        return lead + shown(was[start:]).strip("'"), lead + shown(now[start:]).strip("'")
    return shown(was), shown(now)


def differences(recorded: Any, recomputed: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    """(where, recorded, recomputed) of every value that differs, walking objects and lists alike."""
    if isinstance(recorded, dict) and isinstance(recomputed, dict):
        for key in list(recomputed) + [k for k in recorded if k not in recomputed]:
            here = f"{where}.{key}" if where else str(key)
            if key not in recorded:
                yield here, "(absent)", recomputed[key]
            elif key not in recomputed:
                yield here, recorded[key], "(absent)"
            else:
                yield from differences(recorded[key], recomputed[key], here)
    elif isinstance(recorded, list) and isinstance(recomputed, list):
        if len(recorded) != len(recomputed):
            yield where, f"{len(recorded)} entries", f"{len(recomputed)} entries"
        for i, (x, y) in enumerate(zip(recorded, recomputed)):
            yield from differences(x, y, f"{where}[{i}]")
    elif not same(recorded, recomputed):
        yield where, recorded, recomputed


def _row_name(table: str, row: dict) -> str:
    """'(method grpo, step 150)': the row's key columns (agentrepro.analysis.contract)."""
    key = contract.BY_NAME[table].key if table in contract.BY_NAME else ()
    return "(" + ", ".join(f"{k} {row.get(k)}" for k in key) + ")" if key else ""


def _limited(path: Path, lines: list[str]) -> list[str]:
    return lines[:EXAMPLES] + (
        [f"{path}: and {len(lines) - EXAMPLES} more value(s) that differ from the recomputation"]
        if len(lines) > EXAMPLES
        else []
    )


def check_document(path: Path, recorded: dict, recomputed: dict) -> list[str]:
    """analysis.json against its recomputation (see the module docstring)."""
    lines = []
    for where, was, now in differences(recorded, recomputed, ""):
        parts = where.split(".")
        label = ""
        if len(parts) > 1 and parts[0] == "tables" and "[" in parts[1]:
            table, index = parts[1].split("[", 1)
            rows = recomputed.get("tables", {}).get(table) or []
            i = int(index.split("]")[0])
            label = " " + _row_name(table, rows[i]) if i < len(rows) and isinstance(rows[i], dict) else ""
        was, now = shown_pair(was, now)
        lines.append(f"{path}: {where}{label} is {was}, {RECOMPUTED}: {now}")
    return _limited(path, lines)


def _cell(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def check_csv(path: Path, recomputed: bytes, table: str) -> list[str]:
    """One CSV of the analysis against its recomputed bytes, cell by cell (numbers within tolerance)."""
    try:
        have = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return [f"{path}: unreadable ({type(exc).__name__})"]
    want = list(csv.reader(io.StringIO(recomputed.decode("utf-8"))))
    if not have or have[0] != want[0]:
        return [f"{path}: columns {', '.join(have[0]) if have else '(none)'}; {RECOMPUTED}: {', '.join(want[0])}"]
    header, lines = want[0], []
    if len(have) != len(want):
        lines.append(f"{path}: {len(have) - 1} rows, {RECOMPUTED}: {len(want) - 1}")
    for number, (row, expected) in enumerate(zip(have[1:], want[1:]), start=2):
        named = _row_name(table, dict(zip(header, expected)))
        for column, was, now in zip(header, row, expected):
            if was != now and not same(_cell(was), _cell(now)):
                lines.append(
                    f"{path}: line {number} {named} {column} is {was or '(empty)'}, {RECOMPUTED}: {now or '(empty)'}"
                )
    return _limited(path, lines)


def check_parquet(path: Path, recomputed: pd.DataFrame) -> list[str]:
    """outcomes.parquet against the outcome rows the analysis read."""
    try:
        have = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises its own error types for a damaged file
        return [f"{path}: unreadable ({type(exc).__name__})"]
    want = recomputed[COLUMNS].reset_index(drop=True)
    if list(have.columns) != COLUMNS or len(have) != len(want):
        return [
            f"{path}: {len(have)} rows of columns {', '.join(map(str, have.columns))}; the outcomes hold {len(want)} rows"
        ]
    differ = ~(have.astype(str) == want.astype(str)).all(axis=1)
    if not differ.any():
        return []
    first = int(differ.to_numpy().nonzero()[0][0])
    columns = [c for c in COLUMNS if str(have.at[first, c]) != str(want.at[first, c])]
    return [
        f"{path}: {int(differ.sum())} row(s) differ from the outcomes, the first at row {first} "
        f"({', '.join(f'{c} is {have.at[first, c]}, {RECOMPUTED}: {want.at[first, c]}' for c in columns)})"
    ]


def check_analysis_files(analysis_dir: Path, analysis: Analysis) -> list[str]:
    """Every file of analysis/<study>/ against `analysis`, the recomputation: each file the analysis writes is there and
    equal to it, and no other file is (a file added or removed and the folder sealed again shows here)."""
    found: list[str] = []
    payloads = analysis.files()
    present = {p.name for p in analysis_dir.iterdir() if p.is_file() or p.is_symlink()}
    found += [
        f"{analysis_dir / name}: a stray file: the analysis writes no such file (added after it ran?)"
        for name in sorted(present - set(payloads) - {RunFiles.OUTPUTS})
    ]
    found += [
        f"{analysis_dir / name}: missing: the analysis writes it (removed after it ran?)"
        for name in sorted(set(payloads) - present)
    ]
    for table in contract.TABLES:
        path = analysis_dir / table.file
        if path.is_file() and not path.is_symlink():
            found += check_csv(path, payloads[table.file], table.name)
    path = analysis_dir / ANALYSIS_JSON
    if path.is_file() and not path.is_symlink():
        recorded, problem = load_object(path)
        found += [problem] if recorded is None else check_document(path, recorded, analysis.document())
    path = analysis_dir / OUTCOMES_PARQUET
    if path.is_file() and not path.is_symlink():
        found += check_parquet(path, analysis.outcomes)
    return found


def recompute(study: str, root: Path, analysis_dir: Path) -> tuple[Analysis | None, list[str]]:
    """(the analysis recomputed from the study's runs, []) or (None, one problem line saying why it cannot be)."""
    try:
        return study_analysis(study, root), []
    except (BadInput, Failure) as exc:
        return None, [f"{analysis_dir}: cannot be recomputed from the runs, so nothing in it can be vouched for: {exc}"]
    except (
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        OSError,
    ) as exc:  # inputs the analysis does not name a file for
        return None, [
            f"{analysis_dir}: cannot be recomputed from the runs, so nothing in it can be vouched for "
            f"({type(exc).__name__}: {exc})"
        ]


def _outcomes_of(provenance: Path) -> Path:
    """The outcomes a provenance.json's counts describe: beside it (an evaluation), or a warm start's step-0 evaluation."""
    beside = provenance.parent / RunFiles.OUTCOMES
    return beside if beside.exists() else provenance.parent / RunFiles.EVAL / "step0" / RunFiles.OUTCOMES


def check_counts(tree: Tree) -> list[str]:
    """Every provenance.json under the runs whose last ok attempt records `episodes` and `successes` against the rows
    of the outcomes it describes (see the module docstring)."""
    found = []
    for prov in sorted(p for p in tree.files if p.name == RunFiles.PROVENANCE):
        doc, _ = load_object(prov)
        if doc is None:
            continue  # reported by the provenance check
        done = [a for a in doc.get("attempts") or [] if isinstance(a, dict) and a.get("status") == "ok"]
        if not done or "episodes" not in done[-1]:
            continue
        outcomes = _outcomes_of(prov)
        if outcomes not in tree.files:
            continue  # reported as missing
        try:
            rows = read_jsonl(outcomes)
        except (BadInput, OSError):
            continue  # reported by the outcomes check
        counted = (len(rows), sum(1 for r in rows if isinstance(r, dict) and r.get("success") == 1))
        recorded = (done[-1].get("episodes"), done[-1].get("successes"))
        if not all(same(a, b) for a, b in zip(recorded, counted)):
            found.append(
                f"{prov}: attempt {done[-1].get('number')} records {shown(recorded[1])} successes of {shown(recorded[0])} "
                f"episodes; {outcomes.name} holds {counted[1]} of {counted[0]}"
            )
    return found
