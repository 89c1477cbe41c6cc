"""The harness's own git state: the commit it runs from, and whether the working tree differs from it.

`harness_state(root, ignore=[paths])` asks git (a subprocess, no library) for HEAD and for every change,
untracked files included; git-ignored outputs (runs/, analysis/, ...) never count, and `ignore` removes
paths that the caller is about to write (the lock itself).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MAX_LISTED = 100


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
