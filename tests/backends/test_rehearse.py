"""`agentrepro rehearse`: a verl-agent job run as its train job runs, offline, up to its first use of the GPUs.

End to end in the job's real podman image (tests/podman_kit.py), against a stand-in checkout (verl_checkout.py: the
script and module paths of 20bd331, a stand-in `ray`) whose trainer does what verl's workers do at the boundary: it
asks torch for the GPUs and moves a model to one. The image has no torch, so the checkout carries a stand-in `torch`
whose `.to("cuda")` calls `torch.cuda._lazy_init` by name, as torch's C++ side does; the hook itself
(agentrepro/hooks/agentrepro_rehearsal.py) runs for real inside the container, reached through the job's Python path as verl's
processes reach it, and is also tested against the real torch on the host. The real verl-agent's code is not run here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import load_file_module, run_cli
from podman_kit import PYTHON as PYTHON_IN_IMAGE
from podman_kit import leftover_containers
from study_kit import BASE, write_study

from agentrepro.cgroups import host_memory
from agentrepro.containers import rehearsal
from agentrepro.hooks import HOOKS_DIR, STARTUP_DIR
from agentrepro.hooks import agentrepro_rehearsal as hook

stand_in_checkout = load_file_module("verl_checkout", Path(__file__).with_name("verl_checkout.py")).stand_in_checkout

STAND_IN_TORCH = {
    "__init__.py": "from torch import cuda, nn\n",
    "cuda.py": (
        "def is_available():\n    return False\n"
        "def device_count():\n    return 0\n"
        "def _lazy_init():\n    raise RuntimeError('Torch not compiled with CUDA enabled')\n"
    ),
    "nn.py": (
        "import torch\n"
        "class Linear:\n"
        "    def __init__(self, *sizes):\n        pass\n"
        "    def to(self, device):\n"
        "        if str(device).startswith('cuda'):\n"
        "            torch.cuda._lazy_init()  # by its name, as torch's C++ side calls it\n"
        "        return self\n"
    ),
}

TRAINER = """\
import os, sys
import torch
interfaces = sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:])
print("driver sees", torch.cuda.is_available(), torch.cuda.device_count(), interfaces, os.environ["AGENTREPRO_REHEARSAL_PROGRAM"])
assert os.environ["HF_HUB_OFFLINE"] == "1" and interfaces == ["lo"], interfaces
{before}
model = torch.nn.Linear(4, 4)
model.to("cuda")  # BOUNDARY
print("never here")
"""


def rehearsed_study(tmp_path: Path, image, before: str = "", **resources) -> Path:
    """A verl-agent study in the test image whose train program is TRAINER, beside a stand-in torch; `resources` added
    to its own."""
    workdir = tmp_path / "verl-agent"
    ray = stand_in_checkout(workdir, str(PYTHON_IN_IMAGE))
    (workdir / "fake_trainer.py").write_text(TRAINER.format(before=before))
    (workdir / "torch").mkdir()
    for name, text in STAND_IN_TORCH.items():
        (workdir / "torch" / name).write_text(text)
    (tmp_path / "model").mkdir()
    manifest = {
        **BASE,
        "image": image.block(),
        "backend": {
            **BASE["backend"],
            "workdir": str(workdir),
            "model_path": str(tmp_path / "model"),
            "ray": {"executable": str(ray), "num_cpus": 5},
        },
    }
    manifest["resources"] = {**(manifest.get("resources") or {}), **resources}
    return write_study(tmp_path / "study", manifest)


def boundary_line() -> int:
    return next(i for i, line in enumerate(TRAINER.format(before="").splitlines(), 1) if "BOUNDARY" in line)


def rehearse(manifest: Path, out: Path, *args) -> subprocess.CompletedProcess:
    return run_cli(
        "rehearse", manifest, "--method", "gigpo", "--seed", "0", "--out", out, *args, cwd=manifest.parents[1]
    )


def test_the_hook_and_the_harness_name_the_same_variables():
    """The hook is standard library only, so it keeps its own copy of the rehearsal's names: they must agree."""
    assert (hook.FOLDER_ENV, hook.PROGRAM_ENV, hook.GPUS_ENV, hook.REACHED) == (
        rehearsal.FOLDER_ENV,
        rehearsal.PROGRAM_ENV,
        rehearsal.GPUS_ENV,
        rehearsal.REACHED,
    )


HOOK_PROGRAM = """\
import os
import torch
import torch.distributed as dist
print(torch.cuda.is_available(), torch.cuda.device_count())
if os.environ.get("NCCL"):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
    dist.init_process_group(backend="cpu:gloo,cuda:nccl", rank=0, world_size=1)  # NCCL
torch.zeros(2).to("cuda")  # CUDA
print("not reached")
"""


@pytest.mark.parametrize("nccl", [False, True])
def test_the_hook_stops_the_real_torch_at_its_first_gpu_use(tmp_path, nccl):
    """With the real torch: torch reports the job's GPUs, and moving a tensor to one (through torch's C++ side) or asking
    for an NCCL process group is recorded with the program's line, the process ending with REACHED; without the
    rehearsal's folder nothing is patched."""
    pytest.importorskip("torch")
    program = tmp_path / "program.py"
    program.write_text(HOOK_PROGRAM)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(map(str, (STARTUP_DIR, HOOKS_DIR))),
        **({"NCCL": "1"} if nccl else {}),
    }
    plain = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=300)
    fails = "doesn't have NCCL built in" if nccl else "not compiled with CUDA"  # this machine's CPU torch
    assert plain.stdout.startswith("False 0") and fails in plain.stderr
    env.update({hook.FOLDER_ENV: str(tmp_path), hook.GPUS_ENV: "4", hook.PROGRAM_ENV: "train"})
    ran = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == hook.REACHED and ran.stdout.splitlines() == ["True 4"], ran.stderr
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob(rehearsal.RECORDS)]
    mark = "# NCCL" if nccl else "# CUDA"
    line = next(i for i, text in enumerate(HOOK_PROGRAM.splitlines(), 1) if mark in text)
    assert record["program"] == "train" and record["frames"][0] == {
        "file": str(program),
        "line": line,
        "function": "<module>",
    }
    assert record["call"].startswith("torch.distributed.init_process_group" if nccl else "torch.cuda._lazy_init")


def test_a_job_that_reaches_the_gpus_holds(tmp_path, podman_images):
    """In the job's image, with loopback only and no GPU device: data preparation ends, the train program runs under
    the job's Ray head, torch reports the job's 2 GPUs, and the move of a model to one is recorded as the boundary at
    the trainer's line; the container is gone afterwards and the study's runs/ is untouched. Before freeze the job
    gets the task panel freeze will build (verl's validation envs play its games; without it they refuse to start)."""
    manifest = rehearsed_study(tmp_path, podman_images["a"])
    out = tmp_path / "rehearsal"
    result = rehearse(manifest, out, "--after-s", "30")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| prepare_data (prepare data) | ended |" in result.stdout and "memory:" not in result.stdout
    trainer = tmp_path / "verl-agent" / "fake_trainer.py"
    reached = f"| train (train) | reached the GPUs | torch.cuda._lazy_init at {trainer}:{boundary_line()} (<module>)"
    assert reached in result.stdout and "no network (--network none)" in result.stdout
    record = json.loads((out / "rehearsal.json").read_text())
    (boundary,) = record["boundary"]
    assert boundary["program"] == "train" and boundary["argv"][0] == "fake_trainer.py"
    assert "driver sees True 2 ['lo'] train" in (out / "run" / "logs" / "train.stdout.log").read_text()
    assert not (tmp_path / "study" / "runs").exists() and leftover_containers() == []
    config = yaml.safe_load((out / "config.yaml").read_text())  # no lock yet: the panel freeze would build
    assert [t["task_id"] for t in config["eval"]["task_panel"]] == ["t0", "t1", "t2", "t3"] and "lock" not in config


def test_a_frozen_study_is_rehearsed_from_its_lock(tmp_path, podman_images):
    """Given the lock, the job runs from the config `agentrepro resolve` writes: the lock named, the frozen panel in."""
    from agentrepro.lockfile import lock_sha256, read_lock

    manifest = rehearsed_study(tmp_path, podman_images["a"])
    root = manifest.parents[1]
    frozen = run_cli("freeze", manifest, "--allow-dirty", cwd=root)
    assert frozen.returncode == 0, frozen.stderr
    lock = root / "manifests" / "demo.lock.json"
    out = tmp_path / "rehearsal"
    result = run_cli("rehearse", lock, "--method", "gigpo", "--seed", "0", "--out", out, "--after-s", "30", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| train (train) | reached the GPUs |" in result.stdout
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["lock"]["sha256"] == lock_sha256(read_lock(lock))
    assert [t["task_id"] for t in config["eval"]["task_panel"]] == ["t0", "t1", "t2", "t3"]


def test_a_job_that_fails_before_the_gpus_does_not_hold(tmp_path, podman_images):
    """A program that fails on the way (as a download on an offline node does) is named with its last line: exit 1.
    Where the job will ask more memory than the rehearsal had (its SLURM job's, here the machine's), that is said."""
    failing = 'raise SystemExit("cannot reach huggingface.co")'
    manifest = rehearsed_study(tmp_path, podman_images["a"], failing, mem_mb=2**26)
    out = tmp_path / "rehearsal"
    result = rehearse(manifest, out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "| train (train) | failed |" in result.stdout and "cannot reach huggingface.co" in result.stdout
    assert "rehearsal does not hold" in result.stdout
    had = host_memory()[1] // 2**20
    assert f"memory: this rehearsal could hold {had} MB, less than the {2**26} MB its train job asks" in result.stdout
    assert json.loads((out / "rehearsal.json").read_text())["boundary"] == []


def test_a_job_that_hangs_is_stopped_at_the_time_limit(tmp_path, podman_images):
    """A program that neither reaches the GPUs nor ends (verl's env workers hang without games) is stopped, its
    container with it: exit 1."""
    manifest = rehearsed_study(tmp_path, podman_images["a"], "import time; time.sleep(600)")
    result = rehearse(manifest, tmp_path / "rehearsal", "--timeout-s", "30")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "| train (train) | stopped | still running when the rehearsal stopped the job |" in result.stdout
    assert leftover_containers() == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--method", "nope", "--seed", "0"], "--method: not a method of the study"),
        (["--method", "gigpo", "--seed", "7"], "--seed: not a seed of the study"),
        (["--method", "gigpo", "--seed", "0", "--timeout-s", "0"], "--timeout-s: expected a positive number"),
    ],
)
def test_bad_arguments_are_one_line(tmp_path, args, says):
    manifest = write_study(tmp_path)
    result = run_cli("rehearse", manifest, *args, cwd=tmp_path)
    assert result.returncode == 2 and says in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_folder_that_is_not_a_rehearsals_is_never_cleared(tmp_path):
    manifest = write_study(tmp_path)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = run_cli("rehearse", manifest, "--method", "gigpo", "--seed", "0", "--out", out, cwd=tmp_path)
    assert result.returncode == 2 and "not an earlier rehearsal's" in result.stderr, result.stderr
    assert (out / "notes.txt").read_text() == "keep me"
