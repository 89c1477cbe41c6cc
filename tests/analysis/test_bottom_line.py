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
