"""Source parity: the backend files that implement the algorithm, as pinned and as actually run, per placement.

Every backend a study runs on (the default and each `backends:` entry, agentrepro.placement) may name
its checkout (`backend.workdir`, relative to the study root) and the files that implement the algorithm
(`backend.sources`, paths inside that checkout; for GraphGPO the recipe's graph, advantage and trainer
files). Three records, compared by git blob hash (what `git hash-object` prints):

* `pinned_sources(manifest, root)`: freeze asks git for each file's blob at that backend's `commit`, one
  entry per placement, keyed by its label (the backend's name): the lock's
  `backend_sources: {label: {commit, workdir, files: {path: blob}}}`;
* `record_run(config, run_dir)`: each job hashes the files of its own placement on disk as it starts,
  uncommitted edits included (RUN_DIR/backend_sources.json; an evaluation by the backend itself, its
  eval/step<N>/backend_sources.json);
* `run_parity(lock, method, run_dir)`: the lock's entry for the method's placement against that record;
  the audit reports every file whose hash differs and the analysis tabulates them per method and placement
  for the report, so a locally patched framework never passes as the official one.

A lock frozen before sources were per placement (`backend_sources: {commit, files}`, the default backend's
only) is refused with one line asking for a new freeze (`lockfile.check_form`): it cannot say what the other
backends' runs should have run.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrepro import lockfile
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text
from agentrepro.layout import evaluations_on_disk
from agentrepro.placement import declared, method_placement
from agentrepro.reading import load_json

RUN_FILE = "backend_sources.json"
LOCK_KEY = lockfile.SOURCES


def _git(workdir: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(workdir), *args], capture_output=True, timeout=120, input=input)
    except FileNotFoundError:
        raise BadInput(
            "git is not installed: the backend's source files cannot be hashed", where="backend.sources"
        ) from None


def checkout(config: dict[str, Any], root: str | os.PathLike = ".", *, where: str = "") -> Path:
    """The backend checkout named by backend.workdir (relative to `root`); BadInput if it is not a directory.
    `where`: the key path of the backend's block ("" for the study's, "backends.<label>." otherwise)."""
    value = (config.get("backend") or {}).get("workdir")
    path = Path(root) / value if isinstance(value, str) and value else None
    if path is None or not path.is_dir():
        raise BadInput(
            f"backend.sources needs the backend checkout; {path or 'no path'} is not a directory",
            where=f"{where}backend.workdir",
        )
    return path


def pinned(workdir: Path, commit: str, paths: list[str], *, where: str = "") -> dict[str, str]:
    """{path: git blob hash at `commit`}; BadInput naming the commit or the first path git does not have there."""
    if _git(workdir, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        raise BadInput(
            f"the checkout {workdir} has no commit {commit} (fetch it first)", where=f"{where}backend.commit"
        )
    out = {}
    for path in paths:
        found = _git(workdir, "rev-parse", "--verify", "--quiet", f"{commit}:{path}")
        if found.returncode != 0:
            raise BadInput(f"{path} is not a file of {commit[:12]} in {workdir}", where=f"{where}backend.sources")
        out[path] = found.stdout.decode().strip()
    return out


def pinned_sources(manifest: dict[str, Any], root: str | os.PathLike = ".") -> dict[str, dict[str, Any]]:
    """The lock's backend_sources: for every placement whose block names `sources`, {commit, workdir, files}."""
    out = {}
    for label, placement in declared(manifest).items():
        backend = placement.backend
        if not backend.get("sources"):
            continue
        commit = backend.get("commit")
        if not isinstance(commit, str):
            raise BadInput(
                "backend.sources are hashed at the pinned commit; give backend.commit",
                where=f"{placement.where}backend.commit",
            )
        workdir = checkout({"backend": backend}, root, where=placement.where)
        out[label] = {
            "commit": commit,
            "workdir": backend["workdir"],
            "files": pinned(workdir, commit, list(backend["sources"]), where=placement.where),
        }
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
    return [
        {"path": path, "pinned": blob, "ran": ran.get(path)}
        for path, blob in sorted(expected.items())
        if ran.get(path) != blob
    ]


def record_run(config: dict[str, Any], run_dir: Path, root: str | os.PathLike = ".") -> Path | None:
    """Write RUN_DIR/backend_sources.json: the hashes of the files of this job's own backend (the run config's
    block is its placement's), as they are on disk when it starts; None if that backend names no sources."""
    backend = config.get("backend") or {}
    if not backend.get("sources"):
        return None
    workdir = checkout(config, root)
    record = {
        "backend": backend.get("name"),
        "commit": backend.get("commit"),
        "workdir": str(workdir.resolve()),
        "files": running(workdir, list(backend["sources"])),
    }
    path = Path(run_dir) / RUN_FILE
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


@dataclass
class RunParity:
    """One run against the lock's sources of its placement: `label` None when that placement pins none."""

    label: str | None
    commit: str | None = None
    files: list[str] = field(default_factory=list)
    differences: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None  # the run's record is missing or unreadable: nothing says what it ran


def run_parity(lock: dict[str, Any], method: str, run_dir: Path) -> RunParity:
    """The run of `method` in `run_dir` against the lock's pinned sources of the method's placement."""
    try:
        label = method_placement(lock["manifest"], method).name
    except (BadInput, KeyError, TypeError, ValueError):  # not a method of the lock: reported elsewhere
        return RunParity(None)
    entry = (lock.get(LOCK_KEY) or {}).get(label)
    if not isinstance(entry, dict):
        return RunParity(None)
    found = RunParity(label, entry.get("commit"), sorted(entry.get("files") or {}))
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        found.problem = f"{path}: missing: nothing says which {label} sources this run ran"
        return found
    try:
        record = load_json(path)
    except BadInput as exc:
        found.problem = f"unreadable: {exc}"
        return found
    ran = record.get("files") if isinstance(record, dict) else None
    found.differences = differences(entry.get("files") or {}, ran if isinstance(ran, dict) else {})
    return found


def parity_problems(lock: dict[str, Any] | None, method: str, run_dir: Path) -> list[str]:
    """The audit's lines: each file the run of `method` ran other than its placement's pinned blob."""
    if not lock:
        return []
    found = run_parity(lock, method, run_dir)
    if found.problem:
        return [found.problem]
    return [
        f"{Path(run_dir) / RUN_FILE}: {method} on {found.label}: {d['path']} ran as "
        f"{'blob ' + d['ran'] if d['ran'] else 'a missing file'} but {found.label} commit {str(found.commit)[:12]} has "
        f"{d['pinned']}: the backend was not the pinned one"
        for d in found.differences
    ]


def study_rows(lock: dict[str, Any] | None, runs: list[tuple[str, int, Path]]) -> list[dict[str, Any]]:
    """Per method (with its placement): the pinned files and every file a job of theirs ran differently (each
    difference with its seed and job: `train`, or `eval step N` for an evaluation by the backend itself), for the
    analysis and the report. Methods whose placement pins no sources are left out."""
    if not lock or not lock.get(LOCK_KEY):
        return []
    rows: dict[str, dict[str, Any]] = {}
    for method, seed, run_dir in runs:
        evaluations = [(f"eval step {step}", d) for step, d in evaluations_on_disk(run_dir) if (d / RUN_FILE).is_file()]
        for job, directory in [("train", Path(run_dir)), *evaluations]:
            found = run_parity(lock, method, directory)
            if found.label is None:
                break
            row = rows.setdefault(
                method,
                {
                    "method": method,
                    "placement": found.label,
                    "commit": found.commit,
                    "workdir": lock[LOCK_KEY][found.label].get("workdir"),
                    "files": found.files,
                    "seeds": [],
                    "unrecorded": [],
                    "differences": [],
                },
            )
            if job == "train":
                row["seeds"].append(seed)
                if found.problem:
                    row["unrecorded"].append(seed)
            row["differences"] += [{"seed": seed, "job": job, **d} for d in found.differences]
    for row in rows.values():
        row["status"] = "fail" if row["differences"] or row["unrecorded"] else "pass"
    return list(rows.values())
