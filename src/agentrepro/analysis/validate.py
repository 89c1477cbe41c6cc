"""Checks that run before any statistic (docs/design.md §3.4): every failure is BadInput naming file and keys.

`validate_outcomes(df, panel=None)` where `df` comes from `load.read_outcomes` and `panel` is the lock's
task panel (list of {task_id, task_hash, ...}) or None. It rejects: duplicated (method, seed, step,
task_id, episode) keys; a task_hash that differs from the panel (or between rows when there is no panel);
tasks outside the panel; missing tasks (vs the panel, or vs the other runs at the same step); differing
(task_id, episode) sets between runs that would be paired; a seed present for one method and missing
for another at the same step, unless the analysis is told the matrix is partial (or missing within a method at
one of its steps, always).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from agentrepro.analysis.load import KEY
from agentrepro.errors import BadInput

_SHOW = 5


def _ids(values) -> str:
    values = sorted(values)
    more = f" and {len(values) - _SHOW} more" if len(values) > _SHOW else ""
    return ", ".join(map(str, values[:_SHOW])) + more


def check_duplicates(df: pd.DataFrame) -> None:
    dup = df.duplicated(KEY, keep=False)
    if dup.any():
        rows = df[dup].sort_values([*KEY, "_file", "_line"])
        first = rows.iloc[0]
        same = rows[(rows[KEY] == first[KEY]).all(axis=1)]
        places = "; ".join(f"{r['_file']}: line {r['_line']}" for _, r in same.iterrows())
        key = ", ".join(f"{k}={first[k]!r}" for k in KEY)
        raise BadInput(
            f"duplicated outcome key ({key}) at {places} ({int(dup.sum())} rows share a key in all)",
            path=first["_file"],
            where=f"line {first['_line']}",
        )


def check_hashes(df: pd.DataFrame, panel: list[dict] | None, panel_source: str | None) -> None:
    if panel is not None:
        expected = {t["task_id"]: t["task_hash"] for t in panel}
        known = df["task_id"].isin(expected.keys())
        if not known.all():
            bad = df[~known].iloc[0]
            raise BadInput(
                f"task_id {bad['task_id']!r} is not in the task panel of {panel_source}",
                path=bad["_file"],
                where=f"line {bad['_line']}",
            )
        wrong = df["task_hash"] != df["task_id"].map(expected)
        if wrong.any():
            bad = df[wrong].iloc[0]
            raise BadInput(
                f"task_hash of task_id {bad['task_id']!r} is {bad['task_hash']}, the panel in {panel_source} "
                f"says {expected[bad['task_id']]} (the task played is not the frozen one; {int(wrong.sum())} rows differ)",
                path=bad["_file"],
                where=f"line {bad['_line']}",
            )
        return
    per_task = df.groupby("task_id")["task_hash"].nunique()
    if (per_task > 1).any():
        task = per_task[per_task > 1].index[0]
        rows = df[df["task_id"] == task].drop_duplicates("task_hash")
        places = "; ".join(f"{r['_file']}: line {r['_line']} has {r['task_hash'][:12]}…" for _, r in rows.iterrows())
        raise BadInput(
            f"task_id {task!r} was played with different task_hash values: {places}",
            path=rows.iloc[0]["_file"],
            where=f"line {rows.iloc[0]['_line']}",
        )


def check_task_sets(df: pd.DataFrame, panel: list[dict] | None, panel_source: str | None) -> None:
    """Every run at a step has the same (task_id, episode) set; with a panel every panel task is present.

    Counted first (after the duplicate check, equal sets ⇔ equal counts of distinct items within the
    union); the sets themselves are built only to describe a failure.
    """
    panel_ids = None if panel is None else {t["task_id"] for t in panel}
    task_code = pd.factorize(df["task_id"])[0].astype(np.int64)
    episode = df["episode"].to_numpy(np.int64)
    item = pd.Series(task_code * (int(episode.max()) + 1) + episode, index=df.index)  # one code per (task_id, episode)
    keyed = pd.DataFrame(
        {"method": df["method"], "seed": df["seed"], "step": df["step"], "item": item, "task_id": df["task_id"]}
    )
    union = keyed.groupby("step")["item"].nunique()
    sizes = (
        keyed.groupby(["step", "method", "seed"])
        .agg(items=("item", "size"), tasks=("task_id", "nunique"))
        .reset_index()
    )
    bad_items = sizes["items"].to_numpy() != union.loc[sizes["step"]].to_numpy()
    bad_panel = np.zeros(len(sizes), bool) if panel_ids is None else sizes["tasks"].to_numpy() != len(panel_ids)
    if not (bad_items | bad_panel).any():
        return
    first = sizes[bad_items | bad_panel].iloc[0]
    step = first["step"]
    at_step = df[df["step"] == step]
    runs = {
        key: (set(zip(g["task_id"].to_numpy(object).tolist(), g["episode"].to_numpy().tolist())), g["_file"].iloc[0])
        for key, g in at_step.groupby(["method", "seed"], sort=True)
    }
    everything = set().union(*(items for items, _ in runs.values()))
    method, seed = first["method"], int(first["seed"])
    items, path = runs[(method, first["seed"])]
    tasks = {t for t, _ in items}
    if panel_ids is not None and tasks != panel_ids:
        missing = panel_ids - tasks
        raise BadInput(
            f"method {method!r} seed {seed} step {step}: {len(missing)} task(s) of the panel in "
            f"{panel_source} missing: {_ids(missing)}",
            path=path,
        )
    missing = everything - items
    others = [f"{m}/seed{s}" for (m, s), (it, _) in runs.items() if missing & it]
    raise BadInput(
        f"method {method!r} seed {seed} step {step}: task sets differ between methods being paired: "
        f"{len(missing)} (task_id, episode) pair(s) that {_ids(others)} have are missing here: {_ids(missing)}",
        path=path,
    )


def check_seeds(df: pd.DataFrame, expected_seeds: dict[str, list[int]] | None = None, *, partial: bool = False) -> None:
    """No seed present for one method and missing for another (or for the same method) at a step; `partial`
    accepts a method without a seed that others have (`analyze --outcomes --partial`: a matrix of imported runs
    with gaps), never a method that lacks one of its own seeds at a step."""
    triples = df[["method", "step", "seed"]].drop_duplicates()
    seeds = triples.groupby(["method", "step"])["seed"].agg(lambda s: frozenset(int(x) for x in s))
    methods = triples.groupby("method")["seed"].agg(lambda s: frozenset(int(x) for x in s))
    firsts = df.drop_duplicates(["method", "step", "_file"])
    files = firsts.groupby(["method", "step"])["_file"].agg(lambda f: ", ".join(sorted(set(f))[:_SHOW]))
    for method, all_seeds in methods.items():
        want = frozenset(expected_seeds[method]) if expected_seeds and method in expected_seeds else all_seeds
        for step, have in seeds[method].items():
            if have != want:
                lacking = sorted(want - have)
                raise BadInput(
                    f"method {method!r} has no outcomes for seed(s) {lacking} at step {step} "
                    f"(it has seeds {sorted(have)} in {files[(method, step)]})"
                )
    if partial:
        return
    for step, per_method in seeds.groupby(level="step"):
        values = {m: s for (m, _), s in per_method.items()}
        union = frozenset().union(*values.values())
        for method, have in values.items():
            if have != union:
                others = [m for m, s in values.items() if (union - have) & s]
                raise BadInput(
                    f"seed(s) {sorted(union - have)} missing for method {method!r} at step {step} "
                    f"while {', '.join(others)} have them (method {method!r} has {files[(method, step)]}; "
                    "`analyze --outcomes --partial` analyses a matrix with gaps)"
                )


def validate_outcomes(
    df: pd.DataFrame,
    panel: list[dict] | None = None,
    *,
    panel_source: str | None = None,
    expected_seeds: dict[str, list[int]] | None = None,
    partial: bool = False,
) -> None:
    """Run every check; raise BadInput on the first problem (see the module docstring)."""
    check_duplicates(df)
    check_hashes(df, panel, panel_source)
    check_seeds(df, expected_seeds, partial=partial)
    check_task_sets(df, panel, panel_source)
