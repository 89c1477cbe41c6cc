"""The backend registry: lazy entries, duplicate and unknown names, checkpoint steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrepro.backends import REGISTRY, Backend, BackendRegistry
from agentrepro.errors import BadInput, Failure


class Tiny(Backend):
    name = "tiny"

    def train(self, config, run_dir, *, resume=True):
        pass

    def evaluate(self, run_dir, step):
        return []


def test_duplicate_names_are_errors():
    """Registering a name twice raises."""
    registry = BackendRegistry()
    registry.register("tiny", Tiny)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("tiny", Tiny)


def test_unknown_name_lists_the_known_ones():
    """An unknown name is BadInput at backend.name listing every registered name."""
    registry = BackendRegistry()
    registry.register("tiny", Tiny)
    registry.register("other", Tiny)
    with pytest.raises(BadInput, match=r"backend.name: unknown backend 'x' \(known: other, tiny\)"):
        registry.get("x")


def test_lazy_entries_and_interface_check():
    """A lazy entry is imported on use; an object lacking the Backend methods is a Failure; a missing module too."""
    registry = BackendRegistry()
    registry.register("command", "agentrepro.backends.command.backend:CommandBackend")
    registry.register("bad", lambda: object())
    registry.register("gone", "agentrepro.backends.no_such_module:X")
    assert registry.get("command").name == "command"
    with pytest.raises(Failure, match="lacks default_config"):
        registry.get("bad")
    with pytest.raises(Failure, match="cannot be loaded"):
        registry.get("gone")


def test_global_registry_names():
    """The global registry knows the four backends of docs/design.md §6."""
    assert REGISTRY.names() == ["builtin", "command", "relax", "verl-agent"]


def test_a_backend_checkpoints_the_evaluated_steps():
    """By default a backend's checkpoint steps are the layout's evaluated steps (0, every `eval.every`, the last)."""
    assert Tiny().checkpoint_steps({"train": {"steps": 12}, "eval": {"every": 5, "checkpoint": "last"}}) == [
        0,
        5,
        10,
        12,
    ]
    assert Tiny().checkpoint_steps({"train": {"steps": 4}}) == [0, 4]


def test_manifest_schema_names_exactly_the_registered_backends():
    """The manifest schema's `backend.name` enum is the registry's list (one owner: a new backend fails here until both agree)."""
    import json

    from agentrepro.schema import schema_path

    schema = json.loads(schema_path("manifest.schema.json").read_text(encoding="utf-8"))
    assert sorted(schema["$defs"]["backend"]["properties"]["name"]["enum"]) == REGISTRY.names()


def test_a_launch_is_shown_with_every_word_quoted():
    """`Launch.shown()` quotes shell syntax in values, so the shown line splits back into the same words."""
    import shlex

    from agentrepro.backends.launch import Launch

    launch = Launch("train", ("bash", "run $(id).sh", "a;b"), {"SEED": "1 && reboot"}, Path("/tmp/x y"))
    words = shlex.split(launch.shown())
    assert words[:3] == ["cd", "/tmp/x y", "&&"]
    assert words[3:] == ["SEED=1 && reboot", "bash", "run $(id).sh", "a;b"]
