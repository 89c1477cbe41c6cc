"""The report's figures (matplotlib, Agg). Each plot function takes table rows of analysis.json and
`ax=None`, draws on `ax` (or a new Axes) and returns the Axes; rates (fractions) are drawn in percent.

Drawing only: no statistic is computed here beyond averaging over seeds for display (said in the
caption). Colours follow `method_colors` so a method has one colour in every figure. Text from the
data is drawn literally (`text.parse_math` off): a task or method name with `$` is not mathtext.
"""

from __future__ import annotations

import base64
import io
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType  # matplotlib >= 3.10; for the type checker only

STYLE: dict[RcKeyType, Any] = {
    "text.parse_math": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9,
    "axes.titlesize": 10,
    "legend.fontsize": 8,
    "figure.dpi": 100,
}
VERDICT_COLORS = {"reproduced": "#1a7f37", "not_reproduced": "#cf222e", "inconclusive": "#9a6700"}
# Fractions in the data, drawn in percent wherever they appear.
RATE_METRICS = {
    "auc",
    "train_success_rate",
    "valid_action_ratio",
    "duplicate_edge_ratio",
    "shared_state_rate",
    "singleton_out_edge_ratio",
    "nonzero_graph_adv_ratio",
    "unreachable_ratio",
    "threshold",
}
DIAGNOSTIC_METRICS = (
    "nodes",
    "edges",
    "shared_state_rate",
    "duplicate_edge_ratio",
    "nonzero_graph_adv_ratio",
    "unreachable_ratio",
    "singleton_out_edge_ratio",
    "all_fail_groups",
)


def _axes(ax: Axes | None, size=(6.4, 3.2)) -> Axes:
    if ax is not None:
        return ax
    _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def method_colors(methods: Iterable[str]) -> dict[str, str]:
    """One colour per method, in order of first appearance (tab10)."""
    palette = matplotlib.color_sequences["tab10"]
    ordered = list(dict.fromkeys(methods))
    return {m: matplotlib.colors.to_hex(palette[i % len(palette)]) for i, m in enumerate(ordered)}


def _at_step(rows: Sequence[dict], step: int | None) -> list[dict]:
    return [r for r in rows if r.get("step") == step]


def interval(row: dict) -> tuple[float, float]:
    """A pooled rate's 95% interval: the task-clustered one (ci_lo, ci_hi) where the analysis has it, else Wilson's."""
    return (
        (row["ci_lo"], row["ci_hi"])
        if row.get("ci_lo") is not None and row.get("ci_hi") is not None
        else (row["wilson_lo"], row["wilson_hi"])
    )


def _below(ax: Axes, rows: int, ncols: int = 3) -> None:
    """The legend below the axes, where it never covers a point or an interval."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35 if rows < 4 else -0.22), ncols=ncols, frameon=False)


def _stacked(xs: Sequence[float], y: float, step: float = 0.09) -> list[float]:
    """A y for each dot at `xs`: `y`, and below it one step more for each earlier dot at the same x, so that seeds of
    equal rate are each seen rather than drawn over one another."""
    seen: dict[float, int] = {}
    ys = []
    for x in xs:
        ys.append(y + step * seen.get(x, 0))
        seen[x] = seen.get(x, 0) + 1
    return ys


def forest_plot(
    methods_rows: Sequence[dict],
    runs_rows: Sequence[dict],
    verdicts: Sequence[dict],
    step: int,
    ax: Axes | None = None,
    colors: dict | None = None,
    reference: str = "paper",
) -> Axes:
    """Methods at `step`: pooled rate with its 95% CI (bar; `interval`), each seed's rate (dots), the reference's value (◆)."""
    rows = _at_step(methods_rows, step)
    ax = _axes(ax, (6.4, 1.1 + 0.45 * max(len(rows), 1)))
    colors = colors or method_colors(r["method"] for r in rows)
    paper = {v["method"]: v["paper"] for v in verdicts}
    for y, r in enumerate(rows):
        c = colors.get(r["method"], "k")
        lo, hi = interval(r)
        ax.errorbar(
            100 * r["pooled_rate"],
            y,
            xerr=[[100 * (r["pooled_rate"] - lo)], [100 * (hi - r["pooled_rate"])]],
            fmt="o",
            color=c,
            capsize=3,
            ms=6,
            label="pooled, 95% CI" if y == 0 else None,
        )
        seeds = [100 * s["rate"] for s in runs_rows if s["method"] == r["method"] and s["step"] == step]
        ax.scatter(seeds, _stacked(seeds, y + 0.18), s=12, color=c, alpha=0.6, label="per seed" if y == 0 else None)
        if r["method"] in paper:
            ax.scatter(
                [100 * paper[r["method"]]],
                [y - 0.18],
                marker="D",
                s=24,
                color="k",
                label=reference if not ax.get_legend_handles_labels()[1].count(reference) else None,
            )
    ax.set_yticks(range(len(rows)), [r["method"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"success rate at step {step} (%)")
    ax.grid(axis="x", alpha=0.3)
    if rows:
        _below(ax, len(rows))
    return ax


def learning_curves(methods_rows: Sequence[dict], ax: Axes | None = None, colors: dict | None = None) -> Axes:
    """Evaluation success over checkpoints: mean over seeds (line) and the pooled rate's 95% band (`interval`), per method."""
    ax = _axes(ax)
    by_method: dict[str, list[dict]] = defaultdict(list)
    for r in methods_rows:
        by_method[r["method"]].append(r)
    colors = colors or method_colors(by_method)
    for m, rows in by_method.items():
        rows = sorted(rows, key=lambda r: r["step"])
        x = [r["step"] for r in rows]
        ax.plot(x, [100 * r["mean"] for r in rows], marker="o", ms=3, color=colors.get(m), label=m)
        ax.fill_between(
            x,
            [100 * interval(r)[0] for r in rows],
            [100 * interval(r)[1] for r in rows],
            color=colors.get(m),
            alpha=0.15,
        )
    ax.set_xlabel("training step (evaluated checkpoint)")
    ax.set_ylabel("success rate (%)")
    ax.grid(alpha=0.3)
    if by_method:
        ax.legend(frameon=False)
    return ax


def paired_deltas(paired_rows: Sequence[dict], step: int | None, alpha: float, ax: Axes | None = None) -> Axes:
    """Paired differences a − b at `step`, seeds pooled by task (`all` rows), with their CIs; blue where Holm p < `alpha`."""
    rows = [r for r in _at_step(paired_rows, step) if r["seed"] == "all"]
    ax = _axes(ax, (6.4, 0.6 + 0.4 * max(len(rows), 1)))
    for y, r in enumerate(rows):
        lo, hi = r.get("ci_lo"), r.get("ci_hi")
        significant = r.get("p_holm") is not None and r["p_holm"] < alpha
        color = "#0969da" if significant else "#57606a"
        xerr = None if lo is None or hi is None else [[100 * (r["delta"] - lo)], [100 * (hi - r["delta"])]]
        ax.errorbar(100 * r["delta"], y, xerr=xerr, fmt="o", color=color, capsize=3)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(rows)), [f"{r['method_a']} − {r['method_b']}" for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"paired difference at step {step} (pp); blue: Holm-adjusted p < {alpha:g}")
    ax.grid(axis="x", alpha=0.3)
    return ax


def _dodged(rows: Sequence[dict], lane_key: str, lanes: list, methods: list) -> Iterator[tuple[str, dict, float]]:
    """(method, row, y) for every row, method by method: lane `lanes.index(row[lane_key])` of a horizontal
    dot chart, shared by the methods side by side within its 0.8 height."""
    width = 0.8 / max(len(methods), 1)
    for j, m in enumerate(methods):
        for r in (r for r in rows if r["method"] == m):
            yield m, r, lanes.index(r[lane_key]) - 0.4 + width * (j + 0.5)


def per_category(
    category_rows: Sequence[dict], step: int | None, ax: Axes | None = None, colors: dict | None = None
) -> Axes:
    """Success per task category at `step`: one dot per method with its 95% CI (`interval`); the legend below the axes."""
    rows = _at_step(category_rows, step)
    cats = list(dict.fromkeys(r["category"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    ax = _axes(ax, (6.4, 0.6 + 0.5 * max(len(cats), 1)))
    colors = colors or method_colors(methods)
    for m, r, y in _dodged(rows, "category", cats, methods):
        lo, hi = interval(r)
        ax.errorbar(
            100 * r["rate"],
            y,
            xerr=[[100 * (r["rate"] - lo)], [100 * (hi - r["rate"])]],
            fmt="o",
            ms=4,
            capsize=2,
            color=colors.get(m),
            label=m if r["category"] == cats[0] else None,
        )
    ax.set_yticks(range(len(cats)), cats)
    ax.invert_yaxis()
    ax.set_xlabel(f"success rate at step {step} (%)")
    ax.grid(axis="x", alpha=0.3)
    if methods:
        _below(ax, len(cats), ncols=min(len(methods), 4))
    return ax


def _seed_mean(rows: Sequence[dict], metric: str) -> dict[str, tuple[list, list]]:
    """{method: (steps, mean over seeds of `metric`)}, skipping rows where it is absent or null."""
    acc: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        v = r.get(metric)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            acc[r["method"]][r["step"]].append(float(v))
    return {m: (sorted(d), [float(np.mean(d[s])) for s in sorted(d)]) for m, d in acc.items()}


def metric_over_training(
    rows: Sequence[dict], metric: str, ax: Axes | None = None, colors: dict | None = None, percent: bool | None = None
) -> Axes:
    """One training-time series (training metrics or graph diagnostics), mean over seeds per method.

    `percent` (default: whether `metric` is in RATE_METRICS) draws fractions ×100.
    """
    ax = _axes(ax, (3.2, 2.2))
    percent = metric in RATE_METRICS if percent is None else percent
    series = _seed_mean(rows, metric)
    colors = colors or method_colors(series)
    for m, (x, y) in series.items():
        ax.plot(x, [100 * v for v in y] if percent else y, color=colors.get(m), lw=1.2, label=m)
    ax.set_title(metric + (" (%)" if percent else ""))
    ax.set_xlabel("training step")
    ax.grid(alpha=0.3)
    return ax


def overhead_seconds(overhead_rows: Sequence[dict], ax: Axes | None = None, colors: dict | None = None) -> Axes:
    """p50 (dot) to p95 (bar end) seconds of every timed component, per method, on a log axis."""
    comps = list(dict.fromkeys(r["component"] for r in overhead_rows))
    methods = list(dict.fromkeys(r["method"] for r in overhead_rows))
    ax = _axes(ax, (6.4, 0.6 + 0.45 * max(len(comps), 1)))
    colors = colors or method_colors(methods)
    for m, r, y in _dodged(overhead_rows, "component", comps, methods):
        ax.hlines(y, r["p50_s"], max(r["p95_s"], r["p50_s"]), color=colors.get(m), lw=3, alpha=0.5)
        ax.plot(r["p50_s"], y, "o", ms=4, color=colors.get(m), label=m if r["component"] == comps[0] else None)
    if overhead_rows and all(r["p50_s"] > 0 for r in overhead_rows):
        ax.set_xscale("log")
        # plain tick labels: the default log labels are mathtext, which STYLE turns off for data text
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_yticks(range(len(comps)), comps)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per training step: p50 (dot) to p95 (bar end)")
    ax.grid(axis="x", alpha=0.3)
    if methods:
        ax.legend(frameon=False, loc="lower right")
    return ax


def convergence_plot(
    convergence_rows: Sequence[dict], metric: str = "auc", ax: Axes | None = None, colors: dict | None = None
) -> Axes:
    """One convergence measure per seed (dots) and its mean (bar) per method; seeds with no value are skipped."""
    methods = list(dict.fromkeys(r["method"] for r in convergence_rows))
    ax = _axes(ax, (3.2, 2.4))
    colors = colors or method_colors(methods)
    scale = 100 if metric in RATE_METRICS else 1
    for i, m in enumerate(methods):
        vals = [scale * r[metric] for r in convergence_rows if r["method"] == m and r.get(metric) is not None]
        if vals:
            ax.bar(i, float(np.mean(vals)), color=colors.get(m), alpha=0.35)
            ax.scatter([i] * len(vals), vals, color=colors.get(m), s=14, zorder=3)
    ax.set_xticks(range(len(methods)), methods, rotation=20, ha="right")
    ax.set_title(metric + (" (%)" if scale == 100 else ""))
    ax.grid(axis="y", alpha=0.3)
    return ax


def to_png(fig, dpi: int = 120) -> bytes:
    """PNG bytes of a figure (closes it); the metadata carries no date, so equal figures give equal bytes."""
    buf = io.BytesIO()
    with plt.rc_context(STYLE):
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
