"""The paired bootstrap over tasks: controlled randomness and agreement with the obvious loop."""

import numpy as np
import pytest

from agentrepro.analysis.bootstrap import bootstrap_ci, bootstrap_means


def slow_bootstrap_means(d, rng, n_boot):
    tasks = d.shape[-1]
    return np.array([d[rng.integers(0, tasks, tasks)].mean() for _ in range(n_boot)])


def test_same_generator_seed_same_result_and_different_seed_differs():
    """Results depend only on the Generator passed in: same seed → identical, other seed → different."""
    d = np.random.default_rng(0).normal(size=200)
    a = bootstrap_means(d, np.random.default_rng(7), 500)
    b = bootstrap_means(d, np.random.default_rng(7), 500)
    c = bootstrap_means(d, np.random.default_rng(8), 500)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_rejects_anything_but_a_generator():
    """A seed or the legacy RandomState is refused, so global state can never leak in."""
    with pytest.raises(TypeError):
        bootstrap_means(np.ones(5), 3, 10)


@pytest.mark.parametrize("tasks", [1, 2, 37, 300])
def test_fast_equals_the_obvious_loop(tasks):
    """With the same seed, the count-matrix replicates equal resampling task indices one replicate at a time."""
    d = (np.random.default_rng(1).binomial(1, 0.3, tasks) - np.random.default_rng(2).binomial(1, 0.5, tasks)).astype(
        float
    )
    fast = bootstrap_means(d, np.random.default_rng(3), 500)
    slow = slow_bootstrap_means(d, np.random.default_rng(3), 500)
    assert np.allclose(fast, slow, atol=1e-12)


def test_spread_matches_the_standard_error():
    """Over many replicates the spread of the means approaches sd/sqrt(tasks)."""
    d = np.random.default_rng(1).normal(size=300)
    reps = bootstrap_means(d, np.random.default_rng(4), 20000)
    assert reps.std() == pytest.approx(d.std() / np.sqrt(d.size), rel=0.03)


def test_two_dimensional_input_uses_the_same_task_draws():
    """Rows of a 2-D input are resampled with shared draws: identical rows give identical replicates."""
    d = np.random.default_rng(5).normal(size=50)
    reps = bootstrap_means(np.vstack([d, d, -d]), np.random.default_rng(0), 100)
    assert reps.shape == (100, 3)
    assert np.allclose(reps[:, 0], reps[:, 1]) and np.allclose(reps[:, 2], -reps[:, 0])
    lo, hi = bootstrap_ci(np.vstack([d, d]), np.random.default_rng(0), 1000)
    assert lo.shape == (2,) and np.all(lo < d.mean()) and np.all(d.mean() < hi)
