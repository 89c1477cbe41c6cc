"""What SLURM says about a job (agentrepro/slurm.py), and a job under its node's confinement: the local SLURM
(scripts/slurm-cluster.sh) confines each job to its CPUs and its memory with cgroup v1 where this machine allows it,
as a cluster's nodes do. Inside such a job the trainer's memory (`host_memory`) is the job's --mem, not the node's,
and a job that outgrows it is killed by the kernel; SLURM ends it as OUT_OF_MEMORY, `agentrepro status` says so, and
the retry's attempt records it. The job that outgrows its memory is a stand-in for a training: it opens its attempt
as `agentrepro train` does (`start_attempt`), then allocates until it is killed. A rootful podman or docker container
started in a job is made under the job's cgroup, so the job's memory limit holds it too; a cluster user's rootless
podman container is inside the job's cgroups by itself, and a cancelled job's container ends with it."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import psutil
import pytest
from helpers import REPO, require
from podman_kit import CONTAINERS_CONF, python_rootfs, require_podman

from agentrepro import cgroups, containers, slurm
from agentrepro.attempts import newest_attempt, read_provenance, start_attempt
from agentrepro.jobs.progress import _attempt_state

MIB = 2**20

PROBE = """
import json, os
from agentrepro.cgroups import host_memory
memory = [line for line in open("/proc/self/cgroup").read().splitlines() if ":memory:" in line]
print(json.dumps({"total": host_memory()[1], "cpus": len(os.sched_getaffinity(0)), "cgroup": memory}))
"""

OUTGROWS = """
import sys
from agentrepro.attempts import start_attempt
start_attempt(sys.argv[1], stage="train", command="a stand-in training that outgrows its memory", base={})
held = []
while True:
    held.append(b"x" * (32 << 20))
"""


# in the job: the same program twice in a container of the image block argv[2] (podman or docker), as
# containers.program wraps it, the first time with the job's SLURM_JOB_ID hidden (so the container's cgroup is the
# runtime's own, as without --cgroup-parent)
IN_CONTAINER = """
import json, os, subprocess, sys
from pathlib import Path
from agentrepro import containers
run_dir, block, job_id = Path(sys.argv[1]), json.loads(sys.argv[2]), os.environ["SLURM_JOB_ID"]
seen = {}
for label in ("outside", "inside"):
    out = run_dir / label
    out.mkdir()
    os.environ.pop("SLURM_JOB_ID") if label == "outside" else os.environ.update(SLURM_JOB_ID=job_id)
    config = {"image": block, "resources": {"gpus": 0}}
    program = containers.program(
        config, ["python3", "-c", sys.argv[3]], {"OUT": str(out)}, None, run_dir=run_dir, job_dir=run_dir, label=label
    )
    with containers.proven(program, run_dir):
        done = subprocess.run(list(program.argv), env={**os.environ, **program.env})
    seen[label] = {"rc": done.returncode, "parent": program.cgroup_parent}
print(json.dumps(seen))
"""
# in the container: where it is, then 640 MiB in 32 MiB blocks, each written down as it is held
GROWS = """
import os
out = os.environ["OUT"]
open(os.path.join(out, "cgroup"), "w").write(open("/proc/self/cgroup").read())
held = []
for _ in range(20):
    held.append(b"x" * (32 << 20))
    open(os.path.join(out, "held"), "w").write(str(32 * len(held)))
"""


def _confined() -> None:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    if "proctrack/cgroup" not in config or "task/cgroup" not in config:
        pytest.skip("the local SLURM runs without cgroups here (no writable cgroup v1 hierarchies: slurm-cluster.sh)")


def _sbatch(tmp_path, program: str, *args: str, flags: tuple[str, ...], step: bool = False) -> str:
    """Submit `python -c PROGRAM ARGS` as a batch job: a child of the batch script's /bin/sh, or with `step` in a job
    step of its own (`srun -n1`), as Snakemake's SLURM executor runs a rule's command."""
    wrap = ("srun -n1 " if step else "") + shlex.join([sys.executable, "-c", program, *args])
    out = tmp_path / "job.out"
    sbatch = ["sbatch", "--parsable", *flags, "--chdir", str(tmp_path), "--output", str(out), "--wrap", wrap]
    return subprocess.run(sbatch, capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def _ended(job: str, deadline_s: float = 120) -> str:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        state = (slurm.job_states({job}) or {}).get(job, ("", ""))[0]
        if state and state not in slurm.RUNNING | slurm.WAITING:
            return state
        time.sleep(0.5)
    pytest.fail(f"SLURM job {job} did not end within {deadline_s} s")


def _job_cgroups(job: str, deadline_s: float = 30) -> list:
    """The cgroups of SLURM job `job` in every hierarchy, once none is left or after `deadline_s`."""
    deadline = time.monotonic() + deadline_s
    while (left := [g for root in cgroups.hierarchies() for g in root.glob(f"slurm_*/uid_*/job_{job}")]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)
    return left


def _block(request, runtime: str, study) -> dict:
    """The image block of the test image for `runtime`: podman's pinned image, or the docker archive copied into the
    study folder `study` (a job's --chdir), pinned by its hash."""
    if runtime == "podman":
        return request.getfixturevalue("podman_images")["a"].block()
    return request.getfixturevalue("docker_image").place(study)


@pytest.mark.slurm
def test_a_job_sees_its_own_memory_and_cpus_not_the_nodes(slurm_cluster, tmp_path):
    """--mem=500 --cpus-per-task=1: the trainer's memory is 500 MiB (the job's cgroup v1 limit, under the node's own
    slurm_<node> hierarchy), though psutil reads the node's; the job runs on one CPU."""
    _confined()
    job = _sbatch(tmp_path, PROBE, flags=("--wait", "--mem=500", "--cpus-per-task=1"))
    seen = json.loads((tmp_path / "job.out").read_text().strip().splitlines()[-1])
    assert seen["total"] == 500 * MIB < psutil.virtual_memory().total, seen
    assert seen["cpus"] == 1, seen
    assert any(f"/job_{job}/" in line and "/slurm_" in line for line in seen["cgroup"]), seen


@pytest.mark.slurm
def test_a_job_over_its_memory_ends_out_of_memory_and_its_retry_records_so(slurm_cluster, tmp_path):
    """A job of --mem=256 whose process keeps allocating is killed in its cgroup: SLURM ends it as OUT_OF_MEMORY;
    while the controller lists it, status says the attempt stopped so, and the retry's attempt records it killed with
    `slurm_state` and a reason that names resources.mem_mb."""
    _confined()
    run = tmp_path / "run"
    run.mkdir()
    job = _sbatch(tmp_path, OUTGROWS, str(run), flags=("--mem=256", "--cpus-per-task=1"))
    assert _ended(job) == "OUT_OF_MEMORY", (tmp_path / "job.out").read_text()[-2000:]
    attempt = newest_attempt(read_provenance(run))
    assert attempt["status"] == "running" and attempt["slurm_job_id"] == job  # never closed: killed mid-way
    state, detail = _attempt_state(attempt, False, slurm.job_states({job}))
    assert state == "stopped" and "OUT_OF_MEMORY" in detail and "resources.mem_mb" in detail, detail
    assert slurm.ended_as(job) == "OUT_OF_MEMORY"
    env = os.environ.pop("SLURM_JOB_ID", None)
    try:
        start_attempt(run, stage="train", command="the retry", base={})
    finally:
        if env is not None:
            os.environ["SLURM_JOB_ID"] = env
    first, second = read_provenance(run)["attempts"]
    assert first["status"] == "killed" and first["slurm_state"] == "OUT_OF_MEMORY", first
    assert f"SLURM ended job {job} as OUT_OF_MEMORY" in first["reason"] and "resources.mem_mb" in first["reason"]
    assert second["status"] == "running"


def test_accountings_state_is_read_first_and_who_cancelled_is_left_out(tmp_path, monkeypatch):
    """Where the cluster keeps accounting, `sacct` says how a job ended ("CANCELLED by 0": the state is CANCELLED);
    where sacct says nothing, the controller's listing does; a job still running has not ended. (Stand-in commands on
    PATH: the local SLURM keeps no accounting.)"""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in {
        "sacct": 'case "$*" in *--jobs=7*) echo "CANCELLED by 0";; *) exit 1;; esac',
        "squeue": 'case "$*" in *--jobs=8*) echo "8|TIMEOUT|n1";; *--jobs=9*) echo "9|RUNNING|n1";; esac',
    }.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{text}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert [slurm.ended_as(job) for job in ("7", "8", "9")] == ["CANCELLED", "TIMEOUT", None]
    assert (
        slurm.ended("8", "TIMEOUT") == "SLURM ended job 8 as TIMEOUT: it reached its time limit (resources.runtime_min)"
    )
    assert slurm.ended("9", "FAILED") == "SLURM ended job 9 as FAILED"


@pytest.mark.slurm
@pytest.mark.parametrize("runtime", ["podman", "docker"])
def test_a_rootful_container_in_a_job_is_held_by_the_jobs_memory(runtime, slurm_cluster, request, tmp_path):
    """--mem=300: the container made with the runtime's own cgroup (podman's `/libpod_parent`, docker's daemon's
    `/docker`) holds all 640 MiB, past the job's limit; made under the job's (`--cgroup-parent`, the job step's cgroup)
    it is killed at 300 MiB, its cgroup inside the job's in every hierarchy. After the job no cgroup of it is left
    anywhere: podman's conmon cgroup and the path runc made in the hierarchies SLURM does not manage are removed with
    the container, so SLURM can remove its own."""
    _confined()
    if os.geteuid() != 0:
        pytest.skip("rootful podman and docker: the tests run them as root")
    run = tmp_path / "run"
    run.mkdir()
    own, made = ("/libpod_parent/", "/libpod-") if runtime == "podman" else ("/docker/", "/")
    block = json.dumps(_block(request, runtime, tmp_path))
    job = _sbatch(tmp_path, IN_CONTAINER, str(run), block, GROWS, flags=("--wait", "--mem=300", "--cpus-per-task=1"))
    seen = json.loads((tmp_path / "job.out").read_text().strip().splitlines()[-1])
    assert seen["outside"] == {"rc": 0, "parent": None}, seen
    assert int((run / "outside" / "held").read_text()) == 640
    assert own in (run / "outside" / "cgroup").read_text()
    parent = seen["inside"]["parent"]
    assert parent.endswith(f"/job_{job}/step_batch") and seen["inside"]["rc"] == 137, seen
    assert int((run / "inside" / "held").read_text()) < 300
    lines = (run / "inside" / "cgroup").read_text().splitlines()
    assert lines and all(line.split(":", 2)[2].startswith(parent + made) for line in lines), lines
    assert _job_cgroups(job) == []


JOB_USER = "agentrepro-user"  # the local SLURM's cluster user (scripts/slurm-cluster.sh)


def _as_user(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    """`argv` run as JOB_USER in its HOME (the tests' working directory may be a folder the user cannot enter)."""
    return subprocess.run(
        ["runuser", "-u", JOB_USER, "--", "env", *(f"{k}={v}" for k, v in env.items()), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=env["HOME"],
    )


@contextlib.contextmanager
def _users_podman():
    """(folder, environment, image block) of JOB_USER's rootless podman: the test image imported into a store of the
    user's own, and agentrepro's source where the user can read it (the checkout may be private), run by Debian's
    Python with Debian's psutil and PyYAML, in a world-readable folder removed afterwards with the user's processes."""
    require_podman()
    require("podman", shutil.which("newuidmap") is not None, "uidmap (newuidmap) is missing: scripts/system-deps.sh")
    require("slurm", _has_user(JOB_USER), f"no user {JOB_USER}: scripts/slurm-cluster.sh start makes it")
    require("podman", pathlib.Path("/dev/mqueue").is_dir(), "no /dev/mqueue: scripts/slurm-cluster.sh start mounts it")
    debian = subprocess.run(["/usr/bin/python3", "-c", "import psutil, yaml"], capture_output=True)
    require("podman", debian.returncode == 0, "Debian's python3-psutil and python3-yaml: scripts/system-deps.sh")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="agentrepro-rootless."))
    try:
        folder.chmod(0o755)
        shutil.copytree(
            REPO / "src" / "agentrepro", folder / "src" / "agentrepro", ignore=shutil.ignore_patterns("__pycache__")
        )
        python_rootfs(folder / "rootfs.tar", "a")
        (folder / "containers.conf").write_text(CONTAINERS_CONF)
        home = folder / "home"
        (folder / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\ngraphroot = "{home}/graph"\nrunroot = "{home}/run"\n'
        )
        for path in (home, folder / "run"):
            path.mkdir()
            shutil.chown(path, JOB_USER, JOB_USER)
        subprocess.run(["chmod", "-R", "a+rX", str(folder)], check=True)
        env = {
            "HOME": str(home),
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "PYTHONPATH": str(folder / "src"),
            "CONTAINERS_CONF": str(folder / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(folder / "storage.conf"),
        }
        ref = "localhost/agentrepro-test/python:a"
        imported = _as_user(env, "podman", "import", "--quiet", str(folder / "rootfs.tar"), ref)
        assert imported.returncode == 0, imported.stderr
        digest = _as_user(env, "podman", "image", "inspect", "--format", "{{.Digest}}", ref).stdout.strip()
        yield folder, env, {"runtime": "podman", "ref": ref, "digest": digest}
    finally:
        subprocess.run(["pkill", "-KILL", "-u", JOB_USER], timeout=30)  # rootless podman's pause process
        shutil.rmtree(folder, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.mark.slurm
def test_a_users_rootless_podman_container_is_held_by_the_job_and_ends_with_it(slurm_cluster):
    """A cluster user's job (not root's), as Snakemake's SLURM executor runs a rule (a job step), runs its program in
    rootless podman: the user's own image store, root mapped to the user. Under cgroup v1 rootless podman makes the
    container's cgroups where the user may, inside the job step's (SLURM gives the job's cgroups to its user), so
    --mem=300 kills the container at 300 MiB without --cgroup-parent; cancelled, it ends with the job, nothing of it
    left in the user's store or the job's cgroups."""
    _confined()
    if os.geteuid() != 0:
        pytest.skip("runs a job as another user: needs root")
    with _users_podman() as (folder, env, block):
        run = folder / "run"

        def submit(program: str, *flags: str) -> str:
            wrap = shlex.join(
                ["srun", "-n1", "/usr/bin/python3", "-c", CONTAINED_LAUNCH, str(run), json.dumps(block), program]
            )
            sbatch = ["sbatch", "--parsable", f"--uid={JOB_USER}", f"--gid={JOB_USER}", "--mem=300", "--export=ALL"]
            sbatch += [*flags, "--chdir", str(run), "--output", str(run / "job.out"), "--wrap", wrap]
            done = subprocess.run(sbatch, capture_output=True, text=True, timeout=60, env=env)
            assert done.stdout.strip(), done.stderr  # with --wait, sbatch's exit status is the job's
            return done.stdout.strip()

        job = submit(GROWS, "--wait")
        assert _ended(job) == "FAILED", (run / "job.out").read_text()[-2000:]
        log = (run / "logs" / "train.stderr.log").read_text()
        assert "--cgroup-parent" not in log and "exit status 137" in (run / "job.out").read_text()
        assert int((run / "held").read_text()) < 300
        memory = [line for line in (run / "cgroup").read_text().splitlines() if ":memory:" in line]
        assert memory and f"/uid_{pwd.getpwnam(JOB_USER).pw_uid}/job_{job}/step_0/" in memory[0], memory
        assert _job_cgroups(job) == []

        job = _cancel_once_up(submit(UP_FOR_LONG), run, run / "job.out")
        assert _as_user(env, "podman", "ps", "--all", "--quiet").stdout.split() == []
        assert _job_cgroups(job) == []
        left = [
            p.info["cmdline"] for p in psutil.process_iter(["username", "cmdline"]) if p.info["username"] == JOB_USER
        ]
        assert all(cmd == ["podman"] for cmd in left), left  # rootless podman's pause process alone


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (None, "sinfo is not on PATH here"),
        ("echo 'slurm_load_partitions: Unable to contact slurm controller' >&2; exit 1", "sinfo failed: slurm_load"),
        ("echo 'short|ten minutes|1|4|8000|(null)'", "sinfo's answer could not be read: short|ten minutes"),
        ("true", ""),  # no such partition
        ("echo 'gpu*|1-00:00:00|2|64|512000|gpu:h100:4(S:0-1)'", None),
    ],
)
def test_a_partition_sinfo_cannot_tell_about_is_said_with_why(script, said, tmp_path, monkeypatch):
    """read_partition's answer for each way sinfo answers (a stand-in `sinfo` printing what SLURM's does): absent,
    failing, an answer it cannot read, no such partition, and a partition of two nodes of 4 H100s each."""
    monkeypatch.setenv("PATH", str(tmp_path))
    if script is not None:
        (tmp_path / "sinfo").write_text(f"#!/bin/sh\n{script}\n")
        (tmp_path / "sinfo").chmod(0o755)
    found = slurm.read_partition("gpu")
    if said is None:
        assert found == slurm.Partition("gpu", minutes=1440, nodes=2, cpus=64, mem_mb=512000, gpus={"h100": 4})
    else:
        assert isinstance(found, str) and (found.startswith(said) if said else found == "")


# in the job: a contained launch run as a verb runs it (backends/launch.py run_launch, SIGTERM turned into an exception
# as `agentrepro train` does); the program is its container's first process, which ignores SIGTERM as PID 1 does
# without a handler, and says it is up
CONTAINED_LAUNCH = """
import json, sys
from pathlib import Path
from agentrepro.backends.launch import Launch, contain, run_launch
from agentrepro.process import install_sigterm_handler
run_dir, block, program = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
install_sigterm_handler()
launch = Launch("train", ("python3", "-c", program), {"OUT": str(run_dir)})
config = {"image": block, "resources": {"gpus": 0}}
run_launch(contain(launch, config, run_dir=run_dir, job_dir=run_dir, label="train"), run_dir, "train")
"""
UP_FOR_LONG = (
    "import os, time; open(os.path.join(os.environ['OUT'], 'up'), 'w').write(str(os.getpid())); time.sleep(600)"
)


def _containers(runtime: str) -> list[str]:
    listed = subprocess.run([runtime, "ps", "--all", "--quiet"], capture_output=True, text=True, check=True, timeout=60)
    return listed.stdout.split()


def _cancelled(tmp_path, request, runtime: str, step: bool) -> tuple[str, pathlib.Path]:
    """(job, run directory) of a batch job (--mem=300) whose contained launch ran UP_FOR_LONG in a container of
    `runtime` (in a job step of its own with `step`), cancelled with scancel once the program was up."""
    _confined()
    if os.geteuid() != 0:
        pytest.skip("rootful podman and docker: the tests run them as root")
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    block = json.dumps(_block(request, runtime, tmp_path))
    job = _sbatch(tmp_path, CONTAINED_LAUNCH, str(run), block, UP_FOR_LONG, flags=("--mem=300",), step=step)
    return _cancel_once_up(job, run, tmp_path / "job.out"), run


def _cancel_once_up(job: str, run: pathlib.Path, out: pathlib.Path) -> str:
    """`job`, cancelled with scancel once its program (UP_FOR_LONG) is up in `run`, and ended so."""
    deadline = time.monotonic() + 120
    while not (run / "up").exists():
        assert time.monotonic() < deadline, out.read_text()
        time.sleep(0.5)
    subprocess.run(["scancel", job], check=True, timeout=60)
    assert _ended(job) == "CANCELLED"
    return job


@pytest.mark.slurm
@pytest.mark.parametrize("runtime", ["podman", "docker"])
def test_a_cancelled_jobs_container_is_stopped_and_removed_with_it(runtime, slurm_cluster, request, tmp_path):
    """scancel sends the job's steps SIGTERM, then SIGKILL after KillWait (5 s here). SLURM signals only the processes
    in a step's own cgroup, not the container's below it, and the program, its container's first process, ignores
    SIGTERM. agentrepro, in a job step as Snakemake's SLURM executor runs a rule (`srun -n1`), has the container
    stopped at once: the container is gone, with its cgroups, before SLURM's SIGKILL, and its record was kept."""
    job, run = _cancelled(tmp_path, request, runtime, step=True)
    assert _job_cgroups(job) == []
    assert _containers(runtime) == []
    [record] = containers.attempt_extra(run)["containers"]
    assert record["label"] == "train" and record["runtime"] == runtime


@pytest.mark.slurm
@pytest.mark.parametrize("runtime", ["podman", "docker"])
def test_a_container_outlives_a_cancelled_batch_shell_until_the_next_attempt(runtime, slurm_cluster, request, tmp_path):
    """In a batch script without srun, agentrepro is a child of the script's /bin/sh: on scancel the shell ends at
    SIGTERM and SLURM kills the rest of the step at once, before agentrepro can act, so the container, which SLURM
    does not see, runs on after its job (docs/containers.md, "When a job is killed"). The next attempt of the run
    removes it, and the cgroups it left in the cancelled job, which SLURM could not remove."""
    job, run = _cancelled(tmp_path, request, runtime, step=False)
    running = subprocess.run([runtime, "ps", "--quiet"], capture_output=True, text=True, check=True, timeout=60)
    assert running.stdout.split() == [(run / "logs" / "train.cid").read_text().strip()[:12]]
    assert _job_cgroups(job, deadline_s=5) != []
    (run / "up").unlink()
    retry = _sbatch(
        tmp_path,
        CONTAINED_LAUNCH,
        str(run),
        json.dumps(_block(request, runtime, tmp_path)),
        "pass",
        flags=("--wait", "--mem=300"),
    )
    assert _ended(retry) == "COMPLETED"
    assert "removed container" in (tmp_path / "job.out").read_text()
    assert _job_cgroups(job) == [] and _job_cgroups(retry) == []
    assert _containers(runtime) == []


@pytest.mark.slurm
@pytest.mark.parametrize("runtime", ["podman", "docker"])
def test_the_node_epilog_removes_a_killed_jobs_container_and_cgroups(runtime, slurm_cluster, request, tmp_path):
    """profiles/slurm/epilog-containers.sh, run as SLURM runs a node's epilog (root, SLURM_JOB_ID), after a job whose
    container outlived it: the container is gone, and so are the cgroups it left in the job's; another container of
    the runtime, made outside any job, is left alone."""
    job, _ = _cancelled(tmp_path, request, runtime, step=False)
    assert len(_containers(runtime)) == 1 and _job_cgroups(job, deadline_s=5) != []
    block = _block(request, runtime, tmp_path)
    image = (
        block["ref"] + "@" + block["digest"]
        if runtime == "podman"
        else containers.archive_image_id(tmp_path / block["file"])
    )
    bystander = subprocess.run([runtime, "create", image, "true"], capture_output=True, text=True, check=True).stdout
    epilog = REPO / "profiles" / "slurm" / "epilog-containers.sh"
    done = subprocess.run(["sh", str(epilog)], env={**os.environ, "SLURM_JOB_ID": job}, timeout=120)
    assert done.returncode == 0
    assert _containers(runtime) == [bystander.strip()[:12]]
    assert _job_cgroups(job, deadline_s=5) == []
    subprocess.run([runtime, "rm", "--force", bystander.strip()], capture_output=True, check=True, timeout=60)
