"""The reading layer's shared text rules: bytes from a file, strict UTF-8, clean strings, bounded values.

`read_bytes`/`decode`/`read_text`/`read_lines` turn a file into text: UTF-8 strictly (a leading byte-order mark
dropped), a byte that does not decode refused with its line, no lone surrogate and no control character other
than tab, newline and carriage return. `check_value` is the walk every parsed document (JSON or YAML) ends with:
string keys, clean text, 64-bit integers, finite floats, JSON's types only, nesting within `MAX_DEPTH` and at
most `MAX_NODES` values. Every problem is one `BadInput` naming the file and the line or key path.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_DEPTH = 64  # no contract nests deeper than ~8; 64 leaves room and stays far from Python's stack
MAX_NODES = 1_000_000  # values in one document, aliases expanded (a 10,000-task panel is ~60,000)
MAX_INT_CHARS = 40  # longer integer literals are refused before int() sees them (CPython caps at 4300 digits)
_BAD_CHAR = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def describe_char(ch: str) -> str:
    code = ord(ch)
    return f"lone surrogate U+{code:04X}" if 0xD800 <= code <= 0xDFFF else f"control character U+{code:04X}"


def check_string(value: str, *, path: object = None, where: str | None = None) -> str:
    """`value` if it is clean text; BadInput for a lone surrogate or a control character (tab, CR, LF allowed)."""
    bad = _BAD_CHAR.search(value)
    if bad:
        raise BadInput(f"{describe_char(bad.group())} in text (at character {bad.start() + 1})", path=path, where=where)
    return value


def decode(data: bytes, *, path: object = None, first_line: int = 1) -> str:
    """Strict UTF-8 text of `data` (BOM dropped); BadInput names the line of the first byte that does not decode."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        raise BadInput(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded ({exc.reason})",
            path=path,
            where=f"line {line}",
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_bytes(path: str | os.PathLike, *, missing: str = "file not found") -> bytes:
    """The bytes of a regular file; BadInput (naming it) for a missing file, a directory or a read error."""
    path = Path(path)
    if path.is_dir():
        raise BadInput("is a directory, expected a file", path=path)
    if not path.is_file():
        raise BadInput(missing, path=path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror}", path=path) from None


def read_text(path: str | os.PathLike, *, missing: str = "file not found") -> str:
    """The strict UTF-8 text of a file, with control characters refused (line named)."""
    text = decode(read_bytes(path, missing=missing), path=path)
    bad = _BAD_CHAR.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise BadInput(f"{describe_char(bad.group())} in text", path=path, where=f"line {line}")
    return text


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a text file (see `read_text`), without their line ends: a line ends at a line feed (a carriage
    return before it is dropped) and nowhere else, as the package writes its files; U+2028, U+0085 and the other
    characters `str.splitlines` also breaks at are part of a line."""
    lines = read_text(path).split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


# ---------------------------------------------------------------------------------------------- walking


def key_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _parts(chain: tuple | None) -> list:
    out = []
    while chain is not None:
        chain, key = chain
        out.append(key)
    return out[::-1]


def check_value(obj: Any, *, path: object = None, where: str | None = None) -> Any:
    """Walk a parsed document (iteratively): depth, string keys, clean text, 64-bit integers, finite floats.

    Only JSON's types pass (a YAML date, set or binary cannot be frozen into canonical JSON). Key paths are
    kept as linked pairs and spelled out only for the message.
    """

    def bad(message: str, chain: tuple | None) -> BadInput:
        located = ": ".join(w for w in (where, key_path(_parts(chain)) if chain is not None else None) if w)
        return BadInput(message, path=path, where=located or None)

    stack: list[tuple[Any, tuple | None, int]] = [(obj, None, 0)]
    budget = MAX_NODES
    while stack:
        value, chain, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise BadInput(f"more than {MAX_NODES:,} values in one document", path=path, where=where)
        kind = type(value)
        if kind is str:
            if _BAD_CHAR.search(value):
                try:
                    check_string(value)
                except BadInput as exc:
                    raise bad(str(exc), chain) from None
        elif kind is bool or value is None:
            continue
        elif kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                raise bad(f"integer {short_int(value)} is outside the 64-bit range", chain)
        elif kind is float:
            if not math.isfinite(value):
                raise bad(f"{value!r} is not a finite number", chain)
        elif kind is dict:
            if depth >= MAX_DEPTH:
                raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path, where=where)
            for key, item in value.items():
                if type(key) is not str:
                    raise bad(f"key {key!r} ({type(key).__name__}) must be a string: quote it", chain)
                found = _BAD_CHAR.search(key)
                if found:
                    raise bad(f"{describe_char(found.group())} in the key {key[:40]!r}", chain)
                stack.append((item, (chain, key), depth + 1))
        elif kind is list:
            if depth >= MAX_DEPTH:
                raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path, where=where)
            stack.extend((item, (chain, i), depth + 1) for i, item in enumerate(value))
        else:
            raise bad(f"{str(value)[:40]!r} is a {kind.__name__}, which JSON cannot hold: quote it", chain)
    return obj


def short_int(value: int | str) -> str:
    text = (
        str(value)
        if isinstance(value, str)
        else (f"{value}" if abs(value) < 10**40 else f"of {len(str(abs(value)))} digits")
    )
    return text if len(text) <= 30 else f"{text[:12]}...({len(text)} characters)"
