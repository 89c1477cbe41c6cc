"""What code runs: the harness's git state, the agentrepro package a process imports, and the Python packages
installed. Freeze records them in the lock; every attempt of a job records them again (agentrepro.attempts), so the
audit can say where a job ran other code than its lock names (`differences`).

* `harness_state(root, ignore=[paths])` asks git (a subprocess, no library) for HEAD and for every change,
  untracked files included; git-ignored outputs (runs/, analysis/, ...) never count, and `ignore` removes
  paths that the caller is about to write (the lock itself).
* `installed_packages()` / `python_environment()`: every installed distribution as `name==version`, sorted, and
  their hash.
* `package_sha256()`: a hash of the agentrepro package's own files as this process imports them: the code, where a
  commit says nothing (an installed wheel, an edited checkout).
* `running(root)`: the three, for an attempt; `differences(lock, software)`: what it ran unlike its lock, in words.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrepro import __version__
from agentrepro.fileio import sha256_json

MAX_LISTED = 100
COMMIT = re.compile(r"[0-9a-f]{40}")
PACKAGE_DIR = Path(__file__).resolve().parent  # the agentrepro package this process imports


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)


def harness_state(root: str | os.PathLike, *, ignore: Sequence[str | os.PathLike] = ()) -> dict[str, Any]:
    """{"commit": 40-hex or None, "dirty": bool, "dirty_paths": [...], "note"?: why no commit}."""
    root = Path(root).resolve()
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
    except FileNotFoundError:
        return {
            "commit": None,
            "dirty": True,
            "dirty_paths": [],
            "note": "git is not installed: the commit cannot be read",
        }
    if top.returncode != 0:
        return {"commit": None, "dirty": True, "dirty_paths": [], "note": f"{root} is not inside a git repository"}
    top_dir = Path(top.stdout.strip()).resolve()
    head = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    commit = head.stdout.strip() if head.returncode == 0 else None
    status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    if status.returncode != 0:
        return {
            "commit": commit,
            "dirty": True,
            "dirty_paths": [],
            "note": f"git status failed: {status.stderr.strip()}",
        }
    ignored = set()
    for path in ignore:
        try:
            ignored.add(Path(path).resolve().relative_to(top_dir).as_posix())
        except ValueError:
            pass
    changed = []
    entries = status.stdout.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        code, rel = entry[:2], entry[3:]
        if code[0] in "RC":  # a rename or copy is followed by its source path
            i += 1
        if rel not in ignored:
            changed.append(rel)
    state: dict[str, Any] = {
        "commit": commit,
        "dirty": bool(changed) or commit is None,
        "dirty_paths": sorted(changed)[:MAX_LISTED],
    }
    if commit is None:
        state["note"] = "the repository has no commit yet"
    return state


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages() -> list[str]:
    """Sorted, de-duplicated `name==version` of every distribution importlib.metadata sees."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.add(f"{_normalise(name)}=={dist.version}")
    return sorted(found)


def python_environment() -> dict[str, Any]:
    packages = installed_packages()
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "packages": packages,
        "packages_sha256": sha256_json(packages),
    }


def package_sha256(package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 over every file of the package (its path and content, sorted; compiled caches left out). Linked
    folders are followed: a checkout's schemas/ links to workflow/schemas/, which a wheel holds as files."""
    files = []
    for folder, dirnames, filenames in os.walk(package_dir, followlinks=True):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        files += [Path(folder) / name for name in filenames]
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(package_dir).as_posix()):
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def changed_between(
    root: str | os.PathLike, first: str, second: str, *, ignore: Sequence[str] = ()
) -> list[str] | None:
    """The paths that differ between two commits of the checkout holding `root` (`ignore`: paths relative to its
    top, left out), or None when git cannot tell (a commit it does not have, or either is no 40-hex commit: a value
    read from a lock never reaches git's command line as anything but a commit)."""
    if not (COMMIT.fullmatch(first) and COMMIT.fullmatch(second)):
        return None
    try:
        diff = _git(Path(root), "diff", "--name-only", "-z", first, second, "--")
    except FileNotFoundError:
        return None
    if diff.returncode != 0:
        return None
    return sorted(p for p in diff.stdout.split("\0") if p and p not in ignore)[:MAX_LISTED]


def running(
    root: str | os.PathLike = ".", *, lock: str | None = None, lock_commit: str | None = None
) -> dict[str, Any]:
    """What this process runs: the git state of the study's checkout as freeze records it (`lock`, the lock's path
    relative to `root`, left out: a lock is written after it was frozen, and often committed after), with the paths
    changed since the lock's commit; the agentrepro package it imports (version and files' hash); and the Python
    environment (version, packages, their hash)."""
    harness = harness_state(root, ignore=[Path(root) / lock] if lock else [])
    state: dict[str, Any] = {"commit": harness["commit"], "dirty": harness["dirty"]}
    if lock_commit and harness["commit"] and lock_commit != harness["commit"]:
        state["changed_since_lock"] = changed_between(
            root, lock_commit, harness["commit"], ignore=[lock] if lock else []
        )
    return {
        "harness": state,
        # the package's own version: a process may import agentrepro from a source tree that was never installed
        "agentrepro": {"version": __version__, "files_sha256": package_sha256()},
        "python": python_environment(),
    }


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}  # a record of another shape differs in every field


def _versions(packages: Any) -> dict[str, str]:
    pairs = (p.partition("==") for p in packages if isinstance(p, str)) if isinstance(packages, list) else ()
    return {name: version for name, _, version in pairs}


NOT_RECORDED = "no record of the code it ran (written by an agentrepro that did not record it)"


def differences(lock: dict[str, Any], software: Any) -> list[str]:
    """What `software` (an attempt's, from `running`) ran unlike what `lock` was frozen with, one phrase each: the
    commit, uncommitted changes, the Python version, and each package added, removed or of another version;
    [NOT_RECORDED] when the attempt recorded none."""
    if not isinstance(software, dict):
        return [NOT_RECORDED]
    found = []
    harness, frozen = _object(software.get("harness")), _object(lock.get("harness"))
    listed = harness.get("changed_since_lock")
    changed = [str(p) for p in listed] if isinstance(listed, list) else None  # None: not known
    if harness.get("commit") != frozen.get("commit") and changed != []:  # []: only the lock was committed since
        files = ""
        if changed:
            files = f", {len(changed)} file(s) changed: {', '.join(changed[:3])}{' ...' if len(changed) > 3 else ''}"
        found.append(
            f"harness commit {str(harness.get('commit'))[:12]} (the lock: {str(frozen.get('commit'))[:12]}{files})"
        )
    if harness.get("dirty") and not frozen.get("dirty"):
        found.append("harness with uncommitted changes (the lock: none)")
    python, locked = _object(software.get("python")), _object(lock.get("python"))
    if python.get("version") != locked.get("version"):
        found.append(f"Python {python.get('version')} (the lock: {locked.get('version')})")
    if python.get("packages_sha256") != locked.get("packages_sha256"):
        ran, had = _versions(python.get("packages")), _versions(locked.get("packages"))
        for name in sorted(set(ran) | set(had)):
            if ran.get(name) != had.get(name):
                found.append(f"{name} {ran.get(name, 'absent')} (the lock: {had.get(name, 'absent')})")
    return found
