"""Wilson, t and task-clustered intervals against independent values."""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from agentrepro.analysis.intervals import (
    CLUSTERED_WILSON,
    clustered_interval,
    clustered_se,
    clustered_wilson,
    t_interval,
    wilson,
)


def wilson_by_hand(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_wilson_matches_the_issue_values():
    """Wilson 95% for 113/128 is [81.56%, 92.77%] and for 101/128 is [71.05%, 85.08%] (to 0.01 pp)."""
    lo, hi = wilson([113, 101], [128, 128])
    assert np.round(100 * lo, 2).tolist() == [81.56, 71.05]
    assert np.round(100 * hi, 2).tolist() == [92.77, 85.08]


@pytest.mark.parametrize("k,n", [(0, 10), (10, 10), (3, 7), (64, 128), (1, 1000)])
def test_wilson_matches_the_closed_form(k, n):
    """The statsmodels-backed interval equals the textbook closed form, including k = 0 and k = n."""
    lo, hi = wilson(k, n)
    elo, ehi = wilson_by_hand(k, n)
    assert lo == pytest.approx(elo, abs=1e-12) and hi == pytest.approx(ehi, abs=1e-12)


def test_t_interval_matches_scipy():
    """The t-interval over per-seed rates equals scipy's t.interval with the standard error (ddof = 1)."""
    rates = np.array([0.81, 0.86, 0.84])
    mean, lo, hi = t_interval(rates, 0.05)
    elo, ehi = stats.t.interval(0.95, 2, loc=rates.mean(), scale=stats.sem(rates))
    assert (mean, lo, hi) == pytest.approx((rates.mean(), elo, ehi))
    assert np.isnan(t_interval([0.8])[1])


def test_clustered_se_equals_statsmodels_cluster_robust_se():
    """The task-clustered SE of the grand mean equals OLS-on-a-constant with cluster-robust SE by task."""
    rng = np.random.default_rng(3)
    y = (rng.random((3, 40)) < np.linspace(0.2, 0.9, 40)).astype(float)  # (seeds, tasks)
    groups = np.tile(np.arange(40), 3)
    fit = sm.OLS(y.ravel(), np.ones(y.size)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert clustered_se(y) == pytest.approx(float(fit.bse[0]), rel=1e-10)
    mean, se, _lo, hi = clustered_interval(y)
    assert mean == pytest.approx(y.mean()) and hi - mean == pytest.approx(stats.t.ppf(0.975, 39) * se)


def clustered_wilson_by_hand(success, alpha=0.05):
    """Kish's design effect written out: n_eff = N / deff, deff = clustered variance / binomial variance, in [tasks, N]."""
    _seeds, tasks, _episodes = success.shape
    n, p = success.size, success.mean()
    per_task = success.mean(axis=(0, 2))
    var_clustered = per_task.var(ddof=1) / tasks
    if p in (0.0, 1.0):
        n_eff = tasks
    elif var_clustered == 0:
        n_eff = n
    else:
        n_eff = n / (var_clustered / (p * (1 - p) / n))
    n_eff = min(max(n_eff, tasks), n)
    lo, hi = wilson_by_hand(p * n_eff, n_eff, z=stats.norm.ppf(1 - alpha / 2))
    return lo, hi, n_eff


def test_clustered_wilson_is_plain_wilson_without_repeats():
    """One seed and one episode per task: nothing to cluster, the interval is Wilson's of k/n."""
    success = (np.random.default_rng(1).random((1, 50, 1)) < 0.6).astype(float)
    lo, hi, n_eff, test = clustered_wilson(success)
    assert test == "wilson" and n_eff == 50
    assert (lo, hi) == pytest.approx(wilson_by_hand(success.sum(), 50), abs=1e-12)


def test_repeated_identical_seeds_count_once():
    """Three seeds that repeat every task's outcome are worth one trial per task, not three."""
    one = (np.random.default_rng(2).random((1, 40, 1)) < 0.5).astype(float)
    lo, hi, n_eff, test = clustered_wilson(np.repeat(one, 3, axis=0))
    assert test == CLUSTERED_WILSON and n_eff == 40
    assert (lo, hi) == pytest.approx(wilson_by_hand(one.sum(), 40), abs=1e-12)
    wide = wilson(3 * one.sum(), 120)
    assert hi - lo > float(wide[1] - wide[0])  # wider than counting 120 independent trials


@pytest.mark.parametrize("shape", [(3, 30, 1), (2, 17, 4), (5, 2, 1), (3, 64, 2)])
def test_clustered_wilson_matches_the_design_effect_by_hand(shape):
    """On random outcomes (all-fail and all-success included) the interval equals Kish's design effect written out."""
    rng = np.random.default_rng(sum(shape))
    for p in (0.0, 0.2, 0.5, 0.9, 1.0):
        difficulty = rng.random(shape[1])[None, :, None]
        success = (
            (rng.random(shape) < np.clip(p + difficulty - 0.5, 0, 1)).astype(float) if 0 < p < 1 else np.full(shape, p)
        )
        lo, hi, n_eff, _ = clustered_wilson(success)
        elo, ehi, en = clustered_wilson_by_hand(success)
        assert n_eff == pytest.approx(en) and (lo, hi) == pytest.approx((elo, ehi), abs=1e-12)
        assert shape[1] <= n_eff <= success.size and 0 <= lo <= success.mean() <= hi <= 1
