"""The per-job Ray ports: reserved on the node when the job starts, disjoint from every other live reservation and from
anything listening, released with the job (the head itself: test_ray_head.py; with real Ray: test_ray_scale.py)."""

from __future__ import annotations

import random
import socket
import subprocess
import sys

import pytest

from agentrepro.hooks import agentrepro_ray_head as ray_head


def test_job_key_is_stable_and_distinct(tmp_path):
    """The key (temp dir, messages) comes from SLURM_JOB_ID(.STEP) or the run dir."""
    assert ray_head.job_key(tmp_path, {"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "1"}) == "slurm-42.1"
    a, b = ray_head.job_key(tmp_path / "a", {}), ray_head.job_key(tmp_path / "b", {})
    assert a != b and a == ray_head.job_key(tmp_path / "a", {})


def test_a_block_holds_the_head_ports_and_every_worker_port_it_was_sized_for(tmp_path):
    """A reservation for 315 workers is 10 head ports then 315 worker ports, below the kernel's ephemeral range, and
    `ray start` gets exactly that worker range; without a size each worker binds a port the kernel picks."""
    held = ray_head.reserve(315, directory=tmp_path)
    try:
        ports = held.ports
        flags = dict(f[2:].split("=") for f in ports.flags())
        assert int(flags["max-worker-port"]) - int(flags["min-worker-port"]) + 1 == 315
        assert int(flags["min-worker-port"]) == ports.base + ray_head.HEAD_PORTS
        numbers = sorted(int(v) for k, v in flags.items())
        assert numbers[0] == ports.base and numbers[-1] == ports.base + ports.size - 1 < ray_head.ephemeral_low()
        assert ports.base >= ray_head.PORT_LOW
    finally:
        held.release()
    assert ray_head.RayPorts(30000).flags()[-2:] == ["--min-worker-port=0", "--max-worker-port=0"]
    assert not any("client" in f for f in ray_head.RayPorts(30000).flags(client=False))


def test_two_reservations_starting_at_the_same_place_are_disjoint(tmp_path):
    """Two jobs whose search starts at the same port (the same random start) get blocks that do not overlap; once the
    first is released its ports can be reserved again, and its record is gone."""
    first = ray_head.reserve(50, directory=tmp_path, rng=random.Random(7))
    second = ray_head.reserve(50, directory=tmp_path, rng=random.Random(7))
    try:
        a = set(range(first.ports.base, first.ports.base + first.ports.size))
        b = set(range(second.ports.base, second.ports.base + second.ports.size))
        assert not a & b
    finally:
        first.release()
    assert not first.path.exists()
    third = ray_head.reserve(50, directory=tmp_path, rng=random.Random(7))
    assert third.ports.base == first.ports.base
    second.release()
    third.release()
    assert not list(tmp_path.glob("agentrepro-ray-*.ports"))


HOLDER = """
import sys, time
from pathlib import Path
from agentrepro.hooks import agentrepro_ray_head as ray_head
held = ray_head.reserve(20, fixed=(int(sys.argv[2]),), directory=Path(sys.argv[1]))
print(held.ports.base, held.ports.size, flush=True)
time.sleep(300)
"""


def test_a_live_reservation_of_another_process_is_respected_and_reclaimed_when_it_dies(tmp_path):
    """Another process's reservation (its lock held) excludes its block and its hard-coded port: a second job asking
    for the same fixed port is refused (PortsTaken); after that process is killed, its record is reclaimed."""
    fixed = free_port()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), str(fixed)], stdout=subprocess.PIPE, text=True
    )
    try:
        base, size = map(int, holder.stdout.readline().split())
        mine = ray_head.reserve(20, directory=tmp_path)
        assert not set(range(base, base + size)) & set(range(mine.ports.base, mine.ports.base + mine.ports.size))
        mine.release()
        with pytest.raises(ray_head.PortsTaken, match=f"port {fixed}, which the framework hard-codes"):
            ray_head.reserve(20, fixed=(fixed,), directory=tmp_path)
    finally:
        holder.kill()
        holder.wait()
    again = ray_head.reserve(20, fixed=(fixed,), directory=tmp_path)
    again.release()
    assert not list(tmp_path.glob("agentrepro-ray-*.ports"))


def test_ports_something_listens_on_are_skipped(tmp_path):
    """A port bound by anything (not a reservation) is never part of a block, and a hard-coded port in use refuses."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        busy = sock.getsockname()[1]
        with pytest.raises(ray_head.PortsTaken):
            ray_head.reserve(0, fixed=(busy,), directory=tmp_path)
    with socket.socket() as sock:
        start = ray_head.PORT_LOW + 5
        sock.bind(("", start))
        sock.listen()
        held = ray_head.reserve(10, directory=tmp_path, rng=FixedStart(0))
        try:
            assert held.ports.base > start
        finally:
            held.release()


class FixedStart(random.Random):
    """A search that starts at offset `start` of the range."""

    def __init__(self, start: int):
        super().__init__(0)
        self.start = start

    def randrange(self, *args, **kwargs):
        return self.start


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def test_the_wait_for_a_head_is_bounded(tmp_path):
    """A head that never listens is refused after the wait with HeadFailed naming the port."""
    held = ray_head.reserve(0, directory=tmp_path)
    try:
        with pytest.raises(ray_head.HeadFailed, match="did not listen"):
            with ray_head.running_head(["sleep", "60"], held, wait_for=(held.ports.head,), wait_s=1):
                pass
    finally:
        held.release()


def test_a_head_is_stopped_when_anything_fails_after_it_started(tmp_path):
    """A failure right after the head starts (here its pid file cannot be written) stops the head's process group."""
    import psutil

    held = ray_head.reserve(0, directory=tmp_path)
    duration = f"{300 + random.random():.6f}"  # names this test's stand-in head among the machine's processes
    try:
        with pytest.raises(FileNotFoundError):
            with ray_head.running_head(
                ["sleep", duration], held, wait_for=(held.ports.head,), pid_file=tmp_path / "missing" / "ray_head.pid"
            ):
                pass
    finally:
        held.release()
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", duration]]
