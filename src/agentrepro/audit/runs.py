"""The audit of one run directory and its evaluations: provenance ties them to the lock, outcomes to its task panel.

* `check_run(run, method, seed, lock)`: provenance.json is an object carrying the lock hash, the hash of
  resolved_config.yaml and a finished attempt; resolved_config.yaml names the backend the lock gives the method.
* `check_evaluation(step_dir, lock, config_sha, run_seal)`: eval/step<N>/provenance.json likewise, and the
  hash of the run's OUTPUTS.sha256 it evaluated (`run_outputs_sha256`) equal to that seal now: a run
  re-sealed after its evaluation (an edited checkpoint or metrics file) breaks this link; an evaluation by the
  backend itself (not `eval.engine: served`) ran its placement's pinned sources.
* Both: every program run in a container proves the image the lock pins for the method's placement, and a
  training job of a placement with a container ran its programs in it (`container_problems`, agentrepro.containers).
* `check_outcomes(file, ...)`: every row names its study, method, seed and step, and a task of the lock's
  panel with the same task_hash; no (task_id, episode) twice; no panel task missing.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from agentrepro import containers
from agentrepro.attempts import PROVENANCE
from agentrepro.audit.tree import EXAMPLES, load_object
from agentrepro.backends.sources import parity_problems
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_file
from agentrepro.layout import RunFiles
from agentrepro.lockfile import lock_sha256
from agentrepro.placement import Placement, method_placement
from agentrepro.reading import iter_jsonl, load_yaml
from agentrepro.runconfig import config_file_sha256

RESOLVED_CONFIG = RunFiles.RESOLVED_CONFIG


def _status_problem(path: Path, status: Any) -> list[str]:
    if status == "ok":
        return []
    return [f"{path}: the last attempt {'has not finished' if status is None else 'ended with status ' + repr(status)}"]


def check_run(run: Path, lock: dict[str, Any] | None) -> tuple[list[str], str | None]:
    """(problems, the hash of resolved_config.yaml or None) of one run directory's provenance."""
    path = run / PROVENANCE
    if not path.is_file():
        return [f"{path}: missing: nothing says which lock and config produced this run"], None
    prov, problem = load_object(path)
    if prov is None:
        return [problem], None
    found: list[str] = []
    if lock is not None and prov.get("lock_sha256") != lock_sha256(lock):
        found.append(
            f"{path}: lock_sha256 is {prov.get('lock_sha256')!r}, the lock's hash is {lock_sha256(lock)!r}: "
            "the run was not produced from the current lock"
        )
    config, actual = run / RESOLVED_CONFIG, None
    if not config.is_file():
        found.append(f"{config}: missing")
    else:
        try:
            actual = config_file_sha256(config)
        except (BadInput, UnicodeDecodeError, ValueError) as exc:
            found.append(str(exc) if isinstance(exc, BadInput) else f"{config}: unreadable ({type(exc).__name__})")
        if actual is not None and prov.get("resolved_config_sha256") != actual:
            found.append(
                f"{path}: resolved_config_sha256 is {prov.get('resolved_config_sha256')!r}, but {config} hashes to {actual!r}"
            )
        if actual is not None and lock is not None:
            found += _backend_problem(config, run.parent.name, lock)
    found += container_problems(path, prov, lock, run.parent.name, must_run=True)
    return found + _status_problem(path, prov.get("status")) + source_problems(run, lock), actual


def container_problems(
    path: Path, prov: dict[str, Any], lock: dict[str, Any] | None, method: str, *, must_run: bool
) -> list[str]:
    """Every program of the job ran in the image the lock pins for its method's placement, as the runtime recorded
    it (agentrepro.containers); a training job of a placement with a container recorded at least one such run."""
    placement = _lock_placement(lock, method)
    image = placement.image if placement is not None else None
    return [] if image is None else containers.problems(path, prov, image, must_run=must_run)


def _lock_placement(lock: dict[str, Any] | None, method: str) -> Placement | None:
    """The placement the lock gives `method`; None without a lock, for a method the lock lacks or a malformed lock
    (reported elsewhere)."""
    try:
        return method_placement(lock["manifest"], method) if lock is not None else None
    except (BadInput, KeyError, TypeError, ValueError):
        return None


def source_problems(run: Path, lock: dict[str, Any] | None) -> list[str]:
    """Every file of the run's own backend (its method's placement) that ran with content other than the lock's
    pinned blob of that placement (backends/sources.py)."""
    return parity_problems(lock, run.parent.name, run)


def _backend_problem(config: Path, method: str, lock: dict[str, Any]) -> list[str]:
    """The run's backend (name, repo, commit) must be the one the lock gives its method (agentrepro.placement)."""
    placement = _lock_placement(lock, method)
    if placement is None:
        return []
    expected = placement.backend
    actual = (load_yaml(config) or {}).get("backend")
    actual = actual if isinstance(actual, dict) else {}
    keys = ("name", "repo", "commit")
    if any(actual.get(k) != expected.get(k) for k in keys):
        shown = lambda b: "/".join(str(b.get(k)) for k in keys if b.get(k) is not None)  # noqa: E731
        return [
            f"{config}: backend {shown(actual)!r} differs from the lock's backend of {method} ({shown(expected)!r})"
        ]
    return []


def check_evaluation(step_dir: Path, lock: dict[str, Any] | None, config_sha: str | None, run_seal: Path) -> list[str]:
    """An evaluation directory: its own provenance, from the same lock, run config and training seal, finished."""
    path = step_dir / PROVENANCE
    if not path.is_file():
        return [f"{path}: missing: nothing says how these outcomes were produced"]
    prov, problem = load_object(path)
    if prov is None:
        return [problem]
    found = []
    if lock is not None and prov.get("lock_sha256") != lock_sha256(lock):
        found.append(
            f"{path}: lock_sha256 is {prov.get('lock_sha256')!r}, not the lock's hash: evaluated under another lock"
        )
    if config_sha is not None and prov.get("resolved_config_sha256") != config_sha:
        found.append(f"{path}: resolved_config_sha256 differs from the run's resolved_config.yaml")
    if run_seal.is_file() and not run_seal.is_symlink():
        now = sha256_file(run_seal)
        if prov.get("run_outputs_sha256") is None:
            found.append(f"{path}: run_outputs_sha256 missing: nothing says which training seal was evaluated")
        elif prov["run_outputs_sha256"] != now:
            found.append(
                f"{path}: run_outputs_sha256 is {str(prov['run_outputs_sha256'])[:12]}, but {run_seal} hashes to {now[:12]}: "
                "the run was re-sealed after this evaluation (its outputs changed)"
            )
    found += container_problems(path, prov, lock, step_dir.parent.parent.parent.name, must_run=False)
    return found + _status_problem(path, prov.get("status")) + _evaluation_sources(step_dir, lock)


def _evaluation_sources(step_dir: Path, lock: dict[str, Any] | None) -> list[str]:
    """An evaluation by the backend itself (not eval.engine: served) ran its placement's sources: as pinned."""
    manifest = (lock or {}).get("manifest")
    if not isinstance(manifest, dict) or (manifest.get("eval") or {}).get("engine") == "served":
        return []
    return parity_problems(
        lock, step_dir.parent.parent.parent.name, step_dir
    )  # runs/<study>/<method>/seed<k>/eval/step<N>


def check_outcomes(file: Path, *, study: str, method: str, seed: int, step: int, panel: dict[str, str]) -> list[str]:
    kinds: dict[str, list[str]] = {}
    seen: Counter = Counter()
    try:
        for number, row in iter_jsonl(file):
            where = f"line {number}"
            if not isinstance(row, dict):
                kinds.setdefault("not an object", []).append(where)
                continue
            for key, want in (("study", study), ("method", method), ("seed", seed), ("step", step)):
                if row.get(key) != want:
                    kinds.setdefault(f"{key} is not {want!r}", []).append(where)
            task = row.get("task_id")
            if not isinstance(task, str) or task not in panel:
                kinds.setdefault("task_id not in the lock's task panel", []).append(f"{where} ({task!r})")
            elif row.get("task_hash") != panel[task]:
                kinds.setdefault("task_hash differs from the lock's task panel", []).append(f"{where} ({task!r})")
            seen[(str(task), str(row.get("episode")))] += 1
    except BadInput as exc:
        return [str(exc)]
    except (UnicodeDecodeError, OSError) as exc:
        return [f"{file}: unreadable ({type(exc).__name__})"]
    found = []
    for kind, wheres in kinds.items():
        more = f" and {len(wheres) - EXAMPLES} more" if len(wheres) > EXAMPLES else ""
        found.append(f"{file}: {kind}: {', '.join(wheres[:EXAMPLES])}{more}")
    repeated = [f"'{t}' episode {e}" for (t, e), n in seen.items() if n > 1]
    if repeated:
        found.append(f"{file}: {len(repeated)} (task_id, episode) key(s) repeated: {', '.join(repeated[:EXAMPLES])}")
    missing = sorted(set(panel) - {t for t, _ in seen})
    if missing:
        found.append(f"{file}: {len(missing)} task(s) of the lock's panel have no row: {', '.join(missing[:EXAMPLES])}")
    return found
