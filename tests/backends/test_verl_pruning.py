"""Pruning during training (backends/verl_agent/hooks/agentrepro_verl_prune.py): the verl-agent hook's `_save_checkpoint` wrapper, entered
through its real entry (sitecustomize on PYTHONPATH with the train launch's environment) in the stand-in module tree
(verl_standin.py, whose `_save_checkpoint` writes verl's files of global_step_<N>/), with real files on disk."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import head_pythonpath, load_file_module, step_checkpoint

from agentrepro import seal
from agentrepro.backends import checkpoints, get_backend
from agentrepro.backends.verl_agent import backend as verl_agent
from agentrepro.backends.verl_agent import integration
from agentrepro.backends.verl_agent.hooks import agentrepro_verl_prune as verl_prune
from agentrepro.errors import BadInput
from agentrepro.layout import RunFiles
from agentrepro.runconfig import EvalConfig

VERL = get_backend("verl-agent")
standin = load_file_module("verl_standin", Path(__file__).with_name("verl_standin.py"))


def config(tmp_path: Path, **evaluation) -> dict:
    return {
        "study": "graphgpo-alfworld",
        "method": "gigpo",
        "seed": 1,
        "backend": {"name": "verl-agent", "workdir": str(tmp_path)},
        "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
        "env": {"name": "alfworld"},
        "train": {"estimator": "gigpo", "steps": 15, "groups": 16, "group_size": 8},
        "eval": {"every": 5, **evaluation},
        "resources": {"gpus": 2},
    }


def save(tmp_path: Path, cfg: dict, *steps: int) -> subprocess.CompletedProcess:
    """One training process (a job, or its resume) saving `steps`, with the train launch's environment."""
    tree, run = tmp_path / "verl-agent", (tmp_path / "run").resolve()
    if not tree.is_dir():
        tree.mkdir()
        standin.stand_in_tree(tree)
    run.mkdir(exist_ok=True)
    env = {**verl_agent.programs(cfg, run)[1].env, "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] = head_pythonpath(env, tree)
    root = verl_agent.step_dir(run, 0).parent
    return subprocess.run(
        [sys.executable, "save_driver.py", str(root), *map(str, steps)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )


def training_record(run: Path) -> Path:
    """checkpoints/pruned_in_training.jsonl: what the hook removed during training."""
    return run / "checkpoints" / verl_prune.RECORD


def on_disk(run: Path, step: int) -> set[str]:
    folder = verl_agent.step_dir(run, step)
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_after_saves_at_5_10_15_only_the_latest_state_and_every_hf_copy_remain(tmp_path):
    """Saves at 5 and 10 in one process, 15 in its resume: steps 5 and 10 keep only actor/huggingface/ (exactly
    backends/checkpoints.py's weights of the step; everything else of it, its state, is gone), step 15 keeps
    everything; the record lists each removed file, before it went, with its sha256 and size; a resume is not
    refused; the train verb's summary counts them; the seal covers the record."""
    cfg, run = config(tmp_path), (tmp_path / "run").resolve()
    for steps in ((5, 10), (15,)):
        result = save(tmp_path, cfg, *steps)
        assert result.returncode == 0, result.stderr
    hf = {n for n in standin.SAVED if n.startswith("actor/huggingface/")}
    assert on_disk(run, 5) == on_disk(run, 10) == hf and on_disk(run, 15) == set(standin.SAVED)
    for step in (5, 10, 15):
        assert all((verl_agent.step_dir(run, step) / n).read_text() == standin.saved_text(n, step) for n in hf)
    lines = VERL.pruned_in_training(run).files
    expected = {}
    for step, saved in ((5, 10), (10, 15)):
        ckpt = step_checkpoint(cfg, run, step)
        for name in standin.SAVED:
            path = verl_agent.step_dir(run, step) / name
            in_state, in_weights = (
                any(path.is_relative_to(t) for t in targets) for targets in (ckpt.state, ckpt.weights)
            )
            if in_state and not in_weights:
                text = standin.saved_text(name, step).encode()
                expected[path.relative_to(run).as_posix()] = {
                    "step": step,
                    "saved": saved,
                    "path": path.relative_to(run).as_posix(),
                    "sha256": hashlib.sha256(text).hexdigest(),
                    "bytes": len(text),
                }
    assert lines == expected and len(expected) == 2 * (len(standin.SAVED) - len(hf))
    assert not (verl_agent.step_dir(run, 5) / "critic").exists() and (verl_agent.step_dir(run, 5) / "actor").is_dir()
    checkpoints.refuse_resume(run)  # the latest step's state, the one a resume loads, is all there
    assert (verl_agent.step_dir(run, 0).parent / "latest_checkpointed_iteration.txt").read_text() == "15"
    summary = checkpoints.training_summary(VERL.pruned_in_training(run))
    assert summary == {
        "steps": [5, 10],
        "files": len(expected),
        "bytes": sum(x["bytes"] for x in expected.values()),
        "record": "pruned_in_training.jsonl",
    }
    seal.write_outputs_manifest(run, exclude_dirs={RunFiles.EVAL, RunFiles.LOGS})
    assert "checkpoints/pruned_in_training.jsonl" in seal.read_outputs_manifest(run / seal.OUTPUTS)
    assert checkpoints.pruned_files(run, VERL.pruned_in_training(run)) == (set(), [])


def test_keep_all_removes_nothing(tmp_path):
    cfg, run = config(tmp_path, keep_checkpoints="all"), (tmp_path / "run").resolve()
    result = save(tmp_path, cfg, 5, 10, 15)
    assert result.returncode == 0, result.stderr
    assert all(on_disk(run, step) == set(standin.SAVED) for step in (5, 10, 15))
    assert not training_record(run).exists() and checkpoints.training_summary(VERL.pruned_in_training(run)) is None


def test_none_prunes_training_state_like_hf_and_only_training_launches_carry_the_setting(tmp_path):
    """`none` removes the HF copies only after their evaluation (`prune`); during training it is `hf`."""
    cfg, run = config(tmp_path, keep_checkpoints="none"), (tmp_path / "run").resolve()
    assert verl_agent.programs(cfg, run)[1].env[verl_prune.PRUNE_ENV] == "1"
    assert verl_agent.programs(config(tmp_path, keep_checkpoints="all"), run)[1].env[verl_prune.PRUNE_ENV] == "0"
    assert verl_prune.PRUNE_ENV not in verl_agent.programs(cfg, run, eval_step=5)[1].env
    result = save(tmp_path, cfg, 5, 10)
    assert result.returncode == 0, result.stderr
    assert on_disk(run, 5) == {n for n in standin.SAVED if n.startswith("actor/huggingface/")} and on_disk(
        run, 10
    ) == set(standin.SAVED)


def test_a_prune_value_the_hook_does_not_know_stops_at_import(tmp_path):
    """AGENTREPRO_VERL_PRUNE other than 0 or 1 stops the job when the hook is installed, before training; which
    eval.keep_checkpoints values prune is backends/checkpoints.py's rule."""
    cfg = config(tmp_path)
    tree = tmp_path / "verl-agent"
    tree.mkdir()
    standin.stand_in_tree(tree)
    env = {**integration.env(tmp_path), verl_prune.PRUNE_ENV: "some", "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] = head_pythonpath(env, tree)
    result = subprocess.run(
        [sys.executable, "-c", "import recipe.GraphGPO.graphgpo_ray_trainer"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "AGENTREPRO_VERL_PRUNE='some' is neither 0 nor 1" in result.stderr
    assert checkpoints.keep_setting(cfg) == EvalConfig().keep_checkpoints == "hf"
    assert {
        keep: checkpoints.prunes_during_training(config(tmp_path, keep_checkpoints=keep)) for keep in checkpoints.KEEP
    } == {"hf": True, "none": True, "all": False}


def test_the_record_is_on_disk_before_any_file_goes(tmp_path, monkeypatch):
    """A removal that fails leaves the record of the step complete and its files in place."""
    run = tmp_path / "run"
    root = run / "checkpoints"
    for step in (5, 10):
        for name in standin.SAVED:
            (root / f"global_step_{step}" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / f"global_step_{step}" / name).write_text(standin.saved_text(name, step))

    def refuse(path):
        raise PermissionError(path)

    monkeypatch.setattr(verl_prune.os, "unlink", refuse)
    with pytest.raises(PermissionError):
        verl_prune.prune_older(str(root), 10, str(run))
    lines = [json.loads(x) for x in (root / verl_prune.RECORD).read_text().splitlines()]
    state = [n for n in standin.SAVED if not n.startswith("actor/huggingface/")]
    assert sorted(x["path"] for x in lines) == sorted(f"checkpoints/global_step_5/{n}" for n in state)
    assert on_disk(run, 5) == set(standin.SAVED)
    with pytest.raises(RuntimeError, match="outside the run directory"):
        verl_prune.prune_older(str(root), 10, str(tmp_path / "elsewhere"))


def test_the_audit_refuses_a_record_that_the_seal_contradicts_or_that_is_malformed(tmp_path):
    run = tmp_path / "run"
    kept = run / "checkpoints" / "global_step_5" / "data.pt"
    kept.parent.mkdir(parents=True)
    kept.write_text("data")
    line = {"step": 5, "saved": 10, "path": "checkpoints/global_step_5/data.pt", "sha256": "0" * 64, "bytes": 4}
    training_record(run).write_text(json.dumps(line) + "\n")
    seal.write_outputs_manifest(run)
    _, problems = checkpoints.pruned_files(run, VERL.pruned_in_training(run))
    assert problems == [
        f"{training_record(run)}: lists checkpoints/global_step_5/data.pt as removed during "
        f"training, but the run's seal {run / seal.OUTPUTS} lists it"
    ]
    training_record(run).write_text(json.dumps({**line, "step": "5"}) + "\n")
    with pytest.raises(BadInput, match=r"line 1: expected {step, saved, path, sha256, bytes}"):
        VERL.pruned_in_training(run)
    from agentrepro.audit.study import _pruned

    lock = {"manifest": {"backend": {"name": "verl-agent"}, "image": {}, "methods": {"gigpo": {}}}}
    assert _pruned(run, lock, "gigpo")[1][-1].endswith(
        "line 1: expected {step, saved, path, sha256, bytes} (hooks/agentrepro_verl_prune.py)"
    )


def test_the_train_verb_shows_and_records_what_went_during_training(
    tmp_path, make_config, write_config, monkeypatch, capsys
):
    """The train job (a command-backend run whose backend reads verl-agent's record, as a verl-agent resume's would hold
    one): the summary lands in the ok attempt and on stderr, and the record in the seal."""
    import argparse

    from agentrepro.backends.command.backend import CommandBackend
    from agentrepro.cli import train as train_job

    class RecordingCommand(CommandBackend):
        pruned_in_training = verl_agent.VerlAgentBackend.pruned_in_training

    run = tmp_path / "run"
    lines = [
        {"step": 5, "saved": 10, "path": f"checkpoints/global_step_5/{n}", "sha256": "a" * 64, "bytes": 2_000_000_000}
        for n in ("actor/optim_world_size_2_rank_0.pt", "data.pt")
    ]
    training_record(run).parent.mkdir(parents=True)
    training_record(run).write_text("".join(json.dumps(x) + "\n" for x in lines))
    monkeypatch.setattr(train_job, "get_backend", lambda name: RecordingCommand())
    monkeypatch.setattr(train_job, "install_sigterm_handler", lambda: None)  # keep pytest's own SIGTERM handling
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(config=write_config(make_config()), out=run, no_resume=False, from_warmstart=None)
    assert train_job.run(args) == 0
    attempt = json.loads((run / "provenance.json").read_text())["attempts"][-1]
    assert attempt["status"] == "ok" and attempt["pruned_in_training"] == {
        "steps": [5],
        "files": 2,
        "bytes": 4_000_000_000,
        "record": "pruned_in_training.jsonl",
    }
    assert "training state of steps 5 pruned during training (2 files, 4.00 GB" in capsys.readouterr().err
    assert "checkpoints/pruned_in_training.jsonl" in seal.read_outputs_manifest(run / seal.OUTPUTS)
