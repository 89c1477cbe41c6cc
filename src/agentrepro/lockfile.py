"""The lock (docs/design.md §3.2; shape in docs/internals.md): its keys, its hashes, and its one reader.

Freeze gathers the parts and `build` lays them out; everything else reads a lock through `read_lock`, at the level
it needs: `verify=False` (a JSON object of the current form: what the analysis, with `manifest_of`, and the
planner read) or `verify=True` (also its schema, its self-hash and its manifest hash: what resolve
and the bundle trust). The audit lists every problem instead of stopping at the first: `lock_problems`.

A lock holds `lock_self_sha256`: the SHA-256 of the canonical JSON of every other field, the seal against
hand edits (audit recomputes it). "The lock hash" that `resolve` writes into each run config and that
provenance.json carries is `lock_sha256(lock) = sha256_json(lock)`, over the whole lock, self-hash included
(docs/internals.md): the hash of the lock file's parsed content.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_json
from agentrepro.reading import load_json
from agentrepro.schema import problems as schema_problems

LOCK_VERSION = 1
LOCK_SCHEMA = "lock.schema.json"
# The lock's top-level keys, in the order freeze writes them (lock.schema.json holds their shapes).
VERSION_KEY = "lock_version"
STUDY = "study"
MANIFEST_PATH = "manifest_path"
MANIFEST = "manifest"  # the canonical manifest, as frozen
MANIFEST_SHA256 = "manifest_sha256"
RESOLVED = "resolved"  # every identifier made immutable (files, model, image, env packages)
TASK_PANEL = "task_panel"
SOURCES = "backend_sources"  # by placement: {label: {commit, workdir, files: {path: blob}}} (backends/sources.py)
DEVIATIONS = "deviations"
SEED_STREAMS = "seed_streams"
HARNESS = "harness"
PYTHON = "python"
MACHINE = "machine"  # the freezing machine's CPU and BLAS (agentrepro.attempts.machine, threads left out)
CREATED = "created"
SELF_KEY = "lock_self_sha256"
MISSING = "lock not found (run `agentrepro freeze` on the manifest first)"


def build(
    *,
    study: str,
    manifest_path: str,
    manifest: dict[str, Any],
    resolved: dict[str, Any],
    task_panel: list[dict[str, Any]],
    backend_sources: dict[str, Any] | None,
    deviations: list[str],
    seed_streams: Any,
    harness: dict[str, Any],
    python: dict[str, Any],
    machine: dict[str, Any] | None,
    created: str,
) -> dict[str, Any]:
    """The sealed lock of these parts: optional parts only when there are any."""
    lock = {
        VERSION_KEY: LOCK_VERSION,
        STUDY: study,
        MANIFEST_PATH: manifest_path,
        MANIFEST: manifest,
        MANIFEST_SHA256: sha256_json(manifest),
        RESOLVED: resolved,
        TASK_PANEL: task_panel,
        **({SOURCES: backend_sources} if backend_sources else {}),
        **({DEVIATIONS: deviations} if deviations else {}),
        SEED_STREAMS: seed_streams,
        HARNESS: harness,
        PYTHON: python,
        **({MACHINE: machine} if machine else {}),
        CREATED: created,
    }
    return seal(lock)


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


def same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two locks differ at most in when they were made (and so in their self-hash)."""
    return content_sha256({k: v for k, v in a.items() if k != CREATED}) == content_sha256(
        {k: v for k, v in b.items() if k != CREATED}
    )


def check_form(lock: Any, path: object) -> None:
    """BadInput (one line) for a lock of an older form that cannot be read as today's: one whose backend_sources
    predate placements (the default backend's only: it cannot say what the other backends' runs should have run)."""
    sources = lock.get(SOURCES) if isinstance(lock, dict) else None
    if isinstance(sources, dict) and isinstance(sources.get("commit"), str):
        manifest = lock.get(MANIFEST_PATH) or "the manifest"
        raise BadInput(
            f"pins the sources of the default backend only (frozen before each backend had its own); "
            f"freeze again (agentrepro freeze {manifest}) so every backend's sources are pinned",
            path=path,
            where=SOURCES,
        )


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
    if lock.get(MANIFEST) is not None and lock.get(MANIFEST_SHA256) != sha256_json(lock[MANIFEST]):
        found.append(f"{MANIFEST_SHA256}: does not match the canonical manifest stored in the lock")
    return found


def read_with_problems(path: str | os.PathLike) -> tuple[dict[str, Any] | None, list[str]]:
    """The audit's reading, which lists every problem instead of stopping at the first: (the lock, each line of
    `lock_problems` naming the file), or (None, [why it cannot be read]). A lock of an older form is BadInput, as
    for every reader: nothing in it can be checked against today's rules."""
    path = Path(path)
    try:
        lock = load_json(path, missing=MISSING)
    except BadInput as exc:
        return None, [str(exc)]
    except (UnicodeDecodeError, OSError) as exc:
        return None, [f"{path}: unreadable ({type(exc).__name__})"]
    if not isinstance(lock, dict):
        return None, [f"{path}: expected a JSON object, got {type(lock).__name__}"]
    check_form(lock, path)
    return lock, [f"{path}: {p}" for p in lock_problems(lock)]


def read_lock(path: str | os.PathLike, *, verify: bool = True) -> dict[str, Any]:
    """The lock at `path`: a JSON object of the current form; with `verify`, also its schema, self-hash and manifest
    hash. BadInput names the file and the first problem."""
    path = Path(path)
    lock = load_json(path, missing=MISSING)
    if not isinstance(lock, dict):
        raise BadInput(f"expected a JSON object, got {type(lock).__name__}", path=path)
    check_form(lock, path)
    if verify:
        found = lock_problems(lock)
        if found:
            raise BadInput(found[0], path=path)
    return lock


def manifest_of(lock: dict[str, Any], path: object) -> dict[str, Any]:
    """The canonical manifest a lock holds; BadInput naming the lock when it holds none."""
    manifest = lock.get(MANIFEST)
    if not isinstance(manifest, dict):
        raise BadInput("missing key (the canonical manifest)", path=path, where=MANIFEST)
    return manifest
