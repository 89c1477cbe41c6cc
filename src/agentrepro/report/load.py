"""Read and validate `analysis/<study>/analysis.json` before anything is drawn.

The report trusts nothing it is given: each table row is checked for the columns of the analysis contract
(agentrepro.analysis.contract), their kinds, and rates being fractions in [0, 1] (a file written in percent
would otherwise print 7800%).
Every problem is a BadInput naming the file and the key path, e.g. `tables.verdicts[2].verdict`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from agentrepro.analysis import contract
from agentrepro.analysis.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from agentrepro.errors import BadInput
from agentrepro.reading import load_json

VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
PARITY_STATUS = ("pass", "fail", "not_run")

# Every table and column, with its kind, comes from the analysis contract. Required columns must be in every
# row; the other declared columns are checked where a row has them (an older analysis may lack them).
COLUMNS: dict[str, dict[str, str]] = {t.name: {c.name: c.kind for c in t.required} for t in contract.TABLES}
OTHER_COLUMNS: dict[str, dict[str, str]] = {
    t.name: {c.name: c.kind for c in t.columns if not c.required} for t in contract.TABLES
}


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(kind: str, value: Any) -> str | None:
    """None if `value` is of `kind`, else what was expected."""
    nullable = kind.endswith("?")
    kind = kind.rstrip("?")
    if value is None:
        return None if nullable else "a value (got null)"
    if kind == "str":
        return None if isinstance(value, str) else f"a string (got {value!r})"
    if kind == "int":
        return None if isinstance(value, int) and not isinstance(value, bool) else f"an integer (got {value!r})"
    if kind in ("num", "seconds", "share"):
        return None if _is_num(value) else f"a finite number (got {value!r})"
    if kind == "rate":
        return None if _is_num(value) and 0 <= value <= 1 else f"a fraction in [0, 1] (got {value!r})"
    if kind == "p":
        return None if _is_num(value) and 0 <= value <= 1 else f"a p-value in [0, 1] (got {value!r})"
    if kind == "seed":
        ok = (
            value == "all"
            or (isinstance(value, int) and not isinstance(value, bool))
            or (isinstance(value, str) and value.isdigit())
        )
        return None if ok else f'an integer seed or "all" (got {value!r})'
    if kind == "bool":
        return None if isinstance(value, bool) else f"true or false (got {value!r})"
    if kind == "verdict":
        return None if value in VERDICTS else f"one of {', '.join(VERDICTS)} (got {value!r})"
    if kind == "json":
        return None if isinstance(value, dict) else f"a JSON object (got {value!r})"
    raise ValueError(f"unknown column kind {kind!r}")  # the contract declares a kind this checker does not know


def validate(analysis: Any, path: str | Path) -> dict:
    """Check `analysis` against the contract; return it unchanged or raise BadInput naming the key path."""

    def bad(where: str, what: str) -> BadInput:
        return BadInput(f"expected {what}", path=path, where=where)

    if not isinstance(analysis, dict):
        raise bad("top level", "a JSON object")
    for key, typ in [
        ("study", str),
        ("settings", dict),
        ("tables", dict),
        ("notes", list),
        ("parity", list),
        ("provenance", dict),
    ]:
        if key not in analysis:
            raise bad(key, f"key '{key}' (missing)")
        if not isinstance(analysis[key], typ):
            raise bad(key, f"a {'JSON object' if typ is dict else 'list' if typ is list else 'string'}")
    settings = analysis["settings"]
    if not _is_num(settings.get("tolerance_pp")):
        raise bad("settings.tolerance_pp", "a number (percentage points)")
    if not _is_num(settings.get("alpha")) or not 0 < settings["alpha"] < 1:
        raise bad("settings.alpha", "a number between 0 and 1 (the significance level)")
    if "final_step" in settings and settings["final_step"] is not None and not isinstance(settings["final_step"], int):
        raise bad("settings.final_step", "an integer step")
    tables = analysis["tables"]
    for name, columns in COLUMNS.items():
        if name not in tables:
            raise bad(f"tables.{name}", f"table '{name}' (missing; an empty list if there is nothing)")
        rows = tables[name]
        if not isinstance(rows, list):
            raise bad(f"tables.{name}", "a list of row objects")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise bad(f"tables.{name}[{i}]", "a row object")
            for column in columns:
                if column not in row:
                    raise bad(f"tables.{name}[{i}].{column}", f"column '{column}' (missing)")
            for column, kind in {**columns, **OTHER_COLUMNS[name]}.items():
                if column not in row:
                    continue
                problem = _check(kind, row[column])
                if problem:
                    raise bad(f"tables.{name}[{i}].{column}", problem)
                if kind == "seed" and isinstance(row[column], str) and row[column].isdigit():
                    row[column] = int(row[column])  # a CSV-typed seed column ("0") is the seed 0
    for i, note in enumerate(analysis["notes"]):
        if not isinstance(note, str):
            raise bad(f"notes[{i}]", "a string")
    for i, item in enumerate(analysis["parity"]):
        if not isinstance(item, dict) or not isinstance(item.get("check"), str):
            raise bad(f"parity[{i}].check", "an object with a 'check' string")
        if item.get("status") not in PARITY_STATUS:
            raise bad(f"parity[{i}].status", f"one of {', '.join(PARITY_STATUS)} (got {item.get('status')!r})")
    certificate = analysis.setdefault("certificate", [])  # absent in analyses written before the parity certificate
    if not isinstance(certificate, list):
        raise bad("certificate", "a list of certificate entries")
    for i, item in enumerate(certificate):
        if not isinstance(item, dict) or item.get("status") not in PARITY_STATUS:
            raise bad(f"certificate[{i}].status", f"one of {', '.join(PARITY_STATUS)}")
        for key in ("method", "step", "detail"):
            if key not in item:
                raise bad(f"certificate[{i}].{key}", f"key '{key}' (missing)")
    prov = analysis["provenance"]
    if not isinstance(prov.get("runs", []), list):
        raise bad("provenance.runs", "a list of runs")
    for i, run in enumerate(prov.get("runs", [])):
        if not isinstance(run, dict):
            raise bad(f"provenance.runs[{i}]", "a run object")
        if not isinstance(run.get("attempts", []), list):
            raise bad(f"provenance.runs[{i}].attempts", "a list of attempts")
        if not isinstance(run.get("outputs", {}), dict):
            raise bad(f"provenance.runs[{i}].outputs", "an object {path: sha256}")
    _check_source_parity(prov.get("source_parity"), bad)
    return analysis


# provenance.source_parity (agentrepro.backends.sources.study_rows): one row per method; what each key must hold
SOURCE_ROW: dict[str, type | tuple[type, ...]] = {
    "method": str,
    "placement": str,
    "commit": (str, type(None)),
    "workdir": (str, type(None)),
    "files": list,
    "seeds": list,
    "unrecorded": list,
    "differences": list,
}
SOURCE_DIFFERENCE: dict[str, type | tuple[type, ...]] = {
    "seed": (int, str),
    "path": str,
    "pinned": str,
    "ran": (str, type(None)),
}


def _check_source_parity(rows: Any, bad) -> None:
    """The rows the report's Source parity section shows: absent (no lock), or objects of the shapes above."""
    if rows is None:
        return
    if not isinstance(rows, list):
        raise bad("provenance.source_parity", "a list of rows (one per method)")
    for i, row in enumerate(rows):
        where = f"provenance.source_parity[{i}]"
        if not isinstance(row, dict):
            raise bad(where, "a row object")
        for key, kind in SOURCE_ROW.items():
            if not isinstance(row.get(key), kind):
                raise bad(
                    f"{where}.{key}",
                    f"{'a string' if kind is str else 'a list' if kind is list else 'a string or null'} (got {row.get(key)!r})",
                )
        if row.get("status") not in ("pass", "fail"):
            raise bad(f"{where}.status", f"pass or fail (got {row.get('status')!r})")
        for j, diff in enumerate(row["differences"]):
            if not isinstance(diff, dict) or any(
                not isinstance(diff.get(k), kind) for k, kind in SOURCE_DIFFERENCE.items()
            ):
                raise bad(f"{where}.differences[{j}]", "an object {seed, path, pinned, ran (a blob or null)}")


def load_analysis(path: str | Path) -> dict:
    """Load and validate analysis.json; BadInput if it is missing, malformed or off-contract."""
    path = Path(path)
    data = load_json(path, missing="file not found (run `agentrepro analyze` for this study first)")
    return validate(data, path)
