"""Paper values (docs/design.md §3.6.1) and the verdicts table comparing our final-step rates with them.

`load_reference(path)` validates the YAML (unknown keys are errors naming the key path); its `kind` (a paper, a
reference implementation or an earlier run, default paper) says what the values come from.
`verdicts_table(runs, success, reference, tolerance, final_step)` returns the §3.6 verdicts rows, each
with a plain-language `reason`, and the notes the report must show.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from agentrepro.analysis import contract
from agentrepro.analysis.intervals import clustered_interval, t_interval, wilson
from agentrepro.analysis.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Verdict,
    fixed_value_verdict,
    needed_words,
    welch_verdict,
)
from agentrepro.errors import BadInput
from agentrepro.reading import load_yaml

VERDICTS = contract.names("verdicts")
_TOP = {"paper", "kind", "metric", "values"}
# What the reference is (its `kind`; default paper): the report names it so in titles and text.
KINDS = ("paper", "reference implementation", "earlier run")
_VALUE = {"value", "std", "seeds", "source", "checked"}


def load_reference(path: str | os.PathLike) -> dict:
    """The reference YAML, validated: values.<method> has value in [0, 1], optional std/seeds, source, checked."""
    path = Path(path)
    ref = load_yaml(path)
    if not isinstance(ref, dict):
        raise BadInput("expected a mapping with paper, metric, values", path=path)
    for key in ref:
        if key not in _TOP:
            raise BadInput(f"unknown key (expected one of {sorted(_TOP)})", path=path, where=str(key))
    for key in ("paper", "metric", "values"):
        if key not in ref:
            raise BadInput("missing key", path=path, where=key)
    for key in ("paper", "metric"):
        if not isinstance(ref[key], str) or not ref[key].strip():
            raise BadInput(f"expected a non-empty string, got {ref[key]!r}", path=path, where=key)
    kind = ref.setdefault("kind", KINDS[0])
    if kind not in KINDS:
        raise BadInput(f"expected one of {', '.join(map(repr, KINDS))}, got {kind!r}", path=path, where="kind")
    if not isinstance(ref["values"], dict) or not ref["values"]:
        raise BadInput("expected a non-empty mapping from method to value", path=path, where="values")
    for method, entry in ref["values"].items():
        where = f"values.{method}"
        if not isinstance(method, str) or not method:
            raise BadInput(f"a method name must be a non-empty string, got {method!r}", path=path, where="values")
        if not isinstance(entry, dict):
            raise BadInput("expected a mapping {value, std, seeds, source, checked}", path=path, where=where)
        for key in entry:
            if key not in _VALUE:
                raise BadInput(f"unknown key (expected one of {sorted(_VALUE)})", path=path, where=f"{where}.{key}")
        value = entry.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise BadInput(f"expected a fraction in [0, 1], got {value!r}", path=path, where=f"{where}.value")
        std = entry.get("std")
        if std is not None and (isinstance(std, bool) or not isinstance(std, (int, float)) or std < 0):
            raise BadInput(f"expected null or a non-negative number, got {std!r}", path=path, where=f"{where}.std")
        seeds = entry.get("seeds")
        if seeds is not None and (type(seeds) is not int or seeds < 1):
            raise BadInput(f"expected null or a positive integer, got {seeds!r}", path=path, where=f"{where}.seeds")
        if not isinstance(entry.get("source", ""), str):
            raise BadInput("expected a string", path=path, where=f"{where}.source")
        if not isinstance(entry.get("checked", False), bool):
            raise BadInput("expected true or false", path=path, where=f"{where}.checked")
    return ref


def _pp(x: float) -> str:
    return f"{100 * x:+.1f} pp"


def _reason(v: Verdict, tolerance: float, seeds: int, n_tasks: int, half90: float, kind: str) -> str:
    tol = f"±{100 * tolerance:g} pp"
    ci90 = f"[{_pp(v.ci90[0])}, {_pp(v.ci90[1])}]"
    ci95 = f"[{_pp(v.ci95[0])}, {_pp(v.ci95[1])}]"
    if v.test == "welch_tost" and not np.isfinite(v.ci90[0]):
        return f"the {kind} gives mean ± std, but the Welch TOST needs at least 2 seeds on each side; no verdict is possible"
    if v.verdict == REPRODUCED:
        return f"the 90% CI of ours − {kind} {ci90} lies within {tol} (TOST at 5%, {v.test})"
    if v.verdict == NOT_REPRODUCED:
        side = "below" if v.ci95[1] < 0 else "above"
        return f"the 95% CI of ours − {kind} {ci95} lies entirely {side} the {tol} tolerance ({v.test})"
    parts = [f"the 90% CI {ci90} is not inside {tol} and the 95% CI {ci95} is not outside it ({v.test})"]
    if np.isfinite(half90) and half90 > tolerance:
        who = f"one run of {n_tasks} tasks" if seeds == 1 else f"{seeds} seeds of {n_tasks} tasks"
        parts.append(f"{who} cannot show equivalence within {100 * tolerance:g} pp: the 90% CI alone is ±{100 * half90:.1f} pp wide "
                     "even at a perfect match")
    if v.needed is not None:
        parts.append(f"about {v.needed} {v.needed_unit} would be needed at the same estimate")
    elif abs(abs(v.delta) - tolerance) < 1e-12:
        parts.append("the estimate sits on the tolerance boundary, so no amount of data decides it")
    elif v.test == "welch_tost":
        parts.append(f"no number of our seeds would decide it at this estimate: the {kind}'s own spread over its seeds dominates")
    return "; ".join(parts)


def _undecidable(v: Verdict, tolerance: float) -> str:
    """Why no amount of data would decide an inconclusive verdict (the words after "undecidable")."""
    if v.test == "welch_tost" and not np.isfinite(v.ci90[0]):
        return "with fewer than 2 seeds on a side (the Welch TOST needs them)"
    if abs(abs(v.delta) - tolerance) < 1e-12:
        return "on the tolerance boundary"
    return "at this reference spread" if v.test == "welch_tost" else "at this estimate"


def verdicts_table(runs: pd.DataFrame, success: dict[str, np.ndarray], reference: dict, tolerance: float,
                   final_step: int) -> tuple[pd.DataFrame, list[str]]:
    """Verdict rows for every method of the reference present at `final_step`, and plain-language notes.

    `success[method]` is the (seeds, tasks) array of per-task success at the final step (episodes
    averaged), used for the task-clustered interval when there are several seeds.
    """
    rows, notes = [], []
    kind = reference.get("kind", KINDS[0])
    at_final = runs[runs["step"] == final_step]
    for method, entry in reference["values"].items():
        mine = at_final[at_final["method"] == method]
        if mine.empty:
            notes.append(f"The {kind} gives a value for {method!r}, which this study did not evaluate at step {final_step}; no verdict.")
            continue
        paper, paper_std, paper_seeds = float(entry["value"]), entry.get("std"), entry.get("seeds")
        seeds, n_tasks = len(mine), int(success[method].shape[1])
        rates = mine["rate"].to_numpy()
        k, n = int(mine["successes"].sum()), int(mine["n"].sum())
        if paper_std is not None and paper_seeds is not None:
            sd = float(np.std(rates, ddof=1)) if seeds > 1 else float("nan")
            v = welch_verdict(float(rates.mean()), sd, seeds, paper, float(paper_std), int(paper_seeds), tolerance)
            half90 = (v.ci90[1] - v.ci90[0]) / 2
        elif seeds == 1:
            (lo90,), (hi90,) = wilson([k], [n], 0.10)
            (lo95,), (hi95,) = wilson([k], [n], 0.05)
            ours = k / n
            per_task = n / n_tasks

            def at(m: int, ours=ours, per_task=per_task):
                (l90,), (h90,) = wilson([ours * m * per_task], [m * per_task], 0.10)
                (l95,), (h95,) = wilson([ours * m * per_task], [m * per_task], 0.05)
                return (l90, h90), (l95, h95)
            v = fixed_value_verdict(ours, (lo90, hi90), (lo95, hi95), paper, tolerance, n_tasks, "tasks", "wilson", at)
            half90 = max(ours - lo90, hi90 - ours)
        else:
            ours = float(rates.mean())
            _, tlo90, thi90 = t_interval(rates, 0.10)
            _, tlo95, thi95 = t_interval(rates, 0.05)
            _, _, clo90, chi90 = clustered_interval(success[method], 0.10)
            _, _, clo95, chi95 = clustered_interval(success[method], 0.05)
            if (thi95 - tlo95) >= (chi95 - clo95):
                v = fixed_value_verdict(ours, (tlo90, thi90), (tlo95, thi95), paper, tolerance, seeds, "seeds", "t_over_seeds")
                half90 = (thi90 - tlo90) / 2
            else:
                v = fixed_value_verdict(ours, (clo90, chi90), (clo95, chi95), paper, tolerance, n_tasks, "tasks", "task_clustered")
                half90 = (chi90 - clo90) / 2
        reason = _reason(v, tolerance, seeds, n_tasks, half90, kind)
        needed = needed_words(v.verdict, v.needed, v.needed_unit, _undecidable(v, tolerance))
        if v.verdict == INCONCLUSIVE:
            notes.append(f"{method}: inconclusive against the {kind}'s {100 * paper:.2f}% — {reason}.")
        if not entry.get("checked", False):
            notes.append(f"{method}: the {kind}'s value {100 * paper:.2f}% ({entry.get('source', 'no source given')}) was not checked "
                         "against its source itself (checked: false).")
        rows.append({
            "method": method, "paper": paper, "paper_std": paper_std, "ours": paper + v.delta, "delta": v.delta,
            "ci90_lo": v.ci90[0], "ci90_hi": v.ci90[1], "ci95_lo": v.ci95[0], "ci95_hi": v.ci95[1], "tolerance": tolerance,
            "verdict": v.verdict, "tasks_needed": v.needed if v.needed_unit == "tasks" else None, "reason": reason,
            "seeds_needed": v.needed if v.needed_unit == "seeds" else None, "test": v.test, "seeds": seeds, "n_tasks": n_tasks,
            "paper_seeds": paper_seeds, "source": entry.get("source"), "checked": bool(entry.get("checked", False)),
            "needed": needed,
        })
    table = pd.DataFrame(rows, columns=VERDICTS)
    for column in ("tasks_needed", "seeds_needed", "paper_seeds", "seeds", "n_tasks"):
        table[column] = table[column].astype("Int64")   # counts stay integers next to missing values
    return table, notes
