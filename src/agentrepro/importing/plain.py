"""The plain reader: a CSV (with a header row) or JSONL file of one episode a row or line, with the fields
method, seed, step, task_id and success, and optionally reward, turns, tokens and episode; other columns or keys
are left alone. `task_id` is the panel's task_id or the task's seed; `success` is 0 or 1 (true or false too). A
file without a method, seed or step column takes the one the command line gives (`--method`, `--seed`, `--step`).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from agentrepro.bounds import MAX_SEED
from agentrepro.errors import BadInput
from agentrepro.importing.records import Record
from agentrepro.reading import check_string, iter_jsonl, read_text

REQUIRED = ("method", "seed", "step", "task_id", "success")
MAX_TEXT = 500  # characters of a method or task name
MAX_COUNT = 10**9  # steps, turns, tokens, episodes


def _count(value: Any, field: str, limit: int = MAX_COUNT) -> int:
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 12:
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise ValueError(f"{field}: expected a whole number from 0 to {limit}, got {value!r}"[:300])
    return value


def _success(value: Any) -> int:
    said = value.strip().lower() if isinstance(value, str) else value
    if said in (1, "1", True, "true"):
        return 1
    if said in (0, "0", False, "false"):
        return 0
    raise ValueError(f"success: expected 0 or 1 (or true / false), got {value!r}"[:300])


def _reward(value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or abs(number) > 1e100:
        raise ValueError(f"reward: expected a finite number, got {value!r}"[:300])
    return number


def _text(value: Any, field: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and field == "task_id":
        value = str(value)  # a task named by its seed
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        raise ValueError(f"{field}: expected a name of 1 to {MAX_TEXT} characters, got {value!r}"[:300])
    check_string(value, where=field)
    return value.strip()


def _record(fields: dict[str, Any], source: int, line: int) -> Record:
    missing = [f for f in REQUIRED if fields.get(f) in (None, "")]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")

    def optional(name: str, parse: Any) -> Any:
        return None if fields.get(name) in (None, "") else parse(fields[name])

    return Record(
        method=_text(fields["method"], "method"),
        seed=_count(fields["seed"], "seed", MAX_SEED),
        step=_count(fields["step"], "step"),
        task=_text(fields["task_id"], "task_id"),
        success=_success(fields["success"]),
        source=source,
        line=line,
        reward=optional("reward", _reward),
        turns=optional("turns", lambda v: _count(v, "turns")),
        tokens=optional("tokens", lambda v: _count(v, "tokens")),
        episode=optional("episode", lambda v: _count(v, "episode")),
    )


def _csv_rows(path: Path, given: set[str]) -> list[tuple[int, dict[str, Any]]]:
    text = read_text(path)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
        header = reader.fieldnames or []
        rows = [(reader.line_num, row) for row in reader]
    except csv.Error as exc:
        raise BadInput(f"not a CSV file: {exc}", path=path) from None
    missing = [f for f in REQUIRED if f not in header and f not in given]
    if missing:
        raise BadInput(f"the header has no column {', '.join(missing)}", path=path, where="line 1")
    for line, row in rows:
        if None in row or any(v is None for v in row.values()):
            raise BadInput("has another number of fields than the header", path=path, where=f"line {line}")
    return rows


def read_plain(path: Path, source: int, given: dict[str, Any]) -> list[Record]:
    """The records of one plain file (`source`: its index in the import's files): CSV by its `.csv` name, else
    JSONL; `given` (the command line's method, seed, step) fills a column the file does not have. BadInput names
    the file and the line of the first record that cannot be read."""
    path = Path(path)
    defaults = {k: v for k, v in given.items() if v is not None}
    if path.suffix.lower() == ".csv":
        rows = _csv_rows(path, set(defaults))
    else:
        rows = []
        for line, obj in iter_jsonl(path):
            if not isinstance(obj, dict):
                raise BadInput(f"expected a JSON object, got {type(obj).__name__}", path=path, where=f"line {line}")
            rows.append((line, obj))
    records = []
    for line, fields in rows:
        try:
            records.append(_record({**defaults, **fields}, source, line))
        except (ValueError, BadInput) as exc:
            raise BadInput(str(exc), path=path, where=f"line {line}") from None
    if not records:
        raise BadInput("holds no record", path=path)
    return records
