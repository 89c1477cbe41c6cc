"""The per-job Ray ports: reserved on the node when the job starts, disjoint from every other live reservation and from
anything listening, released with the job (the head itself: test_ray_head.py; with real Ray: test_ray_scale.py)."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import in_private_mounts

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
        first, last = ray_head.ephemeral_range()
        assert numbers[0] == ports.base and not any(first <= n <= last for n in numbers)
        assert ports.base >= ray_head.PORT_LOW
    finally:
        held.release()
    assert ray_head.RayPorts(30000).flags()[-2:] == ["--min-worker-port=0", "--max-worker-port=0"]
    assert not any("client" in f for f in ray_head.RayPorts(30000).flags(client=False))


def _kernel(monkeypatch, tmp_path, ephemeral: str, reserved: str = "") -> None:
    """This node's kernel port settings, as /proc/sys/net/ipv4 shows them."""
    for name, text in (("EPHEMERAL", ephemeral), ("RESERVED", reserved)):
        path = tmp_path / name.lower()
        path.write_text(text + "\n")
        monkeypatch.setattr(ray_head, name, path)


@pytest.mark.parametrize(
    ("ephemeral", "reserved", "rooms"),
    [
        ("20000\t60999", "", [(61000, 65535)]),  # the range from PORT_LOW up: above it
        ("9000\t65499", "20500-21999", [(20500, 21999), (65500, 65535)]),  # a tuned node: the ports it reserves
        ("32768\t60999", "", [(20000, 32767), (61000, 65535)]),  # Linux's default: below it or above it
    ],
)
def test_blocks_lie_where_the_kernel_gives_no_connection_its_ports(monkeypatch, tmp_path, ephemeral, reserved, rooms):
    """A block lies outside the ephemeral range, or inside it where the kernel reserves ports, wherever that is; a
    node whose range starts at PORT_LOW still has room above it."""
    _kernel(monkeypatch, tmp_path, ephemeral, reserved)
    assert ray_head.port_windows() == [(low, high + 1) for low, high in rooms]
    held = [ray_head.reserve(315, directory=tmp_path / "ports", rng=random.Random(seed)) for seed in range(2)]
    try:
        for reservation in held:
            first, last = reservation.ports.base, reservation.ports.base + reservation.ports.size - 1
            assert any(low <= first and last <= high for low, high in rooms), (first, last)
    finally:
        for reservation in held:
            reservation.release()


def test_a_node_with_no_room_for_the_block_says_so_once_instead_of_asking_to_retry(monkeypatch, tmp_path, capsys):
    """ "9000 65499" leaves 36 ports above the range and none reserved: no block of 325 ever fits, so the head exits 1
    with one line naming the kernel settings, not 75 (EX_TEMPFAIL: "busy, try later"), and starts nothing."""
    _kernel(monkeypatch, tmp_path, "9000 65499")
    monkeypatch.setenv(ray_head.PORTS_ENV, str(tmp_path / "ports"))
    with pytest.raises(ray_head.NoRoom, match="65500-65535"):
        ray_head.reserve(315, directory=tmp_path / "ports")
    status = ray_head.run(["true"], key="k", worker_ports=315, ray=str(tmp_path / "no-ray"))
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(lines) == 1 and "net.ipv4.ip_local_port_range" in lines[0]


@pytest.mark.parametrize("text", ["", "abc", "1-x", "70000-80000"])
def test_reserved_ports_that_cannot_be_read_reserve_nothing_outside_the_kernels_own(monkeypatch, tmp_path, text):
    """Unreadable or empty: none; ports past 65535 are dropped."""
    _kernel(monkeypatch, tmp_path, "32768 60999", text)
    assert ray_head.reserved_ports() == set()


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


# --- a folder every user's jobs share, and distrust --------------------------------------------------------------

NOBODY = 65534
SYSTEM_PYTHON = (
    "/usr/bin/python3"  # readable by every user, unlike a virtual environment under /root; the hook is stdlib only
)


def _shared_parent() -> Path:
    """A folder under /tmp that other users may enter (pytest's tmp_path is private to root)."""
    parent = Path(tempfile.mkdtemp(prefix="agentrepro-ports-test-", dir="/tmp"))
    parent.chmod(0o755)
    return parent


def test_the_folder_is_made_for_every_user_and_its_files_readable_by_them(tmp_path):
    """A new folder is sticky and writable by all (as /tmp), the lock and the record readable by all whatever the
    umask, and the record's name carries the user's ID."""
    folder = tmp_path / "ports"
    old = os.umask(0o077)
    try:
        held = ray_head.reserve(5, directory=folder)
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o1777
        assert stat.S_IMODE((folder / "agentrepro-ray.lock").stat().st_mode) == 0o644
        assert stat.S_IMODE(held.path.stat().st_mode) == 0o644
        assert held.path.name == f"agentrepro-ray-{held.ports.base}-{os.getuid()}.ports"
    finally:
        held.release()


@pytest.mark.skipif(os.geteuid() != 0 or not Path(SYSTEM_PYTHON).exists(), reason="needs root to run a job as nobody")
def test_another_users_job_reserves_beside_roots_and_neither_can_touch_the_others_record():
    """With root's reservation live in the shared folder, a job of user nobody (the hook run by the system Python)
    reserves a disjoint block: the folder, its lock and root's record let another user lock and read them."""
    parent = _shared_parent()
    folder = parent / "ports"
    hook = Path(shutil.copy(ray_head.__file__, parent))  # where nobody can read it (the clone may be private)
    hook.chmod(0o644)
    mine = ray_head.reserve(20, directory=folder)
    try:
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); import agentrepro_ray_head as h; from pathlib import Path; "
            "r = h.reserve(20, directory=Path(sys.argv[2])); print(r.ports.base, r.path.name); r.release()"
        )
        theirs = subprocess.run(
            [SYSTEM_PYTHON, "-c", code, str(parent), str(folder)],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)),
        )
        assert theirs.returncode == 0, theirs.stderr
        base, name = theirs.stdout.split()
        assert name == f"agentrepro-ray-{base}-{NOBODY}.ports"
        assert not set(range(int(base), int(base) + 30)) & set(range(mine.ports.base, mine.ports.base + 30))
        assert mine.path.exists()
    finally:
        mine.release()
        shutil.rmtree(folder.parent)


def test_a_link_planted_under_a_records_name_is_never_written_through(tmp_path):
    """A symlink named as the record this job would write, pointing at a victim file, leaves the victim
    intact (the job takes another block); a link under another record's name is skipped with one line naming it."""
    folder, victim = tmp_path / "ports", tmp_path / "victim.txt"
    victim.write_text("precious\n")
    ray_head.shared_folder(folder)
    base = ray_head.PORT_LOW + 100
    (folder / f"agentrepro-ray-{base}-{os.getuid()}.ports").symlink_to(victim)
    (folder / "agentrepro-ray-31000-0.ports").symlink_to(victim)
    log = io.StringIO()
    with contextlib.redirect_stderr(log):
        held = ray_head.reserve(0, directory=folder, rng=FixedStart(100))
    try:
        assert victim.read_text() == "precious\n"
        assert held.ports.base != base
        assert f"skipped reservation {folder / 'agentrepro-ray-31000-0.ports'}" in log.getvalue()
    finally:
        held.release()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("20000 100000000000\n", "not BASE SIZE"),
        ("65000 1000\n", "a port outside 1-65535"),
        ("20000 10 70000\n", "a port outside 1-65535"),
        ("garbage\n", "not BASE SIZE"),
        ("\xff\xfe\n", "codec"),
    ],
)
def test_a_live_record_that_is_not_a_reservation_is_skipped_in_one_line(tmp_path, content, why):
    """A record held live whose content claims 10^11 ports, ports past 65535, or garbage is skipped with
    one line naming it (not expanded, not a traceback), and the job still reserves."""
    folder = ray_head.shared_folder(tmp_path / "ports")
    record = folder / "agentrepro-ray-20000-12345.ports"
    record.write_bytes(content.encode("latin-1"))
    with open(record, "rb") as held_by_other:  # another open file: its flock makes the record live
        fcntl.flock(held_by_other, fcntl.LOCK_EX)
        log = io.StringIO()
        with contextlib.redirect_stderr(log):
            mine = ray_head.reserve(0, directory=folder)
        mine.release()
    lines = log.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"agentrepro: skipped reservation {record}: ") and why in lines[0]


def test_a_directory_in_place_of_a_record_is_skipped_and_in_place_of_the_lock_ends_the_job_in_one_line(tmp_path):
    folder = ray_head.shared_folder(tmp_path / "ports")
    (folder / "agentrepro-ray-25000-7.ports").mkdir()
    log = io.StringIO()
    with contextlib.redirect_stderr(log):
        ray_head.reserve(0, directory=folder).release()
    assert "is not a regular file" in log.getvalue() and len(log.getvalue().splitlines()) == 1
    (folder / "agentrepro-ray.lock").unlink()
    (folder / "agentrepro-ray.lock").mkdir()
    done = subprocess.run(
        [sys.executable, ray_head.__file__, "--key", "k", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, ray_head.PORTS_ENV: str(folder)},
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"agentrepro: no Ray ports for job k: {folder / 'agentrepro-ray.lock'} cannot be opened as the "
        "reservations' lock: Is a directory; not starting"
    ]


def test_a_folder_that_is_a_link_or_open_to_all_without_the_sticky_bit_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ray_head.UnsafeFolder, match="is not a directory"):
        ray_head.reserve(0, directory=tmp_path / "link")
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    with pytest.raises(ray_head.UnsafeFolder, match="not sticky"):
        ray_head.reserve(0, directory=tmp_path / "open")


@pytest.mark.parametrize(
    ("flag", "value"), [("--fixed-port", "70000"), ("--fixed-port", "0"), ("--worker-ports", "99999")]
)
def test_a_port_out_of_range_is_refused_in_one_line(flag, value):
    done = subprocess.run(
        [sys.executable, ray_head.__file__, "--key", "k", flag, value, "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"agentrepro_ray_head.py: {flag} {value} is out of range (ports are 1-65535)"]


def test_the_harness_makes_the_shared_folder_or_names_what_it_cannot_trust(tmp_path, monkeypatch):
    """backends/ray_head.ready (before a container mounts the folder): creates it shared; a link in its place is
    refused in one line naming the setting."""
    from agentrepro.backends import ray_head as harness
    from agentrepro.errors import BadInput

    monkeypatch.setenv(ray_head.PORTS_ENV, str(tmp_path / "ports"))
    harness.ready()
    assert stat.S_IMODE((tmp_path / "ports").stat().st_mode) == 0o1777
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "planted").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv(ray_head.PORTS_ENV, str(tmp_path / "planted"))
    with pytest.raises(BadInput, match=rf"^{ray_head.PORTS_ENV}: .*planted is not a directory"):
        harness.ready()


PRIVATE_TMP_PROBE = """
import sys
from agentrepro.backends import ray_head
from agentrepro.errors import BadInput
try:
    ray_head.ready()
except BadInput as exc:
    print(exc)
    sys.exit(2)
print("ready")
"""


def test_a_reservation_folder_in_a_jobs_private_tmp_is_refused(tmp_path, request):
    """SLURM's job_container/tmpfs gives each job its own /tmp (BasePath/<job id>/.<job id> bound there): the default
    /tmp/agentrepro-ray would be seen by this job alone, and two jobs' port blocks would overlap. Made for real in a
    private mount namespace (the job's folder bound over a folder standing for /tmp, so that a Python installed under
    /tmp stays visible); the same folder under another job's ID, and a folder outside it, are accepted."""
    if shutil.which("unshare") is None:
        pytest.skip("`unshare` (util-linux) is not on PATH")
    base = tmp_path / "tmpfs" / "4711" / ".4711"
    base.mkdir(parents=True, mode=0o1777)
    area = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    request.addfinalizer(lambda: shutil.rmtree(area, ignore_errors=True))
    private, shared = area / "tmp", area / "node-local"
    private.mkdir()
    script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'

    def ready(job_id: str, folder: Path) -> subprocess.CompletedProcess:
        env = {**os.environ, "SLURM_JOB_ID": job_id, ray_head.PORTS_ENV: str(folder)}
        words = in_private_mounts(script, base, private)
        return subprocess.run(
            [*words, sys.executable, "-c", PRIVATE_TMP_PROBE], capture_output=True, text=True, env=env, timeout=60
        )

    probe = ready("1", shared)
    if probe.returncode not in (0, 2) or "ready" not in probe.stdout:
        pytest.skip(f"no private mount namespace here: {probe.stderr.strip()[-200:]}")
    refused = ready("4711", private / "agentrepro-ray")
    assert refused.returncode == 2
    assert (
        refused.stdout.startswith(
            f"{ray_head.PORTS_ENV}: {private}/agentrepro-ray lies in this job's private {private} (mounted from "
        )
        and refused.stdout.count("\n") == 1
    )
    assert ready("4711", shared).stdout == "ready\n"  # outside the private folder
