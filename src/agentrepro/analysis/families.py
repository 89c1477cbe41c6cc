"""Statistical families: which comparisons are Holm-adjusted together. Declared here once; every table, the report
and its summary show a comparison's family by the key set here and its Holm p-value as adjusted here.

A comparison belongs to exactly one family:
* `claims`: the ordering claims the manifest declared before running ("a > b", analysis.claims), each tested on
  the seeds-pooled paired difference at the final step. The `paired.csv` row a claim tests belongs to this family
  too, and shows the claim's Holm p.
* `pairs@<step>/<seed>`: every other method pair at one evaluated step, for one seed or seeds pooled by task (`all`).
* `learning@<step>/<seed>`: every method against its own step 0 at one step, for one seed or seeds pooled by task.

Equivalence claims ("a == b ± m pp") are decisions at their own margin (TOST), not adjusted: they have no family.
`families_table` lists each family with a label in words and the number of comparisons it adjusts over.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from agentrepro.analysis import contract
from agentrepro.analysis.paired import holm

CLAIMS = "claims"
ADJUSTMENT = "holm"


def pairs(step: int, seed) -> str:
    return f"pairs@{step}/{seed}"


def learning(step: int, seed) -> str:
    return f"learning@{step}/{seed}"


def holm_by_family(frame: pd.DataFrame) -> None:
    """Set `p_holm` to Holm's adjustment of `p` within each `family` of `frame` (in place; rows without a family keep theirs)."""
    if not len(frame):
        return
    adjusted = frame["p_holm"].to_numpy(dtype=float, copy=True)
    for family, index in frame.groupby("family").indices.items():
        if family:
            adjusted[index] = holm(frame["p"].to_numpy(dtype=float)[index])
    frame["p_holm"] = adjusted


def join_claims(paired: pd.DataFrame, claims: pd.DataFrame, final_step: int) -> pd.DataFrame:
    """`paired` with the seeds-pooled rows that the ordering claims test moved into the `claims` family (their
    p_holm the claim's) and every pairs family they left adjusted again without them."""
    paired = paired.copy()
    ordering = claims[claims["family"] == CLAIMS] if len(claims) else claims
    if not len(paired) or not len(ordering):
        return paired
    holm_of = {frozenset((r.method_a, r.method_b)): r.p_holm for r in ordering.itertuples()}
    pooled = (paired["seed"] == "all") & (paired["step"] == final_step)
    tested = pooled & pd.Series(
        [frozenset(pair) in holm_of for pair in zip(paired["method_a"], paired["method_b"])], index=paired.index
    )
    left = set(paired.loc[tested, "family"])
    paired.loc[tested, "family"] = CLAIMS
    paired.loc[tested, "p_holm"] = [
        holm_of[frozenset(pair)] for pair in zip(paired.loc[tested, "method_a"], paired.loc[tested, "method_b"])
    ]
    again = paired["family"].isin(left)
    rest = paired[again].copy()
    holm_by_family(rest)
    paired.loc[again, "p_holm"] = rest["p_holm"].to_numpy()
    return paired


def _seed_words(seed) -> str:
    return "seeds pooled by task" if str(seed) == "all" else f"seed {seed}"


def families_table(tables: dict[str, pd.DataFrame], final_step: int | None) -> pd.DataFrame:
    """One row per family of `tables` (paired, learning, claims): its key, a label in words, how many comparisons."""
    rows = []
    claims = tables["claims"]
    ordering = claims[claims["family"] == CLAIMS] if len(claims) else claims
    if len(ordering):
        rows.append(
            {
                "family": CLAIMS,
                "label": f"the {len(ordering)} ordering claim(s) declared before running, at step {final_step}, "
                "seeds pooled by task",
                "comparisons": len(ordering),
                "adjustment": ADJUSTMENT,
                "table": "claims, paired",
            }
        )
    for name, words in (("paired", "method pairs"), ("learning", "methods against their own step 0")):
        frame = tables[name]
        if not len(frame):
            continue
        for family, group in frame[frame["family"] != CLAIMS].groupby("family", sort=False):
            first = group.iloc[0]
            rows.append(
                {
                    "family": family,
                    "label": f"the {len(group)} {words} at step {first['step']}, {_seed_words(first['seed'])}",
                    "comparisons": len(group),
                    "adjustment": ADJUSTMENT,
                    "table": name,
                }
            )
    out = pd.DataFrame(rows, columns=contract.names("families"))
    out["comparisons"] = out["comparisons"].astype(np.int64)
    return out
