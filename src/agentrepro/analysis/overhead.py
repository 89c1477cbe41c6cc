"""Overhead of each timed component (timings.jsonl, docs/design.md §3.3): p50, p95, mean, share of the step time.

`overhead_table(timings)`: `timings[(method, seed)]` is the list of rows of that run's timings.jsonl.
Per method and component, over all steps of all seeds: n, p50_s, p95_s, mean_s (seconds), and
share_of_step = Σ component / Σ step_total over the rows where the component ran (a fraction; None
when no row has step_total). Components that did not run are absent, never counted as 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from agentrepro.analysis import contract

OVERHEAD = contract.names("overhead")


def overhead_table(timings: dict[tuple[str, int], list[dict]]) -> pd.DataFrame:
    rows = []
    methods = sorted({m for m, _ in timings})
    for method in methods:
        records = [r for (m, _), rs in sorted(timings.items()) if m == method for r in rs]
        components = sorted({k for r in records for k in r if k != "step"})
        for component in components:
            have = [r for r in records if isinstance(r.get(component), (int, float))]
            if not have:
                continue
            values = np.array([r[component] for r in have], dtype=float)
            totals = np.array([r.get("step_total", np.nan) for r in have], dtype=float)
            share = (
                float(values[np.isfinite(totals)].sum() / totals[np.isfinite(totals)].sum())
                if np.isfinite(totals).any() and np.nansum(totals) > 0
                else None
            )
            rows.append(
                {
                    "method": method,
                    "component": component,
                    "n": int(values.size),
                    "p50_s": float(np.percentile(values, 50)),
                    "p95_s": float(np.percentile(values, 95)),
                    "mean_s": float(values.mean()),
                    "share_of_step": share,
                }
            )
    return pd.DataFrame(rows, columns=OVERHEAD)
