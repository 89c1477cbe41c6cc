"""Confidence intervals for success rates (fractions in [0, 1]).

* `wilson(k, n, alpha)`: Wilson score interval (statsmodels `proportion_confint(method="wilson")`),
  vectorised over arrays of counts.
* `t_interval(values, alpha)`: mean ± t_{1-alpha/2, m-1} · sd(ddof=1)/sqrt(m) over m per-seed rates.
* `clustered_interval(y, alpha)`: `y` has shape (seeds, tasks) of per-task success (or per-task
  differences); the mean over all cells with a task-clustered SE: the sd (ddof=1) of the per-task means
  over seeds divided by sqrt(tasks), and t with tasks − 1 degrees of freedom.
* `clustered_wilson(success, alpha)`: a rate pooled over seeds and episodes of the same tasks: the Wilson
  interval at the effective number of trials the task clustering leaves (Kish's design effect), so that
  3 seeds × 128 tasks count as fewer than 384 independent trials whenever a task's outcomes agree across seeds.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from statsmodels.stats.proportion import proportion_confint


def wilson(k, n, alpha: float = 0.05):
    """Wilson score interval for k successes of n; arrays broadcast. Returns (lo, hi)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson")
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


def t_interval(values, alpha: float = 0.05) -> tuple[float, float, float]:
    """(mean, lo, hi) of a t-interval over per-seed values; lo = hi = nan with fewer than 2 values."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if values.size < 2:
        return mean, float("nan"), float("nan")
    half = stats.t.ppf(1 - alpha / 2, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
    return mean, mean - half, mean + half


def clustered_se(y) -> float:
    """Task-clustered standard error of the grand mean of `y` (shape (seeds, tasks))."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    per_task = y.mean(axis=0)
    if per_task.size < 2:
        return float("nan")
    return float(per_task.std(ddof=1) / np.sqrt(per_task.size))


def clustered_interval(y, alpha: float = 0.05) -> tuple[float, float, float, float]:
    """(mean, se, lo, hi) of the grand mean of `y` (seeds, tasks), clustered by task (t, tasks − 1 df)."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    mean = float(y.mean())
    se = clustered_se(y)
    if not np.isfinite(se):
        return mean, se, float("nan"), float("nan")
    half = stats.t.ppf(1 - alpha / 2, y.shape[1] - 1) * se
    return mean, se, mean - half, mean + half


CLUSTERED_WILSON = "wilson_task_clustered"  # the test name of `clustered_wilson` where clustering applies


def clustered_wilson(success, alpha: float = 0.05) -> tuple[float, float, float, str]:
    """(lo, hi, n_eff, test) of the pooled rate of `success`, 0/1 of shape (seeds, tasks, episodes).

    n_eff = p(1 − p) / SE², SE the task-clustered standard error of the pooled rate (`clustered_se` of the
    per-task means), kept within [tasks, trials]: never more than the trials themselves, never fewer than one
    trial per task (a task's outcomes all alike). Then Wilson at k = p·n_eff of n_eff. A rate of 0 or 1 has no
    spread to measure the clustering by and gets n_eff = tasks. With one seed and one episode per task there is
    nothing to cluster: the plain Wilson interval (`test` "wilson").
    """
    success = np.asarray(success, dtype=float)
    if success.ndim != 3 or success.size == 0:
        raise ValueError(f"expected 0/1 success of shape (seeds, tasks, episodes), got shape {success.shape}")
    seeds, tasks, episodes = success.shape
    trials, rate = success.size, float(success.mean())
    if seeds * episodes == 1:
        lo, hi = wilson(success.sum(), trials, alpha)
        return float(lo), float(hi), float(trials), "wilson"
    se = clustered_se(success.mean(axis=2))
    spread = rate * (1 - rate)
    n_eff = float(tasks) if spread == 0 else float(trials) if se == 0 or not np.isfinite(se) else spread / se**2
    n_eff = min(max(n_eff, float(tasks)), float(trials))
    lo, hi = wilson(rate * n_eff, n_eff, alpha)
    return float(lo), float(hi), n_eff, CLUSTERED_WILSON
