"""Declared claims (agentrepro.analysis.claim_text) tested at the final step: claims.csv.

* Ordering ("a > b", "a < b"): one row (`seed` = all). The claim holds when the task-clustered paired
  difference (the `all` row of paired.csv) points the claimed way and its two-sided p-value,
  Holm-adjusted over the declared ordering claims (the `claims` family, agentrepro.analysis.families), is below alpha.
* Equivalence ("a == b ± 3pp"): on the tasks both methods were scored on, one row per seed (when there
  are several) and one `all` row clustered by task across seeds, each with the TOST verdict of
  agentrepro.analysis.equivalence; the claim's verdict is the `all` row's, and it holds when reproduced.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from agentrepro.analysis import contract
from agentrepro.analysis.claim_text import EQUIVALENCE, Claim, check_methods, parse_claim_text
from agentrepro.analysis.equivalence import equivalence, statement
from agentrepro.analysis.families import CLAIMS as CLAIMS_FAMILY
from agentrepro.analysis.paired import holm
from agentrepro.analysis.verdicts import needed_words
from agentrepro.errors import BadInput

CLAIMS = contract.names("claims")


def parse_claim(text: str, methods: list[str], where: str, path: object = None) -> Claim:
    """The claim parsed and its methods checked; BadInput naming `path` and `where` otherwise."""
    return check_methods(parse_claim_text(text, where=where, path=path), methods, where=where, path=path)


def shared_arrays(final: pd.DataFrame, a: str, b: str) -> tuple[np.ndarray, np.ndarray, list]:
    """(a, b, seeds): 0/1 arrays (seeds, tasks, episodes) over the (seed, task, episode) items both were scored on.

    A task is kept when both methods have it for every shared seed with the same episodes.
    """
    keys = ["seed", "task_id", "episode"]
    left = final.loc[final["method"] == a, [*keys, "success"]]
    right = final.loc[final["method"] == b, [*keys, "success"]]
    both = left.merge(right, on=keys, suffixes=("_a", "_b"))
    seeds = sorted(both["seed"].unique().tolist())
    if not seeds:
        return np.zeros((0, 0, 0)), np.zeros((0, 0, 0)), []
    shape = both.groupby("task_id").agg(seeds=("seed", "nunique"), items=("episode", "size"))
    per_seed = both.groupby(["task_id", "seed"])["episode"].nunique().groupby("task_id").agg(["min", "max"])
    episodes = int(per_seed["max"].max())
    keep = shape.index[(shape["seeds"] == len(seeds)) & (per_seed["min"] == episodes) & (per_seed["max"] == episodes)]
    both = both[both["task_id"].isin(keep)].sort_values(keys, kind="stable")
    n_tasks = len(keep)
    arrays = [both[f"success_{side}"].to_numpy(np.int8).reshape(len(seeds), n_tasks, episodes) for side in "ab"]
    return arrays[0], arrays[1], seeds


def _equivalence_rows(claim: Claim, final: pd.DataFrame, where: str, path: object) -> list[dict]:
    margin = claim.margin
    if margin is None:
        raise ValueError(f"equivalence claim {claim.text!r} has no margin")  # the claim parser gives every one a margin
    a, b, seeds = shared_arrays(final, claim.a, claim.b)
    if a.size == 0 or a.shape[1] < 2:
        raise BadInput(
            f"claim {claim.text!r}: {claim.a} and {claim.b} share {0 if a.size == 0 else a.shape[1]} scored task(s) "
            "at the final step; an equivalence needs at least 2",
            path=path,
            where=where,
        )
    blocks = [(str(s), a[i : i + 1], b[i : i + 1]) for i, s in enumerate(seeds)] if len(seeds) > 1 else []
    rows = []
    for seed, xa, xb in [*blocks, ("all", a, b)]:
        e = equivalence(xa, xb, margin)
        rows.append(
            {
                "claim": claim.text,
                "method_a": claim.a,
                "method_b": claim.b,
                "delta": e.delta,
                "ci_lo": e.ci95[0],
                "ci_hi": e.ci95[1],
                "p": e.p,
                "p_holm": None,
                "holds": e.verdict == "reproduced",
                "statement": statement(e, claim.a, claim.b, margin),
                "kind": EQUIVALENCE,
                "seed": seed,
                "margin": claim.margin,
                "n_tasks": e.n_tasks,
                "seeds": e.seeds,
                "ci90_lo": e.ci90[0],
                "ci90_hi": e.ci90[1],
                "verdict": e.verdict,
                "tasks_needed": e.tasks_needed,
                "test": e.test,
                "family": None,
                "needed": needed_words(e.verdict, e.tasks_needed, "tasks", "on the margin"),
            }
        )
    return rows


def _ordering_row(
    claim: Claim, pooled: pd.DataFrame, final: pd.DataFrame, final_step: int, where: str, path: object
) -> dict:
    better, worse = claim.a, claim.b
    row = pooled[(pooled["method_a"] == better) & (pooled["method_b"] == worse)]
    sign = 1.0
    if row.empty:
        row, sign = pooled[(pooled["method_a"] == worse) & (pooled["method_b"] == better)], -1.0
    if row.empty:
        raise BadInput(
            f"claim {claim.text!r}: no paired comparison of {better} and {worse} at step {final_step}",
            path=path,
            where=where,
        )
    r = row.iloc[0]
    lo, hi = (r["ci_lo"], r["ci_hi"]) if sign > 0 else (-r["ci_hi"], -r["ci_lo"])
    return {
        "claim": claim.text,
        "method_a": better,
        "method_b": worse,
        "delta": sign * r["delta"],
        "ci_lo": lo,
        "ci_hi": hi,
        "p": r["p"],
        "kind": claim.kind,
        "seed": "all",
        "margin": None,
        "n_tasks": int(r["n_tasks"]),
        "seeds": int(final.loc[final["method"] == better, "seed"].nunique()),
        "ci90_lo": None,
        "ci90_hi": None,
        "verdict": None,
        "tasks_needed": None,
        "test": r.get("test"),
        "family": CLAIMS_FAMILY,
        "needed": None,
    }


def _ordering_statement(r) -> str:
    direction = (
        "the claimed direction" if r.delta > 0 else ("no difference" if r.delta == 0 else "the opposite direction")
    )
    return (
        f"{r.method_a} − {r.method_b} = {100 * r.delta:+.1f} pp (95% CI {100 * r.ci_lo:+.1f} to {100 * r.ci_hi:+.1f} pp); "
        + direction
        + ("; significant after Holm adjustment" if r.p_holm < r.alpha else "; not significant after Holm adjustment")
        + f" (p = {r.p:.3g}, Holm p = {r.p_holm:.3g})"
    )


def claims_table(
    claims: list[str],
    paired: pd.DataFrame,
    final: pd.DataFrame,
    methods: list[str],
    final_step: int,
    alpha: float,
    *,
    field: str,
    path: object = None,
) -> pd.DataFrame:
    """The claims.csv rows. `final`: the validated outcomes at the final step; `field`: where the claims were
    declared, formatted with the claim's index `i` (`"analysis.claims[{i}]"`, or `"--claim"`)."""
    pooled = paired[(paired["seed"] == "all") & (paired["step"] == final_step)] if len(paired) else paired
    ordering, rows = [], []
    for i, text in enumerate(claims):
        where = field.format(i=i)
        claim = parse_claim(text, methods, where, path)
        if claim.kind == EQUIVALENCE:
            rows += _equivalence_rows(claim, final, where, path)
        else:
            ordering.append(len(rows))
            rows.append(_ordering_row(claim, pooled, final, final_step, where, path))
    adjusted: np.ndarray | list[float] = holm([rows[k]["p"] for k in ordering]) if ordering else []
    for k, p_holm in zip(ordering, adjusted):
        r = rows[k]
        r.update(p_holm=float(p_holm), holds=bool(r["delta"] > 0 and p_holm < alpha))
        r["statement"] = _ordering_statement(pd.Series({**r, "alpha": alpha}))
    out = pd.DataFrame(rows, columns=CLAIMS)
    for column in ("n_tasks", "seeds", "tasks_needed"):
        out[column] = out[column].astype("Int64")  # counts stay integers next to missing values
    return out
