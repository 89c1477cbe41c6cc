"""The manifest schema's backend part is generated from each backend's own declarations (backends/schema.py)."""

from __future__ import annotations

import copy
import json

import pytest
from helpers import REPO

from agentrepro import schema
from agentrepro.backends import REGISTRY
from agentrepro.backends import schema as generator
from agentrepro.errors import BadInput
from agentrepro.manifest.loading import check_manifest
from agentrepro.schema import SCHEMA_DIR

MANIFEST = SCHEMA_DIR / "manifest.schema.json"


def shipped(name: str) -> dict:
    from agentrepro.reading import load_yaml

    return load_yaml(REPO / "manifests" / f"{name}.yaml")


def test_the_schema_file_is_what_the_generator_writes():
    """workflow/schemas/manifest.schema.json equals `python -m agentrepro.backends.schema`'s output."""
    assert MANIFEST.read_text(encoding="utf-8") == schema.dump(generator.render(schema.load("manifest.schema.json")))


def test_each_backend_takes_exactly_the_keys_it_declares():
    """For every registered backend the schema lists exactly its block's keys, and its image and model forms."""
    defs = schema.load("manifest.schema.json")["$defs"]
    rules = {rule["if"]["properties"]["name"]["const"]: rule["then"] for rule in defs["backend"]["allOf"]}
    forms = {
        rule["if"]["properties"]["backend"]["properties"]["name"]["const"]: rule["then"]["properties"]
        for rule in defs["backend_forms"]["allOf"]
    }
    assert sorted(rules) == REGISTRY.names() == sorted(forms)
    for name, cls in REGISTRY.classes().items():
        assert set(rules[name]["properties"]) == set(cls.block.keys) and rules[name]["additionalProperties"] is False
        image = {"required": "image_container", "optional": "image_or_none", "never": "image_none"}[cls.container]
        assert forms[name]["image"]["$ref"].endswith(image)
        assert forms[name]["model"]["$ref"].endswith(generator.MODEL_DEFS[cls.model_forms])


def test_a_stale_copy_is_rewritten(tmp_path):
    """`python -m agentrepro.backends.schema FILE` restores a schema whose backend part was edited by hand."""
    stale = json.loads(MANIFEST.read_text(encoding="utf-8"))
    stale["$defs"]["backend"]["properties"]["name"]["enum"].append("ghost")
    del stale["$defs"]["placement_forms"]
    path = tmp_path / "manifest.schema.json"
    path.write_text(json.dumps(stale))
    assert generator.main([str(path)]) == 0
    assert path.read_text(encoding="utf-8") == MANIFEST.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "key, value",
    [
        ("python", "python3"),
        ("entry", "main"),
        ("env_name", "alfworld"),
        ("alfworld_data", "/data"),
        ("command", "python x.py"),
    ],
)
def test_a_key_verl_agent_does_not_declare_is_refused_at_load(key, value):
    """A verl-agent block with a key another backend takes (or that none takes) is refused when the manifest is
    loaded, naming backend.<key> and the keys verl-agent takes."""
    manifest = copy.deepcopy(shipped("graphgpo-alfworld"))
    manifest["backend"][key] = value
    with pytest.raises(BadInput, match=rf"m\.yaml: backend\.{key}: unknown key \(allowed: .*overrides"):
        check_manifest(manifest, path="m.yaml")
