"""agentrepro.planning: the DAG's shape from a manifest, and the lock check before any job runs."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import REPO, run_cli
from wfkit import TINY

from agentrepro import planning as plan
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_json
from agentrepro.layout import lock_path
from agentrepro.reading import load_yaml


def test_job_resources_from_manifest():
    """gpus/runtime_min/mem_mb/cpus become Snakemake's gpu/runtime/mem_mb/cpus_per_task, plus the partition."""
    resources, threads = plan.job_resources(
        {"gpus": 2, "cpus": 8, "runtime_min": 1440, "mem_mb": 200000, "partition": "h200"}
    )
    assert resources == {
        "gpu": 2,
        "runtime": 1440,
        "runtime_per_retry": 0,
        "mem_mb": 200000,
        "mem_mb_per_retry": 0,
        "cpus_per_task": 8,
        "slurm_partition": "h200",
    }
    assert threads == 8
    with pytest.raises(BadInput, match=r"resources.gpus"):
        plan.job_resources({"gpus": -1})


def test_a_training_that_saves_on_the_signal_asks_for_it_before_its_time_limit():
    """Five minutes before the limit, a tenth of a shorter runtime, the manifest's lead, or none; a lead that would
    signal the job at its start is refused naming the field."""

    def lead(**resources):
        return plan.job_resources(resources, signal=True)[0].get("slurm_extra")

    assert lead(runtime_min=1440) == "--signal=USR1@300" and lead(runtime_min=20) == "--signal=USR1@120"
    assert lead(runtime_min=60, signal_before_limit_s=900) == "--signal=USR1@900"
    assert lead(runtime_min=60, signal_before_limit_s=0) is None
    assert "slurm_extra" not in plan.job_resources({"runtime_min": 60})[0]  # a job that does not save on it
    with pytest.raises(BadInput, match=r"resources.signal_before_limit_s: the signal would come at the job's start"):
        plan.job_resources({"runtime_min": 5, "signal_before_limit_s": 300})


def test_a_job_over_several_nodes_asks_each_nodes_gpus_and_only_a_backend_that_spans_nodes_may():
    """nodes > 1: sbatch --nodes, the GPUs as the per-node GRES instead of --gpus (the job's total), CPUs and memory
    as they are (sbatch's are per node); a backend whose jobs are one node's refuses it naming the field."""
    ask = {"gpus": 4, "cpus": 16, "mem_mb": 64000, "nodes": 2, "gpu_model": "h100"}
    resources, _ = plan.job_resources(ask, spans_nodes=True, backend="verl-agent")
    assert resources["nodes"] == 2 and resources["gres"] == "gpu:h100:4" and resources["gpu"] == 0
    assert "gpu_model" not in resources and plan.gpus_per_node(resources) == ("h100", 4)
    flags = plan.slurm_request(resources)
    assert "--nodes=2" in flags and "--gres=gpu:h100:4" in flags and not any(f.startswith("--gpus") for f in flags)
    one = plan.job_resources({**ask, "nodes": 1}, spans_nodes=True)[0]
    assert one["gpu"] == 4 and "gres" not in one and plan.gpus_per_node(one) == ("h100", 4)
    with pytest.raises(BadInput, match=r"resources.nodes: a job of builtin runs on one node, got 2"):
        plan.job_resources(ask, backend="builtin")


def test_study_plan_of_the_tiny_study():
    """The tiny study plans 2 methods x 1 seed, steps 0 and 2, CPU-only jobs."""
    p = plan.study_plan(TINY)
    assert (p.study, p.methods, p.seeds, p.steps) == ("wf-tiny", ("grpo", "graphgpo"), (0,), (0, 2))
    assert p.resources["gpu"] == 0 and p.lock == str(TINY.with_name("wf-tiny.lock.json"))


def test_the_plan_gives_each_method_its_backends_resources():
    """Snakemake resources are per-method functions of the wildcards when the study's backends ask different ones."""
    from types import SimpleNamespace

    p = plan.study_plan(TINY.with_name("wf-xbackend.yaml"))
    assert p.methods == ("grpo", "grpo@command") and p.steps == (0, 2)
    mem = p.job_resources()["mem_mb"]
    assert (mem(SimpleNamespace(method="grpo")), mem(SimpleNamespace(method="grpo@command"))) == (1000, 1500)
    assert p.job_resources()["gpu"](SimpleNamespace(method="grpo@command")) == 0 and p.job_threads() == 1
    tiny = plan.study_plan(TINY)
    resources = tiny.job_resources()
    runtime = resources.pop("runtime")  # resources.runtime_retry_min: a function of Snakemake's attempt
    mem = resources.pop("mem_mb")  # resources.mem_retry_mb: the same
    # one backend: plain values; its trainings ask for the signal before the time limit (a tenth of 10 minutes)
    assert resources == {k: v for k, v in tiny.resources.items() if k not in ("runtime", "mem_mb")} | {
        "slurm_extra": "--signal=USR1@60"
    }
    grpo = SimpleNamespace(method="grpo")
    assert [runtime(grpo, attempt) for attempt in (1, 2, 3)] == [10, 15, 20] and tiny.resources["runtime"] == 10
    assert [mem(grpo, attempt) for attempt in (1, 2, 3)] == [1000, 1250, 1500] and tiny.resources["mem_mb"] == 1000


def test_each_retry_asks_the_memory_the_manifest_adds_per_method(tmp_path):
    """resources.mem_retry_mb: a job killed for its memory is retried with more, by method where methods differ
    (a backend's own resources), and `agentrepro command` says so; the warm start's memory does not grow."""
    from types import SimpleNamespace

    manifest = load_yaml(TINY.with_name("wf-xbackend.yaml"))
    manifest["resources"]["mem_retry_mb"] = 500
    path = tmp_path / "wf-xbackend.yaml"
    path.write_text(yaml.safe_dump(manifest))
    p = plan.study_plan(path)
    mem = p.job_resources()["mem_mb"]
    asked = [[mem(SimpleNamespace(method=m), attempt) for attempt in (1, 2, 3)] for m in ("grpo", "grpo@command")]
    assert asked == [[1000, 1500, 2000], [1500, 2000, 2500]] and p.resources["mem_mb"] == 1000
    assert "mem_mb_per_retry" not in p.job_resources() and "mem_mb_per_retry" not in p.resources
    shown = run_cli("command", path, "--method", "grpo", "--seed", "0", cwd=tmp_path)
    assert "# each retry asks 500 MB more (resources.mem_retry_mb)" in shown.stdout, shown.stdout + shown.stderr


@pytest.mark.parametrize("name", ["graphgpo-alfworld.yaml", "graphgpo-alfworld-relax.yaml"])
def test_eval_jobs_that_convert_the_trainings_evaluation_ask_for_no_gpu(name):
    """verl-agent and Relax evaluate during training; their eval jobs convert a JSONL, so they ask for one CPU, no
    GPU and half an hour, not the training's GPUs, CPUs, memory and day."""
    p = plan.study_plan(REPO / "manifests" / name)
    train, evaluation = p.job_resources(), p.job_resources(evaluation=True)
    assert train["gpu"] >= 1 and train["cpus_per_task"] > 1 and train["runtime"] > 60
    assert evaluation == {"gpu": 0, "runtime": 30, "mem_mb": 2000, "cpus_per_task": 1, **_partition(train)}
    assert p.job_threads(evaluation=True) == 1
    assert "slurm_extra" not in train  # their trainings do not save on the time limit's signal: none is asked
    builtin = plan.study_plan(REPO / "manifests" / "vagen-sokoban.yaml")  # the builtin backend evaluates the model
    train = builtin.job_resources()
    assert train.pop("slurm_extra") == "--signal=USR1@300"  # only the training saves on the signal
    assert builtin.job_resources(evaluation=True) == train


def _partition(resources: dict) -> dict:
    return {"slurm_partition": resources["slurm_partition"]} if "slurm_partition" in resources else {}


def test_a_backend_that_cannot_save_the_evaluated_steps_stops_the_plan(tmp_path):
    """verl-agent validates only on its eval.every grid: a checkpoint off the grid is BadInput at `eval`."""
    source = REPO / "manifests" / "graphgpo-alfworld.yaml"
    assert plan.study_plan(source).steps == tuple(range(0, 151, 5))
    text = source.read_text()
    assert "every: 5, checkpoint: last" in text
    (tmp_path / source.name).write_text(text.replace("every: 5, checkpoint: last", "every: 5, checkpoint: [7]"))
    with pytest.raises(
        BadInput, match=r"graphgpo-alfworld\.yaml: eval: the verl-agent backend would save steps \[0, 5, 10"
    ):
        plan.study_plan(tmp_path / source.name)


def test_study_plan_missing_manifest_names_the_file(tmp_path):
    """A manifest that does not exist is BadInput naming its path and how to choose one."""
    with pytest.raises(BadInput, match=r"nope\.yaml.*--config manifest="):
        plan.study_plan(tmp_path / "nope.yaml")


def test_study_plan_rejects_unknown_keys(tmp_path):
    """The manifest is validated by the manifest schema: an unknown key stops planning with its name."""
    bad = tmp_path / "wf-tiny.yaml"
    bad.write_text(TINY.read_text() + "colour: blue\n")
    with pytest.raises(BadInput, match="colour"):
        plan.study_plan(bad)


def _lock_for(manifest_path, sha):
    lock = lock_path(manifest_path)
    with open(lock, "w") as fh:
        json.dump({"lock_version": 1, "study": "wf-tiny", "manifest_sha256": sha}, fh)
    return lock


def test_lock_state_missing_ok_and_mismatch(study_dir):
    """No lock: `missing`; the manifest's hash: `ok`; another hash: LockMismatch telling to run freeze."""
    manifest = study_dir / "manifests" / "wf-tiny.yaml"
    assert plan.lock_state(manifest) == "missing"
    _lock_for(manifest, sha256_json(load_yaml(manifest)))
    assert plan.lock_state(manifest) == "ok"
    _lock_for(manifest, "0" * 64)
    with pytest.raises(plan.LockMismatch, match=r"wf-tiny\.lock\.json.*manifest_sha256.*agentrepro freeze"):
        plan.lock_state(manifest)


def test_lock_state_malformed_lock(study_dir):
    """A lock that is not JSON is an error with its line, not a silent re-freeze."""
    manifest = study_dir / "manifests" / "wf-tiny.yaml"
    (study_dir / "manifests" / "wf-tiny.lock.json").write_text("{not json\n")
    with pytest.raises(plan.LockMismatch, match="line 1"):
        plan.lock_state(manifest)


def test_methods_that_would_evaluate_other_steps_stop_the_plan(tmp_path):
    """A method training another number of steps evaluates other steps: the plan refuses it, naming methods."""
    manifest = load_yaml(TINY)
    first = next(iter(manifest["methods"]))
    manifest["methods"][first] = {**(manifest["methods"][first] or {}), "steps": manifest["train"]["steps"] + 1}
    path = tmp_path / TINY.name
    path.write_text(json.dumps(manifest))
    with pytest.raises(BadInput, match=r"methods: every method must evaluate the same steps"):
        plan.study_plan(path)
