"""workflow/scripts/gpu_slots.py: concurrent local GPU jobs get disjoint CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from helpers import REPO
from wfkit import load_script

gpu_slots = load_script("gpu_slots")
SCRIPT = str(REPO / "workflow" / "scripts" / "gpu_slots.py")
PRINT_DEVICES = [
    sys.executable,
    "-c",
    "import os, time; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES'))); time.sleep(1.0)",
]


def _wrapped(gpus, slots, env):
    return subprocess.Popen(
        [sys.executable, SCRIPT, "--gpus", str(gpus), "--slots-dir", str(slots), "--", *PRINT_DEVICES],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES", "AGENTREPRO_GPU_DEVICES")
    }
    return {**env, **extra}


def test_concurrent_jobs_get_disjoint_devices(tmp_path):
    """Two 2-GPU jobs running at once on a 4-GPU machine see disjoint device sets covering all four."""
    env = _env(AGENTREPRO_GPU_DEVICES="0,1,2,3")
    jobs = [_wrapped(2, tmp_path, env) for _ in range(2)]
    seen = [eval(job.communicate(timeout=60)[0].strip()) for job in jobs]
    assert all(job.returncode == 0 for job in jobs)
    sets = [set(s.split(",")) for s in seen]
    assert all(len(s) == 2 for s in sets) and sets[0].isdisjoint(sets[1]) and sets[0] | sets[1] == {"0", "1", "2", "3"}


def test_a_second_job_waits_for_a_free_device(tmp_path):
    """With one device, a second job waits until the first exits, then gets the device."""
    devices = ["7"]
    first_taken, first_handles = gpu_slots.acquire(1, devices, tmp_path)
    result = {}

    def second():
        result["taken"] = gpu_slots.acquire(1, devices, tmp_path, poll_s=0.05, log=open(os.devnull, "w"))

    thread = threading.Thread(target=second)
    thread.start()
    thread.join(0.3)
    assert thread.is_alive(), "the second job must wait while the only device is held"
    for fh in first_handles:
        fh.close()
    thread.join(10)
    assert first_taken == ["7"] and result["taken"][0] == ["7"]


def test_cpu_job_sees_no_gpu(tmp_path):
    """gpu=0: the command runs with CUDA_VISIBLE_DEVICES set to the empty string."""
    job = _wrapped(0, tmp_path, _env(CUDA_VISIBLE_DEVICES="0,1"))
    out, _ = job.communicate(timeout=60)
    assert job.returncode == 0 and eval(out.strip()) == ""


def test_inside_slurm_devices_are_left_alone(tmp_path):
    """Inside a SLURM job the allocation's CUDA_VISIBLE_DEVICES passes through unchanged."""
    job = _wrapped(1, tmp_path, _env(SLURM_JOB_ID="42", CUDA_VISIBLE_DEVICES="3"))
    out, _ = job.communicate(timeout=60)
    assert job.returncode == 0 and eval(out.strip()) == "3"


def test_too_few_devices_is_a_clear_error(tmp_path):
    """Asking 2 GPUs of a 1-GPU machine exits 2 and says how many exist."""
    job = _wrapped(2, tmp_path, _env(AGENTREPRO_GPU_DEVICES="0"))
    _, err = job.communicate(timeout=60)
    assert job.returncode == 2 and "needs 2 GPU(s)" in err and "offers 1" in err


def test_exit_status_passes_through(tmp_path):
    """The wrapped command's non-zero exit status is the wrapper's."""
    proc = subprocess.run(
        [
            sys.executable,
            SCRIPT,
            "--gpus",
            "0",
            "--slots-dir",
            str(tmp_path),
            "--",
            sys.executable,
            "-c",
            "raise SystemExit(3)",
        ],
        capture_output=True,
        env=_env(),
    )
    assert proc.returncode == 3


def test_with_two_jobs_per_gpu_two_jobs_share_the_device_and_a_third_waits(tmp_path):
    """--per-gpu 2 (AGENTREPRO_JOBS_PER_GPU): two 1-GPU jobs get the one device at once, each told its share; a
    third waits for a slot; without the option the second job waits (the default is one job a device)."""
    env = _env(AGENTREPRO_GPU_DEVICES="0", AGENTREPRO_JOBS_PER_GPU="2")
    show = [
        sys.executable,
        "-c",
        "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['AGENTREPRO_GPU_SHARE'])",
    ]
    shared = subprocess.run(
        [sys.executable, SCRIPT, "--gpus", "1", "--slots-dir", str(tmp_path), "--", *show],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shared.returncode == 0 and shared.stdout.split() == ["0", "2"], shared.stderr
    first = gpu_slots.acquire(1, ["0"], tmp_path, per_gpu=2)
    second = gpu_slots.acquire(1, ["0"], tmp_path, per_gpu=2, poll_s=0.05)
    assert first[0] == second[0] == ["0"]
    result = {}
    thread = threading.Thread(
        target=lambda: result.setdefault(
            "taken", gpu_slots.acquire(1, ["0"], tmp_path, per_gpu=2, poll_s=0.05, log=open(os.devnull, "w"))
        )
    )
    thread.start()
    thread.join(0.3)
    assert thread.is_alive(), "a third job must wait while both slots are held"
    for fh in first[1]:
        fh.close()
    thread.join(10)
    assert result["taken"][0] == ["0"]
    for fh in second[1] + result["taken"][1]:
        fh.close()
    one = gpu_slots.acquire(1, ["0"], tmp_path)
    alone = threading.Thread(
        target=lambda: gpu_slots.acquire(1, ["0"], tmp_path, poll_s=0.05, log=open(os.devnull, "w"))
    )
    alone.daemon = True
    alone.start()
    alone.join(0.3)
    assert alone.is_alive(), "one job a device by default"
    for fh in one[1]:
        fh.close()
    alone.join(10)


def test_jobs_per_gpu_must_be_a_positive_integer(tmp_path):
    env = _env(AGENTREPRO_GPU_DEVICES="0", AGENTREPRO_JOBS_PER_GPU="two")
    done = subprocess.run(
        [sys.executable, SCRIPT, "--gpus", "1", "--slots-dir", str(tmp_path), "--", sys.executable, "-c", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        done.returncode == 2 and done.stderr.strip() == "gpu_slots: jobs per GPU must be a positive integer, got 'two'"
    )
