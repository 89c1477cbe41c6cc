"""2×2 table orientation, exact McNemar, the Newcombe (1998) method-10 paired CI, and Holm."""

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from agentrepro.analysis.paired import holm, mcnemar_exact, newcombe_paired_ci, table_2x2


def test_table_orientation():
    """both, a_only, b_only, neither count the right cells."""
    a = [1, 1, 0, 0, 1]
    b = [1, 0, 1, 0, 0]
    assert table_2x2(a, b) == (1, 2, 1, 1)


@pytest.mark.parametrize("cells", [(10, 7, 1, 30), (0, 0, 0, 5), (3, 12, 2, 0), (50, 20, 19, 39)])
def test_mcnemar_exact_matches_statsmodels_and_binomial(cells):
    """Exact McNemar equals statsmodels' and the two-sided binomial test on the discordant pairs."""
    both, a_only, b_only, neither = cells
    p = mcnemar_exact(*cells)
    assert p == pytest.approx(mcnemar([[both, a_only], [b_only, neither]], exact=True).pvalue)
    if a_only + b_only:
        assert p == pytest.approx(stats.binomtest(min(a_only, b_only), a_only + b_only, 0.5).pvalue)
    else:
        assert p == 1.0


# Newcombe RG (1998) "Improved confidence intervals for the difference between binomial proportions based on
# paired data", Stat Med 17:2635-2650, Table II, method 10 (the four worked examples e, f, g, h), as also
# asserted by the R package propint (tests/testthat, ci.two.dep.props "results reported in Newcombe1998").
NEWCOMBE_TABLE_II = [
    ((36, 12, 2, 0), 0.0569, 0.3404),
    ((18, 12, 2, 18), 0.0562, 0.3290),
    ((53, 0, 0, 1), -0.0729, 0.0729),
    ((0, 30, 0, 0), 0.8395, 1.0000),
]


@pytest.mark.parametrize("cells,lo,hi", NEWCOMBE_TABLE_II)
def test_newcombe_method_10_reproduces_the_published_examples(cells, lo, hi):
    """Our method-10 interval matches Newcombe's (1998) Table II to the 4 published decimals."""
    _e, f, g, _h = cells
    delta, got_lo, got_hi = newcombe_paired_ci(*cells)
    assert delta == pytest.approx((f - g) / sum(cells))
    assert round(got_lo, 4) == pytest.approx(lo, abs=1e-4)
    assert round(got_hi, 4) == pytest.approx(hi, abs=1e-4)


def test_newcombe_is_antisymmetric_and_contains_the_estimate():
    """Swapping a and b negates the interval; the estimate lies inside it."""
    d, lo, hi = newcombe_paired_ci(40, 9, 3, 20)
    d2, lo2, hi2 = newcombe_paired_ci(40, 3, 9, 20)
    assert (d2, lo2, hi2) == pytest.approx((-d, -hi, -lo))
    assert lo < d < hi


def test_holm_matches_statsmodels_and_keeps_nan():
    """Holm adjustment equals statsmodels' on finite p-values and leaves NaN where a test was not run."""
    p = np.array([0.01, 0.04, np.nan, 0.03, 0.5])
    out = holm(p)
    finite = ~np.isnan(p)
    assert np.allclose(out[finite], multipletests(p[finite], method="holm")[1])
    assert np.isnan(out[2])
    assert out[0] == pytest.approx(0.04)  # 4 tests: 0.01 × 4


def test_vectorised_mcnemar_and_newcombe_equal_the_scalar_ones():
    """Array versions agree with the statsmodels-backed scalar McNemar and the scalar Newcombe on random tables."""
    from agentrepro.analysis.paired import mcnemar_exact_many

    rng = np.random.default_rng(0)
    cells = rng.integers(0, 30, size=(50, 4))
    cells[0] = (5, 0, 0, 5)
    cells[1] = (0, 7, 0, 0)
    p = mcnemar_exact_many(cells[:, 1], cells[:, 2])
    d, lo, hi = newcombe_paired_ci(*cells.T)
    for k, row in enumerate(cells):
        assert p[k] == pytest.approx(mcnemar_exact(*row))
        assert (d[k], lo[k], hi[k]) == pytest.approx(newcombe_paired_ci(*(int(x) for x in row)))


def test_holm_against_statsmodels_on_random_families():
    """The written-out Holm equals statsmodels' multipletests on random families, ties included."""
    rng = np.random.default_rng(1)
    for size in (1, 2, 7, 30):
        p = rng.random(size) ** 3
        p[: size // 3] = p[0]
        assert np.allclose(holm(p), multipletests(p, method="holm")[1])
