"""Rate tables and the vectorised paired table against slow, obvious per-pair loops."""

import numpy as np
import pandas as pd
import pytest
from analysis_synth import outcome_rows
from scipy import stats

from agentrepro.analysis import tables as T
from agentrepro.analysis.intervals import wilson
from agentrepro.analysis.paired import mcnemar_exact, newcombe_paired_ci


def frame(spec, episodes=1):
    """spec: {(method, seed, step): successes}."""
    rows = [r for (m, s, st), succ in spec.items() for r in outcome_rows("s", m, s, st, succ, episodes=episodes)]
    return pd.DataFrame(rows)


def random_spec(rng, methods=("a", "b", "c"), seeds=(0, 1, 2), steps=(5, 10), items=30, p=(0.8, 0.6, 0.5)):
    return {
        (m, s, st): (rng.random(items) < p[i]).astype(int) for i, m in enumerate(methods) for s in seeds for st in steps
    }


def test_runs_and_methods_tables_follow_the_contract():
    """Columns are docs/design.md §3.6's in order; std uses ddof = 1; pooled Wilson is on pooled counts."""
    spec = random_spec(np.random.default_rng(0))
    df = frame(spec)
    runs = T.runs_table(df)
    methods = T.methods_table(runs, df)
    assert list(runs.columns) == ["method", "seed", "step", "n", "successes", "rate", "wilson_lo", "wilson_hi"]
    assert list(methods.columns[:10]) == [
        "method",
        "step",
        "seeds",
        "mean",
        "std",
        "pooled_n",
        "pooled_successes",
        "pooled_rate",
        "wilson_lo",
        "wilson_hi",
    ]
    rates = [spec[("b", s, 10)].mean() for s in (0, 1, 2)]
    row = methods[(methods["method"] == "b") & (methods["step"] == 10)].iloc[0]
    assert row["std"] == pytest.approx(np.std(rates, ddof=1)) and row["mean"] == pytest.approx(np.mean(rates))
    k = sum(spec[("b", s, 10)].sum() for s in (0, 1, 2))
    assert (row["wilson_lo"], row["wilson_hi"]) == pytest.approx(tuple(float(x) for x in wilson(k, 90)))
    cats = T.categories_table(df)
    assert set(cats["category"]) == {"even", "odd"} and cats["n"].sum() == len(df)


@pytest.mark.parametrize("episodes", [1, 3])
def test_paired_table_matches_slow_loops(episodes):
    """Per-seed cells, Newcombe CI and McNemar, and the `all` clustered row equal a per-pair loop."""
    rng = np.random.default_rng(episodes)
    spec = random_spec(rng, items=24 * episodes)
    df = frame(spec, episodes=episodes)
    out = T.paired_table(df, ["a", "b", "c"], rng=np.random.default_rng(0), n_boot=200)
    assert len(out) == 2 * 3 * 4  # steps × pairs × (3 seeds + all)
    for ma, mb in [("a", "b"), ("a", "c"), ("b", "c")]:
        diffs = []
        for s in (0, 1, 2):
            a, b = spec[(ma, s, 10)].astype(bool), spec[(mb, s, 10)].astype(bool)
            cells = (int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum()), int((~a & ~b).sum()))
            row = out[(out.method_a == ma) & (out.method_b == mb) & (out.seed == str(s)) & (out.step == 10)].iloc[0]
            assert tuple(row[["both", "a_only", "b_only", "neither"]]) == cells
            assert (row.delta, row.ci_lo, row.ci_hi) == pytest.approx(newcombe_paired_ci(*cells))
            assert row.mcnemar_p == pytest.approx(mcnemar_exact(*cells))
            diffs.append((a.astype(float) - b).reshape(-1, episodes).mean(1))  # per task
        d = np.mean(diffs, axis=0)
        row = out[(out.method_a == ma) & (out.method_b == mb) & (out.seed == "all") & (out.step == 10)].iloc[0]
        se = d.std(ddof=1) / np.sqrt(d.size)
        assert row.n_tasks == 24 and row.delta == pytest.approx(d.mean())
        assert row.ci_hi - row.delta == pytest.approx(stats.t.ppf(0.975, 23) * se)
        assert row.p == pytest.approx(stats.ttest_1samp(d, 0).pvalue)
        assert row.boot_lo < row.delta < row.boot_hi
    fam = out[(out.step == 10) & (out.seed == "all")]
    p = np.sort(fam.p.to_numpy())
    assert fam.p_holm.max() == pytest.approx(min(1, max(p[0] * 3, p[1] * 2, p[2])))


def test_paired_bootstrap_is_reproducible():
    """The same generator seed gives the same bootstrap columns."""
    df = frame(random_spec(np.random.default_rng(9)))
    one = T.paired_table(df, ["a", "b", "c"], rng=np.random.default_rng(1), n_boot=100)
    two = T.paired_table(df, ["a", "b", "c"], rng=np.random.default_rng(1), n_boot=100)
    pd.testing.assert_frame_equal(one, two)


def test_single_seed_all_row_is_the_exact_analysis():
    """With one seed and one episode per task the `all` row repeats Newcombe and exact McNemar."""
    rng = np.random.default_rng(4)
    spec = random_spec(rng, methods=("a", "b"), seeds=(0,), steps=(5,), items=50, p=(0.8, 0.5))
    out = T.paired_table(frame(spec), ["a", "b"], rng=np.random.default_rng(0), n_boot=100)
    seed_row, all_row = out.iloc[0], out.iloc[1]
    assert all_row.seed == "all" and all_row.test == "newcombe10+mcnemar_exact"
    assert (all_row.delta, all_row.ci_lo, all_row.ci_hi, all_row.p) == pytest.approx(
        (seed_row.delta, seed_row.ci_lo, seed_row.ci_hi, seed_row.mcnemar_p)
    )


def test_learning_table_matches_slow_loops():
    """Each method at its last step against its own step 0: per-seed 2×2 cells, Newcombe CI and McNemar equal a
    per-run loop; the pooled row clusters by task; Holm is within each (step, seed) family of methods."""
    rng = np.random.default_rng(11)
    spec = random_spec(rng, steps=(0, 10), items=30, p=(0.7, 0.5, 0.4))
    out = T.learning_table(frame(spec), ["a", "b", "c"], 10, rng=np.random.default_rng(0), n_boot=200)
    assert len(out) == 3 * 4 and set(out["baseline_step"]) == {0}
    for m in ("a", "b", "c"):
        diffs = []
        for s in (0, 1, 2):
            now, then = spec[(m, s, 10)].astype(bool), spec[(m, s, 0)].astype(bool)
            cells = (
                int((now & then).sum()),
                int((now & ~then).sum()),
                int((~now & then).sum()),
                int((~now & ~then).sum()),
            )
            row = out[(out.method == m) & (out.seed == str(s))].iloc[0]
            assert tuple(row[["both", "gained", "lost", "neither"]]) == cells
            assert (row.delta, row.ci_lo, row.ci_hi) == pytest.approx(newcombe_paired_ci(*cells))
            assert row.mcnemar_p == pytest.approx(mcnemar_exact(*cells)) and row.family == f"learning@10/{s}"
            diffs.append(now.astype(float) - then)
        pooled = out[(out.method == m) & (out.seed == "all")].iloc[0]
        d = np.mean(diffs, axis=0)
        assert pooled.delta == pytest.approx(d.mean()) and pooled.p == pytest.approx(stats.ttest_1samp(d, 0).pvalue)
    family = out[out.seed == "all"]
    p = np.sort(family.p.to_numpy())
    assert family.p_holm.max() == pytest.approx(min(1, max(p[0] * 3, p[1] * 2, p[2])))


def test_learning_table_is_empty_at_the_first_step():
    """At the first evaluated step there is nothing to compare with."""
    spec = random_spec(np.random.default_rng(3), steps=(0, 10))
    assert T.learning_table(frame(spec), ["a", "b", "c"], 0, rng=np.random.default_rng(0)).empty
