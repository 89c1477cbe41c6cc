"""The bottom line: what was compared, what held, what did not and what was not checked, in four sentences."""

from agentrepro.analysis.bottom_line import bottom_line


def doc(**over):
    """A small analysis.json object: two methods × 3 seeds, learning, one claim, one verdict against an earlier run."""
    tables = {
        "runs": [{"method": m, "seed": s, "step": 100, "n": 128} for m in ("grpo", "gigpo") for s in range(3)],
        "methods": [{"method": m, "step": 100, "seeds": 3} for m in ("grpo", "gigpo")],
        "learning": [
            {
                "method": "grpo",
                "seed": "all",
                "step": 100,
                "baseline_step": 0,
                "delta": 0.16,
                "p_holm": 0.0004,
                "family": "learning@100/all",
            },
            {
                "method": "gigpo",
                "seed": "all",
                "step": 100,
                "baseline_step": 0,
                "delta": 0.02,
                "p_holm": 0.4,
                "family": "learning@100/all",
            },
        ],
        "claims": [
            {
                "claim": "gigpo > grpo",
                "kind": "ordering",
                "seed": "all",
                "holds": False,
                "delta": 0.012,
                "p_holm": 0.479,
            }
        ],
        "verdicts": [
            {
                "method": "gigpo",
                "verdict": "inconclusive",
                "delta": -0.09,
                "tolerance": 0.05,
                "checked": False,
                "needed": "undecidable at this reference spread",
            }
        ],
        "paired": [],
        "categories": [],
        "families": [],
    }
    out = {
        "settings": {"alpha": 0.05, "final_step": 100, "reference": {"paper": "the probe", "kind": "earlier run"}},
        "tables": tables,
        "certificate": [],
        "parity": [],
        "provenance": {"lock": {"task_panel": [{"task_id": f"t{i}"} for i in range(128)]}},
    }
    out.update(over)
    return out


def test_four_sentences_say_what_held_and_what_did_not():
    """Learning, claims and verdicts land in Held or Did not hold with their numbers; the unchecked reference is named."""
    compared, held, failed, unchecked = bottom_line(doc())
    assert compared.startswith(
        "Compared: 2 method(s) (grpo and gigpo) over 3 seed(s) on 128 frozen task(s) at step 100"
    )
    assert "against an earlier run (the probe)" in compared and "1 claim(s) declared before running" in compared
    assert held == "Held: grpo beat its step 0 (+16.0 pp; Holm p < 0.05 in family learning@100/all)."
    assert "gigpo did not beat its step 0 (+2.0 pp, Holm p 0.400)" in failed
    assert "the claim 'gigpo > grpo' is not supported (+1.2 pp, Holm p 0.479)" in failed
    assert (
        "gigpo is inconclusive against the earlier run (-9.0 pp; tasks needed: undecidable at this reference spread)"
        in failed
    )
    assert unchecked.startswith("Not checked: the reference is an earlier run, not a paper")
    assert "implementation parity (no run dumped its step rows: train.step_rows)" in unchecked
    assert "the earlier run's values were not checked against their source" in unchecked


def test_every_method_beating_step_0_and_a_passing_certificate():
    """When every method beats its step 0 the sentence says so once; a certificate that passed is held, not unchecked."""
    d = doc(certificate=[{"method": "grpo", "seed": 0, "step": 1, "status": "pass"}])
    d["tables"]["learning"][1].update(delta=0.18, p_holm=0.0001)
    _, held, _, unchecked = bottom_line(d)
    assert held.startswith("Held: every method beat its step 0 (+16.0 pp to +18.0 pp;")
    assert "matched the reference estimator in 1 dumped batch(es)" in held and "implementation parity" not in unchecked


def _run(packages: list[str], commit: str, changed: list[str] | None) -> dict:
    from agentrepro.fileio import sha256_json

    harness = {"commit": commit, "dirty": False}
    if changed is not None:
        harness["changed_since_lock"] = changed
    software = {
        "harness": harness,
        "python": {"version": "3.11.7", "packages": packages, "packages_sha256": sha256_json(packages)},
    }
    return {"attempts": [{"stage": "train", "software": software}]}


def test_training_jobs_that_ran_other_code_than_the_lock_are_not_checked_on_page_1():
    """Jobs at the lock's commit with its packages say nothing; jobs after a commit that changed code, or with another
    numpy, are counted, with what the most of them ran; a job that recorded nothing is counted too."""
    from agentrepro.fileio import sha256_json

    packages = ["numpy==2.2.0", "torch==2.5.0"]
    lock = {
        "task_panel": [{"task_id": "t0"}],
        "harness": {"commit": "a" * 40, "dirty": False},
        "python": {"version": "3.11.7", "packages": packages, "packages_sha256": sha256_json(packages)},
    }
    same = [_run(packages, "a" * 40, None), _run(packages, "b" * 40, [])]  # the second: only the lock committed since
    assert "the code the lock names" not in bottom_line(doc(provenance={"lock": lock, "runs": same}))[3]
    other = [*same, _run(packages, "c" * 40, ["src/x.py"]), _run(packages, "c" * 40, ["src/x.py"]), {"attempts": []}]
    unchecked = bottom_line(doc(provenance={"lock": lock, "runs": other}))[3]
    assert (
        "that the training jobs ran the code the lock names: 3 of 5 did not (2 ran harness commit cccccccccccc "
        "(the lock: aaaaaaaaaaaa, 1 file(s) changed: src/x.py);"
    ) in unchecked, unchecked
