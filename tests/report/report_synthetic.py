"""A synthetic `analysis/<study>/` directory that follows the "Analysis → report" contract (docs/internals.md).

The report is built at the same time as the analysis that feeds it, so its tests render from analysis
directories made here: simulated paired outcomes of 4 methods × 3 seeds × several checkpoints, turned into
every table of docs/design.md §3.6 with the same statistics the analysis uses (Wilson, McNemar, Holm), verdicts of
each kind, claims (ordering, and one equivalence claim through the analysis' own claims table), graph diagnostics, overhead, convergence, training curves, notes, parity checks and
provenance with attempts (one run failed once and was retried).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from agentrepro.analysis import contract, families
from agentrepro.analysis import tables as T
from agentrepro.analysis.bottom_line import bottom_line
from agentrepro.analysis.claims import claims_table
from agentrepro.analysis.contract import TABLE_NAMES
from agentrepro.fileio import atomic_write_json, sha256_json

HOSTILE = "<script>alert(1)</script>"  # a task category that must be shown as text, never run
STUDY = "graphgpo-alfworld"
METHODS = {"grpo": 0.2, "gigpo": 0.55, "graphgpo": 0.7, "graph_only": 0.35}  # final-step skill (logit shift)
CATEGORIES = ["pick", "clean", "heat", "cool", "look", "pick_two"]
COMPONENTS = {
    "rollout": 9.0,
    "graph_build": 0.002,
    "shortest_paths": 0.0015,
    "step_returns": 0.0008,
    "advantage": 0.001,
    "update": 4.0,
    "checkpoint": 0.3,
}
GRAPH_METHODS = ("gigpo", "graphgpo", "graph_only")
EQUIVALENCE_CLAIM = "graphgpo == gigpo ± 3pp"


def _wilson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson")
    return float(lo), float(hi)


def _none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def simulate(rng: np.random.Generator, methods: dict, seeds, steps, n_tasks: int, categories) -> pd.DataFrame:
    """Outcome rows (docs/design.md §3.4 columns that the statistics need): success in {0, 1}, paired by task_id."""
    difficulty = rng.normal(0.0, 1.2, n_tasks)
    cats = [categories[i % len(categories)] for i in range(n_tasks)]
    rows = []
    final = max(steps)
    for method, skill in methods.items():
        for seed in seeds:
            seed_shift = rng.normal(0, 0.15)
            for step in steps:
                logit = -1.0 + (skill + 1.8) * step / final + seed_shift - difficulty
                success = rng.random(n_tasks) < 1 / (1 + np.exp(-logit))
                for t in range(n_tasks):
                    rows.append(
                        {
                            "method": method,
                            "seed": seed,
                            "step": step,
                            "task_id": f"task-{t:03d}",
                            "category": cats[t],
                            "success": int(success[t]),
                        }
                    )
    return pd.DataFrame(rows)


def build_analysis(
    *,
    study: str = "graphgpo-alfworld",
    seed: int = 0,
    methods: dict | None = None,
    seeds=(0, 1, 2),
    steps=(0, 50, 100, 150),
    n_tasks: int = 128,
    categories=None,
    note_extra: str | None = None,
) -> dict:
    """The analysis.json object of a realistic study; every number follows from simulated outcomes."""
    rng = np.random.default_rng(seed)
    methods = dict(methods or METHODS)
    categories = list(categories or CATEGORIES)
    out = simulate(rng, methods, seeds, steps, n_tasks, categories)
    final = max(steps)

    runs = []
    for (m, s, st), g in out.groupby(["method", "seed", "step"], sort=False):
        k, n = int(g.success.sum()), len(g)
        runs.append(
            {
                "method": m,
                "seed": int(s),
                "step": int(st),
                "n": n,
                "successes": k,
                "rate": k / n,
                **dict(zip(("wilson_lo", "wilson_hi"), _wilson(k, n))),
            }
        )
    runs_df = pd.DataFrame(runs)

    methods_rows = []
    for (m, st), g in runs_df.groupby(["method", "step"], sort=False):
        k, n = int(g.successes.sum()), int(g.n.sum())
        methods_rows.append(
            {
                "method": m,
                "step": int(st),
                "seeds": len(g),
                "mean": float(g.rate.mean()),
                "std": float(g.rate.std(ddof=1)),
                "pooled_n": n,
                "pooled_successes": k,
                "pooled_rate": k / n,
                **dict(zip(("wilson_lo", "wilson_hi"), _wilson(k, n))),
            }
        )

    paired = []
    for a, b in itertools.combinations(methods, 2):
        for st in steps:
            for sd in [*seeds, "all"]:
                sel = out[(out.step == st) & ((out.seed == sd) if sd != "all" else True)]
                xa = sel[sel.method == a].sort_values(["seed", "task_id"]).success.to_numpy()
                xb = sel[sel.method == b].sort_values(["seed", "task_id"]).success.to_numpy()
                both, a_only = int(((xa == 1) & (xb == 1)).sum()), int(((xa == 1) & (xb == 0)).sum())
                b_only, neither = int(((xa == 0) & (xb == 1)).sum()), int(((xa == 0) & (xb == 0)).sum())
                n = len(xa)
                d = xa - xb
                se = d.std(ddof=1) / math.sqrt(n) if n > 1 else float("nan")
                disc = a_only + b_only
                p = stats.binomtest(a_only, disc, 0.5).pvalue if disc else 1.0
                paired.append(
                    {
                        "method_a": a,
                        "method_b": b,
                        "seed": sd,
                        "step": int(st),
                        "n_tasks": n_tasks,
                        "both": both,
                        "a_only": a_only,
                        "b_only": b_only,
                        "neither": neither,
                        "delta": float(d.mean()),
                        "ci_lo": float(d.mean() - 1.96 * se),
                        "ci_hi": float(d.mean() + 1.96 * se),
                        "mcnemar_p": float(p),
                    }
                )
    pvals = [r["mcnemar_p"] for r in paired]
    for r, ph in zip(paired, multipletests(pvals, method="holm")[1]):
        r["p_holm"] = float(ph)

    cats = []
    for (m, c, st), g in out.groupby(["method", "category", "step"], sort=False):
        k, n = int(g.success.sum()), len(g)
        cats.append(
            {
                "method": m,
                "category": c,
                "step": int(st),
                "n": n,
                "successes": k,
                "rate": k / n,
                **dict(zip(("wilson_lo", "wilson_hi"), _wilson(k, n))),
            }
        )

    tol = 0.03
    final_methods = {r["method"]: r for r in methods_rows if r["step"] == final}
    # Paper values placed to give each verdict: near ours (reproduced), far (not), in between (inconclusive).
    offsets = {"graphgpo": 0.002, "gigpo": 0.15, "grpo": 0.02}
    verdicts = []
    for m, off in offsets.items():
        if m not in final_methods:
            continue
        r = final_methods[m]
        ours, n = r["pooled_rate"], r["pooled_n"]
        paper = min(0.999, ours + off)
        # The "reproduced" target is given 4x the tasks: with 3 x 128 tasks no CI fits inside ±3 pp.
        se = math.sqrt(max(ours * (1 - ours), 1e-4) / (4 * n if m == "graphgpo" else n))
        delta = ours - paper
        ci90 = (delta - 1.645 * se, delta + 1.645 * se)
        ci95 = (delta - 1.96 * se, delta + 1.96 * se)
        if -tol <= ci90[0] and ci90[1] <= tol:
            verdict, reason, need = "reproduced", "90% CI of ours − paper lies inside ±3 pp (TOST at 5%)", None
        elif ci95[1] < -tol or ci95[0] > tol:
            verdict, reason, need = "not_reproduced", "95% CI of ours − paper lies entirely outside ±3 pp", None
        else:
            verdict = "inconclusive"
            reason = "90% CI crosses the tolerance bound; more tasks are needed"
            margin = tol - abs(delta)
            need = math.ceil((1.645 * math.sqrt(max(ours * (1 - ours), 1e-4)) / margin) ** 2) if margin > 0 else None
        verdicts.append(
            {
                "method": m,
                "paper": paper,
                "paper_std": None,
                "ours": ours,
                "delta": delta,
                "ci90_lo": ci90[0],
                "ci90_hi": ci90[1],
                "ci95_lo": ci95[0],
                "ci95_hi": ci95[1],
                "tolerance": tol,
                "verdict": verdict,
                "tasks_needed": need,
                "reason": reason,
            }
        )

    claims = []
    for a, b in [("graphgpo", "gigpo"), ("gigpo", "grpo")]:
        pooled = [
            p
            for p in paired
            if p["method_a"] in (a, b) and p["method_b"] in (a, b) and p["seed"] == "all" and p["step"] == final
        ]
        if not pooled:
            continue
        r = pooled[0]
        sign = 1 if r["method_a"] == a else -1
        lo, hi = sorted((sign * r["ci_lo"], sign * r["ci_hi"]))
        claims.append(
            {
                "claim": f"{a} > {b}",
                "method_a": a,
                "method_b": b,
                "delta": sign * r["delta"],
                "ci_lo": lo,
                "ci_hi": hi,
                "p": r["mcnemar_p"],
                "p_holm": r["p_holm"],
                "holds": bool(sign * r["delta"] > 0 and r["p_holm"] < 0.05),
            }
        )

    # an equivalence claim, through the analysis' own claims table (rows per seed and the task-clustered `all` row)
    at_final = out[out.step == final].assign(episode=0)
    names = list(
        methods
    )  # the claim between the study's own methods (graphgpo and gigpo in the default synthetic study)
    claim = EQUIVALENCE_CLAIM if {"graphgpo", "gigpo"} <= set(names) else f"{names[-1]} == {names[0]} ± 3pp"
    equivalence = claims_table(
        [claim], pd.DataFrame(paired).iloc[:0], at_final, list(methods), final, 0.05, field="--claim"
    )
    claims += json.loads(equivalence.to_json(orient="records"))

    train_steps = range(1, final + 1, 5)
    diagnostics, training, overhead, convergence = [], [], [], []
    for m in methods:
        for sd in seeds:
            for st in train_steps:
                frac = st / final
                training.append(
                    {
                        "method": m,
                        "seed": sd,
                        "step": st,
                        "env_steps": st * 128 * 12,
                        "episodes": st * 128,
                        "tokens_generated": st * 400_000,
                        "tokens_trained": st * 380_000,
                        "train_success_rate": float(
                            np.clip(0.1 + 0.7 * frac * (1 + methods[m]) / 1.7 + rng.normal(0, 0.03), 0, 1)
                        ),
                        "reward_mean": float(1 + 8 * frac + rng.normal(0, 0.3)),
                        "valid_action_ratio": float(np.clip(0.8 + 0.15 * frac, 0, 1)),
                        "loss_policy": float(rng.normal(0, 0.02)),
                        "loss_value": None,
                        "kl": float(0.001 * st),
                        "entropy": float(1.2 - 0.5 * frac),
                        "grad_norm": float(abs(rng.normal(0.5, 0.1))),
                        "lr": 1e-6,
                        "wall_s": st * 14.0,
                        "gpu_hours": st * 14.0 * 2 / 3600,
                    }
                )
                if m in GRAPH_METHODS:
                    nodes = int(900 - 300 * frac + rng.integers(0, 40))
                    diagnostics.append(
                        {
                            "method": m,
                            "seed": sd,
                            "step": st,
                            "groups": 16,
                            "nodes": nodes,
                            "edges": int(nodes * 1.6),
                            "duplicate_edge_ratio": 0.2 + 0.3 * frac,
                            "shared_state_rate": 0.3 + 0.4 * frac,
                            "singleton_out_edge_ratio": 0.6 - 0.2 * frac,
                            "nonzero_graph_adv_ratio": 0.4 + 0.3 * frac,
                            "all_fail_groups": int(10 * (1 - frac)),
                            "all_success_groups": int(8 * frac),
                            "unreachable_ratio": 0.5 * (1 - frac),
                            "distance_hist": {"0": 40, "1": 120, "2": 90, "3": 30},
                            "step_group_size_hist": {"1": 300, "2": 120, "4": 40},
                        }
                    )
            curve = [r for r in runs if r["method"] == m and r["seed"] == sd]
            xs, ys = [r["step"] for r in curve], [r["rate"] for r in curve]
            reached = [x for x, y in zip(xs, ys) if y >= 0.5]
            convergence.append(
                {
                    "method": m,
                    "seed": sd,
                    "auc": float(np.trapezoid(ys, xs) / final),
                    "threshold": 0.5,
                    "steps_to_threshold": reached[0] if reached else None,
                    "env_steps_to_threshold": reached[0] * 128 * 12 if reached else None,
                    "tokens_generated": final * 400_000,
                    "wall_s": final * 14.0,
                    "gpu_hours": final * 14.0 * 2 / 3600,
                }
            )
        total = sum(
            c for name, c in COMPONENTS.items() if m in GRAPH_METHODS or name not in ("graph_build", "shortest_paths")
        )
        for comp, base in [*COMPONENTS.items(), ("step_total", total)]:
            if m not in GRAPH_METHODS and comp in ("graph_build", "shortest_paths"):
                continue  # components that did not run are absent, not 0
            x = base * rng.lognormal(0, 0.1, len(train_steps))
            overhead.append(
                {
                    "method": m,
                    "component": comp,
                    "n": len(x),
                    "p50_s": float(np.percentile(x, 50)),
                    "p95_s": float(np.percentile(x, 95)),
                    "mean_s": float(x.mean()),
                    "share_of_step": float(x.mean() / total),
                }
            )

    lock = {
        "lock_version": 1,
        "study": study,
        "manifest_path": f"manifests/{study}.yaml",
        "manifest": {"study": study, "title": "GraphGPO reproduction on ALFWorld", "seeds": list(seeds)},
        "manifest_sha256": sha256_json({"study": study}),
        "resolved": {
            "image": {"runtime": "apptainer", "ref": "ghcr.io/x/agentrepro:1", "digest": "sha256:" + "a" * 64},
            "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct", "revision": "b" * 40},
            "tokenizer": {"revision": "c" * 40},
            "backend": {"name": "verl-agent", "commit": "d" * 40},
            "files": {"data/eval.json": "e" * 64},
        },
        "task_panel": [
            {
                "task_id": f"task-{t:03d}",
                "task_hash": sha256_json(t),
                "seed": t,
                "category": categories[t % len(categories)],
            }
            for t in range(n_tasks)
        ],
        "harness": {"commit": "f" * 40, "dirty": False},
        "python": {"version": "3.11.9", "packages": ["numpy==2.3.0"], "packages_sha256": "0" * 64},
        "created": "2026-11-29T10:00:00+00:00",
    }
    prov_runs = []
    for m in methods:
        for sd in seeds:
            cmd = f"agentrepro train --config runs/{study}/{m}/seed{sd}/config.yaml --out runs/{study}/{m}/seed{sd}"
            attempts = [
                {
                    "stage": "train",
                    "number": 1,
                    "start": "2026-11-29T10:00:00+00:00",
                    "end": "2026-11-29T10:40:00+00:00",
                    "status": "ok",
                    "reason": None,
                    "command": cmd,
                    "host": "node01",
                }
            ]
            if (m, sd) == ("graphgpo", 1):
                attempts = [
                    {**attempts[0], "status": "failed", "reason": "CUDA out of memory at step 87"},
                    {
                        **attempts[0],
                        "number": 2,
                        "start": "2026-11-29T10:41:00+00:00",
                        "end": "2026-11-29T11:20:00+00:00",
                    },
                ]
            prov_runs.append(
                {
                    "method": m,
                    "seed": sd,
                    "command": cmd,
                    "resolved_config_sha256": sha256_json([m, sd]),
                    "attempts": attempts,
                    "outputs": {
                        f"runs/{study}/{m}/seed{sd}/metrics.jsonl": sha256_json([m, sd, "metrics"]),
                        f"runs/{study}/{m}/seed{sd}/eval/step{final}/outcomes.jsonl": sha256_json([m, sd, "outcomes"]),
                    },
                }
            )

    # each method against its step 0 and the families of those comparisons, through the analysis' own tables
    learning = T.learning_table(
        out.assign(episode=0), list(methods), final, 0.05, rng=np.random.default_rng(seed), n_boot=200
    )
    family_rows = families.families_table(
        {"paired": contract.empty("paired"), "learning": learning, "claims": contract.empty("claims")}, final
    )

    notes = [
        "One run of 128 tasks can never show equivalence within 3 pp; only pooled seeds can.",
        "Paper values marked unchecked were read from a secondary source.",
    ]
    if note_extra:
        notes.append(note_extra)
    doc = {
        "study": study,
        "title": "GraphGPO reproduction on ALFWorld",
        "settings": {
            "tolerance_pp": 3,
            "alpha": 0.05,
            "final_step": final,
            "claims": [c["claim"] for c in claims],
            "reference": {
                "paper": "GraphGPO (arXiv:2605.26684)",
                "metric": "success_rate",
                "path": "manifests/references/graphgpo.yaml",
            },
        },
        # every table of the contract is present; a table added to it later starts empty here
        "tables": {
            **{name: [] for name in TABLE_NAMES},
            "runs": runs,
            "methods": methods_rows,
            "paired": paired,
            "categories": cats,
            "verdicts": verdicts,
            "claims": claims,
            "diagnostics": diagnostics,
            "overhead": overhead,
            "convergence": convergence,
            "training": training,
            "learning": json.loads(learning.to_json(orient="records")),
            "families": json.loads(family_rows.to_json(orient="records")),
        },
        "notes": notes,
        "parity": [
            {"check": "GraphGPO oracle: graph rewards [10, 1, 0.1]", "status": "pass", "detail": "max |diff| 0"},
            {
                "check": "episode advantage independent of trajectory length",
                "status": "fail",
                "detail": "episode-stats rows: 1-turn success 0.71 vs 3-turn failure -1.15",
            },
            {"check": "verl-agent batch dump parity", "status": "not_run", "detail": "no batch dumps in runs"},
        ],
        "provenance": {"lock": lock, "lock_sha256": sha256_json(lock), "runs": prov_runs},
    }
    return {**doc, "bottom_line": bottom_line(doc)}


def write_analysis_dir(root: Path, analysis: dict) -> Path:
    """Write analysis/<study>/analysis.json and the CSVs of docs/design.md §3.6; returns the directory."""
    out = Path(root) / "analysis" / analysis["study"]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "analysis.json", analysis)
    for name, rows in analysis["tables"].items():
        if name in ("diagnostics",):
            continue
        pd.DataFrame(rows).to_csv(out / f"{name}.csv", index=False)
    return out


def write_outcomes(
    root: Path,
    *,
    study: str = "graphgpo-alfworld",
    seed: int = 0,
    methods: dict | None = None,
    seeds=(0, 1, 2),
    steps=(0, 50, 100, 150),
    n_tasks: int = 64,
    categories=None,
) -> list[Path]:
    """Simulated outcomes.jsonl files (docs/design.md §3.4), one per method × seed × step, for the real `analyze`."""
    rng = np.random.default_rng(seed)
    categories = list(categories or CATEGORIES)
    out = simulate(rng, dict(methods or METHODS), seeds, steps, n_tasks, categories)
    paths = []
    for (m, sd, st), g in out.groupby(["method", "seed", "step"], sort=False):
        rows = [
            {
                "study": study,
                "method": m,
                "seed": int(sd),
                "step": int(st),
                "task_id": r.task_id,
                "task_hash": sha256_json(r.task_id),
                "category": r.category,
                "episode": 0,
                "success": int(r.success),
                "reward": float(r.success),
                "turns": 5,
                "tokens": 300,
            }
            for r in g.itertuples()
        ]
        path = Path(root) / "runs" / study / m / f"seed{sd}" / "eval" / f"step{st}" / "outcomes.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        paths.append(path)
    return paths
