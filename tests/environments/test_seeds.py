"""Seed directives (VAGEN's AgenticDataset order) and the command line's seed ranges."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers import FIXTURES

from agentrepro.environments.seeds import (
    directive_payload,
    directive_rng_seed,
    expand_directive,
    lite_train_seeds,
    lite_val_seeds,
    parse_seed_ranges,
)
from agentrepro.errors import BadInput

with open(FIXTURES / "vagen" / "seed_lists.jsonl", encoding="utf-8") as fh:
    SPECS = [json.loads(line) for line in fh if line.strip()]


@pytest.mark.parametrize("spec", SPECS, ids=[s["id"] for s in SPECS])
def test_seed_lists_match_reference(spec):
    """Payload, generator seed, count, full-list SHA-256 and the listed seeds equal the reference's."""
    p = spec["params"]
    args = (p["name"], p["seed"], p["base_seed"], p["spec_idx"])
    assert directive_payload(*args) == spec["rng_payload"]
    assert directive_rng_seed(*args) == spec["rng_seed"]
    seeds = expand_directive(p["name"], p["n_envs"], p["seed"], p["base_seed"], p["spec_idx"])
    assert len(seeds) == spec["count"]
    assert hashlib.sha256(",".join(map(str, seeds)).encode()).hexdigest() == spec["sha256_of_comma_joined"]
    if "seeds" in spec:
        assert seeds == spec["seeds"]
    else:
        assert seeds[:50] == spec["seeds_head"] and seeds[-5:] == spec["seeds_tail"]


def test_lite_lists_are_the_yaml_specs():
    """lite_val_seeds/lite_train_seeds are the Sokoban val/train dataset specs of the fixtures."""
    by_id = {s["id"]: s for s in SPECS}
    assert lite_val_seeds() == by_id["Sokoban-val"]["seeds"]
    assert lite_train_seeds()[:50] == by_id["Sokoban-train"]["seeds_head"]
    assert sorted(lite_val_seeds()) == list(range(10001, 10257))
    assert lite_val_seeds("FrozenLake") != lite_val_seeds("Sokoban")  # the name enters the generator seed


def test_limit_directive_respects_limit():
    """`[lo, hi, limit]` never uses a value more than `limit` times, and impossible requests are BadInput."""
    seeds = expand_directive("X", 30, [1, 10, 3])
    assert max(seeds.count(v) for v in set(seeds)) <= 3 and len(seeds) == 30
    with pytest.raises(BadInput):
        expand_directive("X", 31, [1, 10, 3])
    with pytest.raises(BadInput):
        expand_directive("X", 3, [5, 1])
    with pytest.raises(BadInput):
        expand_directive("X", 3, "0-9")


def test_parse_seed_ranges():
    """`0-2,7,10-11` expands in order; malformed or backwards ranges are BadInput naming --seeds."""
    assert parse_seed_ranges("0-2,7, 10-11") == [0, 1, 2, 7, 10, 11]
    for bad in ("", "a-b", "5-1", "1,,2", "-3"):
        with pytest.raises(BadInput, match="--seeds"):
            parse_seed_ranges(bad)
