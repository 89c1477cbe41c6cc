"""Declared claims ("a > b", "a < b") tested with the paired analysis at the final step, Holm across claims.

A claim holds when the task-clustered paired difference (the `all` row of paired.csv) points the
claimed way and its two-sided p-value, Holm-adjusted over the declared claims, is below alpha.
"""

from __future__ import annotations

import re

import pandas as pd

from agentrepro.analysis import contract
from agentrepro.analysis.paired import holm
from agentrepro.errors import BadInput

CLAIMS = contract.names("claims")
_CLAIM = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*([<>])\s*([A-Za-z0-9_.\-]+)\s*$")


def parse_claim(text: str, methods: list[str], source: str) -> tuple[str, str]:
    """(better, worse) of a claim "a > b" or "a < b"; BadInput naming the source if malformed or unknown."""
    match = _CLAIM.match(text)
    if not match:
        raise BadInput(f"claim {text!r}: expected 'method_a > method_b' or 'method_a < method_b'", where=source)
    left, op, right = match.groups()
    for name in (left, right):
        if name not in methods:
            raise BadInput(f"claim {text!r}: unknown method {name!r} (methods: {', '.join(methods)})", where=source)
    if left == right:
        raise BadInput(f"claim {text!r}: compares a method with itself", where=source)
    return (left, right) if op == ">" else (right, left)


def claims_table(claims: list[str], paired: pd.DataFrame, methods: list[str], final_step: int, alpha: float,
                 source: str) -> pd.DataFrame:
    """One row per declared claim; `delta` is better − worse as the claim states it."""
    rows = []
    pooled = paired[(paired["seed"] == "all") & (paired["step"] == final_step)] if len(paired) else paired
    for text in claims:
        better, worse = parse_claim(text, methods, source)
        row = pooled[(pooled["method_a"] == better) & (pooled["method_b"] == worse)]
        sign = 1.0
        if row.empty:
            row, sign = pooled[(pooled["method_a"] == worse) & (pooled["method_b"] == better)], -1.0
        if row.empty:
            raise BadInput(f"claim {text!r}: no paired comparison of {better} and {worse} at step {final_step}", where=source)
        r = row.iloc[0]
        lo, hi = (r["ci_lo"], r["ci_hi"]) if sign > 0 else (-r["ci_hi"], -r["ci_lo"])
        rows.append({"claim": text.strip(), "method_a": better, "method_b": worse, "delta": sign * r["delta"],
                     "ci_lo": lo, "ci_hi": hi, "p": r["p"]})
    out = pd.DataFrame(rows, columns=CLAIMS)   # p_holm, holds and statement are filled in below
    out["p_holm"] = holm(out["p"].to_numpy()) if len(out) else []
    out["holds"] = (out["delta"] > 0) & (out["p_holm"] < alpha)
    out["statement"] = [
        f"{r.method_a} − {r.method_b} = {100 * r.delta:+.1f} pp (95% CI {100 * r.ci_lo:+.1f} to {100 * r.ci_hi:+.1f} pp); "
        + ("the claimed direction" if r.delta > 0 else ("no difference" if r.delta == 0 else "the opposite direction"))
        + ("; significant after Holm adjustment" if r.p_holm < alpha else "; not significant after Holm adjustment")
        + f" (p = {r.p:.3g}, Holm p = {r.p_holm:.3g})"
        for r in out.itertuples()
    ]
    return out[CLAIMS]
