"""ray_job: a program run against the job's own Ray head (stand-in `ray`), and the refusal when the head port is taken."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from agentrepro.backends import ray_launch


def test_program_gets_the_head_address_and_its_exit_status(tmp_path, fake_ray):
    """PROGRAM sees RAY_ADDRESS of this job's head; its exit status is returned; the head is stopped afterwards."""
    program = [sys.executable, "-c", "import os, sys; print(os.environ['RAY_ADDRESS']); sys.exit(3)"]
    key = f"test-{tmp_path.name}"
    result = subprocess.run([sys.executable, "-m", "agentrepro.backends.ray_job", "--key", key, "--ray", str(fake_ray),
                             "--num-gpus", "2", "--", *program], capture_output=True, text=True,
                            env={**__import__("os").environ, "FAKE_RAY_LOG": str(tmp_path / "ray.json")})
    assert result.returncode == 3, result.stderr
    assert result.stdout.strip() == f"127.0.0.1:{ray_launch.ray_ports(key).head}"
    head = json.loads((tmp_path / "ray.json").read_text())
    assert "--num-gpus=2" in head["args"]
    assert subprocess.run(["kill", "-0", str(head["pid"])], capture_output=True).returncode != 0


def test_a_taken_head_port_refuses_to_start(tmp_path, fake_ray):
    """If the derived head port is already listening, nothing starts and the exit status is 75 (EX_TEMPFAIL)."""
    key = f"busy-{tmp_path.name}"
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", ray_launch.ray_ports(key).head))
        s.listen()
        result = subprocess.run([sys.executable, "-m", "agentrepro.backends.ray_job", "--key", key, "--ray", str(fake_ray),
                                 "--", "true"], capture_output=True, text=True)
    assert result.returncode == 75 and "already in use" in result.stderr
