"""The manifest's `env.params.render_mode` (image observations) binds the frozen panel to the pixels."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import require_vision

from agentrepro.environments import task_panel
from agentrepro.errors import BadInput
from agentrepro.manifest.taskpanel import build_panel_sources


def manifest(env: str, params: dict | None) -> dict:
    m: dict[str, Any] = {"env": {"name": env, "split": "val"}, "eval": {"tasks": 3, "first_seed": 10001}}
    if params is not None:
        m["env"]["params"] = params
    return m


@pytest.mark.parametrize("env", ["sokoban", "frozenlake"])
def test_vision_panel_hashes_cover_the_picture(env):
    """With render_mode vision the frozen task hashes are the environment's vision ones, unlike the default (text) panel, which an explicit text equals."""
    require_vision()
    vision = build_panel_sources(manifest(env, {"render_mode": "vision"}), ".")[0]
    default = build_panel_sources(manifest(env, None), ".")[0]
    assert vision == task_panel(env, {"render_mode": "vision"}, [10001, 10002, 10003])
    assert default == build_panel_sources(manifest(env, {"render_mode": "text"}), ".")[0]
    assert [t["task_id"] for t in vision] == [t["task_id"] for t in default]
    assert all(v["task_hash"] != d["task_hash"] for v, d in zip(vision, default))


def test_bad_render_mode_is_named():
    """An unknown render_mode is refused naming env.params.render_mode and the accepted values."""
    with pytest.raises(BadInput, match=r"env\.params\.render_mode: expected one of 'text', 'vision'"):
        build_panel_sources(manifest("sokoban", {"render_mode": "image"}), ".")


def test_builtin_backend_refuses_image_observations():
    """The builtin (text-model) backend refuses render_mode vision, naming the field, rather than showing a text model '<image>'."""
    from agentrepro.backends import get_backend

    config = get_backend("builtin").default_config()
    config.update(study="s", method="grpo", seed=0, env={"name": "sokoban", "params": {"render_mode": "vision"}})
    with pytest.raises(BadInput, match=r"env\.params\.render_mode: the builtin trainer plays text observations only"):
        get_backend("builtin").validate_config(config)
    config["env"]["params"]["render_mode"] = "text"
    get_backend("builtin").validate_config(config)


@pytest.mark.parametrize("env, package", [("sokoban", "gym-sokoban"), ("frozenlake", "gymnasium")])
def test_vision_panel_records_the_sprite_package_version(env, package):
    """A vision panel names the installed version of the package whose sprites are drawn; a text panel names none."""
    require_vision()
    from importlib.metadata import version

    assert build_panel_sources(manifest(env, {"render_mode": "vision"}), ".")[2] == {package: version(package)}
    assert build_panel_sources(manifest(env, None), ".")[2] == {}
