"""`audit --re-eval`: each run's final outcomes derived again from the checkpoint the study ships.

The audit's recount proves the analysis follows from the outcomes; it cannot prove the outcomes follow from the
training. A forger who edits outcomes.jsonl, re-seals it and runs analyze and report again leaves every hash and
number consistent. Evaluation is deterministic where the manifest evaluates greedily (eval.temperature 0), so
playing the final checkpoint on the frozen panel again (`Backend.replay`) must give the recorded rows, field for
field. `re_evaluate(study, root, tasks=N)` does that for every run on disk, at the step its verdicts use, on the panel's first N tasks when asked,
and returns the differences as problems and one line per run of what was, or could not be, re-evaluated (a
checkpoint left out of the bundle, a framework whose evaluation needs its image and GPU: said, never counted as
agreement). A sampled evaluation (temperature above 0) is played again with the generators the evaluation seeds,
on the whole panel only; outcomes a chat server produced (eval.engine: served) are not played again by the backend.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrepro.audit.tree import EXAMPLES
from agentrepro.backends import get_backend
from agentrepro.errors import BadInput
from agentrepro.layout import RunFiles, eval_dir, locate
from agentrepro.lockfile import read_lock
from agentrepro.reading import iter_jsonl
from agentrepro.runconfig import checkpoint_steps, read_resolved_config


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


def re_evaluate(study: str, root: str | os.PathLike = ".", *, tasks: int | None = None) -> tuple[list[str], list[str]]:
    """(problems, what was done): every run's final evaluated step played again and compared row by row."""
    root = Path(root)
    home = locate(study, root)
    try:
        declared = declared_final_step(read_lock(home.lock, verify=False))
    except BadInput as exc:  # the audit reports the lock itself
        return [], [f"not re-evaluated: {exc}"]
    problems, done = [], []
    for _method, _seed, run_dir in home.run_dirs_on_disk():
        name = run_dir.relative_to(root).as_posix()
        try:
            config, step = final_step(run_dir, declared)
            recorded_file = eval_dir(run_dir, step) / RunFiles.OUTCOMES
            recorded = [row for _, row in iter_jsonl(recorded_file)]
            replayed = get_backend(config["backend"]["name"]).replay(config, run_dir, step, tasks)
        except BadInput as exc:  # the audit itself reports an unreadable config or outcomes file
            done.append(f"{name}: not re-evaluated: {exc}")
            continue
        where = recorded_file.relative_to(root)
        found = _differences(recorded, replayed, where)
        problems += found[:EXAMPLES]
        if len(found) > EXAMPLES:
            problems.append(f"{where}: and {len(found) - EXAMPLES} more row(s) the checkpoint plays otherwise")
        done.append(
            f"{name} step {step}: {len(replayed)} episode(s) played again, "
            + (f"{len(found)} not as recorded" if found else "each as recorded")
        )
    return problems, done
