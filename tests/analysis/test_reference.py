"""Reference YAML validation and the verdict rows with their plain-language reasons."""

import numpy as np
import pandas as pd
import pytest

from agentrepro.analysis.reference import load_reference
from agentrepro.analysis.verdicts import verdicts_table
from agentrepro.errors import BadInput

GOOD = "paper: P\nmetric: success_rate\nvalues:\n  a: {value: 0.88, std: null, seeds: 1, source: 'Table 1', checked: true}\n"


def write(tmp_path, text):
    path = tmp_path / "ref.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text,where",
    [
        (GOOD.replace("metric", "metrik"), "metrik"),
        (GOOD.replace("0.88", "88"), "values.a.value"),
        (GOOD.replace("checked: true", "checked: true, extra: 1"), "values.a.extra"),
        (GOOD.replace("std: null", "std: -1"), "values.a.std"),
        (GOOD.replace("seeds: 1", "seeds: 1.5"), "values.a.seeds"),
        ("kind: a blog post\n" + GOOD, "kind"),
        ("caveats: another recipe\n" + GOOD, "caveats"),
        ("caveats: ['']\n" + GOOD, "caveats"),
        ("caveats: [1]\n" + GOOD, "caveats"),
        ("caveats: ['" + "x" * 1001 + "']\n" + GOOD, "caveats"),
        ("caveats: [" + ", ".join(["a"] * 21) + "]\n" + GOOD, "caveats"),
    ],
)
def test_bad_reference_names_the_key(tmp_path, text, where):
    """Every malformed field is an error naming the file and the key path."""
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as err:
        load_reference(path)
    assert str(path) in str(err.value) and where in str(err.value)


def runs_frame(method, seed_counts, n=128, step=10):
    return pd.DataFrame(
        [
            {"method": method, "seed": s, "step": step, "n": n, "successes": k, "rate": k / n}
            for s, k in enumerate(seed_counts)
        ]
    )


def test_single_run_at_88_percent_says_it_cannot_show_equivalence(tmp_path):
    """One run of 128 tasks at 88% vs a paper 88%: inconclusive, and the reason and notes say why and how many tasks."""
    ref = load_reference(write(tmp_path, GOOD))
    success = np.r_[np.ones(113), np.zeros(15)][None, :]
    table, notes = verdicts_table(runs_frame("a", [113]), {"a": success}, ref, 0.03, 10)
    row = table.iloc[0]
    assert row["verdict"] == "inconclusive" and row["test"] == "wilson"
    assert "one run of 128 tasks cannot show equivalence within 3 pp" in row["reason"]
    assert row["tasks_needed"] > 128 and f"about {row['tasks_needed']} tasks" in row["reason"]
    assert row["needed"] == f"about {row['tasks_needed']:,} tasks"
    assert any("cannot show equivalence" in n for n in notes)


def test_the_reference_is_named_by_its_kind(tmp_path):
    """A reference is a paper unless it says otherwise; an earlier run is called so in reasons and notes."""
    assert load_reference(write(tmp_path, GOOD))["kind"] == "paper"
    ref = load_reference(write(tmp_path, "kind: earlier run\n" + GOOD.replace("checked: true", "checked: false")))
    success = np.r_[np.ones(113), np.zeros(15)][None, :]
    _table, notes = verdicts_table(runs_frame("a", [113]), {"a": success}, ref, 0.03, 10)
    assert any(n.startswith("a: inconclusive against the earlier run's 88.00%") for n in notes)
    assert any(n.startswith("a: the earlier run's value 88.00%") for n in notes)
    assert not any("paper" in n for n in notes)


def test_tasks_needed_says_when_no_number_decides(tmp_path):
    """When the reference's own spread over its seeds dominates, 'tasks needed' says so in words, never a bare dash."""
    text = GOOD.replace("std: null, seeds: 1", "std: 0.2, seeds: 3")
    ref = load_reference(write(tmp_path, text))
    rng = np.random.default_rng(1)
    success = (rng.random((3, 128)) < 0.86).astype(float)
    table, _ = verdicts_table(runs_frame("a", success.sum(1).astype(int).tolist()), {"a": success}, ref, 0.03, 10)
    row = table.iloc[0]
    assert row["test"] == "welch_tost" and row["verdict"] == "inconclusive"
    assert row["needed"] == "undecidable at this reference spread"
    decided = verdicts_table(
        runs_frame("a", [60, 61, 59]), {"a": np.zeros((3, 128))}, load_reference(write(tmp_path, GOOD)), 0.03, 10
    )[0]
    assert decided.iloc[0]["verdict"] == "not_reproduced" and decided.iloc[0]["needed"] == "decided"


def test_many_tasks_and_seeds_reproduce(tmp_path):
    """Three seeds of 4,000 tasks at the paper's rate are reproduced within 3 pp."""
    ref = load_reference(write(tmp_path, GOOD.replace("seeds: 1", "seeds: null")))
    rng = np.random.default_rng(0)
    success = (rng.random((3, 4000)) < 0.88).astype(float)
    runs = runs_frame("a", success.sum(1).astype(int).tolist(), n=4000)
    table, _ = verdicts_table(runs, {"a": success}, ref, 0.03, 10)
    assert table.iloc[0]["verdict"] == "reproduced"
    assert table.iloc[0]["test"] in ("t_over_seeds", "task_clustered")


def test_unchecked_value_and_missing_method_are_noted(tmp_path):
    """checked: false and a reference method we did not run both produce notes, not silent skips."""
    text = (
        GOOD.replace("checked: true", "checked: false")
        + "  b: {value: 0.5, std: null, seeds: null, source: x, checked: true}\n"
    )
    ref = load_reference(write(tmp_path, text))
    success = np.r_[np.ones(113), np.zeros(15)][None, :]
    table, notes = verdicts_table(runs_frame("a", [113]), {"a": success}, ref, 0.03, 10)
    assert list(table["method"]) == ["a"]
    assert any("checked: false" in n for n in notes) and any("'b'" in n for n in notes)


def test_caveats_are_kept_and_a_method_without_a_value_is_said(tmp_path):
    """The reference's caveats are kept as written (none by default), and a method the study evaluated that the
    reference gives no value for is named in a note: no verdict for it, said rather than left out silently."""
    assert load_reference(write(tmp_path, GOOD))["caveats"] == []
    ref = load_reference(write(tmp_path, "caveats: ['Another recipe.', 'Other seeds.']\n" + GOOD))
    assert ref["caveats"] == ["Another recipe.", "Other seeds."]
    runs = pd.concat([runs_frame("a", [113]), runs_frame("b", [100]), runs_frame("c", [90])])
    ones = np.ones((1, 128))
    table, notes = verdicts_table(runs, {"a": ones, "b": ones, "c": ones}, ref, 0.03, 10)
    assert list(table["method"]) == ["a"]
    assert "The paper gives no value for 'b', 'c': no verdict for them." in notes
