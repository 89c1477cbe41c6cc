"""The report pictures the first observations of a study whose environment observes images, and only then."""

from __future__ import annotations

import copy

import pytest
from helpers import require_vision

from agentrepro.environments import task_panel
from agentrepro.report import render

PASSED = {"status": "passed", "problems": [], "message": "ok"}


def with_env(analysis: dict, env: dict, seeds=range(10001, 10007)) -> dict:
    a = copy.deepcopy(analysis)
    lock = a["provenance"]["lock"]
    lock["manifest"]["env"] = env
    lock["task_panel"] = task_panel(env["name"], env.get("params"), list(seeds))
    return a


@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
def test_vision_study_has_the_figure_in_its_html(analysis_template, name):
    """A vision study's page embeds the first-observations figure of 4 tasks, saying the recomputed hashes equal the panel's."""
    require_vision()
    a = with_env(analysis_template, {"name": name, "split": "val", "params": {"render_mode": "vision"}})
    html, _, figures = render.render_report(a, audit=PASSED, files={})
    figure = next(f for f in figures if f.key == "first_observations")
    assert figure.section == "parity" and figure.png.startswith(b"\x89PNG")
    assert 'id="fig-first_observations"' in html and figure.uri in html
    assert f"first 4 of 6 panel tasks ({name})" in html
    assert "each recomputed task hash (it covers the picture&#39;s SHA-256) equals the frozen panel" in html


def test_changed_picture_is_reported(analysis_template):
    """A panel whose task hash no longer matches the re-rendered picture is named in the caption."""
    require_vision()
    a = with_env(analysis_template, {"name": "sokoban", "split": "val", "params": {"render_mode": "vision"}})
    a["provenance"]["lock"]["task_panel"][1]["task_hash"] = "0" * 64
    _html, _, figures = render.render_report(a, audit=PASSED, files={})
    caption = next(f for f in figures if f.key == "first_observations").caption
    assert "differs from the frozen panel's for sokoban-10002" in caption


def test_text_study_and_no_env_have_no_figure(analysis_template):
    """A text-observation study (and the synthetic study without an env block) gets no picture."""
    text = with_env(analysis_template, {"name": "sokoban", "split": "val"})
    for a in (text, analysis_template):
        html, _, figures = render.render_report(a, audit=PASSED, files={})
        assert "first_observations" not in {f.key for f in figures} and "fig-first_observations" not in html
