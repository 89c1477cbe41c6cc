"""Seed lists: VAGEN's dataset seed directives, and the `0-99,10001-10256` ranges of the command line.

`expand_directive(name, n_envs, seed, base_seed=0, spec_idx=0)` reproduces the order of environment seeds
that VAGEN's `AgenticDataset` builds from one spec (before any DataLoader shuffling). The per-spec
generator seed is the first 8 bytes (little-endian) of BLAKE2b-64 over
`f"{base_seed}|{spec_idx}|{name}|seed-{directive}"` (directive = the Python list repr), and the draws
come from `random.Random(that seed)` — a private instance, so no global state is touched:

* `[x]`: `n_envs` draws of `randrange(0, 2**31)` (x only enters the payload string);
* `[lo, hi]`: `[lo] * n_envs` if lo == hi, else `n_envs` draws of `randrange(lo, hi + 1)`;
* `[lo, hi, 1]`: `sample(range(lo, hi + 1), n_envs)` (distinct);
* `[lo, hi, limit > 1]`: repeated `randint(lo, hi)`, skipping values already drawn `limit` times.

Independent of PYTHONHASHSEED and of the CPython version (3.10–3.13).
"""

from __future__ import annotations

import hashlib
import random
import re

from agentrepro.bounds import MAX_SEED, MAX_TASKS
from agentrepro.errors import BadInput


def directive_payload(name: str, seed: list[int], base_seed: int = 0, spec_idx: int = 0) -> str:
    return f"{base_seed}|{spec_idx}|{name}|seed-{list(seed)!r}"


def directive_rng_seed(name: str, seed: list[int], base_seed: int = 0, spec_idx: int = 0) -> int:
    payload = directive_payload(name, seed, base_seed, spec_idx).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(payload, digest_size=8).digest(), "little")


def expand_directive(name: str, n_envs: int, seed: list[int], base_seed: int = 0, spec_idx: int = 0) -> list[int]:
    """The `n_envs` environment seeds of one dataset spec, in the reference's order."""
    where = "seed"
    if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 0:
        raise BadInput(f"n_envs must be a non-negative integer, got {n_envs!r}", where="n_envs")
    if (
        not isinstance(seed, (list, tuple))
        or not 1 <= len(seed) <= 3
        or any(isinstance(v, bool) or not isinstance(v, int) for v in seed)
    ):
        raise BadInput(f"expected [x], [min, max] or [min, max, limit] of integers, got {seed!r}", where=where)
    rng = random.Random(directive_rng_seed(name, list(seed), base_seed, spec_idx))
    if len(seed) == 1:
        return [rng.randrange(0, 2**31) for _ in range(n_envs)]
    lo, hi = seed[0], seed[1]
    if lo > hi:
        raise BadInput(f"min {lo} is greater than max {hi}", where=where)
    if len(seed) == 2:
        return [lo] * n_envs if lo == hi else [rng.randrange(lo, hi + 1) for _ in range(n_envs)]
    limit = seed[2]
    if limit < 1:
        raise BadInput(f"limit must be >= 1, got {limit}", where=where)
    if n_envs > limit * (hi - lo + 1):
        raise BadInput(
            f"{n_envs} seeds cannot be drawn from [{lo}, {hi}] with each used at most {limit} times", where=where
        )
    if limit == 1:
        return rng.sample(range(lo, hi + 1), n_envs)
    counts: dict[int, int] = {}
    out: list[int] = []
    while len(out) < n_envs:
        value = rng.randint(lo, hi)
        if counts.get(value, 0) >= limit:
            continue
        counts[value] = counts.get(value, 0) + 1
        out.append(value)
    return out


def lite_train_seeds(name: str = "Sokoban") -> list[int]:
    """VAGEN-Lite's training seeds: spec `[1, 10000, 1]`, 10000 envs, base seed 0, spec index 0."""
    return expand_directive(name, 10000, [1, 10000, 1])


def lite_val_seeds(name: str = "Sokoban") -> list[int]:
    """VAGEN-Lite's validation seeds: spec `[10001, 10256, 1]`, 256 envs, base seed 0, spec index 0."""
    return expand_directive(name, 256, [10001, 10256, 1])


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_seed_ranges(text: str, *, where: str = "--seeds") -> list[int]:
    """`"0-99,10001-10256"` → [0, …, 99, 10001, …, 10256]: numbers and inclusive ranges, in order."""
    seeds: list[int] = []
    for part in str(text).split(","):
        match = _RANGE.match(part)
        if not match:
            raise BadInput(
                f"expected numbers and ranges like 0-99,10001-10256; cannot read {part.strip()!r}", where=where
            )
        if any(g is not None and len(g) > 10 for g in match.groups()):
            raise BadInput(f"seeds must be integers in [0, {MAX_SEED}]; cannot use {part.strip()[:40]!r}", where=where)
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if hi < lo:
            raise BadInput(f"range {lo}-{hi} runs backwards", where=where)
        if hi > MAX_SEED:
            raise BadInput(f"seeds must be integers in [0, {MAX_SEED}]; {part.strip()!r} goes beyond", where=where)
        if len(seeds) + hi - lo + 1 > MAX_TASKS:
            raise BadInput(f"more than {MAX_TASKS:,} seeds; ask for fewer", where=where)
        seeds.extend(range(lo, hi + 1))
    return seeds
