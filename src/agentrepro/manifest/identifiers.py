"""Which identifiers are immutable, and why the others are refused (used by `agentrepro freeze`).

Each check returns None for an acceptable identifier, or the reason it is refused; freeze prefixes the
key path (`model.revision: ...`). A placeholder is any string beginning with `TODO` (any case): manifests
may hold one where a value is not yet known, so that the manifest loads but cannot be frozen.
"""

from __future__ import annotations

import re

COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
HEX = re.compile(r"^[0-9a-fA-F]+\Z")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
SHA256 = re.compile(r"^[0-9a-f]{64}\Z")


def is_placeholder(value: object) -> bool:
    return isinstance(value, str) and value.strip().upper().startswith("TODO")


def commit_problem(value: object) -> str | None:
    """A full 40-hex commit (lower case) is immutable; a branch, a tag or a short hash is not."""
    if not isinstance(value, str):
        return f"expected a 40-hex commit, got {value!r}"
    if is_placeholder(value):
        return f"placeholder {value!r}: replace it with the full 40-hex commit before freezing"
    if value != value.strip():
        return f"{value!r} has whitespace around it (a line break?): give the 40-hex commit alone"
    if COMMIT.match(value):
        return None
    if HEX.match(value) and len(value) == 40:
        return f"{value!r} has upper-case hex digits: write the 40-hex commit in lower case"
    if HEX.match(value) and len(value) < 40:
        return f"{value!r} is a short commit hash ({len(value)} of 40 hex digits): give the full 40-hex commit"
    return f"{value!r} is a branch or tag name, which can move: give the full 40-hex commit it points to"


def digest_problem(value: object, ref: object = None) -> str | None:
    """An image is pinned by `sha256:<64 hex>`; a tag alone can be re-pushed."""
    if value is None or value == "":
        return f"missing: the tag {ref!r} alone is mutable; pin the image with its digest sha256:<64 hex>"
    if is_placeholder(value):
        return f"placeholder {value!r}: replace it with the image digest sha256:<64 hex>"
    if not isinstance(value, str) or not DIGEST.match(value):
        return f"expected sha256:<64 lower-case hex>, got {value!r}"
    if isinstance(ref, str) and "@" in ref and ref.rsplit("@", 1)[1] != value:
        return f"image.ref {ref!r} names a different digest than {value!r}"
    return None


def sha256_problem(value: object) -> str | None:
    if is_placeholder(value):
        return f"placeholder {value!r}: remove it (freeze records the hash) or give the 64-hex SHA-256"
    if not isinstance(value, str) or not SHA256.match(value):
        return f"expected 64 lower-case hex digits, got {value!r}"
    return None
