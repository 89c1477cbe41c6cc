"""The workflow through a real SLURM: `snakemake --profile slurm` submits every job with sbatch.

Runs tests/workflow/manifests/wf-slurm.yaml (1 method x 1 seed, 1 step, 4 tasks) against the local cluster
(scripts/slurm-cluster.sh, whose default partition is one node; no accounting, hence the documented squeue override).
The sbatch calls and squeue status checks are printed into the test log.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml
from helpers import REPO, run_cli
from wfkit import HERE, SLURM_OVERRIDES, snakemake, snakemake_in_background

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
MANIFEST = HERE / "manifests" / "wf-slurm.yaml"


def _through_the_profile(*targets: str) -> list[str]:
    """snakemake's arguments for the test study under the SLURM profile on the local cluster (and `targets`)."""
    args = ["--profile", str(REPO / "profiles" / "slurm"), *SLURM_OVERRIDES, "--verbose", "--config"]
    args += ["manifest=manifests/wf-slurm.yaml", "freeze_flags=--allow-dirty"]
    return args + (["--", *targets] if targets else [])


def test_study_runs_through_slurm(slurm_cluster, tmp_path, capsys):
    """Train, eval, analyze and report each run as a SLURM job (train/eval with --gpus=1); provenance names job and GPU."""
    (tmp_path / "manifests").mkdir()
    shutil.copy(MANIFEST, tmp_path / "manifests" / MANIFEST.name)
    args = _through_the_profile()
    # `timeout` ends snakemake (and, through it, its jobs) if the plugin ever polls forever.
    proc = snakemake(tmp_path, *args, timeout=1000, wrap=["timeout", "900"])
    out = proc.stdout + proc.stderr
    queue = subprocess.run(["squeue", "-t", "all", "-o", "%i %j %T %M %R"], capture_output=True, text=True)
    with capsys.disabled():
        print("\n--- snakemake --profile slurm: sbatch calls and status checks ---", file=sys.stderr)
        for line in out.splitlines():
            if line.startswith(("sbatch call:", "Job ", "Finished jobid", "Status query", "Error")) or "SLURM" in line:
                print(line.split(" --wrap=")[0][:400], file=sys.stderr)
        print("--- squeue -t all ---\n" + queue.stdout, file=sys.stderr)
    assert proc.returncode == 0, out[-6000:]
    submitted = [line for line in out.splitlines() if line.startswith("sbatch call:")]
    rules = sorted(line.split("--comment ")[1].split()[0] for line in submitted)
    warmstarts = [rule for rule in rules if rule.startswith("rule_warmstart_wildcards_seed0-")]  # one per seed
    assert len(warmstarts) == 1, rules
    assert [r for r in rules if r not in warmstarts] == [
        "rule_analyze",
        "rule_eval_wildcards_grpo_0_0",
        "rule_eval_wildcards_grpo_0_1",
        "rule_report",
        "rule_train_wildcards_grpo_0",
    ]
    gpu_jobs = [line for line in submitted if "rule_train" in line or "rule_eval" in line]
    assert len(gpu_jobs) == 3 and all("--gpus=1" in line.split(" --wrap=")[0] for line in gpu_jobs), gpu_jobs
    run = tmp_path / "runs" / "wf-slurm" / "grpo" / "seed0"
    for prov in (
        run / "provenance.json",
        run / "eval" / "step0" / "provenance.json",
        run / "eval" / "step1" / "provenance.json",
    ):
        attempt = json.loads(prov.read_text())["attempts"][-1]
        assert attempt["status"] == "ok" and attempt["slurm_job_id"], prov
        assert attempt["cuda_visible_devices"] == "0", "the GPU SLURM bound to the job is the one recorded"
    assert (tmp_path / "reports" / "wf-slurm" / "report.html").stat().st_size > 0
    again = snakemake(tmp_path, "-n", "--config", "manifest=manifests/wf-slurm.yaml", "freeze_flags=--allow-dirty")
    assert "Nothing to be done" in again.stdout + again.stderr

    status = json.loads(run_cli("status", "wf-slurm", "--root", tmp_path, "--json").stdout)
    assert set(status["counts"]) == {"done"}
    assert all(j["slurm_job"] for j in status["jobs"] if j["kind"] in ("warmstart", "train", "eval")), status["jobs"]
    _status_of_a_slurm_training(tmp_path, run)


def _status_of_a_slurm_training(root, run):
    """`agentrepro status` asks squeue about a training submitted with sbatch: running (its process held with
    SIGSTOP at its attempt's start) with its SLURM job and node, then, once scancel ended it, not running."""
    (run / "OUTPUTS.sha256").unlink()
    provenance = run / "provenance.json"
    before = len(json.loads(provenance.read_text())["attempts"])
    train = [sys.executable, "-m", "agentrepro", "train", "--config", str(run / "config.yaml"), "--out", str(run)]
    submitted = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--chdir",
            str(root),
            "--output",
            str(root / "train.out"),
            "--wrap",
            shlex.join([*train, "--no-resume"]),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    job = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            attempts = json.loads(provenance.read_text())["attempts"]
            if len(attempts) > before and attempts[-1]["status"] == "running":
                os.kill(attempts[-1]["pid"], signal.SIGSTOP)
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the SLURM job {job}'s attempt never opened")
        assert attempts[-1]["slurm_job_id"] == job
        shown = {
            j["name"]: j for j in json.loads(run_cli("status", "wf-slurm", "--root", root, "--json").stdout)["jobs"]
        }
        running = shown["train grpo seed0"]
        assert running["state"] == "running" and f"SLURM job {job} running on " in running["detail"], running
    finally:
        subprocess.run(["scancel", job], check=False)
    deadline = time.monotonic() + 120
    while (
        time.monotonic() < deadline
        and subprocess.run(["squeue", "--noheader", "--jobs", job], capture_output=True, text=True).stdout.strip()
    ):
        time.sleep(1)
    shown = {j["name"]: j for j in json.loads(run_cli("status", "wf-slurm", "--root", root, "--json").stdout)["jobs"]}
    ended = shown["train grpo seed0"]
    assert ended["state"] in ("failed", "stopped") and ended["slurm_job"] == job, ended  # killed: closed or not


def test_the_time_limit_signal_reaches_the_training_through_the_profile(slurm_cluster, tmp_path):
    """Under `snakemake --profile slurm` the train job asks for SIGUSR1 before its time limit (`--signal=USR1@60`: a
    tenth of its 10 minutes). `scancel --signal=USR1` sends it where that option does: to the job step's first process,
    Snakemake's job executor, under the local SLURM's cgroups (to every process of the step without them), which
    passes it on; the executor's shell and the GPU slot wrapper ignore it and the training saves its step and stops; Snakemake retries the job with the runtime the manifest adds for a retry, and the retry resumes from the
    saved step."""
    (tmp_path / "manifests").mkdir()
    manifest = yaml.safe_load(MANIFEST.read_text())
    manifest["train"]["steps"] = 4
    manifest["resources"]["runtime_retry_min"] = 5
    (tmp_path / "manifests" / MANIFEST.name).write_text(yaml.safe_dump(manifest))
    run = tmp_path / "runs" / "wf-slurm" / "grpo" / "seed0"
    provenance = run / "provenance.json"
    proc = snakemake_in_background(tmp_path, *_through_the_profile("runs/wf-slurm/grpo/seed0/OUTPUTS.sha256"))
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            attempts = json.loads(provenance.read_text())["attempts"] if provenance.is_file() else []
            if attempts and attempts[-1]["status"] == "running" and attempts[-1].get("slurm_job_id"):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the train job's attempt never opened:\n" + (tmp_path / "snakemake.log").read_text()[-4000:])
        first = attempts[-1]
        os.kill(first["pid"], signal.SIGSTOP)  # held, so that the signal lands before the last step
        subprocess.run(["scancel", "--signal=USR1", first["slurm_job_id"]], check=True)
        time.sleep(2)  # the job step's other processes have it now: had they ended on it, the step would end
        try:
            os.kill(first["pid"], signal.SIGCONT)
        except ProcessLookupError:
            pytest.fail("the training ended with its job step's other processes before it could save")
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = (tmp_path / "snakemake.log").read_text()
    assert code == 0, out[-6000:]
    attempts = json.loads(provenance.read_text())["attempts"]
    assert [a["status"] for a in attempts] == ["preempted", "ok"], attempts
    assert attempts[0]["slurm_job_id"] == first["slurm_job_id"] != attempts[1]["slurm_job_id"]
    assert attempts[0]["saved_step"] >= 1 and attempts[1]["how_started"].startswith("resumed"), attempts
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    trains = [line.split(" --wrap=")[0] for line in out.splitlines() if "sbatch call:" in line and "rule_train" in line]
    assert len(trains) == 2 and all("--signal=USR1@60" in call for call in trains), trains
    assert " -t 10 " in trains[0] and " -t 15 " in trains[1], trains
