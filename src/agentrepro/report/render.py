"""Fill the report template from a validated analysis.json: sections, tables and embedded figures.

`render_report(analysis, audit=..., files=...)` returns the HTML text (one self-contained page: CSS
inline, figures as base64 PNG, no script, no external URL), the provenance page it links (every hash and the
whole lock, kept out of the printed report) and the figures it embeds, so the caller can also write them as
files for Snakemake's `--report`. jinja2 autoescapes everything: task names, method names, notes and log
text are data, not markup. A Content-Security-Policy in the page forbids scripts and any request other than
its own data: images, as a second guard. Every value printed from analysis.json is marked with where it came
from (agentrepro.report.marks), so that `agentrepro audit` can check it against its recount.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import jinja2
import matplotlib.pyplot as plt
from markupsafe import Markup, escape

from agentrepro.analysis import contract
from agentrepro.analysis.format import NBSP, unit_for
from agentrepro.attempts import machine_words
from agentrepro.containers.proof import KEY as CONTAINERS
from agentrepro.errors import BadInput
from agentrepro.placement import method_placement
from agentrepro.report import figures as F
from agentrepro.report.glossary import Glossary
from agentrepro.report.marks import FILTERS, sourced
from agentrepro.report.observations import first_observations
from agentrepro.report.paged import page_css
from agentrepro.report.summary import HOW_STARTED, cpu_use, reviewer_summary

EQUIVALENCE = "equivalence"  # claims.csv `kind` of an 'a == b ± m pp' claim (agentrepro.analysis.claim_text)

PROVENANCE_PAGE = "provenance.html"  # every hash and the whole lock, linked from the appendix
# <meta name=RENDERING content=JSON>: the settings of a rendering that the analysis does not give (the paper, the PDF
# engine named in the appendix), so that `agentrepro audit` can render the page again (agentrepro.audit.report)
RENDERING = "agentrepro-rendering"
SECTIONS = (
    ("summary", "Reviewer's summary"),
    ("equivalence", "Equivalence claims"),
    ("verdicts", "Verdicts against the {reference}"),
    ("claims", "Claims"),
    ("families", "Statistical families"),
    ("methods", "Methods"),
    ("step0", "Each method against its step 0"),
    ("paired", "Paired comparisons"),
    ("categories", "Per-category results"),
    ("learning", "Learning curves"),
    ("diagnostics", "Graph diagnostics"),
    ("overhead", "Overhead"),
    ("convergence", "Convergence"),
    ("certificate", "Parity certificate"),
    ("parity", "Parity checks"),
    ("sources", "Source parity"),
    ("appendix", "Appendix: provenance and audit"),
)
TRAINING_METRICS = ("train_success_rate", "reward_mean", "valid_action_ratio", "entropy", "kl", "grad_norm")


def reference_kind(analysis: dict) -> str:
    """What the study compares with, in words: a paper, a reference implementation or an earlier run."""
    return str((analysis["settings"].get("reference") or {}).get("kind") or "paper")


def sections(analysis: dict) -> list[tuple[str, str]]:
    """(id, title) of every section, the reference named by its kind."""
    return [(key, title.format(reference=reference_kind(analysis))) for key, title in SECTIONS]


CONVERGENCE_METRICS = ("auc", "steps_to_threshold", "wall_s", "gpu_hours")


@dataclass(frozen=True)
class Figure:
    key: str  # file stem and HTML id (fig-<key>)
    section: str  # id of the section it belongs to
    title: str
    caption: str
    png: bytes

    @property
    def uri(self) -> str:
        return F.data_uri(self.png)


def final_step(analysis: dict) -> int | None:
    """The step compared with the paper: settings.final_step, else the last evaluated step."""
    step = analysis["settings"].get("final_step")
    if step is None:
        steps = [r["step"] for r in analysis["tables"]["methods"]]
        step = max(steps) if steps else None
    return step


def _numbers(rows: Sequence[dict], metric: str) -> list[float]:
    return [r[metric] for r in rows if isinstance(r.get(metric), (int, float)) and not isinstance(r.get(metric), bool)]


def _grid(rows: Sequence[dict], metrics: Sequence[str], draw, colors: dict, ncols: int = 3):
    """A figure of small multiples, one panel per metric present in `rows` and not 0 throughout (GPU-hours of a CPU
    study), with one shared legend of the methods that have rows; also returns the panels drawn and those left out."""
    present = [m for m in metrics if any(v != 0 for v in _numbers(rows, m))]
    zero = [m for m in metrics if _numbers(rows, m) and m not in present]
    nrows = max(1, -(-len(present) // ncols))
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.4 * ncols, 2.0 * nrows + 0.4), layout="constrained", squeeze=False
    )
    for ax, metric in zip(axes.flat, present):
        draw(rows, metric, ax=ax, colors=colors)
    for ax in list(axes.flat)[len(present) :]:
        ax.set_visible(False)
    shown = [m for m in colors if any(r["method"] == m for r in rows)]
    handles = [plt.Line2D([], [], color=colors[m], lw=2) for m in shown]
    fig.legend(handles, shown, loc="outside lower center", ncols=min(len(shown), 6) or 1, frameon=False)
    return fig, present, zero


def _left_out(zero: Sequence[str]) -> str:
    return f" Not drawn, 0 on every run: {', '.join(zero)}." if zero else ""


def build_figures(analysis: dict) -> list[Figure]:
    """Every figure the data supports; a section without data gets no figure (and the page says why)."""
    t = analysis["tables"]
    step, alpha = final_step(analysis), analysis["settings"]["alpha"]
    colors = F.method_colors(
        [r["method"] for r in t["methods"]]
        + [r["method"] for name in ("training", "diagnostics", "overhead", "convergence") for r in t[name]]
    )
    out: list[Figure] = []

    def add(key, section, title, caption, fig_or_ax):
        fig = fig_or_ax.figure if hasattr(fig_or_ax, "figure") and not isinstance(fig_or_ax, plt.Figure) else fig_or_ax
        out.append(Figure(key, section, title, caption, F.to_png(fig)))

    with plt.rc_context(F.STYLE):
        if t["methods"] and step is not None:
            add(
                "forest",
                "methods",
                "Methods at the final step",
                f"Pooled success rate over seeds at step {step} with its 95% CI (Wilson at the task-clustered effective n: "
                f"the seeds replay the same tasks); small dots are the seeds; diamonds are the {reference_kind(analysis)}'s values.",
                F.forest_plot(
                    t["methods"], t["runs"], t["verdicts"], step, colors=colors, reference=reference_kind(analysis)
                ),
            )
        if any(r["seed"] == "all" and r["step"] == step for r in t["paired"]):
            add(
                "paired",
                "paired",
                "Paired differences",
                f"Differences a − b at step {step} over the same tasks, seeds pooled by task, with task-clustered CIs; "
                f"blue where the Holm-adjusted p of the task-clustered t < {alpha:g}.",
                F.paired_deltas(t["paired"], step, alpha),
            )
        if any(r["step"] == step for r in t["categories"]):
            add(
                "categories",
                "categories",
                "Per-category success",
                f"Success rate per task category at step {step}, pooled over seeds, with 95% CIs (task-clustered where seeds repeat "
                "the tasks).",
                F.per_category(t["categories"], step, colors=colors),
            )
        if t["methods"]:
            add(
                "learning_curves",
                "learning",
                "Evaluation learning curves",
                "Mean success over seeds at each evaluated checkpoint; the band is the pooled rate's 95% CI (task-clustered).",
                F.learning_curves(t["methods"], colors=colors),
            )
        if t["training"]:
            fig, present, zero = _grid(t["training"], TRAINING_METRICS, F.metric_over_training, colors)
            add(
                "training_curves",
                "learning",
                "Training metrics",
                "Training-time metrics from metrics.jsonl, mean over seeds: "
                + ", ".join(present)
                + "."
                + _left_out(zero),
                fig,
            )
        if t["diagnostics"]:
            fig, present, zero = _grid(t["diagnostics"], F.DIAGNOSTIC_METRICS, F.metric_over_training, colors, ncols=4)
            add(
                "diagnostics",
                "diagnostics",
                "Graph diagnostics over training",
                "Per-step graph diagnostics (graph_diagnostics.jsonl), mean over seeds: "
                + ", ".join(present)
                + "."
                + _left_out(zero)
                + " Only methods that build a graph have rows.",
                fig,
            )
        if t["overhead"]:
            add(
                "overhead",
                "overhead",
                "Time per component",
                "p50 and p95 seconds per training step of every timed component (log scale).",
                F.overhead_seconds(t["overhead"], colors=colors),
            )
        if t["convergence"]:
            fig, present, zero = _grid(t["convergence"], CONVERGENCE_METRICS, F.convergence_plot, colors, ncols=4)
            add(
                "convergence",
                "convergence",
                "Convergence",
                "Per seed (dots) and mean (bar): "
                + ", ".join(present)
                + "; auc is the mean success rate over the evaluated "
                "checkpoints (area under the curve / step range)." + _left_out(zero),
                fig,
            )
        pictured = first_observations(analysis["provenance"].get("lock"))
        if pictured is not None:
            add("first_observations", "parity", "What the agents saw", pictured[1], pictured[0])
    return out


def compact_json(obj, indent: int = 0) -> str:
    """Pretty JSON whose innermost objects and lists stay on one line (a 128-task panel is 128 lines)."""
    pad = "  " * indent
    if isinstance(obj, dict) and any(isinstance(v, (dict, list)) for v in obj.values()):
        items = [f"{pad}  {json.dumps(k)}: {compact_json(v, indent + 1).lstrip()}" for k, v in obj.items()]
        return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(v, (dict, list)) for v in obj):
        return pad + "[\n" + ",\n".join(compact_json(v, indent + 1) for v in obj) + "\n" + pad + "]"
    return pad + json.dumps(obj, ensure_ascii=False)


def _units(rows: Sequence[dict], table: str) -> dict[str, str]:
    """{column: unit} for every duration column of a plain table: one unit per column (analysis.format.unit_for)."""
    return {
        c.name: unit_for([r.get(c.name) for r in rows])
        for c in contract.BY_NAME[table].required
        if c.kind.rstrip("?") == "seconds"
    }


def _attempt_rows(runs: Sequence[dict]) -> list[dict]:
    """Every attempt of every run, for the appendix: how a training attempt started, the CPUs it had, the code it ran
    and the machine's arithmetic (agentrepro.attempts)."""
    out = []
    for r in runs:
        for i, at in enumerate(r.get("attempts") or [], start=1):
            use = cpu_use(at)
            cpus = f"{use:.2f} of {at.get('cpu_affinity') or at.get('cpus') or '?'}" if use is not None else "—"
            out.append(
                {
                    "run": r,
                    "at": at,
                    "number": at.get("number", i),
                    "cpus": cpus,
                    "how": at.get(HOW_STARTED) or "",
                    "code": _code_said(at.get("software")),
                    "machine": machine_words(at.get("machine")),
                }
            )
    return out


def _code_said(software: Any) -> str:
    """An attempt's code in a cell: the commit (12 digits, and whether the tree was dirty), the packages' hash."""
    if not isinstance(software, dict):
        return "not recorded"
    harness, python = software.get("harness") or {}, software.get("python") or {}
    commit = str(harness.get("commit") or "no commit")[:12] + (" + changes" if harness.get("dirty") else "")
    return f"{commit}; packages {str(python.get('packages_sha256') or '?')[:12]}"


def _pinned(image: dict) -> str:
    """A placement's image block in words: `ref@digest`, `file (sha256 ...)`, or `none: why`."""
    if "none" in image:
        return f"none: {image['none']}"
    if "file" in image:
        return f"{image['file']} (sha256 {image.get('sha256')})"
    return f"{image.get('ref')} @ {image.get('digest')}"


def image_rows(analysis: dict, runs: Sequence[dict]) -> list[dict]:
    """Per method: the image its placement pins (from the lock) and what its training attempts' programs ran in, as
    the container runtime reported it (agentrepro.containers.proof); the audit checks one against the other."""
    manifest = ((analysis["provenance"].get("lock") or {}).get("manifest")) or {}
    out = []
    for method in dict.fromkeys(r["method"] for r in runs):
        try:
            image = method_placement(manifest, method).image if manifest else None
        except (BadInput, KeyError, TypeError):
            image = None
        mine = [r for r in runs if r["method"] == method]
        records = [
            c for r in mine for at in r.get("attempts") or [] for c in at.get(CONTAINERS) or [] if isinstance(c, dict)
        ]
        ran = dict.fromkeys(f"{c.get('runtime')} {c.get('version') or ''}".strip() for c in records)
        resolved = dict.fromkeys(
            d
            for c in records
            for d in ((c.get("resolved") or {}).get("digests") or []) + [(c.get("resolved") or {}).get("file_sha256")]
            if d
        )
        with_records = sum(1 for r in mine if any(at.get(CONTAINERS) for at in r.get("attempts") or []))
        out.append(
            {
                "method": method,
                "pinned": _pinned(image) if isinstance(image, dict) else "not in the lock",
                "runtime": ", ".join(ran) or "—",
                "resolved": list(resolved),
                "programs": len(records),
                "runs": f"{with_records} of {len(mine)}",
            }
        )
    return out


def lock_summary(lock: dict | None) -> list[str]:
    """A few lines that stand for the whole lock in the printed report (the whole lock is on the provenance page)."""
    if not lock:
        return []
    resolved, harness, python = lock.get("resolved") or {}, lock.get("harness") or {}, lock.get("python") or {}
    return [
        f"study {lock.get('study')}, created {lock.get('created')}, manifest sha256 {str(lock.get('manifest_sha256'))[:16]}",
        f"harness commit {harness.get('commit')}" + (" (dirty)" if harness.get("dirty") else ""),
        f"{len(lock.get('task_panel') or [])} tasks in the task panel; {len(resolved.get('files') or {})} data file(s) hashed",
        f"Python {python.get('version')}: {len(python.get('packages') or [])} packages, sha256 {str(python.get('packages_sha256'))[:16]}",
    ]


def rendering(paper: str, pdf_engine: str | None) -> str:
    """The content of the page's RENDERING meta element."""
    return json.dumps({"paper": paper, "pdf_engine": pdf_engine}, sort_keys=True, ensure_ascii=True)


def build_context(
    analysis: dict,
    *,
    figures: Sequence[Figure],
    audit: dict,
    files: dict[str, str],
    paper: str = "a4",
    pdf_engine: str | None = None,
) -> dict:
    """Everything the template shows, selected (never recomputed) from analysis.json, every value printed from it
    marked (agentrepro.report.marks); `pdf_engine` names the program and version that prints this page to
    report.pdf (None: no PDF), for the appendix."""
    a = sourced(analysis)
    t = a["tables"]
    step = final_step(analysis)
    glossary = Glossary()
    at = [r for r in t["methods"] if r["step"] == step]
    pooled = {r["method"]: r for r in at}
    categories = sorted({r["category"] for r in t["categories"] if r["step"] == step}, key=str)
    cat_methods = list(dict.fromkeys(r["method"] for r in t["categories"] if r["step"] == step))
    cat_cells = {(r["category"], r["method"]): r for r in t["categories"] if r["step"] == step}
    diag_last: dict[tuple[str, Any], dict] = {}
    for r in t["diagnostics"]:
        key = (r["method"], r["seed"])
        if key not in diag_last or r["step"] > diag_last[key]["step"]:
            diag_last[key] = r
    prov = analysis["provenance"]
    curve_methods = list(dict.fromkeys(r["method"] for r in t["methods"]))
    curve_steps = sorted({r["step"] for r in t["methods"]})
    equivalence = [r for r in t["claims"] if r.get("kind") == EQUIVALENCE]
    headline = [r for r in equivalence if r.get("seed") == "all"]
    runs = prov.get("runs", [])
    return {
        "summary": reviewer_summary(a, step, glossary),
        "gloss": glossary.term,
        "reference": reference_kind(analysis),
        "bottom_line": a.get("bottom_line") or [],
        # each equivalence claim: its `all` row (the verdict), then its per-seed rows
        "equivalence": [
            (h, [r for r in equivalence if r["claim"] == h["claim"] and r.get("seed") != "all"]) for h in headline
        ],
        "ordering_claims": [r for r in t["claims"] if r.get("kind") != EQUIVALENCE],
        "eq_counts": {
            v: sum(1 for r in headline if r.get("verdict") == v)
            for v in ("reproduced", "not_reproduced", "inconclusive")
        },
        "a": a,
        "t": t,
        "step": step,
        "sections": sections(analysis),
        "columns": {table.name: table.required for table in contract.TABLES},
        "units": {name: _units(t[name], name) for name in ("overhead", "convergence")},
        "figures": {s: [f for f in figures if f.section == s] for s, _ in SECTIONS},
        "verdicts": [{**v, "ours_ci": pooled.get(v["method"])} for v in t["verdicts"]],
        "methods_final": at,
        "learning_final": [r for r in t.get("learning") or [] if r["step"] == step],
        "paired_final": [r for r in t["paired"] if r["step"] == step],
        "families": t.get("families") or [],
        "categories": categories,
        "cat_methods": cat_methods,
        "cat_cells": cat_cells,
        "diag_last": sorted(diag_last.values(), key=lambda r: (r["method"], r["seed"])),
        "diag_columns": [c for c in F.DIAGNOSTIC_METRICS if any(c in r for r in diag_last.values())],
        "diag_hist": any(isinstance(r.get("distance_hist"), dict) for r in diag_last.values()),
        "curve_methods": curve_methods,
        "curve_steps": curve_steps,
        "curve_cells": {(r["method"], r["step"]): r for r in t["methods"]},
        "audit": audit,
        "files": files,
        "pdf_engine": pdf_engine,
        "rendering": {"name": RENDERING, "content": rendering(paper, pdf_engine)},
        "provenance_page": PROVENANCE_PAGE,
        "page_css": page_css(analysis["study"], prov.get("lock_sha256"), paper),
        "lock_json": compact_json(prov.get("lock", {})),
        "lock_summary": lock_summary(prov.get("lock")),
        "runs": runs,
        "attempts": _attempt_rows(runs),
        "images": image_rows(analysis, runs),
        "run_files": sum(len(r.get("outputs") or {}) for r in runs),
        "source_parity": prov.get("source_parity"),  # backends.sources.study_rows: per method and placement
        "counts": {
            v: sum(1 for r in t["verdicts"] if r["verdict"] == v)
            for v in ("reproduced", "not_reproduced", "inconclusive")
        },
    }


def histogram_text(hist) -> str:
    """A histogram object {"0": 40, "1": 120, "unreachable": 3} as '0: 40 · 1: 120 · unreachable: 3' (numeric keys first;
    each 'key: count' held together by a no-break space, so a narrow cell wraps only between entries)."""
    if not isinstance(hist, dict) or not hist:
        return "—"

    def key(k):
        try:
            return (0, float(k), "")
        except (TypeError, ValueError):
            return (1, 0.0, str(k))

    return " · ".join(f"{k}:{NBSP}{hist[k]}" for k in sorted(hist, key=key))


def breakable(name: str) -> Markup:
    """A metric name as a column header that may wrap after its underscores (shared_<wbr>state_<wbr>ratio)."""
    return escape(name).replace("_", Markup("_<wbr>"))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("agentrepro.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.filters["hist"] = histogram_text
    env.filters["breakable"] = breakable
    return env


def render_html(context: dict, template: str = "report.html.j2") -> str:
    css = resources.files("agentrepro.report").joinpath("templates/report.css").read_text(encoding="utf-8")
    return _environment().get_template(template).render(css=css, **context)


def render_report(
    analysis: dict, *, audit: dict, files: dict[str, str], paper: str = "a4", pdf_engine: str | None = None
) -> tuple[str, str, list[Figure]]:
    """(HTML of the report, HTML of its provenance page, embedded figures) of a validated analysis, laid out for
    `paper` when printed."""
    figures = build_figures(analysis)
    context = build_context(analysis, figures=figures, audit=audit, files=files, paper=paper, pdf_engine=pdf_engine)
    return render_html(context), render_html(context, "provenance.html.j2"), figures
