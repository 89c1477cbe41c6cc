"""Read outcome files (docs/design.md §3.4) into one table, validating every row against the outcomes schema.

`read_outcomes(paths) -> pandas.DataFrame` with one row per evaluation episode and the §3.4 columns,
plus `_file` and `_line` (where the row came from, used by error messages; dropped before writing).
Files are parsed by Arrow's JSON reader and checked with vectorised tests; any file that is unusual, and
any file holding a failing row, goes through Python's json with a jsonschema check of every row against
workflow/schemas/outcomes.schema.json, so that the error names the file, the line and the key exactly as
the schema says. An empty file is an error, never a silently smaller denominator.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.json as pa_json

from agentrepro import schema
from agentrepro.bounds import MAX_MAGNITUDE, check_magnitude
from agentrepro.errors import BadInput
from agentrepro.outcomes import FIELDS
from agentrepro.reading import decode, iter_jsonl, read_bytes

COLUMNS = list(FIELDS)  # outcomes.jsonl's fields, in the order its writer and the schema give them
KEY = ["method", "seed", "step", "task_id", "episode"]
_INT_COLUMNS = ["seed", "step", "episode", "success", "turns", "tokens"]
_STR_COLUMNS = ["study", "method", "task_id", "task_hash", "category"]
_COLSET = frozenset(COLUMNS)
_LONG_NUMBER = re.compile(rb"\d{19,}")


def check_row(row: Any, path: str | os.PathLike, line: int) -> None:
    """Raise BadInput naming file, line and key when `row` does not match the outcomes schema."""
    errors = sorted(schema.validator("outcomes.schema.json").iter_errors(row), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        key = ".".join(str(p) for p in err.absolute_path) or "(row)"
        raise BadInput(f"key {key!r}: {err.message}", path=path, where=f"line {line}")


_ARROW_TYPES = {
    **dict.fromkeys(_INT_COLUMNS, ("int64",)),
    **dict.fromkeys(_STR_COLUMNS, ("string", "large_string")),
    "reward": ("int64", "double"),
}


def _fast_table(path: Path) -> pa.Table | None:
    """The file parsed by Arrow's JSON reader, or None when the exact (slow) path must decide.

    None whenever anything is unusual: a parse error or type conflict, blank lines (line numbers would
    shift), a missing key (nulls), or a column whose type is not the schema's (bools, strings for numbers).
    """
    data = read_bytes(path)
    decode(data, path=path)  # not UTF-8: refused here with its line
    if b"NaN" in data or b"Infinity" in data or b"\\u" in data or _LONG_NUMBER.search(data):
        return (
            None  # tokens, escapes and 64-bit overflows Arrow accepts but our contract does not: the exact path decides
        )
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    try:
        table = pa_json.read_json(pa.BufferReader(data))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows == 0 or table.num_rows != lines or not _COLSET.issubset(table.column_names):
        return None
    table = table.select(COLUMNS)
    for name, column in zip(COLUMNS, table.columns):
        if column.null_count or str(column.type) not in _ARROW_TYPES[name]:
            return None
    return table


def _slow_table(path: Path) -> pa.Table:
    """Parse with Python's json and check every row with jsonschema: errors name the line and key."""
    rows = []
    for number, obj in iter_jsonl(path):
        if not isinstance(obj, dict):
            raise BadInput("expected a JSON object per line", path=path, where=f"line {number}")
        check_row(obj, path, number)
        rows.append({c: obj[c] for c in COLUMNS} | {"_line": number})
    if not rows:
        raise BadInput("empty outcomes file: no evaluation episodes", path=path)
    return pa.Table.from_pylist(rows)


def _normalise(table: pa.Table, lines: np.ndarray) -> pa.Table:
    columns = [
        table.column(c).cast(pa.float64() if c == "reward" else pa.int64() if c in _INT_COLUMNS else pa.string())
        for c in COLUMNS
    ]
    return pa.Table.from_arrays([*columns, pa.array(lines, pa.int64())], names=[*COLUMNS, "_line"])


def _first_bad_row(frame: pd.DataFrame) -> int | None:
    """Index of the first row failing a vectorised version of the schema's checks, or None.

    An integer column parsed by pandas as int64 holds only integers (a bool, float or string would make
    it object or float); only such columns are compared numerically.
    """
    ok = np.ones(len(frame), dtype=bool)
    for column in _INT_COLUMNS:
        values = frame[column]
        if values.dtype.kind == "i":
            ok &= values.to_numpy() >= 0
        else:
            ok &= values.map(lambda v: type(v) is int and v >= 0).to_numpy(bool)
    ok &= frame["success"].isin([0, 1]).to_numpy(bool)
    for column in _STR_COLUMNS:
        values = frame[column]
        if values.dtype != object and pd.api.types.is_string_dtype(values):  # every value a str (or missing)
            ok &= (values.str.len() > 0).fillna(False).to_numpy(bool)
        else:
            ok &= values.map(lambda v: type(v) is str and len(v) > 0).to_numpy(bool)
    hashes = frame["task_hash"]
    if hashes.dtype != object and pd.api.types.is_string_dtype(hashes):
        ok &= hashes.str.fullmatch(r"[0-9a-f]{64}").fillna(False).to_numpy(bool)
    reward = frame["reward"]
    if reward.dtype.kind not in "if":
        ok &= reward.map(lambda v: type(v) in (int, float) and check_magnitude(v)).to_numpy(bool)
    else:
        ok &= np.abs(reward.to_numpy(dtype=float)) <= MAX_MAGNITUDE  # NaN compares False
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if bad.size else None


def read_outcomes(paths: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """All rows of the given outcomes.jsonl files, schema-checked; see the module docstring.

    Files are parsed by Arrow's JSON reader when they are plainly well-typed and by Python's json with
    a jsonschema check per row otherwise; value checks then run on all rows at once, and a failing row
    sends its file through the exact path so that the error names the file, line and key.
    """
    if not paths:
        raise BadInput("no outcomes files given")
    files_read = [Path(p) for p in paths]
    tables = []
    for path in files_read:
        if not path.is_file():
            raise BadInput("outcomes file not found", path=path)
        fast = _fast_table(path)
        if fast is not None:
            tables.append(_normalise(fast, np.arange(1, fast.num_rows + 1)))
        else:
            slow = _slow_table(path)
            tables.append(_normalise(slow, slow.column("_line").to_numpy()))
    counts = [t.num_rows for t in tables]
    frame = pa.concat_tables(tables).to_pandas()
    files = np.repeat(np.arange(len(files_read)), counts)
    bad = _first_bad_row(frame)
    if bad is not None:
        path = files_read[files[bad]]
        _slow_table(path)  # raises with the exact line and key
        raise BadInput("row does not match the outcomes schema", path=path, where=f"line {frame['_line'].iloc[bad]}")
    frame["_file"] = pd.Categorical.from_codes(files, categories=[str(p) for p in files_read]).astype(object)
    return frame


def read_steps_jsonl(path: str | os.PathLike, *, required: tuple[str, ...] = ("step",)) -> list[dict]:
    """Rows of metrics/timings/graph_diagnostics JSONL: objects with an integer `step`; BadInput names the line."""
    path = Path(path)
    rows = []
    for number, obj in iter_jsonl(path):
        if not isinstance(obj, dict):
            raise BadInput("expected a JSON object per line", path=path, where=f"line {number}")
        for key in required:
            if key not in obj:
                raise BadInput(f"missing key {key!r}", path=path, where=f"line {number}")
        if type(obj["step"]) is not int:
            raise BadInput(f"key 'step': expected an integer, got {obj['step']!r}", path=path, where=f"line {number}")
        rows.append(obj)
    return rows
