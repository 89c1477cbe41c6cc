"""agentrepro.layout: a study's paths and the run-file names."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrepro import layout
from agentrepro.errors import BadInput


def test_a_slug_lives_in_manifests_under_the_root(tmp_path):
    """A slug names manifests/<slug>.yaml; the lock sits beside it; runs, analysis, reports and logs by slug."""
    study = layout.locate("s1", tmp_path)
    assert study.name == "s1" and study.manifest == tmp_path / "manifests" / "s1.yaml"
    assert study.lock == tmp_path / "manifests" / "s1.lock.json"
    assert study.reference("references/p.yaml") == tmp_path / "manifests" / "references" / "p.yaml"
    assert study.run_dir("grpo", 2) == tmp_path / "runs" / "s1" / "grpo" / "seed2"
    assert (study.analysis, study.reports, study.log("analyze.log")) == (
        tmp_path / "analysis" / "s1",
        tmp_path / "reports" / "s1",
        tmp_path / "logs" / "s1" / "analyze.log",
    )


def test_a_manifest_path_is_the_study_home(tmp_path):
    """A manifest path outside manifests/: lock and reference beside it, outputs still under the root by slug."""
    study = layout.locate("studies/x/wf-home.yaml", tmp_path)
    assert study.name == "wf-home" and study.manifest == Path("studies/x/wf-home.yaml")
    assert study.lock == Path("studies/x/wf-home.lock.json")
    assert study.reference("references/r.yaml") == Path("studies/x/references/r.yaml")
    assert study.run_dir("m", 0) == tmp_path / "runs" / "wf-home" / "m" / "seed0"


@pytest.mark.parametrize("bad", ["../up", "a b", ""])
def test_a_study_that_is_neither_slug_nor_manifest_is_bad_input(bad):
    """Anything but a slug or a .yaml path is BadInput naming STUDY."""
    with pytest.raises(BadInput, match="STUDY"):
        layout.locate(bad)


def test_run_paths_carry_the_step(tmp_path):
    """eval/step<N>/outcomes.jsonl, batches/step<N>.jsonl; evaluation folders on disk are listed by step."""
    run = tmp_path / "run"
    assert layout.outcomes_path(run, 7) == run / "eval" / "step7" / "outcomes.jsonl"
    assert layout.batch_dump(run, 3) == run / "batches" / "step3.jsonl"
    assert layout.outcomes_path("runs/s/{method}/seed{seed}", "{step}") == Path(
        "runs/s/{method}/seed{seed}/eval/step{step}/outcomes.jsonl"
    )
    for step in (10, 2, 0):
        layout.eval_dir(run, step).mkdir(parents=True)
    (run / "eval" / "stepx").mkdir()
    assert [s for s, _ in layout.evaluations_on_disk(run)] == [0, 2, 10]


def test_run_directories_on_disk(tmp_path):
    """Only runs/<study>/<method>/seed<k>/ folders count, sorted by method then seed."""
    study = layout.locate("s", tmp_path)
    for method, seed in (("b", 1), ("a", 0), ("a", 3)):
        study.run_dir(method, seed).mkdir(parents=True)
    (study.runs / "a" / "notes").mkdir()
    assert [(m, s) for m, s, _ in study.run_dirs_on_disk()] == [("a", 0), ("a", 3), ("b", 1)]
