"""A training stopped by the time limit's signal (SIGUSR1, which the SLURM profile asks for before the limit) saves the
step it is at, records its attempt as preempted with that step, exits 75, and its retry resumes from there and ends
as the uninterrupted run ends: the same weights and metrics, no checkpoint of a step the study does not evaluate.
Under the local SLURM the signal comes from `scancel --signal=USR1` on a job sbatch started, and a job SLURM requeues
(`scontrol requeue`) is recorded as such and resumes."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml
from helpers import run_cli
from trainer_helpers import tiny_config

from agentrepro.trainer.checkpoint import load_checkpoint, saved_steps

STEPS = 6  # evaluated (so checkpointed) at 0 and 6 only


def _config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tiny_config(steps=STEPS, checkpoint_every=STEPS, estimator="ppo")))
    return path


def _train(config, run):
    return [sys.executable, "-m", "agentrepro", "train", "--config", str(config), "--out", str(run)]


def _metrics(run):
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _after_first_step(run, deadline_s=300):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if (run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").read_text().strip():
            return
        time.sleep(0.05)
    pytest.fail("the training never finished its first step")


def _sbatch_training(tmp_path, config, run, *flags):
    """sbatch the training (`exec`: it is the batch step's process), its output to job.out: (SLURM job, the training's
    PID) once its first step is done (the job runs on this host)."""
    wrap = "exec " + shlex.join(_train(config, run))
    sbatch = ["sbatch", "--parsable", *flags, "--chdir", str(tmp_path), "--output", str(tmp_path / "job.out")]
    job = subprocess.run([*sbatch, "--wrap", wrap], capture_output=True, text=True, check=True).stdout.strip()
    _after_first_step(run)
    return job, json.loads((run / "provenance.json").read_text())["attempts"][-1]["pid"]


def _resumed_as_whole(tmp_path, config, run, whole):
    attempt = json.loads((run / "provenance.json").read_text())["attempts"][-1]
    assert attempt["status"] == "preempted" and 1 <= attempt["saved_step"] < STEPS, attempt
    assert saved_steps(run) == [0, attempt["saved_step"]]
    again = run_cli("train", "--config", config, "--out", run, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    attempts = json.loads((run / "provenance.json").read_text())["attempts"]
    assert [a["status"] for a in attempts] == ["preempted", "ok"] and attempts[-1]["how_started"].startswith("resumed")
    assert saved_steps(run) == [0, STEPS]  # the preemption's own checkpoint is gone once the run ends
    a, b = load_checkpoint(whole, STEPS), load_checkpoint(run, STEPS)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    drop = {"wall_s", "gpu_hours", "cpu_rss_gb"}  # measured of the machine
    assert [{k: v for k, v in m.items() if k not in drop} for m in _metrics(run)] == [
        {k: v for k, v in m.items() if k not in drop} for m in _metrics(whole)
    ]
    return attempt


def test_the_signal_saves_the_step_and_the_retry_ends_as_the_uninterrupted_run(tmp_path):
    config = _config(tmp_path)
    whole = tmp_path / "whole"
    done = run_cli("train", "--config", config, "--out", whole, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "broken"
    proc = subprocess.Popen(_train(config, run), cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    _after_first_step(run)
    proc.send_signal(signal.SIGSTOP)  # held, so that the signal lands before the last step
    proc.send_signal(signal.SIGUSR1)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 75, err
    assert "stopped on signal SIGUSR1" in err and "its retry resumes from there" in err
    attempt = _resumed_as_whole(tmp_path, config, run, whole)
    assert attempt["reason"].startswith("stopped on signal SIGUSR1 (the time limit is near) with step")


@pytest.mark.slurm
def test_under_slurm_scancel_signal_stops_the_job_and_its_retry_resumes(slurm_cluster, tmp_path):
    """The job sbatch runs (`exec`: the training is the batch step's process) gets SIGUSR1 from `scancel --signal`;
    its attempt records the SLURM job and the step it saved; the retry (run here) resumes there."""
    config = _config(tmp_path)
    whole = tmp_path / "whole"
    assert run_cli("train", "--config", config, "--out", whole, cwd=tmp_path).returncode == 0
    run = tmp_path / "broken"
    job, pid = _sbatch_training(tmp_path, config, run)
    os.kill(pid, signal.SIGSTOP)  # held, so that the signal lands before the last step (the job runs on this host)
    subprocess.run(["scancel", "--signal=USR1", "--full", job], check=True)
    time.sleep(1)
    os.kill(pid, signal.SIGCONT)
    _gone_from_the_queue(job)
    attempt = _resumed_as_whole(tmp_path, config, run, whole)
    assert attempt["slurm_job_id"] == job
    assert "stopped on signal SIGUSR1" in (tmp_path / "job.out").read_text()


def _state(job):
    return subprocess.run(
        ["squeue", "--noheader", "-o", "%T", "--jobs", job], capture_output=True, text=True
    ).stdout.strip()


def _gone_from_the_queue(job, deadline_s=300):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        queue = subprocess.run(
            ["squeue", "--noheader", "--states=RUNNING,PENDING,COMPLETING", "--jobs", job],
            capture_output=True,
            text=True,
        )
        if not queue.stdout.strip():
            return
        time.sleep(1)
    pytest.fail(f"SLURM job {job} still queued after {deadline_s} s")


@pytest.mark.slurm
def test_a_job_slurm_requeues_is_recorded_as_such_and_resumes(slurm_cluster, tmp_path):
    """`scontrol requeue` (what a cluster does to a job on a failed or reclaimed node) stops the training with SIGTERM
    and starts the same SLURM job again: the first attempt is closed as killed with the last step on disk, the second
    records SLURM's restart count, resumes from that step and ends as the uninterrupted run."""
    config = _config(tmp_path)
    whole = tmp_path / "whole"
    assert run_cli("train", "--config", config, "--out", whole, cwd=tmp_path).returncode == 0
    run = tmp_path / "requeued"
    job, pid = _sbatch_training(tmp_path, config, run, "--requeue", "--open-mode=append")
    os.kill(pid, signal.SIGSTOP)  # held, so that the requeue lands before the last step
    subprocess.run(["scontrol", "requeue", job], check=True)
    os.kill(pid, signal.SIGCONT)
    # SLURM holds a requeued job for two minutes (its BeginTime, set once the job is pending again): release it now
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _state(job) != "PENDING":
        time.sleep(0.2)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
    _gone_from_the_queue(job)
    attempts = json.loads((run / "provenance.json").read_text())["attempts"]
    assert [a["status"] for a in attempts] == ["killed", "ok"], attempts
    first, second = attempts
    assert first["slurm_job_id"] == second["slurm_job_id"] == job
    assert first["last_saved_step"] == 0 and first.get("slurm_restart_count", 0) == 0, first
    assert second["slurm_restart_count"] == 1 and second["how_started"].startswith("resumed"), second
    a, b = load_checkpoint(whole, STEPS), load_checkpoint(run, STEPS)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert "DUE TO JOB REQUEUE" in (tmp_path / "job.out").read_text()


def test_a_killed_training_records_the_last_step_its_retry_resumes_from(tmp_path):
    """SIGTERM (scancel, a time limit without the signal before it) stops the attempt as killed, and its record says the
    last step on disk: step 0 here, the only one saved before the study's next evaluated step."""
    config = _config(tmp_path)
    run = tmp_path / "killed"
    proc = subprocess.Popen(_train(config, run), cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    _after_first_step(run)
    proc.terminate()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err
    attempt = json.loads((run / "provenance.json").read_text())["attempts"][-1]
    assert attempt["status"] == "killed" and attempt["last_saved_step"] == 0, attempt
