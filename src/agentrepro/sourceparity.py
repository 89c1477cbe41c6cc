"""Source parity: the backend files that implement the algorithm, as pinned and as actually run.

A manifest names the backend checkout (`backend.workdir`, relative to the study root) and the files that
implement the algorithm (`backend.sources`, paths inside that checkout; for GraphGPO the recipe's graph,
advantage and trainer files). Three records, compared by git blob hash (what `git hash-object` prints):

* `pinned(workdir, commit, paths)`: freeze asks git for each file's blob at `backend.commit` (the lock's
  `backend_sources`);
* `running(workdir, paths)`: each job hashes the files on disk as it starts, uncommitted edits included
  (RUN_DIR/backend_sources.json);
* `differences(pinned, ran)`: the audit lists every file whose hash differs, so a locally patched framework
  never passes as the official one.

Used by every backend that runs an external checkout (verl-agent, Relax).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text

RUN_FILE = "backend_sources.json"


def _git(workdir: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(workdir), *args], capture_output=True, timeout=120, input=input)
    except FileNotFoundError:
        raise BadInput("git is not installed: the backend's source files cannot be hashed", where="backend.sources") from None


def checkout(config: dict[str, Any], root: str | os.PathLike = ".") -> Path:
    """The backend checkout named by backend.workdir (relative to `root`); BadInput if it is not a directory."""
    value = (config.get("backend") or {}).get("workdir")
    path = Path(root) / value if isinstance(value, str) and value else None
    if path is None or not path.is_dir():
        raise BadInput(f"backend.sources needs the backend checkout; {path or 'no path'} is not a directory", where="backend.workdir")
    return path


def pinned(workdir: Path, commit: str, paths: list[str]) -> dict[str, str]:
    """{path: git blob hash at `commit`}; BadInput naming the commit or the first path git does not have there."""
    if _git(workdir, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        raise BadInput(f"the checkout {workdir} has no commit {commit} (fetch it first)", where="backend.commit")
    out = {}
    for path in paths:
        found = _git(workdir, "rev-parse", "--verify", "--quiet", f"{commit}:{path}")
        if found.returncode != 0:
            raise BadInput(f"{path} is not a file of {commit[:12]} in {workdir}", where="backend.sources")
        out[path] = found.stdout.decode().strip()
    return out


def running(workdir: Path, paths: list[str]) -> dict[str, str | None]:
    """{path: git blob hash of the file on disk now} (None: missing), as `git hash-object` computes it."""
    out: dict[str, str | None] = {}
    for path in paths:
        file = Path(workdir) / path
        if not file.is_file():
            out[path] = None
            continue
        hashed = _git(workdir, "hash-object", "--no-filters", "--stdin", input=file.read_bytes())
        out[path] = hashed.stdout.decode().strip() if hashed.returncode == 0 else None
    return out


def differences(expected: dict[str, str], ran: dict[str, str | None]) -> list[dict[str, Any]]:
    """[{path, pinned, ran}] for every pinned file that ran with other content (or not at all), sorted by path."""
    return [{"path": path, "pinned": blob, "ran": ran.get(path)} for path, blob in sorted(expected.items()) if ran.get(path) != blob]


def record_run(config: dict[str, Any], run_dir: Path, root: str | os.PathLike = ".") -> Path | None:
    """Write RUN_DIR/backend_sources.json (the hashes of the files this job runs); None if the config names none."""
    paths = (config.get("backend") or {}).get("sources")
    if not paths:
        return None
    hashes = running(checkout(config, root), list(paths))
    path = Path(run_dir) / RUN_FILE
    atomic_write_text(path, json.dumps({"workdir": str(checkout(config, root).resolve()), "files": hashes}, indent=1, sort_keys=True) + "\n")
    return path
