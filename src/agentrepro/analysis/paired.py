"""Paired comparison of two methods on the same tasks: 2×2 table, exact McNemar, Newcombe CI, Holm.

Orientation: `a` and `b` are 0/1 arrays of shape (pairs,), aligned on (task_id, episode). The table is
both = a∧b, a_only = a∧¬b, b_only = ¬a∧b, neither; delta = p_a − p_b = (a_only − b_only)/n.
In Newcombe's (1998) notation e = both, f = a_only, g = b_only, h = neither.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from agentrepro.analysis.intervals import wilson


def table_2x2(a, b) -> tuple[int, int, int, int]:
    """(both, a_only, b_only, neither) of two aligned 0/1 arrays."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in shape: {a.shape} vs {b.shape}")
    return int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum()), int((~a & ~b).sum())


def mcnemar_exact(both: int, a_only: int, b_only: int, neither: int) -> float:
    """Two-sided exact (binomial) McNemar p-value via statsmodels; 1.0 when there are no discordant pairs."""
    return float(mcnemar([[both, a_only], [b_only, neither]], exact=True).pvalue)


def mcnemar_exact_many(a_only, b_only) -> np.ndarray:
    """Vectorised exact McNemar: min(1, 2·P(X ≤ min(b, c))) with X ~ Binomial(b + c, 1/2); 1 when b + c = 0.

    The same statistic as `mcnemar_exact` (statsmodels), for arrays of discordant counts.
    """
    b = np.asarray(a_only, dtype=float)
    c = np.asarray(b_only, dtype=float)
    return np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(b, c), b + c, 0.5))


def newcombe_paired_ci(both, a_only, b_only, neither, alpha: float = 0.05):
    """(delta, lo, hi): Newcombe (1998) method 10 interval for p_a − p_b from paired data.

    Square-and-add of the Wilson intervals of the two marginal proportions, with the correlation
    correction phi (continuity-corrected as in the paper): B = e·h − f·g; C = B − n/2 if B > n/2,
    0 if 0 ≤ B ≤ n/2, B if B < 0; phi = C / sqrt((e+f)(g+h)(e+g)(f+h)), 0 when that product is 0.
    Scalars give floats; arrays (any shape, broadcast) give arrays.
    """
    e, f, g, h = (np.asarray(x, dtype=float) for x in (both, a_only, b_only, neither))
    n = e + f + g + h
    if np.any(n == 0):
        raise ValueError("empty 2x2 table")
    p1, p2 = (e + f) / n, (e + g) / n
    l1, u1 = wilson(e + f, n, alpha)
    l2, u2 = wilson(e + g, n, alpha)
    product = (e + f) * (g + h) * (e + g) * (f + h)
    b = e * h - f * g
    c = np.where(b > n / 2, b - n / 2, np.where(b >= 0, 0.0, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.where(product == 0, 0.0, c / np.sqrt(np.where(product == 0, 1.0, product)))
    d1, u1d = p1 - l1, u1 - p1
    d2, u2d = p2 - l2, u2 - p2
    delta = p1 - p2
    lo = delta - np.sqrt(np.maximum(d1**2 - 2 * phi * d1 * u2d + u2d**2, 0.0))
    hi = delta + np.sqrt(np.maximum(u1d**2 - 2 * phi * u1d * d2 + d2**2, 0.0))
    if np.ndim(delta) == 0:
        return float(delta), float(lo), float(hi)
    return delta, lo, hi


def holm(pvalues) -> np.ndarray:
    """Holm step-down adjusted p-values: sorted p_(i) × (m − i + 1), running maximum, capped at 1; NaN stays NaN.

    Written out because statsmodels' `multipletests` runs a full gc.collect() per call (0.15 s);
    the tests check equality with it.
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    if finite.size:
        order = np.argsort(p[finite], kind="stable")
        m = finite.size
        adjusted = np.minimum(1.0, np.maximum.accumulate(p[finite][order] * (m - np.arange(m))))
        out[finite[order]] = adjusted
    return out
