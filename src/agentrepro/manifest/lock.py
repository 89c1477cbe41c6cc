"""The lock (docs/design.md §3.2; shape in docs/internals.md) and the hash that every run carries.

A lock holds `lock_self_sha256`: the SHA-256 of the canonical JSON of every other field, the seal against
hand edits (audit recomputes it). "The lock hash" that `resolve` writes into each run config and that
provenance.json carries is `lock_sha256(lock) = sha256_json(lock)`, over the whole lock, self-hash included
(docs/internals.md): the hash of the lock file's parsed content.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrepro.backends.sources import check_lock_form
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_json
from agentrepro.reading import load_json
from agentrepro.schema import problems as schema_problems

LOCK_VERSION = 1
SELF_KEY = "lock_self_sha256"
LOCK_SCHEMA = "lock.schema.json"


def lock_sha256(lock: dict[str, Any]) -> str:
    """The lock hash every run carries: SHA-256 of the canonical JSON of the whole lock."""
    return sha256_json(lock)


def content_sha256(lock: dict[str, Any]) -> str:
    """The self-hash: SHA-256 of the canonical JSON of the lock without its `lock_self_sha256` field."""
    return sha256_json({k: v for k, v in lock.items() if k != SELF_KEY})


def seal(lock: dict[str, Any]) -> dict[str, Any]:
    """Return the lock with its self-hash set."""
    body = {k: v for k, v in lock.items() if k != SELF_KEY}
    return {**body, SELF_KEY: sha256_json(body)}


def lock_problems(lock: Any) -> list[str]:
    """Why a lock cannot be trusted: schema violations, or content that no longer matches its self-hash."""
    if not isinstance(lock, dict):
        return [f"expected a JSON object, got {type(lock).__name__}"]
    found = schema_problems(lock, LOCK_SCHEMA)
    stored = lock.get(SELF_KEY)
    if stored is not None and stored != content_sha256(lock):
        found.append(
            f"{SELF_KEY}: the content does not hash to it: the lock was edited after `agentrepro freeze` wrote it; freeze again"
        )
    if lock.get("manifest") is not None and lock.get("manifest_sha256") != sha256_json(lock["manifest"]):
        found.append("manifest_sha256: does not match the canonical manifest stored in the lock")
    return found


def read_lock(path: str | os.PathLike, *, verify: bool = True) -> dict[str, Any]:
    """Load a lock; with `verify`, raise BadInput if it fails its schema or its self-hash."""
    path = Path(path)
    lock = load_json(path, missing="lock not found (run `agentrepro freeze` on the manifest first)")
    if verify:
        check_lock_form(lock, path)
        found = lock_problems(lock)
        if found:
            raise BadInput(found[0], path=path)
    return lock
