"""The rate tables of docs/design.md §3.6: runs, methods, categories and paired (method pair × seed or `all` × step).

Input is the validated outcomes frame (`load.read_outcomes` + `validate.validate_outcomes`). Paired
statistics work on a dense array `success` of shape (methods, seeds, items) per step, items being the
(task_id, episode) pairs sorted, which validation guarantees are the same for every run at that step.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from agentrepro.analysis import contract
from agentrepro.analysis.bootstrap import bootstrap_ci
from agentrepro.analysis.intervals import clustered_interval, wilson
from agentrepro.analysis.paired import holm, mcnemar_exact_many, newcombe_paired_ci

RUNS, METHODS, CATEGORIES, PAIRED = (contract.names(t) for t in ("runs", "methods", "categories", "paired"))


def _rates(grouped: pd.core.groupby.DataFrameGroupBy, alpha: float) -> pd.DataFrame:
    out = grouped["success"].agg(n="size", successes="sum").reset_index()
    out["rate"] = out["successes"] / out["n"]
    out["wilson_lo"], out["wilson_hi"] = wilson(out["successes"].to_numpy(), out["n"].to_numpy(), alpha)
    return out


def runs_table(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per method × seed × step: k/n and the Wilson interval."""
    return _rates(df.groupby(["method", "seed", "step"], sort=True), alpha)[RUNS]


def methods_table(runs: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per method × step: mean ± std (ddof = 1) of per-seed rates, pooled k/n with Wilson."""
    g = runs.groupby(["method", "step"], sort=True)
    out = g.agg(seeds=("seed", "nunique"), mean=("rate", "mean"), std=("rate", lambda r: r.std(ddof=1)),
                pooled_n=("n", "sum"), pooled_successes=("successes", "sum")).reset_index()
    out["pooled_rate"] = out["pooled_successes"] / out["pooled_n"]
    out["wilson_lo"], out["wilson_hi"] = wilson(out["pooled_successes"].to_numpy(), out["pooled_n"].to_numpy(), alpha)
    out["std_ddof"] = 1
    return out[METHODS]


def categories_table(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per method × category × step, pooled over seeds, with the Wilson interval."""
    return _rates(df.groupby(["method", "category", "step"], sort=True), alpha)[CATEGORIES]


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


def _per_task(values: np.ndarray, task_index: np.ndarray, n_tasks: int) -> np.ndarray:
    """Average the items (episodes) of each task: (..., items) -> (..., tasks); items are sorted by task."""
    if values.shape[-1] == n_tasks:
        return values
    starts = np.flatnonzero(np.r_[True, np.diff(task_index) != 0])
    counts = np.diff(np.r_[starts, task_index.size])
    return np.add.reduceat(values, starts, axis=-1) / counts


def paired_table(df: pd.DataFrame, methods: list[str], alpha: float = 0.05, *, rng: np.random.Generator,
                 n_boot: int = 2000) -> pd.DataFrame:
    """Every method pair × (each seed, then `all`) × step shared by both methods.

    Per seed: 2×2 table over (task_id, episode), Newcombe method-10 CI, exact McNemar. `all`: pooled
    counts, per-task mean difference over seeds and episodes with a task-clustered CI (t, tasks − 1 df),
    its two-sided t-test p (`test` = task_clustered_t; mcnemar_p empty), and a paired bootstrap CI over
    tasks (boot_lo, boot_hi). With one seed and one episode per task there is nothing to cluster and the
    `all` row repeats the exact per-seed analysis. `p` is the p-value of the row's test; `p_holm` is
    Holm over the pairs sharing (step, seed).
    """
    rows = []
    for step, at_step in df.groupby("step", sort=True):
        here = set(at_step["method"].unique().tolist())
        present = [m for m in methods if m in here]
        if len(present) < 2:
            continue
        success, seeds, task_index, task_ids = dense(at_step, present)
        n_tasks = len(task_ids)
        pairs = list(combinations(range(len(present)), 2))
        if not pairs:
            continue
        a_idx = np.array([i for i, _ in pairs])
        b_idx = np.array([j for _, j in pairs])
        a, b = success[a_idx].astype(bool), success[b_idx].astype(bool)   # (P, S, I)
        both = (a & b).sum(-1)
        a_only = (a & ~b).sum(-1)
        b_only = (~a & b).sum(-1)
        neither = (~a & ~b).sum(-1)
        diff = _per_task(a.astype(np.float64) - b, task_index, n_tasks)   # (P, S, T)
        per_task = diff.mean(axis=1)                                      # (P, T)
        boot_lo, boot_hi = bootstrap_ci(per_task, rng, n_boot, alpha)
        n_items = success.shape[2]
        delta_s, lo_s, hi_s = newcombe_paired_ci(both, a_only, b_only, neither, alpha=alpha)   # (P, S)
        mp_s = mcnemar_exact_many(a_only, b_only)
        for p, (i, j) in enumerate(pairs):
            for s, seed in enumerate(seeds):
                cells = dict(both=int(both[p, s]), a_only=int(a_only[p, s]), b_only=int(b_only[p, s]), neither=int(neither[p, s]))
                rows.append(dict(method_a=present[i], method_b=present[j], seed=str(seed), step=int(step), n_tasks=n_tasks, **cells,
                                 delta=float(delta_s[p, s]), ci_lo=float(lo_s[p, s]), ci_hi=float(hi_s[p, s]),
                                 mcnemar_p=float(mp_s[p, s]), p_holm=np.nan, p=float(mp_s[p, s]), test="newcombe10+mcnemar_exact",
                                 boot_lo=np.nan, boot_hi=np.nan, n_pairs=n_items))
            cells = dict(both=int(both[p].sum()), a_only=int(a_only[p].sum()), b_only=int(b_only[p].sum()), neither=int(neither[p].sum()))
            if len(seeds) == 1 and n_items == n_tasks:
                # one seed, one episode per task: nothing to cluster, the `all` row is the exact paired analysis
                delta, lo, hi = float(delta_s[p, 0]), float(lo_s[p, 0]), float(hi_s[p, 0])
                mp = pval = float(mp_s[p, 0])
                test = "newcombe10+mcnemar_exact"
            else:
                delta, se, lo, hi = clustered_interval(diff[p], alpha)
                if np.isfinite(se) and se > 0:
                    pval = float(2 * stats.t.sf(abs(delta) / se, n_tasks - 1))
                else:
                    pval = 1.0 if delta == 0 else 0.0
                mp, test = np.nan, "task_clustered_t"
            rows.append(dict(method_a=present[i], method_b=present[j], seed="all", step=int(step), n_tasks=n_tasks, **cells,
                             delta=delta, ci_lo=lo, ci_hi=hi, mcnemar_p=mp, p_holm=np.nan, p=pval, test=test,
                             boot_lo=float(boot_lo[p]), boot_hi=float(boot_hi[p]), n_pairs=n_items * len(seeds)))
    out = pd.DataFrame(rows, columns=PAIRED)
    if len(out):
        p_holm = np.full(len(out), np.nan)
        for _, index in out.groupby(["step", "seed"]).indices.items():
            p_holm[index] = holm(out["p"].to_numpy()[index])
        out["p_holm"] = p_holm
    return out
