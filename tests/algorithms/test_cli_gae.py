"""`agentrepro gae` run as a subprocess: fixture parity, file-wide whitening, --no-mask and bad input."""

from __future__ import annotations

import functools
import json
import operator

import numpy as np
from helpers import run_cli

from agentrepro.algorithms import masked_gae, masked_whiten


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


def test_cli_matches_fixture_file(fixtures_dir, tmp_path):
    """One call over masked_gae.jsonl (per-line γ, λ; each sequence whitened alone) reproduces all arrays within 1e-4."""
    src = fixtures_dir / "advantages" / "masked_gae.jsonl"
    out = tmp_path / "out.jsonl"
    proc = run_cli("gae", "--whiten", "--whiten-scope", "sequence", src, "-o", out)
    assert proc.returncode == 0, proc.stderr
    ref = [json.loads(line) for line in src.read_text().splitlines()]
    got = _read(out)
    assert [g["id"] for g in got] == [r["id"] for r in ref]
    for r, g in zip(ref, got):
        assert _rel(g["advantages"], r["advantages"]) < 1e-4, r["id"]
        assert _rel(g["returns"], r["returns"]) < 1e-4, r["id"]


def test_cli_whitens_the_whole_file_together(tmp_path):
    """--whiten (file scope) equals masked_whiten over all sequences' masked tokens at once, not per sequence."""
    seqs = [
        {"id": "a", "rewards": [0, 0, 1], "values": [0.1, 0.2, 0.3], "mask": [1, 0, 1]},
        {"id": "b", "rewards": [0, 2, 0, 0, -1], "values": [0.5, 0.0, 0.2, 0.2, 0.1], "mask": [1, 1, 0, 1, 1]},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(s) + "\n" for s in seqs))
    raw, white = tmp_path / "raw.jsonl", tmp_path / "white.jsonl"
    assert run_cli("gae", "--gamma", "0.99", "--lam", "0.95", src, "-o", raw).returncode == 0
    proc = run_cli("gae", "--gamma", "0.99", "--lam", "0.95", "--whiten", src, "-o", white)
    assert proc.returncode == 0, proc.stderr
    raw_rows, white_rows = _read(raw), _read(white)
    for s, r in zip(seqs, raw_rows):
        a, ret = masked_gae(
            np.array([s["rewards"]], float), np.array([s["values"]], float), np.array([s["mask"]]), 0.99, 0.95
        )
        assert np.allclose(r["advantages"], a[0]) and np.allclose(r["returns"], ret[0])
    flat = masked_whiten(
        np.array([functools.reduce(operator.iadd, (r["advantages"] for r in raw_rows), [])]),
        np.array([functools.reduce(operator.iadd, (s["mask"] for s in seqs), [])]),
    )
    assert np.allclose(functools.reduce(operator.iadd, (w["advantages"] for w in white_rows), []), flat[0])
    assert [w["returns"] for w in white_rows] == [r["returns"] for r in raw_rows]  # returns are never whitened
    alone = masked_whiten(np.array([raw_rows[0]["advantages"]]), np.array([seqs[0]["mask"]]))[0]
    assert not np.allclose(white_rows[0]["advantages"], alone)


def test_cli_no_mask_is_the_unmasked_gae(tmp_path):
    """--no-mask ignores (and does not require) `mask`."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "rewards": [0, 1], "values": [0.5, 0.25]}) + "\n")
    out = tmp_path / "out.jsonl"
    proc = run_cli("gae", "--gamma", "1", "--lam", "1", "--no-mask", src, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert _read(out)[0]["advantages"] == [0.5, 0.75]


def test_cli_bad_lines_exit_2_naming_the_line(tmp_path):
    """Unequal lengths, a non-binary mask, or a missing γ stop the command with the line number and no output."""
    good = {"id": "a", "rewards": [0, 1], "values": [0, 0], "mask": [1, 1]}
    out = tmp_path / "out.jsonl"
    for bad, message in (
        ({"values": [0]}, "lengths 2, 1, 2"),
        ({"mask": [1, 2]}, "mask[1] must be 0 or 1"),
        ({"rewards": [0, "x"]}, "rewards[1] must be a finite number"),
    ):
        src = tmp_path / "in.jsonl"
        src.write_text(json.dumps(good) + "\n" + json.dumps({**good, **bad}) + "\n")
        proc = run_cli("gae", "--gamma", "1", "--lam", "1", src, "-o", out)
        assert proc.returncode == 2 and f"{src}: line 2: " in proc.stderr and message in proc.stderr, proc.stderr
        assert not out.exists()
    src.write_text(json.dumps(good) + "\n")
    proc = run_cli("gae", "--lam", "1", src, "-o", out)
    assert proc.returncode == 2 and "line 1: no --gamma given" in proc.stderr
