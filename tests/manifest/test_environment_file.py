"""environment.yml (for conda users) asks for the same packages and lower bounds as pyproject.toml."""

from __future__ import annotations

import re

import pytest
import yaml
from helpers import REPO

tomllib = pytest.importorskip("tomllib", reason="Python 3.11's tomllib reads pyproject.toml")


def _requirements() -> tuple[dict[str, str], list[str]]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    found = {}
    for spec in conda + [p for p in pip if not p.startswith("-e")]:
        match = re.match(r"^([A-Za-z0-9_.-]+)\s*(>=|=)?\s*(.*)$", spec)
        assert match, spec
        name, _, bound = match.groups()
        found[name.lower()] = bound
    return found, pip


def test_environment_matches_pyproject():
    """Every pyproject dependency is in environment.yml with the same lower bound, and the package is installed with its test, serving and vision extras."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found, pip = _requirements()
    for dep in project["dependencies"]:
        name, bound = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*(\S+)$", dep).groups()
        assert found.get(name.lower()) == bound, f"environment.yml: {name} should be >={bound}"
    assert (
        "-e .[test,serving,vision]" in pip
    )  # as the Makefile installs it: the served evaluator's tests need the serving extra, the image tests the vision one
    python = project["requires-python"].removeprefix(">=")
    assert tuple(map(int, found["python"].split("."))) >= tuple(map(int, python.split(".")))
