"""Checkpoints of a run: which of their files an evaluation keeps, and pruning the rest.

Each backend says which files hold checkpoint N (`Backend.checkpoint` -> StepCheckpoint: the Hugging Face directory a
served evaluation reads, the weights an evaluation reads, the training state only a resume reads); this module owns
what happens to them (docs/design.md §3.3 `checkpoints/`). Step 0 of a framework backend is the base model it starts
from (`base_model`): outside the run, never pruned.

What goes is the run config's `eval.keep_checkpoints`:
* `hf` (the default): a step's training state (18 GB a checkpoint for a 1.5B model with its optimizer); the
  weights an evaluation reads stay (the Hugging Face copy, builtin's step<N>.pt), so the step can be served again;
* `none`: after its evaluation, those weights too (outcomes, metrics and every hash stay); `all`: nothing.

During training (`prunes_during_training`: hf and none alike, since a resume needs only the newest step's state and
the served evaluator the copies), a framework's older checkpoints lose their training state: verl-agent's hook
removes it after each save and records every file first (`Backend.pruned_in_training`; those files were never
sealed, so the audit has nothing to excuse, and it refuses a record that lists a file the seal still lists);
Relax runs with --max-actor-ckpt-to-keep 1 (its recipe.retention_args). A run pruned during training still resumes.

After an evaluation (`prune`): `agentrepro eval` calls it once step N's outcomes are checked and written, before it
seals eval/step<N>/ (an evaluation that failed never gets here). Every file removed must still hash as the run's
seal says (a changed checkpoint is evidence, never deleted); the record eval/step<N>/pruned.json lists each removed
file with that hash, the hashes of the kept weights and of the outcomes, and is sealed with the evaluation. The
training seal is not rewritten: the audit accepts a sealed file that is absent exactly when a record of the run
lists it with the seal's hash (`pruned_files`). A run whose checkpoints were pruned after their evaluation cannot
resume (`refuse_resume`; `agentrepro train --no-resume` trains it again).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from agentrepro.backends.base import PrunedInTraining, StepCheckpoint
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_json, sha256_file
from agentrepro.layout import RunFiles, eval_dir, evaluations_on_disk
from agentrepro.reading import load_json
from agentrepro.runconfig import EvalConfig
from agentrepro.seal import OUTPUTS, read_outputs_manifest

KEEP = ("hf", "none", "all")
RECORD = RunFiles.PRUNED


def base_model(config: dict[str, Any], step: int) -> StepCheckpoint:
    """Step 0 of a framework backend: the model it starts from (backend.model_path, else model.path)."""
    path = (config.get("backend") or {}).get("model_path") or (config.get("model") or {}).get("path")
    return StepCheckpoint(step, Path(path) if path else None)


def keep_setting(config: dict[str, Any], *, path: object = None) -> str:
    """eval.keep_checkpoints of a run config: `hf` (default), `none` or `all`; BadInput naming the key otherwise."""
    keep = EvalConfig.of(config, path=path).keep_checkpoints
    if keep not in KEEP:
        raise BadInput(f"expected one of {', '.join(KEEP)}, got {keep!r}", path=path, where="eval.keep_checkpoints")
    return keep


def prunes_during_training(config: dict[str, Any]) -> bool:
    """Whether older checkpoints lose their training state during training under this config's
    eval.keep_checkpoints: under `hf` and `none` (a resume needs only the newest step's state)."""
    return keep_setting(config) != "all"


# --- pruning ------------------------------------------------------------------------------------------------


def _sealed_under(entries: dict[str, str], run_dir: Path, target: Path) -> dict[str, str]:
    """The seal's entries (run-relative path -> sha256) at or below `target`."""
    try:
        rel = target.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        return {}  # outside the run directory (a base model): never pruned
    return {p: d for p, d in entries.items() if p == rel or p.startswith(rel + "/")}


def prune(
    config: dict[str, Any], run_dir: str | Path, ckpt: StepCheckpoint, *, outcomes: Path
) -> dict[str, Any] | None:
    """Remove what `eval.keep_checkpoints` does not keep of checkpoint `step`, once its outcomes are written; writes
    and returns the record eval/step<N>/pruned.json, or None when nothing was removed (nothing to remove, `all`).

    Only files the run's seal lists are removed, each after checking it still has the sealed hash (Failure
    otherwise, before anything is deleted). Files of the step that the seal does not list are refused too. A run
    not sealed yet (evaluated by hand mid-training) is not pruned, and stderr says so.
    """
    run_dir = Path(run_dir)
    keep = keep_setting(config, path=run_dir / RunFiles.RESOLVED_CONFIG)
    if keep == "all":
        return None
    seal, step = run_dir / OUTPUTS, ckpt.step
    if not seal.is_file():  # evaluated before the run was sealed (not in the workflow): nothing can be checked
        if any(p.exists() for p in (*ckpt.state, *(ckpt.weights if keep == "none" else ()))):
            print(
                f"agentrepro: checkpoint {step} not pruned: {seal} is missing (the run is not sealed), so nothing says "
                "what its files were",
                file=sys.stderr,
            )
        return None
    entries = read_outputs_manifest(seal)
    weights = {p: d for target in ckpt.weights for p, d in _sealed_under(entries, run_dir, target).items()}
    state = {
        p: d for target in ckpt.state for p, d in _sealed_under(entries, run_dir, target).items() if p not in weights
    }
    doomed = {**state, **(weights if keep == "none" else {})}
    targets = [
        t for t in (*ckpt.state, *(ckpt.weights if keep == "none" else ())) if _sealed_under(entries, run_dir, t)
    ]
    if not doomed:
        return None
    for rel, digest in sorted(doomed.items()):
        path = run_dir / rel
        if path.is_file() and sha256_file(path) != digest:
            raise Failure(
                f"{path}: changed after it was sealed in {seal}; checkpoint {step} is not pruned (kept as evidence)"
            )
    kept = weights if keep == "hf" else {}
    for target in targets:
        for path in _files(target):
            rel = path.relative_to(run_dir).as_posix()
            if rel not in doomed and rel not in kept:
                raise Failure(
                    f"{path}: not listed in {seal} (written after the run was sealed); checkpoint {step} is not pruned"
                )
    removed_bytes = sum((run_dir / rel).stat().st_size for rel in doomed if (run_dir / rel).is_file())
    for target in targets:
        if keep == "hf" and any(w == target or w.is_relative_to(target) for w in ckpt.weights):
            for path in sorted(_files(target)):  # the state around the kept weights (verl: actor/huggingface/)
                if path.relative_to(run_dir).as_posix() in doomed:
                    path.unlink()
            _remove_empty_dirs(target)
        elif target.is_dir():
            shutil.rmtree(target)
        elif target.is_file():
            target.unlink()
    record = {
        "step": step,
        "keep": keep,
        "outcomes_sha256": sha256_file(outcomes),
        "removed": dict(sorted(doomed.items())),
        "removed_bytes": removed_bytes,
        "kept": dict(sorted(kept.items())),
    }
    atomic_write_json(eval_dir(run_dir, step) / RECORD, record)
    return record


def _files(target: Path) -> list[Path]:
    if target.is_file():
        return [target]
    return [p for p in target.rglob("*") if p.is_file()] if target.is_dir() else []


def _remove_empty_dirs(top: Path) -> None:
    for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(path.iterdir()):
            path.rmdir()


# --- what the audit and the train verb read -------------------------------------------------------------------


def records(run_dir: str | Path) -> dict[int, dict[str, Any]]:
    """The pruned.json record of every evaluated step that has one, by step (a malformed one is BadInput)."""
    found = {}
    for step, folder in evaluations_on_disk(run_dir):
        path = folder / RECORD
        if path.is_file():
            record = load_json(path)
            if not isinstance(record, dict) or not isinstance(record.get("removed"), dict):
                raise BadInput("expected an object with `removed` {path: sha256}", path=path)
            found[step] = record
    return found


def pruned_files(run_dir: str | Path, during: PrunedInTraining | None = None) -> tuple[set[Path], list[str]]:
    """(files of the run's seal that were pruned after an evaluation, problems): a sealed file is pruned when a
    record lists it with the seal's own hash; a record listing another hash, or a file the seal lacks, is a problem.
    `during`: what the backend removed during training (`Backend.pruned_in_training`): never sealed, so a file the
    seal lists there means the record is wrong."""
    run_dir = Path(run_dir)
    seal = run_dir / OUTPUTS
    try:
        found = records(run_dir)
        entries = read_outputs_manifest(seal) if seal.is_file() else {}
    except BadInput as exc:
        return set(), [str(exc)]
    pruned, problems = set(), []
    for step, record in sorted(found.items()):
        where = eval_dir(run_dir, step) / RECORD
        for rel, digest in sorted(record["removed"].items()):
            if entries.get(rel) != digest:
                problems.append(f"{where}: lists {rel} as removed with a hash the run's seal {seal} does not have")
            elif not (run_dir / rel).exists():  # a file still there is checked against the seal as usual
                pruned.add(run_dir / rel)
    if during is not None:
        problems += [
            f"{during.record}: lists {rel} as removed during training, but the run's seal {seal} lists it"
            for rel in sorted(set(during.files) & set(entries))
        ]
    return pruned, problems


def training_summary(during: PrunedInTraining | None) -> dict[str, Any] | None:
    """What the train job shows and records of pruning during training: steps, files, bytes (None: nothing pruned)."""
    if during is None or not during.files:
        return None
    lines = during.files.values()
    return {
        "steps": sorted({line["step"] for line in lines}),
        "files": len(during.files),
        "bytes": sum(line["bytes"] for line in lines),
        "record": during.record.name,
    }


def refuse_resume(run_dir: str | Path) -> None:
    """BadInput when checkpoints of this run were pruned after their evaluation: a resume would load them. Pruning
    during training never refuses: it keeps the latest step's training state, the one a resume loads."""
    steps = sorted(records(run_dir))
    if steps:
        raise BadInput(
            f"checkpoints of steps {', '.join(map(str, steps))} were pruned after their evaluation "
            "(eval.keep_checkpoints), so this run cannot resume; pass --no-resume to train it again",
            path=Path(run_dir) / RunFiles.EVAL,
        )
