"""Framework settings the preflight computes with, given as anything: `preflight` and `command` of the shipped
GraphGPO study exit 0, or 2 in one line naming the field; never a traceback, and never 0 for a value the framework's
key cannot hold (recipes.COMPUTED: the kind of number of the key's composed default at 20bd331, its least value).

The values reach the harness through backend.overrides (any YAML value), backend.ray (the job's head) and, for
Relax, resources.gpus (the recipe's NUM_GPUS, its tensor-parallel size).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers import REPO
from hostile_kit import invoke, record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrepro.backends.verl_agent.recipes import COMPUTED, NULLABLE

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(min_value=-3, max_value=300), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def holds(key: str, value: object) -> bool:
    """Whether `value` is a value of the framework's key the harness can compute with."""
    kind, least = COMPUTED[key]
    if value is None:
        return key in NULLABLE
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        return False
    return math.isfinite(value) and value >= least


def study(work: Path, name: str, change) -> Path:
    """The shipped manifest `name` in `work`, changed by `change(manifest)`."""
    manifest = yaml.safe_load((REPO / "manifests" / f"{name}.yaml").read_text())
    change(manifest)
    (work / "manifests").mkdir()
    shutil.copytree(REPO / "manifests" / "references", work / "manifests" / "references")
    path = work / "manifests" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


def run_both(path: Path, method: str) -> list[tuple[str, int, str]]:
    return [(verb, *invoke(verb, path, "--method", method, "--seed", "0")) for verb in ("preflight", "command")]


@pytest.mark.parametrize("key", sorted(COMPUTED))
@SETTINGS
@given(value=ANY)
def test_an_override_the_harness_computes_with_is_a_number_it_can_hold(key, value):
    """A value the key cannot hold is refused naming backend.overrides.<key>; any other runs the arithmetic."""
    with tempfile.TemporaryDirectory() as tmp:
        path = study(Path(tmp), "graphgpo-alfworld", lambda m: m["backend"].update(overrides={key: value}))
        for verb, status, message in run_both(path, "graphgpo"):
            first = message.strip().splitlines()[0] if message.strip() else ""
            if holds(key, value):
                ok = "Traceback" not in message and status in (0, 2) and (status == 0 or "error" in first)
            else:
                ok = status == 2 and f"backend.overrides.{key}" in first and "Traceback" not in message
            record("overrides", f"verb:{verb}", ok)
            assert ok, f"{verb} with {key}={value!r}: exit {status}: {message[-600:]}"


@pytest.mark.parametrize("key", ["num_cpus", "num_gpus", "worker_ports"])
@SETTINGS
@given(value=ANY)
def test_the_job_heads_numbers_are_positive_integers(key, value):
    with tempfile.TemporaryDirectory() as tmp:
        path = study(Path(tmp), "graphgpo-alfworld", lambda m: m["backend"].update(ray={key: value}))
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        for verb, status, message in run_both(path, "graphgpo"):
            ok = "Traceback" not in message and (
                status in (0, 2) if valid else (status == 2 and f"backend.ray.{key}" in message)
            )
            record("overrides", f"verb:{verb}", ok)
            assert ok, f"{verb} with backend.ray.{key}={value!r}: exit {status}: {message[-600:]}"


@SETTINGS
@given(value=ANY)
def test_relax_gpus_are_a_positive_integer(value):
    """Relax's demands divide by its NUM_GPUS: a value that is not a positive integer is refused, naming it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = study(Path(tmp), "graphgpo-alfworld-relax", lambda m: m["resources"].update(gpus=value))
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        for verb, status, message in run_both(path, "gigpo"):
            ok = "Traceback" not in message and (
                status in (0, 2) if valid else (status == 2 and "resources.gpus" in message)
            )
            record("overrides", f"verb:{verb}", ok)
            assert ok, f"{verb} with resources.gpus={value!r}: exit {status}: {message[-600:]}"
