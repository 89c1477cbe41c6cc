"""Paired equivalence of two methods on the tasks both were scored on: "a == b ± m pp" (docs/design.md §7).

The rule is the CI-inside-margin form of TOST, the one the verdicts against the paper use
(`verdicts.decide`): **reproduced** when the 90% CI of a − b lies inside [−m, +m] (two one-sided tests at
5%), **not_reproduced** when the 95% CI lies entirely outside, **inconclusive** otherwise.

Data: `a` and `b` of shape (seeds, tasks, episodes), 0/1 success on the shared tasks, aligned. A row is
one seed (shape (1, tasks, episodes)) or all seeds, clustered by task. The interval of a − b is the
wider of two (each at 90% and 95%):

* the task-clustered paired t interval: per-task differences averaged over seeds and episodes, their sd
  (ddof = 1) over sqrt(tasks), t with tasks − 1 df (`intervals.clustered_interval`); with one seed and
  one episode this is the paired t interval;
* Newcombe's (1998, method 10) paired interval on the pooled 2×2 counts (`paired.newcombe_paired_ci`),
  which does not collapse to a point when no pair is discordant (the t interval would then claim
  equivalence from five identical tasks).

`p` is the TOST p-value of the paired t test on the per-task means (statsmodels `ttost_paired`; null when
every task has the same difference). For an inconclusive row, `tasks_needed` comes from a power
calculation at the observed difference and spread: the fewest tasks (same seeds and episodes) at which
the TOST (|diff| < m) or the one-sided test that the difference exceeds the margin (|diff| > m, at 2.5%,
matching the 95% CI) has 80% power. The spread is the sd of the per-task differences; when it is 0 (no
discordant pair) the variance of a paired difference at the upper 95% Wilson bound of the discordance rate
is used instead. Where the observed interval, shrinking as 1/sqrt(tasks), would need more tasks than the
power calculation says (`verdicts.units_needed`), that larger number is given: these data did not decide
at a size the power calculation calls enough.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats
from statsmodels.stats.weightstats import ttost_paired

from agentrepro.analysis.intervals import clustered_interval, wilson
from agentrepro.analysis.paired import newcombe_paired_ci
from agentrepro.analysis.verdicts import INCONCLUSIVE, NOT_REPRODUCED, decide, units_needed

POWER = 0.80
MAX_TASKS_SEARCH = 10**7


@dataclass(frozen=True)
class Equivalence:
    """a − b on `n_tasks` shared tasks and `seeds` seeds, its intervals, TOST p, verdict and tasks needed."""

    delta: float
    ci90: tuple[float, float]
    ci95: tuple[float, float]
    p: float | None
    verdict: str
    tasks_needed: int | None
    n_tasks: int
    seeds: int
    test: str
    sd: float  # sd of the per-task differences used by the power calculation


def _interval(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[tuple[float, float], tuple[float, float], str]:
    """((lo, hi) clustered t, (lo, hi) Newcombe) at level 1 − alpha; shapes (seeds, tasks, episodes)."""
    diff = (a.astype(float) - b).mean(axis=2)  # (seeds, tasks)
    _, _, tlo, thi = clustered_interval(diff, alpha)
    a_, b_ = a.astype(bool), b.astype(bool)
    both, a_only, b_only, neither = (int(x.sum()) for x in (a_ & b_, a_ & ~b_, ~a_ & b_, ~a_ & ~b_))
    _, nlo, nhi = newcombe_paired_ci(both, a_only, b_only, neither, alpha=alpha)
    return (tlo, thi), (nlo, nhi), "clustered_t" if a.shape[0] > 1 else "paired_t"


def _tost_power(n: int, diff: float, sd: float, margin: float, alpha: float = 0.05) -> float:
    """Approximate power of the paired TOST with n tasks (noncentral t; Chow & Liu's two-sided form)."""
    se = sd / math.sqrt(n)
    df = n - 1
    tc = stats.t.ppf(1 - alpha, df)
    upper = stats.nct.sf(tc, df, (diff + margin) / se)  # P(reject H0: diff <= -margin)
    lower = stats.nct.cdf(-tc, df, (diff - margin) / se)  # P(reject H0: diff >= +margin)
    return max(0.0, float(upper + lower - 1.0))


def _outside_power(n: int, diff: float, sd: float, margin: float, alpha: float = 0.025) -> float:
    """Power of the one-sided t test that |diff| exceeds the margin, with n tasks."""
    df = n - 1
    return float(stats.nct.sf(stats.t.ppf(1 - alpha, df), df, (abs(diff) - margin) / (sd / math.sqrt(n))))


def tasks_needed(diff: float, sd: float, margin: float, power: float = POWER) -> int | None:
    """Fewest tasks (≥ 2) at which the deciding test has `power`; None on the margin or beyond the search."""
    if not (math.isfinite(diff) and math.isfinite(sd)) or sd <= 0 or abs(abs(diff) - margin) < 1e-12:
        return None
    fn = _tost_power if abs(diff) < margin else _outside_power

    def enough(n: int) -> bool:
        return fn(n, diff, sd, margin) >= power

    hi = 2
    while not enough(hi):
        hi *= 2
        if hi > MAX_TASKS_SEARCH:
            return None
    lo = hi // 2
    if lo < 2 or enough(lo):
        return hi if lo < 2 else lo
    while hi - lo > 1:  # enough(hi), not enough(lo)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def _spread(a: np.ndarray, b: np.ndarray) -> float:
    """sd of the per-task differences (seeds and episodes averaged); the Wilson-bound floor when it is 0."""
    per_task = (a.astype(float) - b).mean(axis=(0, 2))
    sd = float(per_task.std(ddof=1)) if per_task.size > 1 else float("nan")
    if not sd > 0:
        discordant = int((a != b).sum())
        (hi,) = wilson([discordant], [a.size], 0.05)[1]
        sd = math.sqrt(float(hi))
    return sd


def equivalence(a, b, margin: float) -> Equivalence:
    """The paired equivalence of `a` and `b` (0/1 arrays of shape (seeds, tasks, episodes), aligned) within ±margin."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 3 or a.shape[1] == 0:
        raise ValueError(f"expected two aligned (seeds, tasks, episodes) arrays, got {a.shape} and {b.shape}")
    seeds, n_tasks = a.shape[0], a.shape[1]
    delta = float((a.astype(float) - b).mean())
    t90, n90, name = _interval(a, b, 0.10)
    t95, n95, _ = _interval(a, b, 0.05)
    t_usable = bool(np.isfinite(t90[0]) and np.isfinite(t90[1]))
    if t_usable and (t90[1] - t90[0]) >= (n90[1] - n90[0]):
        ci90, ci95, test = t90, t95, name
    else:
        ci90, ci95, test = n90, n95, "newcombe10"
    verdict = decide(ci90, ci95, margin)
    per_task_a = a.astype(float).mean(axis=(0, 2))
    per_task_b = b.astype(float).mean(axis=(0, 2))
    p = None
    if n_tasks > 1 and np.std(per_task_a - per_task_b) > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(ttost_paired(per_task_a, per_task_b, -margin, margin)[0])
    sd = _spread(a, b)
    needed = None
    if verdict == INCONCLUSIVE:
        half90 = max(delta - ci90[0], ci90[1] - delta)
        half95 = max(delta - ci95[0], ci95[1] - delta)
        candidates = [
            n
            for n in (tasks_needed(delta, sd, margin), units_needed(n_tasks, delta, half90, half95, margin))
            if n is not None
        ]
        needed = max(candidates) if candidates else None
    return Equivalence(delta, ci90, ci95, p, verdict, needed, n_tasks, seeds, f"tost:{test}", sd)


def statement(e: Equivalence, a: str, b: str, margin: float) -> str:
    """The verdict in words, as the verdicts against the paper word it."""

    def pp(x: float) -> str:
        return f"{100 * x:+.1f} pp"

    tol = f"±{100 * margin:g} pp"
    where = f"on the {e.n_tasks} tasks both were scored on, {e.seeds} seed{'s' if e.seeds != 1 else ''}"
    head = f"{a} − {b} = {pp(e.delta)} {where}"
    ci90, ci95 = f"[{pp(e.ci90[0])}, {pp(e.ci90[1])}]", f"[{pp(e.ci95[0])}, {pp(e.ci95[1])}]"
    if e.verdict == INCONCLUSIVE:
        tail = f"the 90% CI {ci90} is not inside {tol} and the 95% CI {ci95} is not outside it"
        if e.tasks_needed is not None:
            tail += (
                f"; about {e.tasks_needed} tasks would be needed ({100 * POWER:.0f}% power at the observed "
                f"difference and a per-task sd of {e.sd:.2f})"
            )
        else:
            tail += "; the estimate sits on the margin, so no number of tasks decides it"
    elif e.verdict == NOT_REPRODUCED:
        tail = f"the 95% CI {ci95} lies entirely {'below' if e.ci95[1] < 0 else 'above'} the {tol} margin"
    else:
        tail = f"the 90% CI {ci90} lies within {tol} (TOST at 5%)"
    return f"{head}: {tail} ({e.test})"
