"""`audit --re-eval`: each run's final outcomes derived again from the checkpoint the study ships.

The audit's recount proves the analysis follows from the outcomes; it cannot prove the outcomes follow from the
training. A forger who edits outcomes.jsonl, re-seals it and runs analyze and report again leaves every hash and
number consistent. Evaluation is deterministic where the manifest evaluates greedily (eval.temperature 0), so
playing the final checkpoint on the frozen panel again (`Backend.replay`) must give the recorded rows, field for
field. `re_evaluate(study, root, sample=...)` does that for every run on disk, at the step its verdicts use, on
the whole panel or on a sample of its tasks (`TaskSample`), and returns the differences as problems and one line
per run of what was, or could not be, re-evaluated (a checkpoint left out of the bundle, a framework whose
evaluation needs its image and GPU: said, never counted as agreement), naming the tasks played.

Who plays again is who played: outcomes a chat server produced (`eval.engine: served`, any backend's Hugging Face
checkpoint) go through the served evaluator again, on a server of the recorded kind started here, where that
server repeats its outcomes (agentrepro.serving.servers.determinism); the rest through the backend's own
`Backend.replay` (the builtin trainer's greedy evaluation; a sampled one only on the whole panel, since its draws
depend on the batch).
"""

from __future__ import annotations

import os
import random
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrepro.audit.tree import EXAMPLES, walk
from agentrepro.backends import get_backend
from agentrepro.errors import BadInput, Failure
from agentrepro.layout import RunFiles, eval_dir, locate
from agentrepro.lockfile import read_lock
from agentrepro.reading import iter_jsonl
from agentrepro.runconfig import EvalConfig, checkpoint_steps, read_resolved_config
from agentrepro.serving.evaluate import replay_run

SHOWN_TASKS = 12  # task ids a run's line names; the seed names the rest


@dataclass(frozen=True)
class TaskSample:
    """`--tasks N [--tasks-seed S]`: N tasks of the frozen panel drawn at random, the same positions for every run.
    Drawn, not the first N, so that no one can know beforehand which outcomes an audit will play; the seed is drawn
    afresh for each audit unless given, and printed, so that the same sample can be played again."""

    size: int
    seed: int

    @classmethod
    def drawn(cls, size: int, seed: int | None = None) -> TaskSample:
        return cls(size, secrets.randbelow(2**32) if seed is None else seed)

    def positions(self, panel_size: int) -> list[int] | None:
        """Sorted panel positions of the sample; None when it covers the whole panel."""
        if self.size >= panel_size:
            return None
        return sorted(random.Random(self.seed).sample(range(panel_size), self.size))


def final_step(run_dir: Path, declared: int | None) -> tuple[dict[str, Any], int]:
    """A run's resolved config and the step its verdicts compare with the paper (the checkpoint re-evaluated and
    shipped): the lock's `analysis.final_step` (`declared`) where the run evaluates it, else its last evaluated step,
    as the analysis chooses. BadInput when the config cannot be read."""
    config = read_resolved_config(run_dir)
    steps = checkpoint_steps(config)
    return config, declared if declared in steps else max(steps)


def declared_final_step(lock: dict[str, Any]) -> int | None:
    """The manifest's `analysis.final_step` as the lock froze it (None: the analysis takes the last shared step)."""
    return ((lock.get("manifest") or {}).get("analysis") or {}).get("final_step")


def _key(row: dict[str, Any]) -> tuple[Any, Any]:
    return row.get("task_id"), row.get("episode")


def _differences(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]], where: Path) -> list[str]:
    """One line per row of `replayed` whose recorded row differs (or is absent), naming the task and the fields."""
    by_key = {_key(row): row for row in recorded}
    lines = []
    for row in replayed:
        task, episode = _key(row)
        old = by_key.get((task, episode))
        if old is None:
            lines.append(f"{where}: task {task} episode {episode}: no recorded row, the shipped checkpoint plays one")
            continue
        fields = sorted(k for k in old.keys() | row.keys() if old.get(k) != row.get(k))
        if fields:
            said = ", ".join(f"{k} recorded {old.get(k)!r}, played {row.get(k)!r}" for k in fields)
            lines.append(f"{where}: task {task} episode {episode}: {said}: not what the shipped checkpoint plays")
    return lines


def replay(
    config: dict[str, Any], run_dir: Path, step: int, positions: list[int] | None, *, log_dir: Path
) -> list[dict[str, Any]]:
    """Checkpoint `step` played again by what played it, on the panel positions given (None: all), writing nothing
    but the served evaluator's server logs under `log_dir`; BadInput saying why where it cannot be."""
    backend = get_backend(config["backend"]["name"])
    if not EvalConfig.of(config).served:
        return backend.replay(config, run_dir, step, positions)
    return replay_run(
        config,
        run_dir,
        step,
        exported=backend.checkpoint(config, run_dir, step).hf,
        positions=positions,
        log_dir=log_dir,
    )


def _played(replayed: list[dict[str, Any]], sample: TaskSample | None) -> str:
    """What was played: the episodes, and with a sample (None: the whole panel) the tasks and how to draw them again."""
    if sample is None:
        return f"{len(replayed)} episode(s) played again"
    ids = list(dict.fromkeys(str(row.get("task_id")) for row in replayed))
    named = ", ".join(ids[:SHOWN_TASKS]) + (f" and {len(ids) - SHOWN_TASKS} more" if len(ids) > SHOWN_TASKS else "")
    return (
        f"{len(replayed)} episode(s) of {len(ids)} task(s) played again (--tasks {sample.size} --tasks-seed "
        f"{sample.seed}: {named})"
    )


@dataclass
class ReEvaluation:
    """What `re_evaluate` found: problems (a row the checkpoint plays otherwise), one line per run of what was done,
    and the counts of runs played as recorded, played otherwise, and not played (the lines say why)."""

    problems: list[str]
    lines: list[str]
    as_recorded: int = 0
    otherwise: int = 0
    not_played: int = 0


def re_evaluate(study: str, root: str | os.PathLike = ".", *, sample: TaskSample | None = None) -> ReEvaluation:
    """Every run's final evaluated step played again, on the whole panel or `sample`, and compared row by row."""
    root = Path(root)
    home = locate(study, root)
    try:
        declared = declared_final_step(read_lock(home.lock, verify=False))
    except BadInput as exc:  # the audit reports the lock itself
        return ReEvaluation([], [f"not re-evaluated: {exc}"])
    result = ReEvaluation([], [])
    problems, done = result.problems, result.lines
    for _method, _seed, run_dir in home.run_dirs_on_disk():
        name = run_dir.relative_to(root).as_posix()
        try:
            config, step = final_step(run_dir, declared)
            recorded_file = eval_dir(run_dir, step) / RunFiles.OUTCOMES
            recorded = [row for _, row in iter_jsonl(recorded_file)]
            panel = (config.get("eval") or {}).get("task_panel") or []
            positions = sample.positions(len(panel)) if sample is not None else None
            with tempfile.TemporaryDirectory(prefix="agentrepro-reeval-") as logs:
                replayed = replay(config, run_dir, step, positions, log_dir=Path(logs))
        # the audit itself reports an unreadable config or outcomes file; a server that fails is said here
        except (BadInput, Failure) as exc:
            done.append(f"{name}: not re-evaluated: {exc}")
            result.not_played += 1
            continue
        where = recorded_file.relative_to(root)
        found = _differences(recorded, replayed, where)
        problems += found[:EXAMPLES]
        if len(found) > EXAMPLES:
            problems.append(f"{where}: and {len(found) - EXAMPLES} more row(s) the checkpoint plays otherwise")
        done.append(
            f"{name} step {step}: {_played(replayed, sample if positions is not None else None)}, "
            + (f"{len(found)} not as recorded" if found else "each as recorded")
        )
        if found:
            result.otherwise += 1
        else:
            result.as_recorded += 1
    return result


def final_checkpoint_files(study: str, root: Path, declared: int | None) -> dict[Path, list[Path]]:
    """Each run directory on disk -> the files of its final checkpoint that are here (`Backend.checkpoint(...)
    .weights`: what an evaluation of it reads); [] where there are none or the run config cannot be read (the audit
    reports that)."""
    found: dict[Path, list[Path]] = {}
    for _method, _seed, run_dir in locate(study, root).run_dirs_on_disk():
        found[run_dir] = []
        try:
            config, step = final_step(run_dir, declared)
            weights = get_backend(config["backend"]["name"]).checkpoint(config, run_dir, step).weights
        except BadInput:
            continue
        found[run_dir] = [f for w in weights for f in (walk(w).files if w.is_dir() else {w} if w.is_file() else set())]
    return found


def kept_checkpoints(study: str, root: str | os.PathLike = ".") -> tuple[int, int]:
    """(runs whose final checkpoint is here, as `bundle` ships it: any of the files an evaluation of it reads; runs),
    in a study's folder or an extracted bundle."""
    root = Path(root)
    try:
        declared = declared_final_step(read_lock(locate(study, root).lock, verify=False))
    except BadInput:
        declared = None  # the audit reports the lock; the count is then of the last evaluated steps
    found = final_checkpoint_files(study, root, declared)
    return sum(bool(files) for files in found.values()), len(found)
