"""agentrepro.layout: a study's paths, the run-file names, the evaluated steps, the schemas, the config hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrepro import layout
from agentrepro.backends.runconfig import write_resolved_config
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import sha256_json


def test_a_slug_lives_in_manifests_under_the_root(tmp_path):
    """A slug names manifests/<slug>.yaml; the lock sits beside it; runs, analysis, reports and logs by slug."""
    study = layout.locate("s1", tmp_path)
    assert study.name == "s1" and study.manifest == tmp_path / "manifests" / "s1.yaml"
    assert study.lock == tmp_path / "manifests" / "s1.lock.json"
    assert study.reference("references/p.yaml") == tmp_path / "manifests" / "references" / "p.yaml"
    assert study.run_dir("grpo", 2) == tmp_path / "runs" / "s1" / "grpo" / "seed2"
    assert (study.analysis, study.reports, study.log("analyze.log")) == (
        tmp_path / "analysis" / "s1", tmp_path / "reports" / "s1", tmp_path / "logs" / "s1" / "analyze.log")


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
    assert layout.outcomes_path("runs/s/{method}/seed{seed}", "{step}") == Path("runs/s/{method}/seed{seed}/eval/step{step}/outcomes.jsonl")
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


def test_evaluated_steps_every_and_last():
    """0 is always evaluated, then every `every` steps, then the last step even off the grid."""
    assert layout.evaluated_steps(150, {"every": 50, "checkpoint": "last"}) == [0, 50, 100, 150]
    assert layout.evaluated_steps(200, {"every": 25}) == [0, 25, 50, 75, 100, 125, 150, 175, 200]
    assert layout.evaluated_steps(7, {"every": 3}) == [0, 3, 6, 7]
    assert layout.evaluated_steps(5, {}) == [0, 5]


def test_evaluated_steps_fixed_checkpoint_and_all():
    """An integer or list adds those steps only; `all` adds every checkpoint_every-th step (else every step) and the last."""
    assert layout.evaluated_steps(10, {"checkpoint": 4}) == [0, 4]
    assert layout.evaluated_steps(10, {"checkpoint": [3, 9]}) == [0, 3, 9]
    assert layout.evaluated_steps(10, {"checkpoint": "all"}, checkpoint_every=4) == [0, 4, 8, 10]
    assert layout.evaluated_steps(3, {"checkpoint": "all"}) == [0, 1, 2, 3]
    assert layout.evaluated_steps(0, {"every": 5}) == [0]


@pytest.mark.parametrize("block, where", [({"checkpoint": 11}, "eval.checkpoint"), ({"checkpoint": "best"}, "eval.checkpoint"),
                                          ({"every": 0}, "eval.every"), ({"every": True}, "eval.every")])
def test_evaluated_steps_rejects_bad_values(block, where):
    """A checkpoint beyond training, an unknown name or a non-positive period is an error naming the key."""
    with pytest.raises(BadInput, match=rf"m\.yaml: {where}"):
        layout.evaluated_steps(10, block, path="m.yaml")


def test_checkpoint_steps_of_a_run_config():
    """A run config's train.steps, train.checkpoint_every and eval block give its checkpoint steps."""
    config = {"train": {"steps": 6, "checkpoint_every": 2}, "eval": {"checkpoint": "all"}}
    assert layout.checkpoint_steps(config) == [0, 2, 4, 6]
    with pytest.raises(BadInput, match="train.steps"):
        layout.checkpoint_steps({"train": {"steps": -1}})


def test_schemas_are_found_in_one_folder_and_a_missing_one_is_an_error():
    """Every shipped schema is found through the package; an unknown one is a Failure, never a skipped check."""
    repo_schemas = Path(__file__).resolve().parents[1] / "workflow" / "schemas"
    for schema in repo_schemas.glob("*.schema.json"):
        assert layout.schema_path(schema.name).read_bytes() == schema.read_bytes()
    with pytest.raises(Failure, match="no-such.schema.json: schema not found"):
        layout.schema_path("no-such.schema.json")


def test_config_hash_of_a_document_and_of_its_file(tmp_path):
    """resolved_config.yaml's header hash, config_sha256 of the document and config_file_sha256 of the file agree."""
    config = {"study": "s", "train": {"lr": 1e-6, "steps": 3}, "eval": {"task_panel": [{"task_id": "t-1"}]}}
    digest = write_resolved_config(tmp_path, config)
    assert digest == layout.config_sha256(config) == sha256_json(config)
    assert layout.config_file_sha256(tmp_path / layout.RunFiles.RESOLVED_CONFIG) == digest
