"""ray_job, as the verl-agent backend runs it (`verl_agent.ray_head` + the program): the program against this job's own
Ray head (a stand-in `ray`, or the real one when installed), its exit status, SIGTERM, and only that head stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from agentrepro.backends import ray_launch
from agentrepro.backends.verl_agent import backend as verl_agent


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
    """The argv the verl-agent backend launches: its Ray-job wrapper (with backend.ray settings) around `program`."""
    return [*verl_agent.ray_head({"backend": {"ray": ray}, "resources": {"gpus": ray.pop("gpus", 2)}}, run_dir), *program]


def test_program_gets_its_head_and_only_that_head_is_stopped(tmp_path, fake_ray):
    """The program sees RAY_ADDRESS of this job's port and the job's environment; its exit status passes through; the
    head (on this job's ports and temp dir) and its child die after, the pid file goes, and another job's process lives."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    key = ray_launch.job_key(run_dir)
    decoy = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        program = [sys.executable, "-c", "import os, sys; print(os.environ['RAY_ADDRESS'], os.environ['EXTRA']); sys.exit(5)"]
        result = subprocess.run(wrapped(run_dir, program, executable=str(fake_ray)), capture_output=True, text=True, timeout=120,
                                env={**os.environ, "FAKE_RAY_LOG": str(tmp_path / "ray.json"), "EXTRA": "a b"})
        assert result.returncode == 5, result.stderr
        port = ray_launch.ray_ports(key).head
        assert result.stdout.strip() == f"127.0.0.1:{port} a b"
        head = json.loads((tmp_path / "ray.json").read_text())
        assert f"--port={port}" in head["args"] and f"--temp-dir={ray_launch.temp_dir(key)}" in head["args"]
        assert "--num-gpus=2" in head["args"]
        wait_dead(head["pid"], head["child"])
        assert not alive(head["pid"]) and not alive(head["child"])
        assert alive(decoy.pid) and not (run_dir / "ray_head.pid").exists()
    finally:
        decoy.kill()
        decoy.wait()


def test_a_taken_head_port_refuses_to_start(tmp_path, fake_ray):
    """If the derived head port is already listening, nothing starts and the exit status is 75 (EX_TEMPFAIL)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", ray_launch.ray_ports(ray_launch.job_key(run_dir)).head))
        s.listen()
        result = subprocess.run(wrapped(run_dir, ["true"], executable=str(fake_ray)), capture_output=True, text=True, timeout=60,
                                env={**os.environ, "FAKE_RAY_LOG": str(tmp_path / "ray.json")})
    assert result.returncode == 75 and "already in use" in result.stderr
    assert not (tmp_path / "ray.json").exists()


def test_sigterm_stops_the_program_and_the_head(tmp_path, fake_ray):
    """SIGTERM to the wrapper (a scheduler's time limit) stops the program and this job's head and its child; exit 143."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    program = [sys.executable, "-c", f"import os, time; open({str(tmp_path / 'program.pid')!r}, 'w').write(str(os.getpid())); time.sleep(300)"]
    proc = subprocess.Popen(wrapped(run_dir, program, executable=str(fake_ray)), env={**os.environ, "FAKE_RAY_LOG": str(tmp_path / "ray.json")},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "program.pid").is_file() or not (tmp_path / "program.pid").read_text():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
    head, program_pid = json.loads((tmp_path / "ray.json").read_text()), int((tmp_path / "program.pid").read_text())
    wait_dead(head["pid"], head["child"], program_pid)
    assert not alive(head["pid"]) and not alive(head["child"]) and not alive(program_pid)
    assert not (run_dir / "ray_head.pid").exists()


def real_ray() -> tuple[str, str]:
    """The `ray` executable (AGENTREPRO_RAY or PATH) and the Python beside it; skip unless required."""
    import shutil
    from pathlib import Path

    from helpers import require

    ray = os.environ.get("AGENTREPRO_RAY") or shutil.which("ray")
    python = Path(ray).with_name("python") if ray else None
    require("ray", bool(ray) and python.exists(), "no `ray` executable (set AGENTREPRO_RAY to one, e.g. a venv's bin/ray)")
    return ray, str(python)


@pytest.mark.slow
def test_real_ray_private_head(tmp_path):
    """With real Ray: the program's ray.init() joins this job's head (our CPU count, our temp dir), which is gone afterwards."""
    import psutil

    ray, python = real_ray()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    key = ray_launch.job_key(run_dir)
    probe = ("import ray; ray.init(); ctx = ray._private.worker._global_node; "
             "print(int(ray.cluster_resources()['CPU']), ctx.get_session_dir_path())")
    argv = wrapped(run_dir, [python, "-c", probe], executable=ray, num_cpus=1, gpus=0, client=False)  # minimal Ray has no client server
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    cpus, session = result.stdout.split()[-2:]
    assert cpus == "1" and session.startswith(ray_launch.temp_dir(key) + "/")
    leftovers = [proc.pid for proc in psutil.process_iter(["cmdline", "status"])
                 if proc.info["status"] != psutil.STATUS_ZOMBIE and ray_launch.temp_dir(key) in " ".join(proc.info["cmdline"] or [])]
    assert leftovers == []
