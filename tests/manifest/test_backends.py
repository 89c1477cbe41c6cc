"""Per-method backends (agentrepro.placement): `backends:` blocks, `<method>@<backend>` names, and
every stage that reads a method's backend: loading, freeze and resolve (the plan: tests/workflow/test_plan.py)."""

from __future__ import annotations

import json
import re

import pytest
from helpers import run_cli
from study_kit import BASE, COMMIT_A, DIGEST, git_commit_all, load, set_key, write_study

from agentrepro.errors import BadInput
from agentrepro.manifest import load_manifest
from agentrepro.placement import METHOD_NAME, method_placement, split_method
from agentrepro.schema import schema_path

# A Relax placement whose jobs demand what it gives (agentrepro preflight at freeze): the model revision the recipe's data
# preparation pins, and a GPU count (its tensor-parallel size) that divides the model's 2 query groups.
RELAX = {
    "backend": {"name": "relax", "repo": "redai-infra/Relax", "commit": COMMIT_A},
    "image": {"runtime": "apptainer", "ref": "example.org/relax:1.0", "digest": DIGEST},
    "resources": {"gpus": 2},
}
PINNED = "775b11afaf83e0dc75bd5abaf90133e47b3ec082"
TWO = set_key(
    set_key(
        set_key(
            set_key(BASE, "backends", {"relax": RELAX}), "methods.gigpo@relax", {"estimator": "gigpo", "gamma": 0.95}
        ),
        "model.revision",
        PINNED,
    ),
    "model.tokenizer_revision",
    PINNED,
)


def _error(tmp_path, manifest) -> str:
    path = write_study(tmp_path, manifest)
    with pytest.raises(BadInput) as info:
        load_manifest(path)
    return str(info.value)


def test_a_method_runs_on_the_backend_its_name_declares(tmp_path):
    """`gigpo@relax` gets backends.relax (block, image, resources over the study's); `gigpo` the study's backend."""
    manifest = load_manifest(write_study(tmp_path, TWO))
    relax, default = method_placement(manifest, "gigpo@relax"), method_placement(manifest, "gigpo")
    assert (relax.name, relax.image, relax.resources) == ("relax", RELAX["image"], {**BASE["resources"], "gpus": 2})
    assert (default.name, default.image, default.resources) == ("verl-agent", BASE["image"], BASE["resources"])
    assert method_placement(set_key(manifest, "methods.gigpo@verl-agent", {}), "gigpo@verl-agent") == default
    assert split_method("gigpo@relax") == ("gigpo", "relax") and split_method("gigpo") == ("gigpo", None)


@pytest.mark.parametrize(
    "manifest, where, says",
    [
        (
            set_key(BASE, "methods.gigpo@relax", {}),
            "methods.gigpo@relax",
            "neither the study's backend (verl-agent) nor declared",
        ),
        (
            set_key(TWO, "backends.relax.backend.name", "verl-agent"),
            "backends.relax.backend.name",
            "differs from its label 'relax'",
        ),
        (
            set_key(
                set_key(TWO, "backends.verl-agent", {**RELAX, "backend": BASE["backend"]}),
                "methods.grpo@verl-agent",
                {},
            ),
            "backends.verl-agent",
            "already the study's backend",
        ),
        (
            set_key(
                TWO,
                "backends.command",
                {"backend": {"name": "command", "command": "train {run_dir}"}, "image": {"none": "CPU"}},
            ),
            "backends.command",
            "no method runs on 'command'",
        ),
        (set_key(TWO, "backends.relax.image", {"none": "no container"}), "backends.relax.image", ""),
        (set_key(TWO, "backends.relax.colour", 1), "backends.relax.colour", "unknown key"),
        (set_key(TWO, "methods.gigpo@Relax", {}), "methods.gigpo@Relax", "invalid name"),
    ],
)
def test_a_backend_that_disagrees_with_its_name_is_refused(tmp_path, manifest, where, says):
    """An @backend that is not declared, a label unlike its block, a repeated or unused backend, a framework
    backend without a container, an unknown key: one line naming the file and the field."""
    message = _error(tmp_path, manifest)
    assert f"manifests/demo.yaml: {where}" in message and says in message, message


def test_the_study_model_must_suit_every_backend_in_use(tmp_path):
    """A builtin study with a verl-agent method: the config-built model is refused for verl-agent, naming model."""
    builtin = set_key(
        set_key(set_key(BASE, "backend", {"name": "builtin"}), "image", {"none": "CPU"}),
        "model",
        {"name": "tiny-gpt2", "config": {"d_model": 16}},
    )
    verl = {"backend": BASE["backend"], "image": BASE["image"]}
    message = _error(
        tmp_path, set_key(set_key(builtin, "backends", {"verl-agent": verl}), "methods.grpo@verl-agent", {})
    )
    assert "demo.yaml: model: the verl-agent backend (backends.verl-agent) takes a hub model" in message


def test_a_command_template_of_a_further_backend_is_checked_at_load(tmp_path):
    """A command template that would hand a value to a shell is refused under backends.<name>, naming the field."""
    command = {"backend": {"name": "command", "command": "bash -c 'train --note {train.note}'"}, "image": BASE["image"]}
    message = _error(tmp_path, set_key(set_key(BASE, "backends", {"command": command}), "methods.grpo@command", {}))
    assert (
        "demo.yaml: backends.command.backend.command: train --note {train.note} (word 3) puts a placeholder" in message
    )


def test_method_name_pattern_is_the_schemas():
    """The schema's method-name pattern and agentrepro.placement.METHOD_NAME accept the same names."""
    schema = json.loads(schema_path("manifest.schema.json").read_text())
    pattern = schema["properties"]["methods"]["propertyNames"]["pattern"]
    assert pattern == f"^{METHOD_NAME}$"
    for name in ("grpo", "graph_only", "graphgpo@relax", "graphgpo@verl-agent"):
        assert re.match(pattern, name)
    for name in ("GRPO", "grpo@", "@relax", "grpo@relax@x", "grpo@re lax"):
        assert not re.match(pattern, name)


def test_freeze_pins_every_backend_and_names_each_placeholder(tmp_path):
    """freeze records backends.relax in the lock; its placeholders are refused with their key paths (subprocess)."""
    root = tmp_path / "root"
    root.mkdir()
    write_study(
        root,
        set_key(set_key(TWO, "backends.relax.backend.commit", "TODO-pin"), "backends.relax.image.digest", "TODO-pin"),
    )
    git_commit_all(root)
    refused = run_cli("freeze", "manifests/demo.yaml", cwd=root)
    assert refused.returncode == 2
    assert (
        "backends.relax.backend.commit: placeholder 'TODO-pin'" in refused.stderr
        and "backends.relax.image.digest" in refused.stderr
    )
    write_study(root, TWO)
    git_commit_all(root)
    result = run_cli("freeze", "manifests/demo.yaml", cwd=root)
    assert result.returncode == 0, result.stderr
    lock = json.loads((root / "manifests" / "demo.lock.json").read_text())
    assert lock["resolved"]["backends"] == {
        "relax": {
            "backend": {"name": "relax", "repo": "redai-infra/Relax", "commit": COMMIT_A},
            "image": RELAX["image"],
        }
    }
    assert lock["resolved"]["backend"]["name"] == "verl-agent"
    out = "runs/demo/gigpo@relax/seed0/config.yaml"
    resolved = run_cli(
        "resolve", "manifests/demo.lock.json", "--method", "gigpo@relax", "--seed", "0", "-o", out, cwd=root
    )
    assert resolved.returncode == 0, resolved.stderr
    config = load(root / out)
    assert (config["method"], config["backend"], config["image"], config["resources"]) == (
        "gigpo@relax",
        RELAX["backend"],
        RELAX["image"],
        {**BASE["resources"], "gpus": 2},
    )
    assert config["train"]["estimator"] == "gigpo"
