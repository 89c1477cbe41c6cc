"""The parity certificate: the advantages a trainer computed, recomputed from its step rows (docs/design.md §3.5).

Every runs/<study>/<method>/seed<k>/batches/step<N>.jsonl holds the step rows of one training step with the
`advantage` the trainer computed for each (the builtin trainer's dump, verl-agent's integration
backends/verl_agent/hooks/agentrepro_verl_rows.py, the Relax wrapper backends/relax/hooks/agentrepro_relax_advantage.py). Its rows are
recomputed with the run's estimator and options (resolved_config.yaml `train`; the same code as
`agentrepro advantages`) once in each episode-statistics mode, `rows` (the reference: every step row counts)
and `trajectories` (each trajectory once). A mode is within tolerance when every row has
|ours − theirs| ≤ TOLERANCE·max(1, |theirs|) (the reference fixtures agree to 3.3e-5 in that measure: float32).

Rows the reference's float32 arithmetic gets wrong are set apart, not counted: a row in a normalisation group
(its rollout group for the episode term, its anchor state for the step term) whose values are all one number
that float32 cannot hold exactly (9.9, 0.9, ...), where float32 `torch.mean` lands an ulp off and turns an
ε-sized std into an advantage of up to about 1 (the fixtures' `fp32_artifact`, tests/fixtures/advantages/README.md);
the exact answer is 0. Their number and largest difference are reported with the entry.

A certificate entry per dump: the mode the trainer implements (the one within tolerance, `rows` first when
both are, as on a batch where every trajectory has one turn), the largest absolute difference in each mode with
the row where it occurs, and a status: pass when the mode the run declares (`train.episode_stats`, default
rows) is within tolerance; fail otherwise, saying which mode the rows fit, if any; not_run, with the reason,
when there is nothing to compare, including every step of `train.step_rows` that has no dump.
`parity_checks` turns the entries into the analysis's parity checks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agentrepro import algorithms
from agentrepro.algorithms.spec import all_options
from agentrepro.errors import BadInput
from agentrepro.layout import STEP_DIR_RE, RunFiles, batch_dump, batch_dumps_on_disk
from agentrepro.reading import iter_jsonl, load_yaml

OPTION_KEYS = tuple(o.name for o in all_options())
"""Options of the estimators (algorithms/spec.py) that a resolved config's train block may set."""
TOLERANCE = 1e-4
MODES = ("rows", "trajectories")
TOLERANCE_TEXT = f"|difference| ≤ {TOLERANCE:g}·max(1, |advantage|) on every row"


def _train(run: Path) -> dict:
    path = run / RunFiles.RESOLVED_CONFIG
    return ((load_yaml(path) or {}).get("train") or {}) if path.is_file() else {}


def _names(run: Path) -> tuple[str, str | int]:
    """(method, seed) from runs/<study>/<method>/seed<k>/."""
    seed = run.name[4:]
    return run.parent.name, int(seed) if seed.isdigit() else run.name


def _shown(path: Path, root: Path | None) -> str:
    """`path` as analysis.json records it: relative to the study's root, so that the analysis of a study does not
    depend on where its root lies (an audit recomputes it in another folder)."""
    return (path.relative_to(root) if root is not None and path.is_relative_to(root) else path).as_posix()


def _entry(run: Path, step: int, status: str, detail: str, root: Path | None, **more) -> dict:
    method, seed = _names(run)
    return {
        "method": method,
        "seed": seed,
        "step": step,
        "status": status,
        "detail": detail,
        "dump": _shown(batch_dump(run, step), root),
        "tolerance": TOLERANCE,
        **more,
    }


def float32_artefact_rows(batch, result) -> np.ndarray:
    """bool (n,): rows in a group of two or more equal values that float32 cannot represent exactly, for each
    normalised term the advantage has (the episode score, and the step return or graph reward)."""
    terms = (
        []
        if (result.advantage_step is not None and result.advantage_episode is None)
        else [(result.episode_score, batch.group_codes, batch.n_groups)]
    )  # graph-only has no episode term
    step = result.graph_reward if result.graph_reward is not None else result.step_return
    if step is not None:
        terms.append((step, *batch.step_groups))
    flags = np.zeros(len(batch), dtype=bool)
    for values, codes, n in terms:
        x = np.asarray(values, dtype=float)
        low, high = np.full(n, np.inf), np.full(n, -np.inf)
        np.minimum.at(low, codes, x)
        np.maximum.at(high, codes, x)
        same = (low == high) & (np.bincount(codes, minlength=n) > 1)
        flags |= same[codes] & (x != x.astype(np.float32).astype(float))
    return flags


def _mode_fit(ours: np.ndarray, theirs: np.ndarray, rows: list[dict], artefact: np.ndarray) -> dict:
    err = np.abs(ours - theirs)
    off = err > TOLERANCE * np.maximum(1.0, np.abs(theirs))
    counted = np.where(artefact, 0.0, err)
    worst = int(np.argmax(counted))
    return {
        "max_abs_difference": float(counted[worst]),
        "within": not bool(np.any(off & ~artefact)),
        "float32_artefacts": int(np.sum(off & artefact)),
        "float32_artefact_max": float(np.max(err, where=artefact, initial=0.0)),
        "worst": {
            "traj": rows[worst]["traj"],
            "turn": rows[worst]["turn"],
            "framework": float(theirs[worst]),
            "ours": float(ours[worst]),
        },
    }


def certify_dump(run: Path, step: int, train: dict, root: Path | None = None) -> dict:
    """The certificate entry of one dump (see the module docstring); paths in it are relative to `root`."""
    dump = batch_dump(run, step)
    estimator = train.get("estimator")
    if estimator is None:
        return _entry(
            run, step, "not_run", f"{_shown(run / RunFiles.RESOLVED_CONFIG, root)} names no train.estimator", root
        )
    spec = algorithms.ESTIMATORS.spec(estimator) if estimator in algorithms.ESTIMATORS else None
    if spec is None or not spec.step_rows:
        return _entry(
            run,
            step,
            "not_run",
            f"{estimator}'s advantages are not computed from step rows (GAE over a critic's values)",
            root,
        )
    rows = [row for _, row in iter_jsonl(dump)]
    if not rows:
        return _entry(run, step, "not_run", "the dump has no rows", root)
    missing = sum(
        not isinstance(r.get("advantage"), (int, float)) or isinstance(r.get("advantage"), bool) for r in rows
    )
    if missing:
        return _entry(run, step, "not_run", f"{missing} of {len(rows)} rows carry no framework `advantage`", root)
    accepted = algorithms.ESTIMATORS.defaults(estimator)
    options = {k: train[k] for k in OPTION_KEYS if k in train and k in accepted and k != "episode_stats"}
    declared = train.get("episode_stats", "rows")
    theirs = np.array([r["advantage"] for r in rows], dtype=float)
    try:
        batch = algorithms.StepBatch.from_rows(rows, source=_shown(dump, root))
        results = {mode: algorithms.estimate(batch, estimator, **options, episode_stats=mode) for mode in MODES}
        artefact = float32_artefact_rows(batch, results["rows"])
        fits = {
            mode: _mode_fit(np.asarray(results[mode].advantage, dtype=float), theirs, rows, artefact) for mode in MODES
        }
    except (BadInput, ValueError) as exc:
        return _entry(run, step, "not_run", f"the rows could not be recomputed: {exc}", root)
    implements = next((mode for mode in MODES if fits[mode]["within"]), None)
    measured = "; ".join(f"{mode}: largest |difference| {fits[mode]['max_abs_difference']:.3g}" for mode in MODES)
    head = f"{estimator} {options}, {len(rows)} rows, {batch.n_trajs} trajectories"
    set_apart = fits[declared]["float32_artefacts"]
    if set_apart:
        head += (
            f"; {set_apart} rows of zero-variance groups of float32-inexact values differ by up to "
            f"{fits[declared]['float32_artefact_max']:.3g} (the reference's float32 artefact; not counted)"
        )
    if implements is not None and fits[declared]["within"]:
        status, verdict = "pass", f"implements episode statistics over {declared}, as declared"
    elif implements is not None:
        status, verdict = "fail", f"implements episode statistics over {implements}, but the run declares {declared}"
    else:
        w = fits[declared]["worst"]
        status, verdict = (
            "fail",
            (
                f"within tolerance in neither mode; in the declared mode ({declared}) the largest difference is at "
                f"trajectory {w['traj']!r} turn {w['turn']}: framework {w['framework']:.6g}, recomputed {w['ours']:.6g}"
            ),
        )
    return _entry(
        run,
        step,
        status,
        f"{verdict} ({measured}; {head}; tolerance {TOLERANCE_TEXT})",
        root,
        estimator=estimator,
        options=options,
        declared=declared,
        implements=implements,
        rows=len(rows),
        trajectories=batch.n_trajs,
        max_abs_difference={mode: fits[mode]["max_abs_difference"] for mode in MODES},
        float32_artefacts={mode: fits[mode]["float32_artefacts"] for mode in MODES},
        worst={mode: fits[mode]["worst"] for mode in MODES},
    )


def certificate(run_dirs: list[Path], root: Path | None = None) -> list[dict]:
    """One entry per dump and per step named in `train.step_rows` without a dump, by run then step; paths in the
    entries are relative to `root` (the study's root) when given."""
    entries = []
    for run in run_dirs:
        run, train = Path(run), _train(Path(run))
        found = {int(m.group(1)): d for d in batch_dumps_on_disk(run) if (m := STEP_DIR_RE.match(d.stem))}
        named = train.get("step_rows") or []
        for step in sorted(set(found) | set(named)):
            error = Path(f"{batch_dump(run, step)}.error")
            if error.is_file():  # hooks/agentrepro_step_rows.py write_error: the rows could not be taken from the batch
                entries.append(
                    _entry(
                        run,
                        step,
                        "not_run",
                        f"the integration could not write the step rows: "
                        f"{error.read_text(encoding='utf-8', errors='replace').strip()[:300]}",
                        root,
                    )
                )
            elif step not in found:
                entries.append(
                    _entry(
                        run,
                        step,
                        "not_run",
                        f"train.step_rows names step {step}, but the run wrote no step rows for it",
                        root,
                    )
                )
            else:
                entries.append(certify_dump(run, step, train, root))
    return entries


def parity_checks(run_dirs: list[Path], entries: list[dict] | None = None) -> list[dict]:
    """The certificate as parity checks; a single not_run entry when no run has step rows."""
    entries = certificate(run_dirs) if entries is None else entries
    if not entries:
        return [
            {
                "check": "parity certificate: advantages recomputed from step rows",
                "status": "not_run",
                "detail": "no runs/<study>/<method>/seed<k>/batches/step<N>.jsonl step rows were found, and no run names train.step_rows",
            }
        ]
    return [
        {
            "check": f"parity certificate: advantages recomputed from {e['dump']}",
            "status": e["status"],
            "detail": e["detail"],
        }
        for e in entries
    ]
