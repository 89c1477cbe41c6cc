"""Each plot function draws the data it is given, in percent, on the Axes it is given."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from agentrepro.report import figures as F


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_forest_plot_one_row_per_method_in_percent(ax, analysis):
    """The forest plot has one labelled row per method, and the pooled rate drawn in percent."""
    t = analysis["tables"]
    out = F.forest_plot(t["methods"], t["runs"], t["verdicts"], 150, ax=ax)
    assert out is ax
    final = [r for r in t["methods"] if r["step"] == 150]
    assert [tl.get_text() for tl in ax.get_yticklabels()] == [r["method"] for r in final]
    xs = sorted(float(c.lines[0].get_xdata()[0]) for c in ax.containers)  # one errorbar per method
    assert xs == pytest.approx(sorted(100 * r["pooled_rate"] for r in final))


def test_forest_plot_shows_every_seed_even_at_equal_rates(ax, analysis):
    """Three seeds at the same rate are three dots at three heights, not one dot drawn three times."""
    t = analysis["tables"]
    method = next(r["method"] for r in t["methods"] if r["step"] == 150)
    runs = [{**r, "rate": 0.5} if r["method"] == method else r for r in t["runs"]]
    F.forest_plot(t["methods"], runs, t["verdicts"], 150, ax=ax)
    from matplotlib.collections import PathCollection

    dots = next(c for c in ax.collections if isinstance(c, PathCollection)).get_offsets()  # the first method's seeds
    mine = [r for r in runs if r["method"] == method and r["step"] == 150]
    assert len(mine) > 1 and len(dots) == len(mine)
    assert len({(float(x), float(y)) for x, y in dots}) == len(mine) and set(dots[:, 0]) == {50.0}


def test_learning_curves_follow_the_means(ax, analysis):
    """Each method's line is its mean over seeds at every checkpoint, ×100."""
    rows = analysis["tables"]["methods"]
    F.learning_curves(rows, ax=ax)
    by_label = {line.get_label(): line for line in ax.lines}
    grpo = sorted((r for r in rows if r["method"] == "grpo"), key=lambda r: r["step"])
    assert np.allclose(by_label["grpo"].get_ydata(), [100 * r["mean"] for r in grpo])
    assert len(ax.collections) == len(by_label)  # one CI band per method


def test_paired_deltas_use_pooled_rows_only(ax, analysis):
    """Only the seeds-pooled ('all') rows of the final step are drawn, one per pair."""
    rows = analysis["tables"]["paired"]
    F.paired_deltas(rows, 150, 0.05, ax=ax)
    expected = [r for r in rows if r["seed"] == "all" and r["step"] == 150]
    assert len(ax.get_yticklabels()) == len(expected)
    assert ax.get_yticklabels()[0].get_text() == f"{expected[0]['method_a']} − {expected[0]['method_b']}"


def test_other_plots_return_their_axes(analysis):
    """Every plot function returns the Axes it drew on, or a new one when ax is None."""
    t = analysis["tables"]
    calls = [
        lambda ax: F.per_category(t["categories"], 150, ax=ax),
        lambda ax: F.overhead_seconds(t["overhead"], ax=ax),
        lambda ax: F.convergence_plot(t["convergence"], "auc", ax=ax),
        lambda ax: F.metric_over_training(t["diagnostics"], "nodes", ax=ax),
    ]
    for call in calls:
        fig, ax = plt.subplots()
        assert call(ax) is ax and ax.has_data()
        plt.close(fig)
        new = call(None)
        assert new.has_data()
        plt.close(new.figure)


def test_overhead_skips_absent_components(analysis):
    """A component that did not run for a method (grpo: no graph_build) draws no point for it."""
    ax = F.overhead_seconds(analysis["tables"]["overhead"])
    grpo_points = [
        line
        for line in ax.lines
        if line.get_color()
        == F.method_colors(dict.fromkeys(r["method"] for r in analysis["tables"]["overhead"]))["grpo"]
    ]
    n_grpo = sum(1 for r in analysis["tables"]["overhead"] if r["method"] == "grpo")
    assert len(grpo_points) == n_grpo
    plt.close(ax.figure)


def test_text_from_data_is_literal_and_png_is_deterministic(analysis):
    """A category with '$' is drawn literally (no mathtext error); the same figure gives the same PNG."""
    rows = [dict(r, category="$x^{2 <b>") for r in analysis["tables"]["categories"] if r["category"] == "pick"]
    pngs = []
    for _ in range(2):
        with plt.rc_context(F.STYLE):
            ax = F.per_category(rows, 150)
            pngs.append(F.to_png(ax.figure))
    assert pngs[0].startswith(b"\x89PNG") and pngs[0] == pngs[1]


def test_log_axis_labels_are_plain_numbers(analysis):
    """The overhead figure's log-axis tick labels are numbers, not raw mathtext ('$\\mathdefault{10^{-3}}$')."""
    ax = F.overhead_seconds(analysis["tables"]["overhead"])
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and not any("$" in s or "mathdefault" in s for s in labels)
    assert all(float(s) > 0 for s in labels)
    plt.close(ax.figure)


def test_fractions_are_drawn_in_percent(analysis):
    """Rate-like series (train_success_rate, auc) are drawn ×100 with '(%)' in the title; counts are not scaled."""
    t = analysis["tables"]
    ax = F.metric_over_training(t["training"], "train_success_rate")
    assert ax.get_title().endswith("(%)") and max(max(line.get_ydata()) for line in ax.lines) > 1
    plt.close(ax.figure)
    ax = F.metric_over_training(t["diagnostics"], "nodes")
    assert "(%)" not in ax.get_title()
    plt.close(ax.figure)
    ax = F.convergence_plot(t["convergence"], "auc")
    heights = [p.get_height() for p in ax.patches]
    assert ax.get_title() == "auc (%)" and all(1 < h <= 100 for h in heights)
    plt.close(ax.figure)
