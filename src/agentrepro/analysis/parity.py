"""Parity checks computable from the runs: recompute advantages from batch dumps and compare.

For every runs/<study>/<method>/seed<k>/batches/step<N>.jsonl (step rows of docs/design.md §3.5 with the
`advantage` the trainer wrote), the advantages are recomputed with `agentrepro.algorithms.estimate`
using the run's resolved estimator options and compared element-wise (atol 1e-5 + rtol 1e-5).
Each check is {"check", "status": "pass"|"fail"|"not_run", "detail"}; not_run always says why.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agentrepro import algorithms
from agentrepro.algorithms.spec import all_options
from agentrepro.fileio import iter_jsonl, load_yaml
from agentrepro.layout import RunFiles, batch_dumps_on_disk

OPTION_KEYS = tuple(o.name for o in all_options())
"""Options of the estimators (algorithms/spec.py) that a resolved config's train block may set."""
ATOL = RTOL = 1e-5


def _estimator(config_path: Path) -> tuple[str | None, dict]:
    if not config_path.is_file():
        return None, {}
    train = (load_yaml(config_path) or {}).get("train") or {}
    return train.get("estimator"), {k: train[k] for k in OPTION_KEYS if k in train}


def check_dump(dump: Path, estimator: str, options: dict, algorithms) -> dict:
    name = f"advantages recomputed from {dump.as_posix()}"
    rows = [obj for _, obj in iter_jsonl(dump)]
    if not rows:
        return {"check": name, "status": "not_run", "detail": "the dump is empty"}
    if any("advantage" not in r for r in rows):
        return {"check": name, "status": "not_run", "detail": "the dump has rows without the trainer's `advantage`"}
    spec = algorithms.ESTIMATORS.spec(estimator) if estimator in algorithms.ESTIMATORS else None
    if spec is not None and not spec.step_rows:
        return {"check": name, "status": "not_run",
                "detail": f"{estimator}'s advantages are GAE over the critic's values, which step rows do not hold"}
    try:
        accepted = algorithms.ESTIMATORS.defaults(estimator)   # options this estimator takes
        options = {k: v for k, v in options.items() if k in accepted}
        batch = algorithms.StepBatch.from_rows(rows)
        result = algorithms.estimate(batch, estimator, **options)
    except Exception as exc:  # noqa: BLE001 - reported as a check that could not run, with the reason
        return {"check": name, "status": "not_run", "detail": f"estimate({estimator!r}, {options}) raised {type(exc).__name__}: {exc}"}
    ours = np.asarray(result.advantage, dtype=float)
    theirs = np.array([r["advantage"] for r in rows], dtype=float)
    if ours.shape != theirs.shape:
        return {"check": name, "status": "fail", "detail": f"{ours.size} recomputed vs {theirs.size} dumped advantages"}
    err = np.abs(ours - theirs)
    ok = bool(np.all(err <= ATOL + RTOL * np.abs(theirs)))
    return {"check": name, "status": "pass" if ok else "fail",
            "detail": f"{estimator} {options}: {theirs.size} rows, max |difference| {err.max():.3g} (tolerance {ATOL:g} + {RTOL:g}·|a|)"}


def parity_checks(run_dirs: list[Path]) -> list[dict]:
    """One check per batch dump; a single not_run entry when there is nothing to check or no estimator."""
    dumps = [(run, d) for run in run_dirs for d in batch_dumps_on_disk(run)]
    if not dumps:
        return [{"check": "advantages recomputed from batch dumps", "status": "not_run",
                 "detail": "no runs/<study>/<method>/seed<k>/batches/step<N>.jsonl dumps were found"}]
    checks = []
    for run, dump in dumps:
        estimator, options = _estimator(run / RunFiles.RESOLVED_CONFIG)
        if estimator is None:
            checks.append({"check": f"advantages recomputed from {dump.as_posix()}", "status": "not_run",
                           "detail": f"{run / RunFiles.RESOLVED_CONFIG} names no train.estimator"})
            continue
        checks.append(check_dump(dump, estimator, options, algorithms))
    return checks
