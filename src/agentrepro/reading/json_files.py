"""JSON and JSONL documents for the reading layer (see agentrepro.reading).

`parse_json`/`load_json`/`iter_jsonl` refuse `NaN` and `Infinity` (not JSON, though Python writes them),
numbers that overflow to infinity, integer literals too long for 64 bits, duplicate keys and nesting deeper
than `MAX_DEPTH`, then walk the result with `text.check_value`. Text that is not JSON at all is
`MalformedJSON` (a `BadInput`), so a caller may fall back to reading it as a string.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.reading.text import MAX_DEPTH, MAX_INT_CHARS, check_value, decode, read_bytes, short_int


class _Refused(ValueError):
    pass


class MalformedJSON(BadInput):
    """Text that is not JSON at all (as opposed to JSON outside the bounds); callers may fall back to a string."""


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_CHARS:
        raise _Refused(f"integer {short_int(text)} is outside the 64-bit range")
    return int(text)  # the 64-bit range is checked by check_value, with the key path


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {short_int(text)} overflows to infinity")
    return value


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key[:40]!r}: the last one would silently win")
        out[key] = value
    return out


def _json_constant(name: str) -> float:
    raise _Refused(f"{name} is not a JSON number (give a finite number or null)")


def parse_json(text: str, *, path: object = None, where: str | None = None, line: int | None = None) -> Any:
    """Parse one JSON document with the bounds above; errors name `path` and the line (or `where`)."""
    try:
        obj = json.loads(
            text,
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
            object_pairs_hook=_json_object,
        )
    except json.JSONDecodeError as exc:
        at = f"line {line}" if line is not None else f"line {exc.lineno}"
        raise MalformedJSON(f"malformed JSON: {exc.msg} (column {exc.colno})", path=path, where=where or at) from None
    except _Refused as exc:
        raise BadInput(str(exc), path=path, where=where or (f"line {line}" if line is not None else None)) from None
    except RecursionError:
        raise BadInput(
            f"nested deeper than {MAX_DEPTH} levels",
            path=path,
            where=where or (f"line {line}" if line is not None else None),
        ) from None
    return check_value(obj, path=path, where=where or (f"line {line}" if line is not None else None))


def load_json(path: str | os.PathLike, *, missing: str = "file not found") -> Any:
    """A JSON file, decoded and bounded; BadInput names the file and the line or key path."""
    return parse_json(decode(read_bytes(path, missing=missing), path=path), path=path)


def iter_jsonl(path: str | os.PathLike, *, lines: Iterable[str | bytes] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield (line_number, object) for each non-blank line; any problem is BadInput with the line's number.

    `lines` lets a caller stream from stdin (bytes or text) while keeping the same messages.
    """
    if lines is None:
        lines = read_bytes(path).splitlines()
    for number, line in enumerate(lines, start=1):
        text = decode(line, path=path, first_line=number) if isinstance(line, bytes) else line
        if not text.strip():
            continue
        yield number, parse_json(text, path=path, line=number)


def stdin_lines() -> Iterable[bytes | str]:
    """Standard input as raw lines, so that bytes that are not UTF-8 get the same one-line error as in a file."""
    return getattr(sys.stdin, "buffer", sys.stdin)


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    return [obj for _, obj in iter_jsonl(path)]
