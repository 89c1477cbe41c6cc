"""Manifest loading: schema errors name the file and key path; YAML errors name the line."""

from __future__ import annotations

import pytest
from helpers import REPO, run_cli
from study_kit import BASE, DELETE, set_key, write_study

from agentrepro.errors import BadInput
from agentrepro.manifest import load_manifest


@pytest.mark.parametrize(
    "study", ["frozenlake-cpu", "graphgpo-alfworld", "vagen-sokoban", "vagen-lite-sokoban", "vagen-lite-frozenlake"]
)
def test_shipped_manifests_load(study):
    """Every manifest shipped in manifests/ is valid against the schema."""
    manifest = load_manifest(REPO / "manifests" / f"{study}.yaml")
    assert manifest["study"] == study


def _error(tmp_path, manifest) -> str:
    path = write_study(tmp_path, manifest)
    with pytest.raises(BadInput) as info:
        load_manifest(path)
    return str(info.value)


def test_wrong_type_names_key_path_and_value(tmp_path):
    """A string where a number belongs gives `file: methods.gigpo.gamma: expected a number, got 'abc'`."""
    message = _error(tmp_path, set_key(BASE, "methods.gigpo.gamma", "abc"))
    assert message.endswith("manifests/demo.yaml: methods.gigpo.gamma: expected a number, got 'abc'")


@pytest.mark.parametrize(
    "dotted, where",
    [
        ("colour", "colour"),
        ("methods.gigpo.gamm", "methods.gigpo.gamm"),
        ("eval.taks", "eval.taks"),
        ("image.tag", "image.tag"),
    ],
)
def test_unknown_key_is_rejected_with_its_path(tmp_path, dotted, where):
    """A misspelt key anywhere is an error naming its full path."""
    message = _error(tmp_path, set_key(BASE, dotted, 1))
    assert f"demo.yaml: {where}: unknown key" in message


def test_missing_required_key(tmp_path):
    """A manifest without `seeds` names the missing key."""
    assert "seeds: missing required key" in _error(tmp_path, set_key(BASE, "seeds", DELETE))


def test_no_image_only_for_the_builtin_and_command_backends(tmp_path):
    """`image: {none: ...}` is refused for a framework backend (verl-agent), naming image."""
    message = _error(tmp_path, set_key(BASE, "image", {"none": "no container"}))
    assert "image.none: only the builtin and command backends may run without a container" in message


def test_builtin_backend_accepts_no_image(tmp_path):
    """The builtin backend with a config-built model needs no image."""
    manifest = set_key(set_key(BASE, "backend", {"name": "builtin"}), "image", {"none": "CPU study"})
    manifest = set_key(manifest, "model", {"name": "tiny-gpt2", "config": {"d_model": 8}})
    assert load_manifest(write_study(tmp_path, manifest))["image"] == {"none": "CPU study"}


def test_claim_must_name_methods(tmp_path):
    """A declared claim naming an unknown method is refused with its index."""
    message = _error(tmp_path, set_key(BASE, "analysis.claims", ["gigpo > ppo"]))
    assert "analysis.claims[0]" in message and "'ppo'" in message


def test_study_must_match_file_name(tmp_path):
    """manifests/demo.yaml must declare study: demo (paths are found by it)."""
    path = write_study(tmp_path)
    path.write_text(path.read_text().replace("study: demo", "study: other"))
    with pytest.raises(BadInput, match="study"):
        load_manifest(path)


def test_yaml_syntax_error_gives_the_line_through_the_cli(tmp_path):
    """A YAML syntax error exits 2 and names the line (run as a subprocess through freeze)."""
    path = write_study(tmp_path)
    lines = path.read_text().splitlines()
    lines.insert(3, "methods: [unclosed")
    path.write_text("\n".join(lines) + "\n")
    result = run_cli("freeze", path, "--root", tmp_path, "--allow-dirty")
    assert result.returncode == 2
    assert "demo.yaml: line" in result.stderr and "YAML syntax error" in result.stderr


def test_builtin_backend_refuses_a_hub_revision(tmp_path):
    """A hub model revision under the builtin backend is refused with the forms it accepts."""
    manifest = set_key(set_key(BASE, "backend", {"name": "builtin"}), "image", {"none": "CPU"})
    message = _error(tmp_path, manifest)
    assert "model.revision: the builtin backend takes a config-built model" in message


def test_invalid_method_name_is_named(tmp_path):
    """A method name that cannot be a path component is named with its key path."""
    message = _error(tmp_path, set_key(BASE, "methods", {"GRPO": {}}))
    assert "methods.GRPO: invalid name 'GRPO'" in message


@pytest.mark.parametrize(
    "value, shown", [("2024-01-01", "'2024-01-01' is a date"), (".nan", "nan is not a finite number")]
)
def test_values_json_cannot_hold_are_refused(tmp_path, value, shown):
    """A YAML date or NaN inside a free-form block is refused with its key path (the lock is JSON)."""
    path = write_study(tmp_path)
    path.write_text(path.read_text().replace("env:\n", f"env:\n  params: {{when: {value}}}\n", 1))
    with pytest.raises(BadInput) as info:
        load_manifest(path)
    assert f"env.params.when: {shown}" in str(info.value)


def test_command_template_that_re_evaluates_is_refused_at_freeze(tmp_path):
    """`freeze` exits 2 naming the manifest and backend.command when a template would hand a value to a shell."""
    manifest = set_key(BASE, "backend", {"name": "command", "command": "bash -c 'train --note {train.note}'"})
    result = run_cli("freeze", write_study(tmp_path, manifest), "--root", tmp_path, "--allow-dirty")
    assert result.returncode == 2
    assert "demo.yaml: backend.command: train --note {train.note} (word 3) puts a placeholder" in result.stderr


def test_equivalence_claims_are_checked_at_load(tmp_path):
    """An equivalence claim on the study's methods loads; a malformed margin is refused naming the claim's index."""
    good = set_key(BASE, "analysis.claims", ["gigpo > grpo", "gigpo == grpo ± 3pp"])
    assert load_manifest(write_study(tmp_path, good))["analysis"]["claims"][1] == "gigpo == grpo ± 3pp"
    message = _error(tmp_path, set_key(BASE, "analysis.claims", ["gigpo > grpo", "gigpo == grpo ± 3%"]))
    assert "analysis.claims[1]" in message and "a == b ± 3pp" in message


def test_deviations_from_the_official_recipe_are_declared_strings(tmp_path):
    """`deviations` takes sentences (the report's summary lists them); anything else names the key path."""
    good = set_key(BASE, "deviations", ["rollout temperature 0.4 instead of 1.0"])
    assert load_manifest(write_study(tmp_path, good))["deviations"] == ["rollout temperature 0.4 instead of 1.0"]
    assert "deviations[0]" in _error(tmp_path, set_key(BASE, "deviations", [""]))
