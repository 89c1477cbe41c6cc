"""The audit of the shared warm starts (runs/<study>/_warmstart/): each is planned, sealed, from the lock, and every
method of its seed started from its weights and shows its step-0 outcomes.

* The plan: `StudyPlan.warmstarts` of the lock's manifest (trainer/shared_warmstart.py) gives every method x seed's
  warm-start identity; the folders `seed<k>-<id12>` of those identities must exist (once the runs are required),
  and nothing else may sit in runs/<study>/_warmstart/.
* Each warm start: provenance.json from this lock, its resolved_config.yaml hashing as recorded, the identity the
  plan expects, a last attempt that ended ok (audit_runs.check_run); its seal covering exactly its files; its
  step-0 outcomes on the lock's panel (method `warmstart`).
* Each run that plans a warm start: its sealed checkpoints/step0.pt hashes as its warm start's sealed
  checkpoints/step0.pt (the run started from the same bytes: a run trained from other weights, or one that
  warm-started itself, fails here), its warmstart.json names that warm start, and its step-0 outcomes are the
  warm start's, row for row (only study and method relabelled).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from agentrepro.audit.runs import check_outcomes, check_run
from agentrepro.audit.tree import Tree, check_seal, load_object, read_seal
from agentrepro.errors import BadInput
from agentrepro.layout import (
    WARMSTART_DIR_RE,
    RunFiles,
    checkpoint_file,
    locate,
    outcomes_path,
    warmstart_name,
)
from agentrepro.planning import StudyPlan
from agentrepro.reading import read_jsonl
from agentrepro.seal import OUTPUTS
from agentrepro.trainer.shared_warmstart import WARMSTART_METHOD

STEP0 = checkpoint_file(".", 0).as_posix()  # run-relative, as seals list it
RELABELLED = ("study", "method")


def plan(lock: dict[str, Any] | None) -> tuple[dict[tuple[str, int], str], list[str]]:
    """({(method, seed): identity}, problems) that the lock's manifest plans."""
    manifest = (lock or {}).get("manifest")
    if not isinstance(manifest, dict):
        return {}, []
    try:
        return StudyPlan(manifest, "the lock's manifest").warmstarts, []
    except (BadInput, KeyError, TypeError) as exc:
        return {}, [f"the lock's manifest: its warm starts cannot be planned ({exc})"]


def _step0_hash(unit: Path) -> str | None:
    entries, _ = read_seal(unit / OUTPUTS) if (unit / OUTPUTS).is_file() else (None, "")
    return (entries or {}).get(STEP0)


def _rows(path: Path) -> list[dict] | None:
    try:
        return [{k: v for k, v in row.items() if k not in RELABELLED} for row in read_jsonl(path)]
    except (BadInput, OSError, AttributeError):
        return None  # reported by the outcomes check


def check_warmstarts(
    study: str,
    root: Path,
    lock: dict[str, Any] | None,
    tree: Tree,
    runs: dict[tuple[str, int], Path],
    *,
    require: str,
    not_bundled: set[Path],
) -> list[str]:
    """Problems of runs/<study>/_warmstart/ and of every run's link to its warm start (see the module docstring)."""
    home = locate(study, root)
    top = home.warmstarts
    planned, found = plan(lock)
    expected = {warmstart_name(seed, ident): (seed, ident) for (_, seed), ident in planned.items()}
    on_disk: dict[str, Path] = {}
    for path in sorted(p for p in tree.files | tree.dirs if p.parent == top):
        if path in tree.files or not WARMSTART_DIR_RE.match(path.name):
            found.append(
                f"{path}: a stray entry beside the warm starts: not part of the study's layout (bundle would ship it)"
            )
        elif lock is not None and path.name not in expected:
            found.append(f"{path}: not a warm start of the lock (planned: {', '.join(sorted(expected)) or 'none'})")
        else:
            on_disk[path.name] = path
    if top in tree.files:
        found.append(f"{top}: a file where the warm starts' folder belongs")
    if require != "lock":
        found += [
            f"{top / name}: missing: the lock plans the warm start of seed {seed} (never made, or deleted)"
            for name, (seed, _) in sorted(expected.items())
            if name not in on_disk
        ]
    panel = {
        t["task_id"]: t["task_hash"]
        for t in (lock or {}).get("task_panel") or []
        if isinstance(t, dict) and "task_id" in t
    }
    for name, unit in sorted(on_disk.items()):
        found += check_run(unit, lock)[0]
        found += check_seal(unit, tree, not_bundled=not_bundled)
        prov, _ = load_object(unit / RunFiles.PROVENANCE)
        if name in expected and prov is not None and prov.get("warmstart_identity") != expected[name][1]:
            found.append(
                f"{unit / RunFiles.PROVENANCE}: warmstart_identity is {prov.get('warmstart_identity')!r}, "
                f"the lock's settings give {expected[name][1]!r}"
            )
        outcomes = outcomes_path(unit, 0)
        if outcomes not in tree.files:
            found.append(f"{outcomes}: missing: the warm start's step-0 evaluation")
        elif lock is not None and name in expected:
            found += check_outcomes(
                outcomes, study=study, method=WARMSTART_METHOD, seed=expected[name][0], step=0, panel=panel
            )
    for (method, seed), run in sorted(runs.items()):
        if (method, seed) in planned:
            name = warmstart_name(seed, planned[(method, seed)])
            if name in on_disk:
                found += _check_start(run, on_disk[name])
    return found


def _check_start(run: Path, unit: Path) -> list[str]:
    """A run against its seed's warm start: same step-0 bytes, the record names it, the same step-0 outcomes."""
    found = []
    mine, theirs = _step0_hash(run), _step0_hash(unit)
    if mine is None or theirs is None:
        found.append(
            f"{run / STEP0}: no sealed step-0 checkpoint to compare with {unit / STEP0}"
            if theirs
            else f"{unit / STEP0}: the warm start's seal lists no step-0 checkpoint"
        )
    elif mine != theirs:
        found.append(
            f"{run / STEP0}: hashes {mine[:12]}, its seed's warm start {unit / STEP0} hashes {theirs[:12]}: "
            "the run did not start from the shared warm start's weights"
        )
    record, problem = load_object(run / RunFiles.WARMSTART) if (run / RunFiles.WARMSTART).is_file() else (None, None)
    shared = (record or {}).get("shared")
    if problem:
        found.append(problem)
    elif not isinstance(shared, dict) or PurePosixPath(str(shared.get("dir"))).name != unit.name:
        found.append(
            f"{run / RunFiles.WARMSTART}: does not name the shared warm start {unit.name} "
            f"(it names {shared.get('dir') if isinstance(shared, dict) else 'none: the run warm-started itself'})"
        )
    ours, base = outcomes_path(run, 0), outcomes_path(unit, 0)
    if ours.is_file() and base.is_file():
        a, b = _rows(ours), _rows(base)
        if a is not None and b is not None and a != b:
            differ = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
            found.append(f"{ours}: {differ} row(s) differ from the shared warm start's step-0 outcomes {base}")
    return found
