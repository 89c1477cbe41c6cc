"""TOST decisions on both sides of every boundary, Welch TOST from summary statistics, data needed."""

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from agentrepro.analysis.intervals import wilson
from agentrepro.analysis.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    decide,
    fixed_value_verdict,
    units_needed,
    welch_ci,
    welch_tost_p,
    welch_verdict,
)

D = 0.03
WIDE = (-0.5, 0.5)


@pytest.mark.parametrize(
    "ci90,ci95,expected",
    [
        ((-0.03, 0.03), WIDE, REPRODUCED),  # 90% CI touching both ends: inside
        ((-0.0301, 0.02), WIDE, INCONCLUSIVE),  # just past the lower end
        ((-0.02, 0.0301), WIDE, INCONCLUSIVE),  # just past the upper end
        ((-0.029, 0.029), (-0.04, 0.04), REPRODUCED),  # the 95% CI does not matter when the 90% one is inside
        ((-0.2, -0.1), (-0.25, -0.0301), NOT_REPRODUCED),  # 95% CI entirely below −δ
        ((-0.2, -0.1), (-0.25, -0.03), INCONCLUSIVE),  # touching −δ is not outside
        ((0.1, 0.2), (0.0301, 0.25), NOT_REPRODUCED),  # entirely above +δ
        ((0.1, 0.2), (0.03, 0.25), INCONCLUSIVE),  # touching +δ is not outside
        ((np.nan, np.nan), (np.nan, np.nan), INCONCLUSIVE),
    ],
)
def test_decide_on_both_sides_of_each_boundary(ci90, ci95, expected):
    """The TOST rule of docs/design.md §7 at δ = 3 pp, case by case around each boundary."""
    assert decide(ci90, ci95, D) == expected


def test_one_run_of_128_tasks_at_88_percent_cannot_show_equivalence_within_3pp():
    """Even a perfect match (113/128 vs 0.8828) is inconclusive: the Wilson 90% CI is wider than ±3 pp."""
    k, n = 113, 128
    paper = k / n
    (lo90,), (hi90,) = wilson([k], [n], 0.10)
    (lo95,), (hi95,) = wilson([k], [n], 0.05)

    def at(m):
        return tuple(tuple(float(x[0]) for x in wilson([paper * m], [m], a)) for a in (0.10, 0.05))

    v = fixed_value_verdict(paper, (lo90, hi90), (lo95, hi95), paper, D, n, "tasks", "wilson", at)
    assert v.verdict == INCONCLUSIVE
    assert (hi90 - lo90) / 2 > D
    # the tasks needed: the first count at which the Wilson 90% CI (statsmodels, same rate) fits inside ±3 pp;
    # the normal approximation z²·p(1−p)/δ² ≈ 311 is a lower bound because Wilson's lower side is longer here
    approx = stats.norm.ppf(0.95) ** 2 * paper * (1 - paper) / D**2
    m = v.needed
    assert m > approx > n
    lo, hi = proportion_confint(paper * m, m, alpha=0.10, method="wilson")
    assert lo - paper >= -D and hi - paper <= D
    lo, hi = proportion_confint(paper * (m - 1), m - 1, alpha=0.10, method="wilson")
    assert lo - paper < -D


def test_units_needed_directions():
    """More units are asked for towards 'reproduced' inside the margin and towards 'not_reproduced' outside."""
    assert units_needed(100, 0.0, 0.06, 0.07, D) == 400  # (0.06/0.03)² × 100
    assert units_needed(100, 0.05, 0.03, 0.04, D) == 400  # (0.04/0.02)² × 100
    assert units_needed(100, 0.03, 0.03, 0.04, D) is None  # on the boundary: never decidable
    assert units_needed(100, 0.0, 0.01, 0.02, D) == 100  # never fewer than we have


def test_welch_ci_and_tost_p_agree_with_scipy():
    """Welch CI and TOST p-values equal those from scipy's ttest_ind_from_stats (shifted one-sided tests)."""
    m1, s1, n1, m2, s2, n2 = 0.84, 0.02, 3, 0.85, 0.015, 5
    delta, _lo, hi, df = welch_ci(m1, s1, n1, m2, s2, n2, 0.10)
    se = math.sqrt(s1**2 / n1 + s2**2 / n2)
    t, _ = stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False)
    assert delta / se == pytest.approx(t)
    assert hi - delta == pytest.approx(stats.t.ppf(0.95, df) * se)
    p_low = stats.ttest_ind_from_stats(m1 + D, s1, n1, m2, s2, n2, equal_var=False, alternative="greater").pvalue
    p_up = stats.ttest_ind_from_stats(m1 - D, s1, n1, m2, s2, n2, equal_var=False, alternative="less").pvalue
    assert welch_tost_p(m1, s1, n1, m2, s2, n2, D) == pytest.approx(max(p_low, p_up))


@pytest.mark.parametrize(
    "ours,sd,expected",
    [
        (0.850, 0.005, REPRODUCED),
        (0.845, 0.03, INCONCLUSIVE),
        (0.70, 0.01, NOT_REPRODUCED),
    ],
)
def test_welch_verdict_is_consistent_with_the_tost_p(ours, sd, expected):
    """Welch verdicts follow the 90%/95% CIs and 'reproduced' coincides with TOST p < 0.05."""
    v = welch_verdict(ours, sd, 5, 0.85, 0.01, 5, D)
    assert v.verdict == expected
    assert (welch_tost_p(ours, sd, 5, 0.85, 0.01, 5, D) < 0.05) == (expected == REPRODUCED)


def test_welch_needs_two_seeds():
    """With one seed of ours the Welch TOST is not computed: inconclusive, no CI."""
    v = welch_verdict(0.85, float("nan"), 1, 0.85, 0.01, 3, D)
    assert v.verdict == INCONCLUSIVE and math.isnan(v.ci90[0])


def test_welch_seeds_needed_keeps_the_papers_spread():
    """Seeds needed for Welch are found with the paper's side fixed; a dominating paper spread gives None."""
    v = welch_verdict(0.86, 0.03, 3, 0.85, 0.005, 10, D)
    assert v.verdict == INCONCLUSIVE and v.needed is not None and v.needed > 3
    _, lo, hi, _ = welch_ci(0.86, 0.03, v.needed, 0.85, 0.005, 10, 0.10)
    assert -D <= lo and hi <= D
    _, lo, hi, _ = welch_ci(0.86, 0.03, v.needed - 1, 0.85, 0.005, 10, 0.10)
    assert lo < -D or hi > D
    wide_paper = welch_verdict(0.86, 0.03, 3, 0.85, 0.08, 3, D)
    assert wide_paper.verdict == INCONCLUSIVE and wide_paper.needed is None
