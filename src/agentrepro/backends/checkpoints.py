"""Checkpoint N of a run: which files hold it, which of them an evaluation reads, and pruning them.

The one owner of (backend, step) -> checkpoint files (docs/design.md §3.3 `checkpoints/`), from each framework's
output layout (tests/fixtures/frameworks/*.outputs.json, checked in tests/backends/test_checkpoints.py):

| backend     | `hf`: the Hugging Face directory of step N         | `state`: training state only (pruned under `hf`) |
|-------------|----------------------------------------------------|--------------------------------------------------|
| verl-agent  | checkpoints/global_step_N/actor/huggingface/       | the rest of checkpoints/global_step_N/ (FSDP model, optimizer and extra shards, data.pt, critic/) |
| relax       | relax/hf/<rollout_id>/ (Relax's --save-hf)         | <--save>/iter_<rollout_id:07d>/ (Megatron distributed checkpoint) |
| builtin     | checkpoints/hf/step<N>/ when exported              | none: checkpoints/step<N>.pt is the only copy of its weights, which its evaluator reads |
| other       | checkpoints/hf/step<N>/ (layout.hf_checkpoint)     | none |

Step 0 of verl-agent and relax is the base model (its local directory; outside the run, never pruned). Relax's
0-based rollout_id comes from relax_recipe.rollout_of_step, its one owner. verl-agent's names (global_step_N,
actor/huggingface) are those of the hook that prunes during training (hooks/agentrepro_verl_prune.py), taken from it.

What goes is the run config's `eval.keep_checkpoints`:
* `hf` (the default): a step's training state (18 GB a checkpoint for a 1.5B model with its optimizer); the
  weights an evaluation reads stay (the Hugging Face copy, builtin's step<N>.pt), so the step can be served again;
* `none`: after its evaluation, those weights too (outcomes, metrics and every hash stay); `all`: nothing.

During training (hf and none alike: resume needs only the newest step's state, the served evaluator the copies):
* verl-agent: after saving step N, the hook removes the training state of every older step, recording each file
  first (run-relative path, sha256, bytes) in checkpoints/pruned_in_training.jsonl (`pruned_in_training`). Those
  files were never sealed, so the audit has nothing to excuse; the record is sealed with the run, shown by the
  train verb, and the audit refuses one that lists a file the seal still lists.
* relax: the job passes --max-actor-ckpt-to-keep 1 instead of the recipe's 2 (relax_recipe.retention_args, a
  recorded deviation). Relax rotates its iter_* directories before each save and never its --save-hf copies, so
  after a save the previous step's Megatron checkpoint is still there until the next one.
A run pruned during training still resumes from its latest step.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_json, sha256_file
from agentrepro.hooks import agentrepro_verl_prune as verl_prune
from agentrepro.layout import RunFiles, checkpoint_dir, eval_dir, evaluations_on_disk, hf_checkpoint
from agentrepro.reading import iter_jsonl, load_json
from agentrepro.seal import OUTPUTS, read_outputs_manifest

KEEP = ("hf", "none", "all")
DEFAULT_KEEP = "hf"
RECORD = RunFiles.PRUNED


@dataclass(frozen=True)
class StepCheckpoint:
    """Checkpoint `step` of a run. `hf`: the model directory an evaluator serves (None: none at this step);
    `weights`: paths inside the run directory that an evaluation reads; `state`: paths inside the run directory
    that only a resumed training reads."""

    step: int
    hf: Path | None
    weights: tuple[Path, ...] = ()
    state: tuple[Path, ...] = ()


def _base_model(config: dict[str, Any], step: int) -> StepCheckpoint:
    """Step 0 of an external framework: the model it starts from (backend.model_path, else model.path)."""
    path = (config.get("backend") or {}).get("model_path") or (config.get("model") or {}).get("path")
    return StepCheckpoint(step, Path(path) if path else None)


def _verl_agent(config: dict[str, Any], run_dir: Path, step: int) -> StepCheckpoint:
    """trainer.default_local_dir = checkpoints/ (verl_recipes.appended); global_step_N/actor/huggingface/ is written
    because actor.checkpoint.contents has hf_model (fsdp_checkpoint_manager.py:208 at 20bd331)."""
    if step == 0:
        return _base_model(config, step)
    root = verl_step_dir(run_dir, step)
    hf = root.joinpath(*verl_prune.HF_COPY)
    return StepCheckpoint(step, hf, weights=(hf,), state=(root,))


def _relax(config: dict[str, Any], run_dir: Path, step: int) -> StepCheckpoint:
    from agentrepro.backends import relax, relax_recipe

    if step == 0:
        return _base_model(config, step)
    save = relax.save_dir(run_dir)
    hf = relax_recipe.hf_checkpoint(save, config, step)
    megatron = relax_recipe.checkpoint_dir(save, config) / f"iter_{relax_recipe.rollout_of_step(step):07d}"
    return StepCheckpoint(step, hf, weights=(hf,), state=(megatron,))


def _builtin(config: dict[str, Any], run_dir: Path, step: int) -> StepCheckpoint:
    hf = hf_checkpoint(run_dir, step)
    return StepCheckpoint(step, hf, weights=(hf, checkpoint_dir(run_dir) / f"step{step}.pt"))  # trainer/checkpoint.py


def _default(config: dict[str, Any], run_dir: Path, step: int) -> StepCheckpoint:
    hf = hf_checkpoint(run_dir, step)
    return StepCheckpoint(step, hf, weights=(hf,))


LAYOUTS: dict[str, Callable[[dict[str, Any], Path, int], StepCheckpoint]] = {
    "verl-agent": _verl_agent, "relax": _relax, "builtin": _builtin}


def verl_step_dir(run_dir: str | Path, step: int) -> Path:
    """verl's checkpoint of `step`: <trainer.default_local_dir>/global_step_<N>/ (ray_trainer.py:913)."""
    return checkpoint_dir(run_dir) / verl_prune.STEP_DIR.format(step)


def step_checkpoint(config: dict[str, Any], run_dir: str | Path, step: int) -> StepCheckpoint:
    """Checkpoint `step` of the run in `run_dir` trained from `config` (its backend's layout, table above)."""
    return LAYOUTS.get(config["backend"]["name"], _default)(config, Path(run_dir), step)


def hf_dir(config: dict[str, Any], run_dir: str | Path, step: int) -> Path | None:
    """The Hugging Face directory the served evaluator reads for checkpoint `step` (None: the backend has none)."""
    return step_checkpoint(config, run_dir, step).hf


def keep_setting(config: dict[str, Any], *, path: object = None) -> str:
    """eval.keep_checkpoints of a run config: `hf` (default), `none` or `all`; BadInput naming the key otherwise."""
    keep = (config.get("eval") or {}).get("keep_checkpoints", DEFAULT_KEEP)
    if keep not in KEEP:
        raise BadInput(f"expected one of {', '.join(KEEP)}, got {keep!r}", path=path, where="eval.keep_checkpoints")
    return keep


def prunes_during_training(config: dict[str, Any]) -> bool:
    """Whether older checkpoints lose their training state during training under this config's
    eval.keep_checkpoints (hf and none; stated once, in the verl-agent hook's PRUNES, which Relax's flag follows)."""
    return verl_prune.PRUNES[keep_setting(config)]


# --- pruning ------------------------------------------------------------------------------------------------


def _sealed_under(entries: dict[str, str], run_dir: Path, target: Path) -> dict[str, str]:
    """The seal's entries (run-relative path -> sha256) at or below `target`."""
    try:
        rel = target.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        return {}  # outside the run directory (a base model): never pruned
    return {p: d for p, d in entries.items() if p == rel or p.startswith(rel + "/")}


def prune(config: dict[str, Any], run_dir: str | Path, step: int, *, outcomes: Path) -> dict[str, Any] | None:
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
    seal = run_dir / OUTPUTS
    ckpt = step_checkpoint(config, run_dir, step)
    if not seal.is_file():   # evaluated before the run was sealed (not in the workflow): nothing can be checked
        if any(p.exists() for p in (*ckpt.state, *(ckpt.weights if keep == "none" else ()))):
            print(f"agentrepro: checkpoint {step} not pruned: {seal} is missing (the run is not sealed), so nothing says "
                  "what its files were", file=sys.stderr)
        return None
    entries = read_outputs_manifest(seal)
    weights = {p: d for target in ckpt.weights for p, d in _sealed_under(entries, run_dir, target).items()}
    state = {p: d for target in ckpt.state for p, d in _sealed_under(entries, run_dir, target).items() if p not in weights}
    doomed = {**state, **(weights if keep == "none" else {})}
    targets = [t for t in (*ckpt.state, *(ckpt.weights if keep == "none" else ())) if _sealed_under(entries, run_dir, t)]
    if not doomed:
        return None
    for rel, digest in sorted(doomed.items()):
        path = run_dir / rel
        if path.is_file() and sha256_file(path) != digest:
            raise Failure(f"{path}: changed after it was sealed in {seal}; checkpoint {step} is not pruned (kept as evidence)")
    kept = weights if keep == "hf" else {}
    for target in targets:
        for path in _files(target):
            rel = path.relative_to(run_dir).as_posix()
            if rel not in doomed and rel not in kept:
                raise Failure(f"{path}: not listed in {seal} (written after the run was sealed); checkpoint {step} is not pruned")
    removed_bytes = sum((run_dir / rel).stat().st_size for rel in doomed if (run_dir / rel).is_file())
    for target in targets:
        if keep == "hf" and any(w == target or w.is_relative_to(target) for w in ckpt.weights):
            for path in sorted(_files(target)):   # the state around the kept weights (verl: actor/huggingface/)
                if path.relative_to(run_dir).as_posix() in doomed:
                    path.unlink()
            _remove_empty_dirs(target)
        elif target.is_dir():
            shutil.rmtree(target)
        elif target.is_file():
            target.unlink()
    record = {"step": step, "keep": keep, "outcomes_sha256": sha256_file(outcomes), "removed": dict(sorted(doomed.items())),
              "removed_bytes": removed_bytes, "kept": dict(sorted(kept.items()))}
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


def pruned_files(run_dir: str | Path) -> tuple[set[Path], list[str]]:
    """(files of the run's seal that were pruned after an evaluation, problems): a sealed file is pruned when a
    record lists it with the seal's own hash; a record listing another hash, or a file the seal lacks, is a problem."""
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
            elif not (run_dir / rel).exists():   # a file still there is checked against the seal as usual
                pruned.add(run_dir / rel)
    try:   # pruned during training, before the seal: never sealed, so a sealed one means the record is wrong
        during = pruned_in_training(run_dir)
    except BadInput as exc:
        return pruned, problems + [str(exc)]
    problems += [f"{training_record(run_dir)}: lists {rel} as removed during training, but the run's seal {seal} lists it"
                 for rel in sorted(set(during) & set(entries))]
    return pruned, problems


def training_record(run_dir: str | Path) -> Path:
    """checkpoints/pruned_in_training.jsonl: the files older checkpoints lost during training (verl-agent's hook)."""
    return checkpoint_dir(run_dir) / verl_prune.RECORD


def pruned_in_training(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Run-relative path -> its line ({step, saved, path, sha256, bytes}) of every file removed during training,
    {} when nothing was; BadInput naming the line of a malformed record."""
    path, found = training_record(run_dir), {}
    if not path.is_file():
        return found
    for number, line in iter_jsonl(path):
        if not (isinstance(line, dict) and isinstance(line.get("path"), str) and isinstance(line.get("sha256"), str)
                and all(isinstance(line.get(k), int) and not isinstance(line.get(k), bool) for k in ("step", "saved", "bytes"))):
            raise BadInput("expected {step, saved, path, sha256, bytes} (hooks/agentrepro_verl_prune.py)", path=path,
                           where=f"line {number}")
        found[line["path"]] = line
    return found


def training_summary(run_dir: str | Path) -> dict[str, Any] | None:
    """What the train verb shows and records of pruning during training: steps, files, bytes (None: nothing pruned)."""
    lines = pruned_in_training(run_dir)
    if not lines:
        return None
    return {"steps": sorted({line["step"] for line in lines.values()}), "files": len(lines),
            "bytes": sum(line["bytes"] for line in lines.values()), "record": verl_prune.RECORD}


def refuse_resume(run_dir: str | Path) -> None:
    """BadInput when checkpoints of this run were pruned after their evaluation: a resume would load them. Pruning
    during training never refuses: it keeps the latest step's training state, the one a resume loads."""
    steps = sorted(records(run_dir))
    if steps:
        raise BadInput(f"checkpoints of steps {', '.join(map(str, steps))} were pruned after their evaluation "
                       "(eval.keep_checkpoints), so this run cannot resume; pass --no-resume to train it again",
                       path=Path(run_dir) / RunFiles.EVAL)
