"""The per-job Ray head script (hooks/agentrepro_ray_head.py), as the verl-agent backend runs it (`verl_agent.head_words` + the program): the program against this job's own
Ray head (a stand-in `ray`, or the real one when installed), its exit status, SIGTERM, and only that head stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import require_ray

from agentrepro.backends.verl_agent import backend as verl_agent
from agentrepro.errors import Failure
from agentrepro.hooks import agentrepro_ray_head as ray_head
from agentrepro.planning import StudyPlan


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie is dead for our purpose)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_dead(*pids: int, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)


def wrapped(run_dir, program: list[str], **ray) -> list[str]:
    """The argv the verl-agent backend launches for graphgpo-alfworld's gigpo: its Ray-job wrapper (with backend.ray
    settings) around `program`."""
    config = gigpo_config()
    config["backend"]["ray"] = ray
    config["resources"] = {
        **config["resources"],
        "gpus": ray.pop("gpus", 2),
        "mem_mb": ray.pop("mem_mb", 2000),  # the job's memory, which sizes Ray's object store: this machine's share
        **({"cpus": ray.pop("cpus")} if "cpus" in ray else {}),
    }
    return [*verl_agent.head_words(config, run_dir), *program]


def gigpo_config() -> dict:
    from helpers import REPO

    from agentrepro.manifest.loading import load_manifest
    from agentrepro.manifest.resolve import run_config

    manifest = load_manifest(REPO / "manifests" / "graphgpo-alfworld.yaml")
    lock = {"manifest": manifest, "study": manifest["study"], "resolved": {"files": {}}, "task_panel": None}
    return run_config(lock, "gigpo", 0, lock_path="lock.json")


def flag(args: list[str], name: str) -> str:
    return next(a for a in args if a.startswith(f"--{name}=")).split("=", 1)[1]


def test_program_gets_its_head_and_only_that_head_is_stopped(tmp_path, fake_ray):
    """The program sees RAY_ADDRESS of the head's reserved port and the job's environment; the head gets the job's
    temp dir, resources.cpus and .gpus, and as many worker ports as the preflight's demand (315 for gigpo with 55 CPUs);
    its exit status passes through; the head and its child die after, the pid file and the reservation go, and
    another job's process lives."""
    from helpers import REPO

    from agentrepro import preflight

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    key = ray_head.job_key(run_dir)
    decoy = subprocess.Popen(["sleep", "300"], start_new_session=True)
    ports_dir = tmp_path / "ports"
    try:
        program = [
            sys.executable,
            "-c",
            "import os, sys; print(os.environ['RAY_ADDRESS'], os.environ['EXTRA']); sys.exit(5)",
        ]
        result = subprocess.run(
            wrapped(run_dir, program, executable=str(fake_ray), cpus=55),
            capture_output=True,
            text=True,
            timeout=120,
            env={
                **os.environ,
                "FAKE_RAY_LOG": str(tmp_path / "ray.json"),
                "EXTRA": "a b",
                ray_head.PORTS_ENV: str(ports_dir),
            },
        )
        assert result.returncode == 5, result.stderr
        head = json.loads((tmp_path / "ray.json").read_text())
        port = int(flag(head["args"], "port"))
        assert result.stdout.strip() == f"127.0.0.1:{port} a b"
        assert f"--temp-dir={ray_head.temp_dir(key)}" in head["args"] and "--num-gpus=2" in head["args"]
        assert "--num-cpus=55" in head["args"]
        workers = int(flag(head["args"], "max-worker-port")) - int(flag(head["args"], "min-worker-port")) + 1
        demand = next(
            d
            for d in preflight.job_demands(StudyPlan(yaml_manifest(REPO, cpus=55), "m.yaml"), "gigpo", 0).demands
            if d.what == "Ray worker ports"
        )
        assert workers == demand.need == 260 + 55
        wait_dead(head["pid"], head["child"])
        assert not alive(head["pid"]) and not alive(head["child"])
        assert alive(decoy.pid) and not (run_dir / "ray_head.pid").exists()
        assert not list(ports_dir.glob("agentrepro-ray-*.ports"))
    finally:
        decoy.kill()
        decoy.wait()


def yaml_manifest(repo, *, cpus: int) -> dict:
    from agentrepro.manifest.loading import load_manifest

    manifest = load_manifest(repo / "manifests" / "graphgpo-alfworld.yaml")
    manifest["resources"] = {**manifest["resources"], "cpus": cpus}
    return manifest


def _head_on_port(tmp_path, fake_ray, port: int, wait_s: float) -> subprocess.Popen:
    argv = [sys.executable, "-m", "agentrepro.hooks.agentrepro_ray_head", "--key", "k", "--ray", str(fake_ray)]
    argv += ["--fixed-port", str(port), "--", sys.executable, "-c", "print('program ran')"]
    env = {
        **os.environ,
        "FAKE_RAY_LOG": str(tmp_path / "ray.json"),
        ray_head.PORTS_ENV: str(tmp_path / "ports"),
        ray_head.PORT_WAIT_ENV: str(wait_s),
    }
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_a_hard_coded_port_in_use_past_the_wait_refuses_to_start(tmp_path, fake_ray):
    """If a port the framework hard-codes stays in use on the node through the wait, nothing starts and the exit
    status is 75 (EX_TEMPFAIL: the scheduler's retry runs the job later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        proc = _head_on_port(tmp_path, fake_ray, s.getsockname()[1], wait_s=1)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 75 and "in use on this node" in stderr and "(waited 1 s)" in stderr
    assert not (tmp_path / "ray.json").exists()


def test_a_second_job_waits_for_the_hard_coded_port_and_starts_once_it_is_free(tmp_path, fake_ray):
    """Another job holds the port (Relax's Ray Serve on 8000): this one says it waits, and starts its head and program
    as soon as the port is free, instead of failing at once and having its retries fail too."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    proc = _head_on_port(tmp_path, fake_ray, s.getsockname()[1], wait_s=120)
    time.sleep(3)
    assert proc.poll() is None and not (tmp_path / "ray.json").exists()  # waiting, nothing started
    s.close()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "program ran" in stdout, stderr
    assert "waits for Ray ports" in stderr and (tmp_path / "ray.json").exists()


def sleeper(pid_file) -> list[str]:
    """A program that writes its PID to `pid_file`, then sleeps."""
    return [
        sys.executable,
        "-c",
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(300)",
    ]


def wait_for_file(path, proc, timeout_s: float = 60) -> None:
    """Until `path` holds something, `proc` still running."""
    deadline = time.monotonic() + timeout_s
    while not path.is_file() or not path.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)


def test_sigterm_stops_the_program_and_the_head(tmp_path, fake_ray):
    """SIGTERM to the wrapper (a scheduler's time limit) stops the program and this job's head and its child; exit 143."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    program = sleeper(tmp_path / "program.pid")
    proc = subprocess.Popen(
        wrapped(run_dir, program, executable=str(fake_ray)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "FAKE_RAY_LOG": str(tmp_path / "ray.json"), ray_head.PORTS_ENV: str(tmp_path)},
    )
    try:
        wait_for_file(tmp_path / "program.pid", proc)
        pid, namespace = (run_dir / "ray_head.pid").read_text().split()  # the head's PID, in this PID namespace
        assert (
            namespace == os.readlink("/proc/self/ns/pid")
            and int(pid) == json.loads((tmp_path / "ray.json").read_text())["pid"]
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
    head, program_pid = json.loads((tmp_path / "ray.json").read_text()), int((tmp_path / "program.pid").read_text())
    wait_dead(head["pid"], head["child"], program_pid)
    assert not alive(head["pid"]) and not alive(head["child"]) and not alive(program_pid)
    assert not (run_dir / "ray_head.pid").exists()


OWNER = """\
import sys, time
from pathlib import Path
from agentrepro.backends import ray_head
with ray_head.owned(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(300)
"""


def test_a_job_whose_agentrepro_is_killed_stops_its_program_and_head(tmp_path, fake_ray):
    """The head launcher watches the program's owner lock (backends/ray_head.owned, held by the agentrepro process that
    runs the program): SIGKILL of that process (which leaves a container's programs running) frees it, and the launcher
    stops the program and this job's head within seconds, exit 143. A second holder of the lock is refused."""
    from agentrepro.backends import ray_head as backend_head

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock = backend_head.owner_lock(run_dir, "train")
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(lock)], stdout=subprocess.PIPE, text=True)
    assert owner.stdout.readline().strip() == "held"
    with pytest.raises(Failure, match="another process runs this program"), backend_head.owned(lock):
        pass
    program = sleeper(tmp_path / "program.pid")
    proc = subprocess.Popen(
        wrapped(run_dir, program, executable=str(fake_ray)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "FAKE_RAY_LOG": str(tmp_path / "ray.json"),
            ray_head.PORTS_ENV: str(tmp_path),
            ray_head.OWNER_ENV: str(lock),
        },
    )
    try:
        wait_for_file(tmp_path / "program.pid", proc)
        time.sleep(3)
        assert proc.poll() is None  # the owner lives: the job goes on
        owner.kill()
        owner.wait()
        assert proc.wait(timeout=60) == 143
    finally:
        for p in (proc, owner):
            if p.poll() is None:
                p.kill()
    head, program_pid = json.loads((tmp_path / "ray.json").read_text()), int((tmp_path / "program.pid").read_text())
    wait_dead(head["pid"], head["child"], program_pid)
    assert not alive(head["pid"]) and not alive(head["child"]) and not alive(program_pid)
    assert "the process that ran this job is gone" in proc.stderr.read()


@pytest.mark.slow
def test_real_ray_private_head(tmp_path):
    """With real Ray: the program's ray.init() joins this job's head (our CPU count, our temp dir, an object store
    and memory sized from the job's 2,000 MB, not the node's memory), which is gone afterwards."""
    import psutil

    ray, python = require_ray()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    key = ray_head.job_key(run_dir)
    probe = (
        "import ray; ray.init(); ctx = ray._private.worker._global_node; "
        "r = ray.cluster_resources(); "
        "print(int(r['CPU']), int(r['object_store_memory']), int(r['memory']), ctx.get_session_dir_path())"
    )
    argv = wrapped(
        run_dir, [python, "-c", probe], executable=ray, num_cpus=1, gpus=0, client=False, worker_ports=20
    )  # minimal Ray: no client server
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    cpus, store, memory, session = result.stdout.split()[-4:]
    assert cpus == "1" and session.startswith(ray_head.temp_dir(key) + "/")
    job = 2000 * 1024 * 1024
    assert abs(int(store) - 0.3 * job) < 0.01 * job and abs(int(memory) - 0.7 * job) < 0.01 * job
    leftovers = [
        proc.pid
        for proc in psutil.process_iter(["cmdline", "status"])
        if proc.info["status"] != psutil.STATUS_ZOMBIE
        and ray_head.temp_dir(key) in " ".join(proc.info["cmdline"] or [])
    ]
    assert leftovers == []


ORPHANS = """\
import os, time
for _ in range(5):   # each child leaves a grandchild that ends after the child: an orphan given to PID 1
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            time.sleep(0.3)
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
time.sleep(4)
zombies = []
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            if open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                zombies.append(entry)
        except OSError:
            pass
print("zombies", len(zombies), "launcher pid", os.getppid())
"""


def test_in_a_container_the_launcher_reaps_the_jobs_orphans(tmp_path, podman_images):
    """In the test image without --init (catatonit is not installed here), the head launcher is the container's PID 1:
    the orphans the program leaves are reaped, not left as zombies for the job's lifetime."""
    from helpers import load_file_module
    from podman_kit import PYTHON as PYTHON_IN_IMAGE
    from podman_kit import podman

    from agentrepro.hooks import HOOKS_DIR

    checkout = load_file_module("verl_checkout", Path(__file__).with_name("verl_checkout.py"))
    ray = checkout.stand_in_checkout(tmp_path / "checkout", str(PYTHON_IN_IMAGE))
    (tmp_path / "orphans.py").write_text(ORPHANS)
    (tmp_path / "ports").mkdir()
    result = podman(
        "run", "--rm", "--network", "none", "--volume", f"{HOOKS_DIR}:{HOOKS_DIR}:ro",
        "--volume", f"{tmp_path}:{tmp_path}", "--env", f"{ray_head.PORTS_ENV}={tmp_path / 'ports'}",
        podman_images["a"].ref, "python3", str(HOOKS_DIR / "agentrepro_ray_head.py"), "--key", "k", "--ray", str(ray),
        "--", "python3", str(tmp_path / "orphans.py"),
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "zombies 0 launcher pid 1" in result.stdout, result.stdout
