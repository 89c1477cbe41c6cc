"""`agentrepro analyze` run as a subprocess, as a user would, on synthetic outcome files and a study tree."""

import json

import numpy as np
import pandas as pd
from analysis_synth import make_study, outcome_rows, write_jsonl
from helpers import run_cli


def test_one_run_at_88_percent_says_it_cannot_show_equivalence(tmp_path):
    """--outcomes with a reference: exit 0, the verdict is inconclusive and the output says why and how many tasks."""
    succ = np.r_[np.ones(113, int), np.zeros(15, int)]
    a = write_jsonl(tmp_path / "a.jsonl", outcome_rows("x", "ours", 0, 100, succ))
    b = write_jsonl(
        tmp_path / "b.jsonl", outcome_rows("x", "base", 0, 100, np.roll(succ, 40) * (np.arange(128) % 4 != 0))
    )
    ref = tmp_path / "ref.yaml"
    ref.write_text(
        "paper: P\nmetric: success_rate\nvalues:\n  ours: {value: 0.8828, std: null, seeds: 1, source: 'Table 2', checked: true}\n"
    )
    res = run_cli(
        "analyze",
        "--outcomes",
        a,
        b,
        "--reference",
        ref,
        "--tolerance-pp",
        "3",
        "--claim",
        "ours > base",
        "--out",
        tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    verdicts = pd.read_csv(tmp_path / "out" / "verdicts.csv")
    assert list(verdicts.columns[:12]) == [
        "method",
        "paper",
        "paper_std",
        "ours",
        "delta",
        "ci90_lo",
        "ci90_hi",
        "ci95_lo",
        "ci95_hi",
        "tolerance",
        "verdict",
        "tasks_needed",
    ]
    row = verdicts.iloc[0]
    assert row["verdict"] == "inconclusive" and row["tasks_needed"] > 128
    assert "one run of 128 tasks cannot show equivalence within 3 pp" in row["reason"]
    analysis = json.loads((tmp_path / "out" / "analysis.json").read_text())
    assert any("cannot show equivalence" in n for n in analysis["notes"])
    claims = pd.read_csv(tmp_path / "out" / "claims.csv")
    assert claims.iloc[0]["method_a"] == "ours" and claims.iloc[0]["delta"] > 0
    paired = pd.read_csv(tmp_path / "out" / "paired.csv")
    assert list(paired.columns[:14]) == [
        "method_a",
        "method_b",
        "seed",
        "step",
        "n_tasks",
        "both",
        "a_only",
        "b_only",
        "neither",
        "delta",
        "ci_lo",
        "ci_hi",
        "mcnemar_p",
        "p_holm",
    ]


def test_study_mode(tmp_path):
    """`agentrepro analyze STUDY --root DIR` analyses a study tree and prints the output directory."""
    make_study(tmp_path, n_tasks=20)
    res = run_cli("analyze", "toy", "--root", tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "analysis" / "toy" / "OUTPUTS.sha256").is_file()
    assert res.stdout.strip().endswith("analysis/toy")


def test_bad_input_exits_2_naming_file_and_line_and_writes_nothing(tmp_path):
    """A duplicated key exits 2 with one line naming the file and lines; no output directory appears."""
    rows = outcome_rows("x", "m", 0, 1, [1, 0, 1])
    path = write_jsonl(tmp_path / "dup.jsonl", [*rows, rows[0]])
    res = run_cli("analyze", "--outcomes", path, "--out", tmp_path / "out")
    assert res.returncode == 2
    assert str(path) in res.stderr and "line 1" in res.stderr and "line 4" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    res = run_cli("analyze", "--outcomes", empty, "--out", tmp_path / "out")
    assert res.returncode == 2 and "empty outcomes file" in res.stderr and str(empty) in res.stderr
    res = run_cli("analyze", "--outcomes", path)
    assert res.returncode == 2 and "--out" in res.stderr


def test_equivalence_claim_across_backends(tmp_path):
    """--claim "a@x == a@y ± 3pp" writes the claim to claims.csv with its verdict, per seed and across seeds."""
    rng = np.random.default_rng(5)
    files = []
    for seed in (0, 1):
        ref = (rng.random(500) < 0.6).astype(int)
        port = np.where(rng.random(500) < 0.02, 1 - ref, ref)
        files += [
            write_jsonl(tmp_path / f"v{seed}.jsonl", outcome_rows("x", "graphgpo@verl-agent", seed, 10, ref)),
            write_jsonl(tmp_path / f"r{seed}.jsonl", outcome_rows("x", "graphgpo@relax", seed, 10, port)),
        ]
    res = run_cli(
        "analyze",
        "--outcomes",
        *files,
        "--claim",
        "graphgpo@relax == graphgpo@verl-agent ± 3pp",
        "--out",
        tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    claims = pd.read_csv(tmp_path / "out" / "claims.csv", dtype={"seed": str})
    assert claims["seed"].tolist() == ["0", "1", "all"]
    assert claims["verdict"].tolist() == ["reproduced"] * 3 and claims["n_tasks"].tolist() == [500] * 3
    res = run_cli(
        "analyze",
        "--outcomes",
        *files,
        "--claim",
        "graphgpo@relax == graphgpo@verl-agent ± 3%",
        "--out",
        tmp_path / "o2",
    )
    assert res.returncode == 2 and "--claim: claim 'graphgpo@relax == graphgpo@verl-agent ± 3%': expected" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "o2").exists()
