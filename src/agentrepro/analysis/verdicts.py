"""Verdicts against a paper value by the TOST rule of docs/design.md §7, how much data would decide them, and the
verdicts table: `verdicts_table(runs, success, reference, tolerance, final_step)` returns the §3.6 rows for every
method of the reference (agentrepro.analysis.reference), each with a plain-language `reason`, and the notes the
report must show.

With tolerance δ (a fraction): **reproduced** if the 90% CI of ours − paper lies inside [−δ, +δ]
(two one-sided tests at 5%); **not_reproduced** if the 95% CI lies entirely outside; otherwise
**inconclusive**. The boundaries are closed: a 90% CI touching ±δ counts as inside, a 95% CI touching
±δ does not count as outside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from agentrepro.analysis import contract
from agentrepro.analysis.intervals import clustered_interval, t_interval, wilson
from agentrepro.analysis.reference import KINDS

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not_reproduced", "inconclusive"
VERDICTS = contract.names("verdicts")


def decide(ci90: tuple[float, float], ci95: tuple[float, float], tolerance: float) -> str:
    """The verdict from the 90% and 95% intervals of ours − paper."""
    lo90, hi90 = ci90
    lo95, hi95 = ci95
    if any(not np.isfinite(v) for v in (lo90, hi90, lo95, hi95)):
        return INCONCLUSIVE
    if lo90 >= -tolerance and hi90 <= tolerance:
        return REPRODUCED
    if hi95 < -tolerance or lo95 > tolerance:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def needed_words(verdict: str, needed: int | None, unit: str, undecidable: str) -> str:
    """What a "tasks needed" cell says: "decided", "about N tasks" (or seeds), or why no amount of data decides it."""
    if verdict != INCONCLUSIVE:
        return "decided"
    return f"about {needed:,} {unit}" if needed is not None else f"undecidable {undecidable}"


def units_needed(units: int, delta: float, half90: float, half95: float, tolerance: float) -> int | None:
    """How many units (tasks or seeds) would make the verdict decidable, if the estimate stayed the same.

    Half-widths shrink as 1/sqrt(units). Towards `reproduced` when |delta| < δ (the 90% half-width must
    fit in δ − |delta|), towards `not_reproduced` when |delta| > δ (the 95% half-width must fit in
    |delta| − δ). None when |delta| == δ or a half-width is unknown: no amount of data decides it.
    """
    margin = tolerance - abs(delta)
    half = half90
    if margin < 0:
        margin, half = -margin, half95
    if margin <= 0 or not np.isfinite(half) or units <= 0:
        return None
    return max(math.ceil(units * (half / margin) ** 2), units)


def units_needed_search(units: int, tolerance: float, diff_interval_at, limit: int = 10**7) -> int | None:
    """Smallest unit count m ≥ units at which `diff_interval_at(m) -> (ci90, ci95)` of ours − paper (the
    estimates unchanged) gives a decided verdict; None if even `limit` units would not (for example when
    the paper's own spread dominates a Welch interval, or the estimate sits on the boundary)."""

    def decided(m: int) -> bool:
        ci90, ci95 = diff_interval_at(m)
        return decide(ci90, ci95, tolerance) != INCONCLUSIVE

    hi = max(units, 1)
    while not decided(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = max(units, 1)
    if decided(lo):
        return lo
    while hi - lo > 1:  # decided(hi) and not decided(lo)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decided(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class Verdict:
    """ours − paper with both intervals, the verdict and the data that would decide an inconclusive one."""

    delta: float
    ci90: tuple[float, float]
    ci95: tuple[float, float]
    verdict: str
    needed: int | None
    needed_unit: str  # "tasks" or "seeds"
    test: str  # which interval or test produced the CIs


def fixed_value_verdict(
    ours: float,
    ci90: tuple[float, float],
    ci95: tuple[float, float],
    paper: float,
    tolerance: float,
    units: int,
    unit: str,
    test: str,
    interval_at=None,
) -> Verdict:
    """Paper value treated as fixed: the CI of ours − paper is the CI of our rate shifted by the paper value.

    `interval_at(m) -> (ci90, ci95)`, when given, recomputes our interval at m units for the data-needed
    search (used for the asymmetric Wilson interval); otherwise half-widths scale as 1/sqrt(units).
    """
    d90 = (ci90[0] - paper, ci90[1] - paper)
    d95 = (ci95[0] - paper, ci95[1] - paper)
    delta = ours - paper
    verdict = decide(d90, d95, tolerance)
    half90 = max(ours - ci90[0], ci90[1] - ours)
    half95 = max(ours - ci95[0], ci95[1] - ours)
    needed = None
    if verdict == INCONCLUSIVE:
        if interval_at is not None:

            def shifted(m: int):
                (l90, h90), (l95, h95) = interval_at(m)
                return (l90 - paper, h90 - paper), (l95 - paper, h95 - paper)

            needed = None if abs(abs(delta) - tolerance) < 1e-12 else units_needed_search(units, tolerance, shifted)
        else:
            needed = units_needed(units, delta, half90, half95, tolerance)
    return Verdict(delta, d90, d95, verdict, needed, unit, test)


def _welch(mean1: float, sd1: float, n1: int, mean2: float, sd2: float, n2: int) -> tuple[float, float, float | None]:
    """(delta, se, df) of mean1 − mean2 from summary statistics, Welch–Satterthwaite df (None when se is 0)."""
    v1, v2 = sd1**2 / n1, sd2**2 / n2
    se = math.sqrt(v1 + v2)
    if se == 0:
        return mean1 - mean2, se, None
    df = (v1 + v2) ** 2 / ((v1**2 / (n1 - 1) if v1 else 0.0) + (v2**2 / (n2 - 1) if v2 else 0.0))
    return mean1 - mean2, se, df


def welch_ci(
    mean1: float, sd1: float, n1: int, mean2: float, sd2: float, n2: int, alpha: float
) -> tuple[float, float, float, float]:
    """(delta, lo, hi, df) of mean1 − mean2 from summary statistics, Welch–Satterthwaite df."""
    delta, se, df = _welch(mean1, sd1, n1, mean2, sd2, n2)
    if df is None:
        return delta, delta, delta, float("inf")
    half = stats.t.ppf(1 - alpha / 2, df) * se
    return delta, delta - half, delta + half, df


def welch_tost_p(mean1: float, sd1: float, n1: int, mean2: float, sd2: float, n2: int, tolerance: float) -> float:
    """TOST p-value (the larger of the two one-sided Welch p-values) for |mean1 − mean2| < tolerance."""
    delta, se, df = _welch(mean1, sd1, n1, mean2, sd2, n2)
    if df is None:
        return 0.0 if abs(delta) < tolerance else 1.0
    p_lower = stats.t.sf((delta + tolerance) / se, df)  # H0: delta <= -tolerance
    p_upper = stats.t.cdf((delta - tolerance) / se, df)  # H0: delta >= +tolerance
    return float(max(p_lower, p_upper))


def welch_verdict(
    ours_mean: float, ours_sd: float, ours_seeds: int, paper: float, paper_sd: float, paper_seeds: int, tolerance: float
) -> Verdict:
    """Welch TOST on summary statistics (paper given as mean ± sd over seeds); needs ≥ 2 seeds on each side."""
    if ours_seeds < 2 or paper_seeds < 2:
        nan = (float("nan"), float("nan"))
        return Verdict(ours_mean - paper, nan, nan, INCONCLUSIVE, None, "seeds", "welch_tost")
    delta, lo90, hi90, _ = welch_ci(ours_mean, ours_sd, ours_seeds, paper, paper_sd, paper_seeds, 0.10)
    _, lo95, hi95, _ = welch_ci(ours_mean, ours_sd, ours_seeds, paper, paper_sd, paper_seeds, 0.05)
    verdict = decide((lo90, hi90), (lo95, hi95), tolerance)
    needed = None
    if verdict == INCONCLUSIVE and abs(abs(delta) - tolerance) > 1e-12:
        # more seeds of ours shrink only our side of the Welch SE; the paper's side stays as published
        def at(m: int):
            _, l90, h90, _ = welch_ci(ours_mean, ours_sd, m, paper, paper_sd, paper_seeds, 0.10)
            _, l95, h95, _ = welch_ci(ours_mean, ours_sd, m, paper, paper_sd, paper_seeds, 0.05)
            return (l90, h90), (l95, h95)

        needed = units_needed_search(ours_seeds, tolerance, at, limit=10**6)
    return Verdict(delta, (lo90, hi90), (lo95, hi95), verdict, needed, "seeds", "welch_tost")


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
        parts.append(
            f"{who} cannot show equivalence within {100 * tolerance:g} pp: the 90% CI alone is ±{100 * half90:.1f} pp wide "
            "even at a perfect match"
        )
    if v.needed is not None:
        parts.append(f"about {v.needed} {v.needed_unit} would be needed at the same estimate")
    elif abs(abs(v.delta) - tolerance) < 1e-12:
        parts.append("the estimate sits on the tolerance boundary, so no amount of data decides it")
    elif v.test == "welch_tost":
        parts.append(
            f"no number of our seeds would decide it at this estimate: the {kind}'s own spread over its seeds dominates"
        )
    return "; ".join(parts)


def _undecidable(v: Verdict, tolerance: float) -> str:
    """Why no amount of data would decide an inconclusive verdict (the words after "undecidable")."""
    if v.test == "welch_tost" and not np.isfinite(v.ci90[0]):
        return "with fewer than 2 seeds on a side (the Welch TOST needs them)"
    if abs(abs(v.delta) - tolerance) < 1e-12:
        return "on the tolerance boundary"
    return "at this reference spread" if v.test == "welch_tost" else "at this estimate"


def verdicts_table(
    runs: pd.DataFrame, success: dict[str, np.ndarray], reference: dict, tolerance: float, final_step: int
) -> tuple[pd.DataFrame, list[str]]:
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
            notes.append(
                f"The {kind} gives a value for {method!r}, which this study did not evaluate at step {final_step}; no verdict."
            )
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
                v = fixed_value_verdict(
                    ours, (tlo90, thi90), (tlo95, thi95), paper, tolerance, seeds, "seeds", "t_over_seeds"
                )
                half90 = (thi90 - tlo90) / 2
            else:
                v = fixed_value_verdict(
                    ours, (clo90, chi90), (clo95, chi95), paper, tolerance, n_tasks, "tasks", "task_clustered"
                )
                half90 = (chi90 - clo90) / 2
        reason = _reason(v, tolerance, seeds, n_tasks, half90, kind)
        needed = needed_words(v.verdict, v.needed, v.needed_unit, _undecidable(v, tolerance))
        if v.verdict == INCONCLUSIVE:
            notes.append(f"{method}: inconclusive against the {kind}'s {100 * paper:.2f}% — {reason}.")
        if not entry.get("checked", False):
            notes.append(
                f"{method}: the {kind}'s value {100 * paper:.2f}% ({entry.get('source', 'no source given')}) was not checked "
                "against its source itself (checked: false)."
            )
        rows.append(
            {
                "method": method,
                "paper": paper,
                "paper_std": paper_std,
                "ours": paper + v.delta,
                "delta": v.delta,
                "ci90_lo": v.ci90[0],
                "ci90_hi": v.ci90[1],
                "ci95_lo": v.ci95[0],
                "ci95_hi": v.ci95[1],
                "tolerance": tolerance,
                "verdict": v.verdict,
                "tasks_needed": v.needed if v.needed_unit == "tasks" else None,
                "reason": reason,
                "seeds_needed": v.needed if v.needed_unit == "seeds" else None,
                "test": v.test,
                "seeds": seeds,
                "n_tasks": n_tasks,
                "paper_seeds": paper_seeds,
                "source": entry.get("source"),
                "checked": bool(entry.get("checked", False)),
                "needed": needed,
            }
        )
    unvalued = [m for m in dict.fromkeys(at_final["method"]) if m not in reference["values"]]
    if unvalued:
        notes.append(
            f"The {kind} gives no value for {', '.join(map(repr, unvalued))}: no verdict for "
            f"{'it' if len(unvalued) == 1 else 'them'}."
        )
    table = pd.DataFrame(rows, columns=VERDICTS)
    for column in ("tasks_needed", "seeds_needed", "paper_seeds", "seeds", "n_tasks"):
        table[column] = table[column].astype("Int64")  # counts stay integers next to missing values
    return table, notes
