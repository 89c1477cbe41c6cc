"""Exceptions that the command line turns into exit statuses (docs/design.md §3.7).

`BadInput` (exit 2) is the user's to fix: a malformed manifest, a missing file, a bad row. Its message
names the file and the key path or line. `Failure` (exit 1) is a run that did not succeed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class BadInput(ValueError):
    """Input that cannot be used: the message says where (file, key path or line) and what was expected."""

    def __init__(self, message: str, *, path: object = None, where: str | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.where = where
        prefix = ""
        if self.path and where:
            prefix = f"{self.path}: {where}: "
        elif self.path:
            prefix = f"{self.path}: "
        elif where:
            prefix = f"{where}: "
        super().__init__(prefix + message)


@contextlib.contextmanager
def read_from(path: object) -> Iterator[None]:
    """Inside: a BadInput that names no file is raised again naming `path` (the file whose content it is about),
    with its message and `where` kept; one that names a file passes unchanged."""
    try:
        yield
    except BadInput as exc:
        if exc.path is not None:
            raise
        raise BadInput(exc.message, path=path, where=exc.where) from None


@contextlib.contextmanager
def given_by(option: str) -> Iterator[None]:
    """Inside: a BadInput that names no field or option is raised again naming `option` (the command-line option that
    gave the path it is about), with its message and file kept."""
    try:
        yield
    except BadInput as exc:
        if exc.where is not None:
            raise
        raise BadInput(exc.message, path=exc.path, where=option) from None


def shown(value: object, limit: int = 60) -> str:
    """`repr(value)` for a one-line message: cut to `limit` characters, saying how long it was."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class Failure(RuntimeError):
    """Work that was attempted and did not succeed (exit status 1)."""
