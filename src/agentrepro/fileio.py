"""Small, shared file primitives: atomic writes, hashing, canonical JSON and line-numbered JSONL.

Every writer in the package goes through `atomic_write_*` so that a killed job never leaves a
half-written file that looks complete (docs/design.md §3.3): the content goes to a temporary name in the same
directory, is flushed to disk, and is renamed over the target.

These helpers (and `make_dir`, `make_temp_dir` for folders) are also the one place where an operating-system
error of writing becomes a message: whether a path can be written is found out by writing it, never predicted
(`os.access` says yes to root for `/proc/x`). A path that cannot hold the output (no such folder, not
writable, read-only, not a folder) is `BadInput` naming it (exit 2); a machine's failure while writing (a full
disk, an I/O error) is `Failure` (exit 1). Either way nothing is left at the target.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from agentrepro import reading
from agentrepro.errors import BadInput, Failure


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


# Errors that say the path cannot hold an output as given: the user's to change (exit 2). Any other error while
# writing (ENOSPC, EDQUOT, EIO, ...) is the machine's (exit 1).
_PATH_ERRNOS = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EEXIST,
        errno.EINVAL,
        errno.ENXIO,
        errno.ENODEV,
    }
)


def write_error(exc: OSError, path: str | os.PathLike) -> BadInput | Failure:
    """The one-line error for an OS error raised while writing `path`."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in _PATH_ERRNOS:
        return BadInput(f"cannot write here ({reason}); nothing was written", path=path)
    return Failure(f"{path}: writing failed ({reason}); nothing was written")


def make_dir(path: str | os.PathLike) -> Path:
    """`mkdir -p path`; an OS error is `write_error`'s one line."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, path) from None
    return path


def make_temp_dir(parent: str | os.PathLike, prefix: str) -> Path:
    """A new private folder `parent/<prefix>XXXX.tmp` (made with its parents); an OS error is `write_error`'s one line."""
    parent = make_dir(parent)
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent))
    except OSError as exc:
        raise write_error(exc, parent) from None


@contextlib.contextmanager
def atomic_binary(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file handle whose content appears at `path` only if the block ends without an error.

    OS errors of the writing (making the folder and the temporary file, writes to the handle, flushing, the
    rename) become `write_error`'s one line; an OS error the block raises about another file (one it reads,
    which names its file) passes unchanged.
    """
    path = Path(path)
    folder = make_dir(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise write_error(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        if exc.filename is not None and exc.filename not in (tmp, str(path)):
            raise
        raise write_error(exc, path) from None
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_binary(path) as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate (from a surrogate-escaped argument, say) cannot be UTF-8
        raise Failure(
            f"{path}: character {exc.start + 1} is a lone surrogate and cannot be written as UTF-8; nothing was written"
        ) from None
    return atomic_write_bytes(path, data)


def _first_non_finite(obj: Any, parts: tuple = ()) -> tuple[str, Any] | None:
    if isinstance(obj, float) and not math.isfinite(obj):
        return reading.key_path(parts), obj
    items: Iterable[tuple[Any, Any]]
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return None
    for key, value in items:
        found = _first_non_finite(value, (*parts, key))
        if found:
            return found
    return None


def json_text(obj: Any, *, path: object, indent: int | None = None, sort_keys: bool = False) -> str:
    """`json.dumps` for files (UTF-8, no NaN): a NaN or infinity is a Failure naming the file and the field.

    Input is checked on reading, so a non-finite number here was computed from valid input: a bug to fix
    where it is computed, reported rather than written as a token no JSON reader accepts.
    """
    try:
        return json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=False, allow_nan=False)
    except ValueError:
        found = _first_non_finite(obj)
        where, value = found if found else ("(unknown field)", None)
        raise Failure(
            f"{path}: {where}: computed value {value!r} is not a finite number; nothing was written "
            "(please report this with the input that produced it)"
        ) from None


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> Path:
    return atomic_write_text(path, json_text(obj, path=path, indent=indent, sort_keys=True) + "\n")


def atomic_write_yaml(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, yaml.safe_dump(obj, sort_keys=False, allow_unicode=True))


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    return atomic_write_text(path, "".join(json_text(r, path=path) + "\n" for r in rows))


def check_output_file(path: str | os.PathLike, *, option: str | None = None, make_parents: bool = False) -> Path:
    """Refuse, before any work, an output file path that cannot be one: a directory, a parent that is missing
    (unless `make_parents`) or not a directory. `option` (e.g. `-o`) is named in the message. Permissions are
    not predicted: the write itself says (`write_error`)."""
    path = Path(path)
    if path.is_dir():
        raise BadInput("is a directory; expected the path of a file to write", path=path, where=option)
    if path.exists() and not path.is_file():
        raise BadInput("exists and is not a regular file", path=path, where=option)
    parent = path.parent
    if make_parents:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.exists():
        raise BadInput(f"cannot write: the folder {parent} does not exist", path=path, where=option)
    _check_is_dir(parent, path, option)
    return path


def check_output_dir(path: str | os.PathLike, *, option: str | None = None) -> Path:
    """Refuse an output directory that cannot be one: a file in its place or on its way. Missing folders are
    fine (they are created); permissions are not predicted (`make_dir` and the writes say)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise BadInput("exists and is not a directory", path=path, where=option)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    _check_is_dir(existing, path, option)
    return path


def _check_is_dir(folder: Path, target: Path, option: str | None) -> None:
    if not folder.is_dir():
        raise BadInput(f"cannot write: {folder} is not a directory", path=target, where=option)


# A command-line input or output named "-" is standard input or output.
STDIO = "-"


def input_name(path: str) -> str:
    """How messages name a command-line input: `<stdin>` for "-"."""
    return "<stdin>" if path == STDIO else path


def iter_input_jsonl(path: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) of a command-line JSONL input: standard input for "-", else the file."""
    if path == STDIO:
        return reading.iter_jsonl(input_name(path), lines=reading.stdin_lines())
    return reading.iter_jsonl(path)


def write_output_text(path: str, text: str) -> None:
    """A command-line output: standard output for "-", else the file, atomically."""
    if path == STDIO:
        sys.stdout.write(text)
    else:
        atomic_write_text(path, text)
