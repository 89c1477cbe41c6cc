"""agentrepro.schema: the one loader of the JSON Schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrepro import schema
from agentrepro.errors import Failure


def test_schemas_are_found_in_one_folder_and_a_missing_one_is_an_error():
    """Every shipped schema is found through the package; an unknown one is a Failure, never a skipped check."""
    repo_schemas = Path(__file__).resolve().parents[1] / "workflow" / "schemas"
    for file in repo_schemas.glob("*.schema.json"):
        assert schema.schema_path(file.name).read_bytes() == file.read_bytes()
    with pytest.raises(Failure, match=r"no-such.schema.json: schema not found"):
        schema.schema_path("no-such.schema.json")
