"""Convergence of each run: area under the eval curve, steps/env steps to a threshold, cost.

`convergence_table(runs, metrics, threshold)`: `runs` is runs.csv (method, seed, step, rate);
`metrics[(method, seed)]` the rows of that run's metrics.jsonl (may be empty). AUC is the trapezoid area
under rate(step) divided by the step range (a mean rate in [0, 1]; the rate itself for one step).
`steps_to_threshold` is the first evaluated step with rate ≥ threshold (None if never);
`env_steps_to_threshold` the cumulative env_steps logged at that step. tokens_generated, wall_s and
gpu_hours are the cumulative values of the last metrics row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.integrate import trapezoid

from agentrepro.analysis import contract

CONVERGENCE = contract.names("convergence")


def auc(steps, rates) -> float:
    """Normalised area under the curve: trapezoid(rates, steps) / (max − min step); the rate for one point."""
    steps = np.asarray(steps, dtype=float)
    rates = np.asarray(rates, dtype=float)
    order = np.argsort(steps)
    steps, rates = steps[order], rates[order]
    if steps.size == 1 or steps[-1] == steps[0]:
        return float(rates.mean())
    return float(trapezoid(rates, steps) / (steps[-1] - steps[0]))


def convergence_table(runs: pd.DataFrame, metrics: dict[tuple[str, int], list[dict]], threshold: float) -> pd.DataFrame:
    rows = []
    for (method, seed), g in runs.groupby(["method", "seed"], sort=True):
        g = g.sort_values("step")
        reached = g[g["rate"] >= threshold]
        step_hit = int(reached["step"].iloc[0]) if len(reached) else None
        m = metrics.get((method, int(seed)), [])
        by_step = {r["step"]: r for r in m}
        last = max(m, key=lambda r: r["step"]) if m else {}
        rows.append(
            {
                "method": method,
                "seed": int(seed),
                "auc": auc(g["step"], g["rate"]),
                "threshold": threshold,
                "steps_to_threshold": step_hit,
                "env_steps_to_threshold": by_step.get(step_hit, {}).get("env_steps") if step_hit is not None else None,
                "tokens_generated": last.get("tokens_generated"),
                "wall_s": last.get("wall_s"),
                "gpu_hours": last.get("gpu_hours"),
                "eval_steps": len(g),
            }
        )
    table = pd.DataFrame(rows, columns=CONVERGENCE)
    for column in ("steps_to_threshold", "env_steps_to_threshold", "tokens_generated"):
        if table[column].map(lambda v: pd.isna(v) or float(v).is_integer()).all():
            table[column] = table[column].astype("Int64")  # counts stay integers next to missing values
    return table
