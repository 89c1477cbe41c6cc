"""The rate tables of docs/design.md §3.6: runs, methods, categories, paired (method pair × seed or `all` × step) and
learning (each method against its own step 0, with the paired machinery).

Input is the validated outcomes frame (`load.read_outcomes` + `validate.validate_outcomes`). Paired
statistics work on a dense array `success` of shape (methods, seeds, items) per step, items being the
(task_id, episode) pairs sorted, which validation guarantees are the same for every run at that step.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from agentrepro.analysis import contract, families
from agentrepro.analysis.bootstrap import bootstrap_ci
from agentrepro.analysis.intervals import clustered_interval, clustered_wilson, wilson
from agentrepro.analysis.paired import mcnemar_exact_many, newcombe_paired_ci

RUNS, METHODS, CATEGORIES, PAIRED, LEARNING = (
    contract.names(t) for t in ("runs", "methods", "categories", "paired", "learning")
)
LEARNING_CELLS = {
    "a_only": "gained",
    "b_only": "lost",
}  # the learning table's names of the 2×2 table's off-diagonal cells
EXACT, CLUSTERED_T = (
    "newcombe10+mcnemar_exact",
    "task_clustered_t",
)  # the `test` of a per-seed row and of a clustered `all` row


def _rates(grouped: pd.core.groupby.DataFrameGroupBy, alpha: float) -> pd.DataFrame:
    out = grouped["success"].agg(n="size", successes="sum").reset_index()
    out["rate"] = out["successes"] / out["n"]
    out["wilson_lo"], out["wilson_hi"] = wilson(out["successes"].to_numpy(), out["n"].to_numpy(), alpha)
    return out


def runs_table(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per method × seed × step: k/n and the Wilson interval."""
    return _rates(df.groupby(["method", "seed", "step"], sort=True), alpha)[RUNS]


def _clustered(df: pd.DataFrame, keys: list[str], alpha: float) -> pd.DataFrame:
    """`keys` and the task-clustered interval of each group's pooled rate (intervals.clustered_wilson):
    ci_lo, ci_hi, n_eff, ci_test. Each group holds every (seed, task, episode) once (validated outcomes)."""
    rows = []
    for key, g in df.groupby(keys, sort=True):
        g = g.sort_values(["seed", "task_id", "episode"], kind="stable")
        shape = (g["seed"].nunique(), g["task_id"].nunique(), -1)
        lo, hi, n_eff, test = clustered_wilson(g["success"].to_numpy(float).reshape(shape), alpha)
        rows.append(dict(zip(keys, key), ci_lo=lo, ci_hi=hi, n_eff=n_eff, ci_test=test))
    return pd.DataFrame(rows, columns=[*keys, "ci_lo", "ci_hi", "n_eff", "ci_test"])


def methods_table(runs: pd.DataFrame, df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per method × step: mean ± std (ddof = 1) of per-seed rates, pooled k/n with Wilson (every episode
    counted as independent), and the pooled rate's task-clustered interval (ci_lo, ci_hi: the seeds replay the same tasks)."""
    g = runs.groupby(["method", "step"], sort=True)
    out = g.agg(
        seeds=("seed", "nunique"),
        mean=("rate", "mean"),
        std=("rate", lambda r: r.std(ddof=1)),
        pooled_n=("n", "sum"),
        pooled_successes=("successes", "sum"),
    ).reset_index()
    out["pooled_rate"] = out["pooled_successes"] / out["pooled_n"]
    out["wilson_lo"], out["wilson_hi"] = wilson(out["pooled_successes"].to_numpy(), out["pooled_n"].to_numpy(), alpha)
    out["std_ddof"] = 1
    out = out.merge(_clustered(df, ["method", "step"], alpha), on=["method", "step"], how="left")
    return out[METHODS]


def categories_table(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per method × category × step, pooled over seeds, with the Wilson interval and the task-clustered one."""
    keys = ["method", "category", "step"]
    out = _rates(df.groupby(keys, sort=True), alpha)
    return out.merge(_clustered(df, keys, alpha), on=keys, how="left")[CATEGORIES]


def dense(df_step: pd.DataFrame, methods: list[str]) -> tuple[np.ndarray, list[int], np.ndarray, list[str]]:
    """(success (M, S, I) int8, seeds, task index per item (I,), task ids) for one step of validated rows."""
    ordered = df_step.assign(_m=pd.Categorical(df_step["method"], categories=methods, ordered=True))
    ordered = ordered.sort_values(["_m", "seed", "task_id", "episode"], kind="stable")
    seeds = sorted(df_step["seed"].unique().tolist())
    m, s = len(methods), len(seeds)
    success = ordered["success"].to_numpy(np.int8).reshape(m, s, -1)
    first = ordered.iloc[: success.shape[2]]
    task_ids, task_index = np.unique(first["task_id"].to_numpy(), return_inverse=True)
    return success, seeds, task_index, task_ids.tolist()


def _seed_sets(df_step: pd.DataFrame) -> dict[str, frozenset]:
    """Each method's seeds in one step's rows."""
    return {m: frozenset(int(x) for x in seeds) for m, seeds in df_step.groupby("method")["seed"].unique().items()}


def _per_task(values: np.ndarray, task_index: np.ndarray, n_tasks: int) -> np.ndarray:
    """Average the items (episodes) of each task: (..., items) -> (..., tasks); items are sorted by task."""
    if values.shape[-1] == n_tasks:
        return values
    starts = np.flatnonzero(np.r_[True, np.diff(task_index) != 0])
    counts = np.diff(np.r_[starts, task_index.size])
    return np.add.reduceat(values, starts, axis=-1) / counts


def _compare(
    a: np.ndarray,
    b: np.ndarray,
    seeds: list[int],
    task_index: np.ndarray,
    n_tasks: int,
    alpha: float,
    *,
    rng: np.random.Generator,
    n_boot: int,
) -> list[list[dict]]:
    """Paired comparisons of aligned 0/1 arrays `a`, `b` of shape (comparisons, seeds, items): for each comparison,
    one row per seed and then the `all` row (the statistics of `paired_table`'s docstring, without labels)."""
    a, b = a.astype(bool), b.astype(bool)
    both, a_only, b_only, neither = ((x & y).sum(-1) for x, y in ((a, b), (a, ~b), (~a, b), (~a, ~b)))
    diff = _per_task(a.astype(np.float64) - b, task_index, n_tasks)  # (P, S, T)
    boot_lo, boot_hi = bootstrap_ci(diff.mean(axis=1), rng, n_boot, alpha)
    n_items = a.shape[2]
    delta_s, lo_s, hi_s = newcombe_paired_ci(both, a_only, b_only, neither, alpha=alpha)  # (P, S)
    mp_s = mcnemar_exact_many(a_only, b_only)
    out = []
    for p in range(a.shape[0]):
        rows = []
        for s, seed in enumerate(seeds):
            rows.append(
                {
                    "seed": str(seed),
                    "n_tasks": n_tasks,
                    "both": int(both[p, s]),
                    "a_only": int(a_only[p, s]),
                    "b_only": int(b_only[p, s]),
                    "neither": int(neither[p, s]),
                    "delta": float(delta_s[p, s]),
                    "ci_lo": float(lo_s[p, s]),
                    "ci_hi": float(hi_s[p, s]),
                    "mcnemar_p": float(mp_s[p, s]),
                    "p_holm": np.nan,
                    "p": float(mp_s[p, s]),
                    "test": EXACT,
                    "boot_lo": np.nan,
                    "boot_hi": np.nan,
                    "n_pairs": n_items,
                }
            )
        cells = {
            "both": int(both[p].sum()),
            "a_only": int(a_only[p].sum()),
            "b_only": int(b_only[p].sum()),
            "neither": int(neither[p].sum()),
        }
        if len(seeds) == 1 and n_items == n_tasks:
            # one seed, one episode per task: nothing to cluster, the `all` row is the exact paired analysis
            delta, lo, hi = float(delta_s[p, 0]), float(lo_s[p, 0]), float(hi_s[p, 0])
            mp = pval = float(mp_s[p, 0])
            test = EXACT
        else:
            delta, se, lo, hi = clustered_interval(diff[p], alpha)
            if np.isfinite(se) and se > 0:
                pval = float(2 * stats.t.sf(abs(delta) / se, n_tasks - 1))
            else:
                pval = 1.0 if delta == 0 else 0.0
            mp, test = np.nan, CLUSTERED_T
        rows.append(
            dict(
                seed="all",
                n_tasks=n_tasks,
                **cells,
                delta=delta,
                ci_lo=lo,
                ci_hi=hi,
                mcnemar_p=mp,
                p_holm=np.nan,
                p=pval,
                test=test,
                boot_lo=float(boot_lo[p]),
                boot_hi=float(boot_hi[p]),
                n_pairs=n_items * len(seeds),
            )
        )
        out.append(rows)
    return out


def paired_table(
    df: pd.DataFrame, methods: list[str], alpha: float = 0.05, *, rng: np.random.Generator, n_boot: int = 2000
) -> pd.DataFrame:
    """Every method pair × (each seed, then `all`) × step shared by both methods.

    Per seed: 2×2 table over (task_id, episode), Newcombe method-10 CI, exact McNemar. `all`: pooled
    counts, per-task mean difference over seeds and episodes with a task-clustered CI (t, tasks − 1 df),
    its two-sided t-test p (`test` = task_clustered_t; mcnemar_p empty), and a paired bootstrap CI over
    tasks (boot_lo, boot_hi). With one seed and one episode per task there is nothing to cluster and the
    `all` row repeats the exact per-seed analysis. `p` is the p-value of the row's test; `p_holm` is
    Holm within the row's family (`family`: the pairs sharing (step, seed), agentrepro.analysis.families).
    """
    rows = []
    for step, at_step in df.groupby("step", sort=True):
        seeds_of = _seed_sets(at_step)
        present = [m for m in methods if m in seeds_of]
        pairs: dict[frozenset, list[tuple[str, str]]] = {}  # the pairs that share each set of seeds
        for a, b in combinations(present, 2):
            if seeds_of[a] & seeds_of[b]:
                pairs.setdefault(seeds_of[a] & seeds_of[b], []).append((a, b))
        blocks: dict[tuple[str, str], list[dict]] = {}
        for shared, among in pairs.items():  # one set of seeds unless the matrix is partial
            names = [m for m in present if any(m in pair for pair in among)]
            rows_here = at_step[at_step["seed"].isin(shared) & at_step["method"].isin(names)]
            success, seeds, task_index, task_ids = dense(rows_here, names)
            a_idx, b_idx = (np.array([names.index(pair[side]) for pair in among]) for side in (0, 1))
            compared = _compare(
                success[a_idx], success[b_idx], seeds, task_index, len(task_ids), alpha, rng=rng, n_boot=n_boot
            )
            blocks.update(zip(among, compared))
        for a, b in combinations(present, 2):
            rows += [
                dict(method_a=a, method_b=b, step=int(step), **r, family=families.pairs(int(step), r["seed"]))
                for r in blocks.get((a, b), [])
            ]
    out = pd.DataFrame(rows, columns=PAIRED)
    families.holm_by_family(out)
    return out


def learning_table(
    df: pd.DataFrame,
    methods: list[str],
    step: int,
    alpha: float = 0.05,
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
) -> pd.DataFrame:
    """Each method at `step` against its own first evaluated step (step 0, the policy RL started from), on the
    same tasks and seeds: the statistics of `paired_table` with a = the step, b = its baseline (`gained`: solved
    at the step only; `lost`: at the baseline only), Holm within each (step, seed) family of methods. Empty when
    `step` is the first evaluated step; a method whose two steps were not scored on the same items is left out."""
    baseline = int(df["step"].min())
    if step == baseline:
        return contract.empty("learning")
    at, before = df[df["step"] == step], df[df["step"] == baseline]
    seeds_of, base_seeds_of = _seed_sets(at), _seed_sets(before)
    present = [m for m in methods if m in seeds_of and seeds_of[m] == base_seeds_of.get(m)]
    groups: dict[frozenset, list[str]] = {}  # the methods of each set of seeds: one set unless the matrix is partial
    for m in present:
        groups.setdefault(seeds_of[m], []).append(m)
    blocks: dict[str, list[dict]] = {}
    for names in groups.values():
        success, seeds, task_index, task_ids = dense(at[at["method"].isin(names)], names)
        base, _, _, base_ids = dense(before[before["method"].isin(names)], names)
        if base.shape == success.shape and base_ids == task_ids:
            blocks.update(
                zip(names, _compare(success, base, seeds, task_index, len(task_ids), alpha, rng=rng, n_boot=n_boot))
            )
    rows = [
        dict(
            method=m,
            step=int(step),
            baseline_step=baseline,
            **{LEARNING_CELLS.get(k, k): v for k, v in r.items()},
            family=families.learning(int(step), r["seed"]),
        )
        for m in present
        for r in blocks.get(m, [])
    ]
    out = pd.DataFrame(rows, columns=LEARNING)
    families.holm_by_family(out)
    return out
