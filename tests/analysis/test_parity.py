"""Parity: advantages recomputed from batch dumps with agentrepro.algorithms match or are flagged."""

import json

import yaml

from agentrepro.analysis.parity import parity_checks


def step_rows():
    rows = []
    for group in range(2):
        for traj, (success, turns) in enumerate([(1, 1), (0, 3), (1, 2)]):
            for turn in range(turns):
                last = turn == turns - 1
                rows.append(
                    {
                        "group": group,
                        "traj": f"{group}-{traj}",
                        "turn": turn,
                        "state": f"s{turn}",
                        "next_state": "success" if (last and success) else f"s{turn + 1}",
                        "reward": 10.0 * success * last,
                        "episode_reward": 10.0 * success,
                        "valid": True,
                        "success": bool(success),
                    }
                )
    return rows


def make_run(tmp_path, estimator="grpo", perturb=False):
    from agentrepro.algorithms import StepBatch, estimate

    run = tmp_path / "runs" / "s" / "m" / "seed0"
    (run / "batches").mkdir(parents=True)
    rows = step_rows()
    adv = estimate(StepBatch.from_rows(rows), "grpo").advantage
    for r, a in zip(rows, adv):
        r["advantage"] = float(a)
    if perturb:
        rows[0]["advantage"] += 0.01
    (run / "batches" / "step3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "resolved_config.yaml").write_text(
        yaml.safe_dump({"train": {"estimator": estimator, "gamma": 0.95, "omega": 0.1}})
    )
    return run


def test_no_dumps_is_not_run_with_reason(tmp_path):
    """Without dumps the check is not_run and says so."""
    (tmp_path / "r").mkdir()
    [check] = parity_checks([tmp_path / "r"])
    assert check["status"] == "not_run" and "no runs/" in check["detail"]


def test_matching_dump_passes_and_options_are_filtered(tmp_path):
    """A dump written with the estimator's own advantages passes; options GRPO does not take are dropped."""
    [check] = parity_checks([make_run(tmp_path)])
    assert check["status"] == "pass", check


def test_perturbed_dump_fails(tmp_path):
    """One advantage off by 0.01 is a failure with the size of the difference."""
    [check] = parity_checks([make_run(tmp_path, perturb=True)])
    assert check["status"] == "fail" and "0.01" in check["detail"]


def test_unknown_estimator_is_not_run(tmp_path):
    """An estimator without a step-row implementation (ppo) cannot be checked: not_run with the reason."""
    [check] = parity_checks([make_run(tmp_path, estimator="ppo")])
    assert check["status"] == "not_run" and "ppo" in check["detail"]


def test_float32_artefacts_of_the_reference_are_set_apart_and_reported(tmp_path):
    """The reference's float32 artefact (edge_cases.jsonl zero_variance_fp32_artifact: six rows scoring 9.9 get
    −0.4664 where the exact answer is 0) passes the certificate with those rows counted apart, and named in the detail;
    the same rows shifted by 0.01 outside such a group would fail (test_perturbed_dump_fails)."""
    from pathlib import Path

    from agentrepro.analysis.parity import certificate

    fixtures = Path(__file__).parents[1] / "fixtures" / "advantages" / "edge_cases.jsonl"
    case = next(
        c
        for c in map(json.loads, fixtures.read_text().splitlines())
        if c["case"] == "zero_variance_fp32_artifact"
        and c["params"]["estimator"] == "grpo"
        and c["params"]["norm"] == "std"
    )
    assert all(e.get("fp32_artifact") for e in case["expected"])
    run = tmp_path / "runs" / "s" / "grpo" / "seed0"
    (run / "batches").mkdir(parents=True)
    rows = [{**r, "advantage": e["advantage"]} for r, e in zip(case["rows"], case["expected"])]
    (run / "batches" / "step1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "resolved_config.yaml").write_text(yaml.safe_dump({"train": {"estimator": "grpo", "invalid_penalty": 0.1}}))
    [entry] = certificate([run])
    assert entry["status"] == "pass" and entry["float32_artefacts"]["rows"] == len(rows), entry
    assert f"{len(rows)} rows of zero-variance groups" in entry["detail"] and "0.466" in entry["detail"]
