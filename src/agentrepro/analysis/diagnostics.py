"""Per-step tables read from the runs: graph diagnostics and training metrics, tagged with method and seed.

`per_step_table(records)`: `records[(method, seed)]` is the list of JSONL rows of one run (graph_diagnostics.jsonl
or metrics.jsonl). Returns rows (method, seed, step, every field of the rows), sorted; histograms stay
JSON objects in analysis.json and are written as JSON text in the CSV.
"""

from __future__ import annotations

import pandas as pd

from agentrepro.analysis import contract

DIAGNOSTICS = contract.names("diagnostics")
TRAINING = contract.names("training")


def per_step_table(records: dict[tuple[str, int], list[dict]], columns: list[str]) -> pd.DataFrame:
    rows = [{"method": m, "seed": int(s), **r} for (m, s), rs in sorted(records.items()) for r in rs]
    extra = sorted({k for r in rows for k in r} - set(columns))
    frame = pd.DataFrame(rows, columns=columns + extra)
    return frame.sort_values(["method", "seed", "step"], kind="stable").reset_index(drop=True) if len(frame) else frame
