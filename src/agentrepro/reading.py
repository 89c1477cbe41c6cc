"""The one reading layer: every file the package reads is decoded, parsed and bounded here (issue 12).

A hostile or damaged file must end in one `BadInput` line naming the file and the line or key path,
never in a traceback and never in a value that breaks a later stage. The rules, for every reader:

* **Text** is UTF-8, strictly (a leading byte-order mark is dropped); a byte that does not decode is
  refused with its line. Strings may not hold lone surrogates (JSON's `\\ud800` escape) nor control
  characters other than tab, newline and carriage return: every text field of our contracts is text.
* **YAML** is read with PyYAML's safe loader, plus: a duplicate key is an error naming both lines (the
  last one would silently win, and the lock would hash that); nesting deeper than `MAX_DEPTH` and a
  document whose aliases expand past `MAX_NODES` nodes (an "alias bomb") are refused before anything
  walks them; integers must fit in 64 bits and floats must be finite.
* **JSON / JSONL** refuse `NaN` and `Infinity` (not JSON, though Python writes them), numbers that
  overflow to infinity, integers outside the 64-bit range, and nesting deeper than `MAX_DEPTH`.

Contract-specific ranges (a seed's maximum, a fraction in [0, 1]) stay with the contract's owner: the
JSON Schemas in workflow/schemas/ and the validators beside each reader.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from agentrepro.errors import BadInput

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_DEPTH = 64            # no contract nests deeper than ~8; 64 leaves room and stays far from Python's stack
MAX_NODES = 1_000_000     # values in one document, aliases expanded (a 10,000-task panel is ~60,000)
_MAX_INT_CHARS = 40       # longer integer literals are refused before int() sees them (CPython caps at 4300 digits)
_BAD_CHAR = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def _describe_char(ch: str) -> str:
    code = ord(ch)
    return f"lone surrogate U+{code:04X}" if 0xD800 <= code <= 0xDFFF else f"control character U+{code:04X}"


def check_string(value: str, *, path: object = None, where: str | None = None) -> str:
    """`value` if it is clean text; BadInput for a lone surrogate or a control character (tab, CR, LF allowed)."""
    bad = _BAD_CHAR.search(value)
    if bad:
        raise BadInput(f"{_describe_char(bad.group())} in text (at character {bad.start() + 1})", path=path, where=where)
    return value


def decode(data: bytes, *, path: object = None, first_line: int = 1) -> str:
    """Strict UTF-8 text of `data` (BOM dropped); BadInput names the line of the first byte that does not decode."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        raise BadInput(f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded ({exc.reason})",
                       path=path, where=f"line {line}") from None
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
        raise BadInput(f"{_describe_char(bad.group())} in text", path=path, where=f"line {line}")
    return text


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a text file (see `read_text`), without their line ends."""
    return read_text(path).splitlines()


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
                raise bad(f"integer {_short_int(value)} is outside the 64-bit range", chain)
        elif kind is float:
            if not math.isfinite(value):
                raise bad(f"{value!r} is not a finite number", chain)
        elif kind is dict:
            if depth >= MAX_DEPTH:
                raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path, where=where)
            for key, item in value.items():
                if type(key) is not str:
                    raise bad(f"key {key!r} ({type(key).__name__}) must be a string: quote it", chain)
                if _BAD_CHAR.search(key):
                    raise bad(f"{_describe_char(_BAD_CHAR.search(key).group())} in the key {key[:40]!r}", chain)
                stack.append((item, (chain, key), depth + 1))
        elif kind is list:
            if depth >= MAX_DEPTH:
                raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path, where=where)
            stack.extend((item, (chain, i), depth + 1) for i, item in enumerate(value))
        else:
            raise bad(f"{str(value)[:40]!r} is a {kind.__name__}, which JSON cannot hold: quote it", chain)
    return obj


def _short_int(value: int | str) -> str:
    text = str(value) if isinstance(value, str) else (f"{value}" if abs(value) < 10**40 else f"of {len(str(abs(value)))} digits")
    return text if len(text) <= 30 else f"{text[:12]}...({len(text)} characters)"


# ------------------------------------------------------------------------------------------------- JSON


class _Refused(ValueError):
    pass


class MalformedJSON(BadInput):
    """Text that is not JSON at all (as opposed to JSON outside the bounds); callers may fall back to a string."""


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_CHARS:
        raise _Refused(f"integer {_short_int(text)} is outside the 64-bit range")
    return int(text)   # the 64-bit range is checked by check_value, with the key path


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {_short_int(text)} overflows to infinity")
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
        obj = json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant,
                         object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        at = f"line {line}" if line is not None else f"line {exc.lineno}"
        raise MalformedJSON(f"malformed JSON: {exc.msg} (column {exc.colno})", path=path, where=where or at) from None
    except _Refused as exc:
        raise BadInput(str(exc), path=path, where=where or (f"line {line}" if line is not None else None)) from None
    except RecursionError:
        raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path,
                       where=where or (f"line {line}" if line is not None else None)) from None
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
    import sys

    return getattr(sys.stdin, "buffer", sys.stdin)


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    return [obj for _, obj in iter_jsonl(path)]


# ------------------------------------------------------------------------------------------------- YAML


class _Checks:
    """Constructor checks shared by both loaders: duplicate keys, over-long integer literals."""

    _path: object = None

    def _bad(self, message: str, mark) -> BadInput:
        return BadInput(message, path=self._path, where=f"line {mark.line + 1}" if mark else None)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:
                    raise self._bad("a mapping key must be a plain value, not a list or mapping", key_node.start_mark) from None
                if first is not None:
                    raise self._bad(f"duplicate key {key!r} (first at line {first}): the last one would silently win",
                                    key_node.start_mark)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_expansion(node, self)
        return node

    def construct_yaml_int(self, node):
        text = str(node.value).replace("_", "").lstrip("+-")
        if len(text) > _MAX_INT_CHARS:
            raise self._bad(f"integer {_short_int(str(node.value))} is outside the 64-bit range", node.start_mark)
        return super().construct_yaml_int(node)   # the 64-bit range is checked by check_value, with the key path


class _BoundedLoader(_Checks, yaml.SafeLoader):
    """PyYAML's pure safe loader, plus the checks and a nesting bound applied while composing."""

    def __init__(self, stream, path: object):
        super().__init__(stream)
        self._path, self._depth = path, 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self._bad(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_expansion(root, loader: _Checks) -> None:
    """Refuse a node graph whose aliases expand past MAX_NODES, before anything walks it (an "alias bomb").

    Sizes are memoised per node, so this costs one pass over the distinct nodes.
    """
    sizes: dict[int, int] = {}
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        if id(node) in sizes:
            continue
        sizes[id(node)] = 1
        order.append(node)
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
    for node in reversed(order):   # children before parents (a parent is pushed before its children)
        if isinstance(node, yaml.SequenceNode):
            total = 1 + sum(sizes[id(c)] for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            total = 1 + sum(sizes[id(c)] for pair in node.value for c in pair)
        else:
            continue
        if total > MAX_NODES:
            raise loader._bad(f"aliases expand this document past {MAX_NODES:,} values (an alias bomb?)", node.start_mark)
        sizes[id(node)] = total


_LOADERS = [_BoundedLoader]
if hasattr(yaml, "CSafeLoader"):   # libyaml: ~20x faster on large run configs; it bounds nesting itself (1000)
    class _BoundedCLoader(_Checks, yaml.CSafeLoader):
        def __init__(self, stream, path: object):
            super().__init__(stream)
            self._path = path

    _LOADERS.append(_BoundedCLoader)

for _loader in _LOADERS:
    _loader.add_constructor("tag:yaml.org,2002:int", _loader.construct_yaml_int)


def parse_yaml(text: str, *, path: object = None, fast: bool = False) -> Any:
    """Parse YAML text with the bounded safe loader; any problem is BadInput naming `path` and the line.

    `fast` uses libyaml where PyYAML has it (same checks; a nesting error then names a column of line 1 less
    precisely); for large machine-written files such as resolved configs.
    """
    loader = None
    try:
        loader = _LOADERS[-1 if fast else 0](text, path)
        obj = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise BadInput(f"YAML syntax error: {exc.problem or exc}", path=path, where=where) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise BadInput(f"{_describe_char(chr(exc.character)) if isinstance(exc.character, int) else 'unreadable character'} "
                       "in YAML", path=path, where=f"line {line}") from None
    except yaml.YAMLError as exc:
        raise BadInput(f"YAML error: {exc}", path=path) from None
    except RecursionError:
        raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path) from None
    finally:
        if loader is not None:
            loader.dispose()
    return check_value(obj, path=path)


def load_yaml(path: str | os.PathLike, *, missing: str = "file not found", fast: bool = False) -> Any:
    """A YAML file, decoded and parsed with the bounds above; BadInput names the file and the line."""
    return parse_yaml(decode(read_bytes(path, missing=missing), path=path), path=path, fast=fast)
