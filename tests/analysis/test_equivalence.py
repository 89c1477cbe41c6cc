"""Paired equivalence (TOST as a CI inside the margin) on synthetic outcomes where the answer is known."""

import numpy as np
import pytest
from scipy import stats

from agentrepro.analysis.equivalence import _tost_power, equivalence, statement, tasks_needed


def port(n_tasks: int, seeds: int, *, flip: float, gap: float = 0.0, seed: int = 0):
    """(reference, port): 0/1 (seeds, tasks, 1); the port differs on a `flip` share of tasks and loses `gap` of successes."""
    rng = np.random.default_rng(seed)
    ref = (rng.random((seeds, n_tasks, 1)) < 0.5).astype(np.int8)
    other = ref.copy()
    flips = rng.random(ref.shape) < flip
    other[flips] = 1 - other[flips]
    lost = (other == 1) & (rng.random(ref.shape) < 2 * gap)
    other[lost] = 0
    return other, ref


def test_equal_methods_with_enough_tasks_are_reproduced():
    """A port that matches the reference on 98% of 600 tasks, over 3 seeds and on one seed, is reproduced within 3 pp."""
    a, b = port(600, 3, flip=0.02)
    for e in (equivalence(a, b, 0.03), equivalence(a[:1], b[:1], 0.03)):
        assert e.verdict == "reproduced" and e.tasks_needed is None
        assert -0.03 <= e.ci90[0] <= e.ci90[1] <= 0.03 and e.n_tasks == 600
        assert e.p is not None and e.p < 0.05


def test_a_ten_point_gap_is_not_reproduced():
    """A port 10 pp worse on 400 tasks is not reproduced: the 95% CI lies below −3 pp."""
    a, b = port(400, 3, flip=0.02, gap=0.10)
    e = equivalence(a, b, 0.03)
    assert e.verdict == "not_reproduced" and e.ci95[1] < -0.03 and e.delta == pytest.approx(-0.10, abs=0.03)
    assert "entirely below the ±3 pp margin" in statement(e, "p", "r", 0.03)


@pytest.mark.parametrize("n_tasks, flip", [(8, 0.0), (40, 0.05)])
def test_too_few_tasks_are_inconclusive_with_the_tasks_needed(n_tasks, flip):
    """Identical or near-identical methods on few tasks: inconclusive (no zero-width interval), with more tasks needed."""
    a, b = port(n_tasks, 1, flip=flip)
    e = equivalence(a, b, 0.03)
    assert e.verdict == "inconclusive" and e.ci90[1] - e.ci90[0] > 0.06
    assert e.tasks_needed is not None and e.tasks_needed > n_tasks
    assert f"about {e.tasks_needed} tasks would be needed" in statement(e, "p", "r", 0.03)


def test_tasks_needed_is_the_smallest_count_with_80_percent_power():
    """The power search returns n with power ≥ 0.8 and n − 1 below it; more spread needs more tasks; none on the margin."""
    n = tasks_needed(0.005, 0.2, 0.03)
    assert _tost_power(n, 0.005, 0.2, 0.03) >= 0.8 > _tost_power(n - 1, 0.005, 0.2, 0.03)
    assert tasks_needed(0.005, 0.3, 0.03) > n
    assert tasks_needed(0.03, 0.2, 0.03) is None
    far = tasks_needed(0.08, 0.3, 0.03)  # outside the margin: power of the one-sided test at 2.5%
    df = far - 1
    assert stats.nct.sf(stats.t.ppf(0.975, df), df, 0.05 / (0.3 / np.sqrt(far))) >= 0.8


def test_power_matches_simulation():
    """The TOST power approximation agrees with a simulation of the paired t TOST within 5 points."""
    rng = np.random.default_rng(3)
    n, diff, sd, margin = 150, 0.01, 0.15, 0.03
    d = rng.normal(diff, sd, (4000, n))
    se = d.std(axis=1, ddof=1) / np.sqrt(n)
    half = stats.t.ppf(0.95, n - 1) * se
    simulated = np.mean((d.mean(axis=1) - half > -margin) & (d.mean(axis=1) + half < margin))
    assert _tost_power(n, diff, sd, margin) == pytest.approx(simulated, abs=0.05)
