"""Small, shared file primitives: atomic writes, hashing, canonical JSON and line-numbered JSONL.

Every writer in the package goes through `atomic_write_*` so that a killed job never leaves a
half-written file that looks complete (docs/design.md §3.3): the content goes to a temporary name in the same
directory, is flushed to disk, and is renamed over the target.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from agentrepro.errors import BadInput


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the form every hash in agentrepro is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of `obj`."""
    return sha256_bytes(canonical_json(obj).encode("utf-8"))


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")


def atomic_write_yaml(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, yaml.safe_dump(obj, sort_keys=False, allow_unicode=True))


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    return atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows))


def iter_jsonl(path: str | os.PathLike, *, lines: Iterable[str] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield (line_number, object) for each non-blank line; a malformed line raises BadInput with its number.

    `lines` lets a caller stream from stdin while keeping the same error messages.
    """
    source = open(path, encoding="utf-8") if lines is None else None
    try:
        for number, line in enumerate(lines if lines is not None else source, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"malformed JSON: {exc.msg} (column {exc.colno})", path=path, where=f"line {number}") from None
    finally:
        if source is not None:
            source.close()


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    path = Path(path)
    if not path.is_file():
        raise BadInput("file not found", path=path)
    return [obj for _, obj in iter_jsonl(path)]


def load_json(path: str | os.PathLike, *, missing: str = "file not found") -> Any:
    """Load a JSON file; a missing file (message `missing`) or malformed JSON is BadInput naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(missing, path=path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BadInput(f"malformed JSON: {exc.msg}", path=path, where=f"line {exc.lineno}") from None


def load_yaml(path: str | os.PathLike) -> Any:
    """Load YAML safely; a syntax error names the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise BadInput("file not found", path=path)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise BadInput(f"YAML syntax error: {exc.problem or exc}", path=path, where=where) from None
