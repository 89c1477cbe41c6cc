"""The parity quirks: CPython's PYTHONHASHSEED=0 string hash and the reference's seeding of generators."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pytest

from agentrepro.environments.quirks import reference_generators, reference_str_hash, retry_seed, siphash13


def test_worked_examples_from_fixture_readme():
    """The README's worked examples: hash('10001') and the retry chains of seeds 20 and 87."""
    assert reference_str_hash("10001") == -1907494483064011793
    assert retry_seed(10001) == 1108098065
    assert retry_seed(20) == 3040370273
    assert retry_seed(87) == 389883687 and retry_seed(389883687) == 3337380695


@pytest.mark.skipif(sys.version_info < (3, 11), reason="CPython < 3.11 hashes str with SipHash-2-4")
def test_matches_cpython_hash_with_pythonhashseed_zero():
    """Our SipHash-1-3 equals `hash(str)` of a real CPython process run with PYTHONHASHSEED=0 (all lengths 0-20)."""
    rng = random.Random(0)
    texts = (
        ["", "0", "7", "10001", "4294967295"]
        + [str(rng.randrange(10**k)) for k in range(1, 21)]
        + ["".join(rng.choice("abcXYZ019 ") for _ in range(n)) for n in range(21)]
    )
    code = "import sys, json; print(json.dumps([hash(t) for t in json.loads(sys.stdin.read())]))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=__import__("json").dumps(texts),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        check=True,
    )
    expected = __import__("json").loads(proc.stdout)
    assert [reference_str_hash(t) for t in texts] == expected


def test_siphash13_differs_from_key_change():
    """The key enters the hash (a non-zero key gives another value), so the zero key is a real choice."""
    assert siphash13(b"10001") != siphash13(b"10001", k0=1)


def test_reference_generators_equal_global_seeding():
    """Private generators draw exactly what `random.seed(s)` + `np.random.seed(s)` globals would."""
    for seed in (0, 87, 3337380695):
        rng, nprng = reference_generators(seed)
        state_py, state_np = random.getstate(), np.random.get_state()
        try:
            random.seed(seed)
            np.random.seed(seed)
            expected = (
                [random.random() for _ in range(5)],
                random.sample(range(4), 1),
                np.random.randint(17, size=5).tolist(),
            )
        finally:
            random.setstate(state_py)
            np.random.set_state(state_np)
        got = ([rng.random() for _ in range(5)], rng.sample(range(4), 1), nprng.randint(17, size=5).tolist())
        assert got == expected
