"""A Ray head per job: `python3 agentrepro_ray_head.py --key KEY [options] -- PROGRAM ARG...` runs PROGRAM against it.

Standard library only, no import of the rest of agentrepro: it runs where the framework runs, inside the job's
image with the image's Python and the image's Ray (the backends run this file from the mounted hooks folder), and
the harness imports it for the names it shares (`job_key`, `ports_dir`).

verl-agent and Relax both run on Ray. On a shared node several jobs run at once, and the usual recipes
(`ray stop --force`, `pkill -f ray`, a fixed port 6379/8265) kill or hijack the other jobs' clusters. Here
every job starts `ray start --head --block` in its own session with a private `--temp-dir`, points PROGRAM at
it through RAY_ADDRESS (verl's `ray.init()` and Ray's job CLI both read it): the head's GCS address
127.0.0.1:<port>, or with `--dashboard` the job API http://127.0.0.1:<dashboard port> (Ray's job CLI prefers it to
any --address). On exit, normal, failure or SIGTERM, only that head's process group is signalled, never
`ray stop` or pkill, and the reservation goes with the head. Exit status: PROGRAM's; 75 (EX_TEMPFAIL) when no
ports could be reserved in the wait (a hard-coded port in use: another job's, or every block held); 1 if the head does not come
up, or if this node leaves no room for the block at all (`NoRoom`: a kernel setting, not a busy node). Arguments are
a list from start to end: no shell is involved.

The job ends with the agentrepro process that runs it: with --owner-lock (or AGENTREPRO_OWNER_LOCK), once that
process's lock on the file is
free (it was killed, SIGKILL included, which leaves a container running), PROGRAM and the head are stopped
(`watch_owner`). As a container's first process (podman and docker without --init, whose catatonit or tini a node
need not have) it reaps the orphans the job leaves (`reap_orphans`), so they do not stay zombies for the job's life.

Several nodes: `--node-ip ADDR --address-file FILE` binds the head to the node's address (not 127.0.0.1) and writes
its GCS address to FILE once it listens; on each other node of the job, `--key KEY --node-ip ADDR --join FILE` (no
program) waits for FILE, reserves a block of that node's ports as a head does, and runs a worker node
(`ray start --address=... --block`, `worker_argv`) until SIGTERM or until Ray's processes end with the head; without
--node-ip a worker node binds its address on the route to the head (`route_address`).

Python path: the job's own entries (hooks, checkout) come as AGENTREPRO_PYTHONPATH and go before the PYTHONPATH
this process runs with, which in an image is the image's own (Relax's image puts Megatron-LM there): the head, its
workers and PROGRAM get both (`extended_pythonpath`). A PYTHONPATH set by the job would replace the image's.

Ports: picked when the job starts, never derived from its name, so two jobs on one node cannot collide.
`reserve(...)` takes a node-wide lock (`ports_dir()`/agentrepro-ray.lock), skips every block that a live
reservation of another job holds and every port that something listens on, and records its block as a file
(`agentrepro-ray-<base>-<uid>.ports`) that stays locked (flock) while the job's head lives: a reservation is live
exactly as long as that lock is held, which the kernel releases when the last holder exits, whatever its PID
namespace or container. Blocks lie in PORT_LOW-65535 outside the kernel's ephemeral range, or inside it where the
kernel keeps ports out of it (ip_local_reserved_ports): no outgoing connection is given one of them by the kernel
(`port_windows`), and Ray's own defaults (6379, 8265, 10001, 10002-19999) are below PORT_LOW. Linux's default range
(32768-60999) leaves 20000-32767 and 61000-65535; a node tuned to "9000 65499" leaves 36 ports, too few for any
block, and the job says so (NoRoom) instead of waiting for ports that never come free. A block is HEAD_PORTS head ports (`RayPorts`), then, when the job states how many Ray worker
processes it creates, that many worker ports (`--min/--max-worker-port`); otherwise each worker binds a free
port the kernel picks (`--min-worker-port=0 --max-worker-port=0`). Ports a framework hard-codes (Relax's
Ray Serve on 8000) are reserved the same way. While ports are taken (a second Relax job on the node, or every block
held), the job waits for them, retrying every PORT_RETRY_S and saying so once a minute, for up to --port-wait-s
(AGENTREPRO_PORT_WAIT_S, default 15 minutes), then exits 75 (EX_TEMPFAIL) so that the scheduler's retry runs it
later, perhaps on another node.

The reservations live in AGENTREPRO_RAY_PORTS_DIR (default /tmp/agentrepro-ray): a folder every job of the node
must see, so a job in a container gets it mounted read-write (set it to a node-local folder on a cluster whose
jobs each get a private /tmp). Every user's jobs share it: the first job creates it sticky and writable by all, like
/tmp (`shared_folder`), the lock is taken on a read-only handle, and each job's record carries its user's ID in its
name. What other users wrote there is not trusted: the folder must be a real directory (not a link), sticky when
others may write in it, or this user's or root's; nothing is opened through a link (O_NOFOLLOW), a file that is not a
regular file is refused, a record is read to at most RECORD_MAX_BYTES and its ports must lie in 1-65535 (at most
MAX_FIXED hard-coded ones), and a record that fails is skipped with one line naming it. A folder or lock that cannot
be trusted ends the job in one line (exit 1): `UnsafeFolder`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import random
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

OBJECT_STORE_FRACTION = 0.3  # Ray's own default share of memory for the object store
SHM_FRACTION = 0.9  # of /dev/shm's free space at most, which Ray requires the store to fit
PORT_LOW = 20000  # above Ray's default worker range (10002-19999) and client port (10001)
HEAD_PORTS = 10  # RayPorts below: the head's own ports, the first ten of a block
PORTS_ENV = "AGENTREPRO_RAY_PORTS_DIR"
PORTS_DEFAULT = "/tmp/agentrepro-ray"
EX_TEMPFAIL = 75
PYTHONPATH_ENV = "AGENTREPRO_PYTHONPATH"  # the job's entries, put before the PYTHONPATH this process runs with
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
RESERVED = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")  # "8000-8010,9000": kept out of the ephemeral range
PORT_MAX = 65535
LOOPBACK = "127.0.0.1"  # a job of one node binds its head here: nothing off the node reaches it
AUTO = "auto"  # a worker node's --node-ip: its address on the route to the head (`route_address`)
ADDRESS_WAIT_S = 600.0  # a worker node's wait for the head's address file (the head's node may start later)
HEAD_POLL_S = 1.0  # how often a worker node looks whether the head's address is still there
RECORD_MAX_BYTES = 4096  # a record is one line of a few numbers
MAX_FIXED = 64  # hard-coded ports one record may hold
SHARED_MODE = 0o1777  # sticky and writable by every user, as /tmp: each user may remove only their own records


def extended_pythonpath(environ: Mapping[str, str]) -> str | None:
    """AGENTREPRO_PYTHONPATH, then the PYTHONPATH of `environ` (the image's, in a container); None without the first."""
    first = environ.get(PYTHONPATH_ENV)
    if not first:
        return None
    rest = environ.get("PYTHONPATH")
    return first + (os.pathsep + rest if rest else "")


def job_key(run_dir: str | os.PathLike, env: Mapping[str, str] | None = None) -> str:
    """SLURM_JOB_ID (with SLURM_STEP_ID when set) or, outside SLURM, 'run-' + hash of the absolute run dir: names
    the job's temp dir and its messages (ports come from `reserve`)."""
    environ = os.environ if env is None else env
    if environ.get("SLURM_JOB_ID"):
        step = environ.get("SLURM_STEP_ID")
        return f"slurm-{environ['SLURM_JOB_ID']}" + (f".{step}" if step else "")
    return "run-" + hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class RayPorts:
    """A reserved block: the head's ports at base .. base+HEAD_PORTS-1, then `workers` worker ports (0: none
    reserved, the kernel picks each worker's)."""

    base: int
    workers: int = 0

    @property
    def size(self) -> int:
        return HEAD_PORTS + self.workers

    @property
    def head(self) -> int:
        return self.base

    @property
    def dashboard(self) -> int:
        return self.base + 1

    @property
    def node_manager(self) -> int:
        return self.base + 3

    def flags(self, *, client: bool = True) -> list[str]:
        """`ray start --head` port flags. client=False leaves out --ray-client-server-port, which Ray refuses unless
        the client extra (grpcio; part of ray[default], which verl installs) is there."""
        b = self.base
        client_flag = [f"--ray-client-server-port={b + 2}"] if client else []
        return [f"--port={b}", f"--dashboard-port={b + 1}", *client_flag, *self.node_flags()]

    def node_flags(self) -> list[str]:
        """The ports every node binds (its raylet, object manager, agents and workers): a worker node's whole set."""
        b = self.base
        workers = (
            [f"--min-worker-port={b + HEAD_PORTS}", f"--max-worker-port={b + self.size - 1}"]
            if self.workers
            else ["--min-worker-port=0", "--max-worker-port=0"]
        )
        return [
            f"--node-manager-port={b + 3}",
            f"--object-manager-port={b + 4}",
            f"--metrics-export-port={b + 5}",
            f"--dashboard-agent-grpc-port={b + 6}",
            f"--dashboard-agent-listen-port={b + 7}",
            f"--runtime-env-agent-port={b + 8}",
            *workers,
        ]


def temp_dir(key: str) -> str:
    """Short (unix socket paths are limited to 107 bytes) and private to the job."""
    return f"/tmp/ray-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def head_argv(
    key: str,
    ports: RayPorts,
    *,
    ray: str = "ray",
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    dashboard: bool = False,
    client: bool = True,
    memory_mb: int | None = None,
    node_ip: str = LOOPBACK,
) -> list[str]:
    """`ray start --head --block` on `ports` and this job's temp dir, bound to `node_ip` (the loopback address for a
    job of one node; the node's address where worker nodes join). With `dashboard`, the dashboard (and its
    job-submission API, which `ray job submit` needs) listens on 127.0.0.1 at `RayPorts.dashboard`. Workers
    inherit the head's environment: that is how a Ray job's driver and actors receive the job's settings."""
    argv = [
        ray,
        "start",
        "--head",
        "--block",
        f"--node-ip-address={node_ip}",
        *ports.flags(client=client),
        f"--temp-dir={temp_dir(key)}",
        "--disable-usage-stats",
    ]
    argv += ["--include-dashboard=true", "--dashboard-host=127.0.0.1"] if dashboard else ["--include-dashboard=false"]
    return argv + node_resources(num_cpus, num_gpus, memory_mb)


def worker_argv(
    address: str,
    ports: RayPorts,
    *,
    node_ip: str,
    ray: str = "ray",
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    memory_mb: int | None = None,
) -> list[str]:
    """`ray start --address=HEAD --block`: a worker node of the job's cluster on `ports` (RayPorts.node_flags), bound
    to `node_ip`. Ray gives a worker node the head's temp dir (a path on the node's own /tmp)."""
    argv = [ray, "start", f"--address={address}", "--block", f"--node-ip-address={node_ip}", *ports.node_flags()]
    return [*argv, "--disable-usage-stats", *node_resources(num_cpus, num_gpus, memory_mb)]


def node_resources(num_cpus: int | None, num_gpus: int | None, memory_mb: int | None) -> list[str]:
    """What a node gives the job. `memory_mb`, the job's memory on the node: Ray would size its object store (30%) and
    its memory resource from the node's memory, past a SLURM job's limit; they are sized from the job's instead
    (OBJECT_STORE_FRACTION), the store within /dev/shm's free space (SHM_FRACTION)."""
    argv = [f"--num-cpus={int(num_cpus)}"] if num_cpus is not None else []
    argv += [f"--num-gpus={int(num_gpus)}"] if num_gpus is not None else []
    if memory_mb is not None:
        total = int(memory_mb) * 1024 * 1024
        store = int(total * OBJECT_STORE_FRACTION)
        shm = shm_free()
        if shm is not None:  # Ray refuses a store larger than /dev/shm, which a node or container may keep small
            store = min(store, int(shm * SHM_FRACTION))
        argv += [f"--object-store-memory={store}", f"--memory={total - store}"]
    return argv


def shm_free(path: str = "/dev/shm") -> int | None:
    """Bytes free in /dev/shm, where Ray's object store lives; None when it cannot be read."""
    try:
        found = os.statvfs(path)
    except OSError:
        return None
    return found.f_bavail * found.f_frsize


# --- reservations ----------------------------------------------------------------------------------------------


class PortsTaken(Exception):
    """No block could be reserved, or a hard-coded port is held by another job or listened on."""


class NoRoom(Exception):
    """No block of the job's size fits where this node lets blocks lie (port_windows), however idle the node."""


class UnsafeFolder(Exception):
    """The reservations folder, or its lock, is not what this module made: a link, another kind of file, or a folder
    others may write in that is not sticky (module docstring)."""


def shared_folder(directory: Path) -> Path:
    """`directory`, made (its parents as usual) sticky and writable by every user when it does not exist, then
    checked: a directory reached without a link, and, when other users may write in it, sticky (so that none can
    remove or replace another's records); otherwise it must be this user's or root's. UnsafeFolder otherwise."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(directory, 0o700)
        os.chmod(directory, SHARED_MODE)  # after mkdir: the umask would take the others' bits away
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFolder(
            f"{directory} is not a directory (a link or a file in its place); remove it or set {PORTS_ENV}"
        )
    shared = info.st_mode & 0o022
    if shared and not info.st_mode & stat.S_ISVTX:
        raise UnsafeFolder(
            f"{directory} may be written by others but is not sticky (chmod 1777 it, or set {PORTS_ENV})"
        )
    if not shared and info.st_uid not in (0, os.getuid()):
        raise UnsafeFolder(f"{directory} belongs to user {info.st_uid} and is not shared (set {PORTS_ENV})")
    return directory


def _open_regular(path: Path, flags: int, mode: int = 0o644) -> int:
    """A descriptor of `path` opened without following a link, checked to be a regular file; OSError or UnsafeFolder."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafeFolder(f"{path} is not a regular file (a directory, a device or a pipe in its place)")
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != mode:
        os.fchmod(fd, mode)  # readable by the node's other users whatever the umask: they lock and read it
    return fd


def _parse_record(text: str) -> set[int]:
    """The ports of a record `BASE SIZE [FIXED...]`, every one in 1-65535; ValueError naming what is wrong."""
    words = text.split()
    if not 2 <= len(words) <= 2 + MAX_FIXED or not all(w.isdigit() and len(w) <= 5 for w in words):
        raise ValueError(f"not BASE SIZE and at most {MAX_FIXED} ports")
    base, size, *fixed = (int(w) for w in words)
    if not (1 <= base <= PORT_MAX and 1 <= size <= PORT_MAX + 1 - base and all(1 <= p <= PORT_MAX for p in fixed)):
        raise ValueError("a port outside 1-65535")
    return {*range(base, base + size), *fixed}


class HeadFailed(RuntimeError):
    """The head exited, or did not listen in time."""


def ports_dir(environ: Mapping[str, str] | None = None) -> Path:
    return Path((os.environ if environ is None else environ).get(PORTS_ENV) or PORTS_DEFAULT)


def private_mount(path: Path, mountinfo: str, job_id: str | None) -> tuple[str, str] | None:
    """(mount point, what is mounted there) when `path` lies in a folder private to this job, as /proc/self/mountinfo
    `mountinfo` shows it, else None: SLURM's job_container/tmpfs binds BasePath/<job id>/.<job id> at /tmp (and
    /dev/shm, /var/tmp), systemd's PrivateTmp a systemd-private-* folder. There other jobs never see the folder."""
    best: tuple[str, str] | None = None
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        root, point = (_unescape(field) for field in fields[3:5])
        inside = point == "/" or str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, root)
    if best is None:
        return None
    parts = Path(best[1]).parts
    if any(part.startswith("systemd-private-") for part in parts) or (
        job_id and (job_id in parts or f".{job_id}" in parts)
    ):
        return best
    return None


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (\\040 for a space) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def pid_namespace() -> str:
    """This process's PID namespace as the kernel names it (`pid:[4026531836]`), or `unknown`."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown"


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral range, first and last port (Linux's default 32768-60999 when it cannot be read)."""
    try:
        low, high = (int(word) for word in EPHEMERAL.read_text().split()[:2])
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def reserved_ports() -> set[int]:
    """The ports the kernel keeps out of its ephemeral range (none when they cannot be read)."""
    found: set[int] = set()
    try:
        text = RESERVED.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return found
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:
            return set()  # not the kernel's format: nothing is counted as reserved
        found.update(range(max(low, 1), min(high, PORT_MAX) + 1))
    return found


def port_windows() -> list[tuple[int, int]]:
    """Where a block may lie, as [low, high) runs of ports from PORT_LOW to 65535: outside the ephemeral range, or
    inside it where the kernel reserves them."""
    ephemeral, reserved = ephemeral_range(), reserved_ports()
    windows: list[tuple[int, int]] = []
    start = None
    for port in range(PORT_LOW, PORT_MAX + 2):
        usable = port <= PORT_MAX and (not ephemeral[0] <= port <= ephemeral[1] or port in reserved)
        if usable and start is None:
            start = port
        elif not usable and start is not None:
            windows.append((start, port))
            start = None
    return windows


def bindable(port: int) -> bool:
    """Nothing holds `port` on this host now (a bind on every address succeeds)."""
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def listening(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


@dataclass
class Reservation:
    """A block (and hard-coded ports) held for one job while `handle`, the locked record file, is open."""

    ports: RayPorts
    fixed: tuple[int, ...]
    path: Path
    handle: IO[str]

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
        self.handle.close()


def _live_reservations(directory: Path) -> list[set[int]]:
    """The ports of every reservation whose lock is held; records of jobs that are gone are removed (this user's, or
    any as root). A record that cannot be read as one is skipped with one line on stderr naming it."""
    held = []
    for record in sorted(directory.glob("agentrepro-ray-*.ports")):
        try:
            fd = _open_regular(record, os.O_RDONLY)
        except FileNotFoundError:  # released meanwhile
            continue
        except (OSError, UnsafeFolder) as exc:
            print(f"agentrepro: skipped reservation {record}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
            continue
        with os.fdopen(fd, "rb") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its job holds it: live
                try:
                    held.append(_parse_record(fh.read(RECORD_MAX_BYTES + 1)[:RECORD_MAX_BYTES].decode("ascii")))
                except (ValueError, UnicodeDecodeError) as exc:
                    print(f"agentrepro: skipped reservation {record}: {exc}", file=sys.stderr)
                continue
            with contextlib.suppress(OSError):  # nobody holds it: its job is gone (another user's may stay)
                record.unlink()
    return held


def reserve(
    workers: int = 0, *, fixed: tuple[int, ...] = (), directory: Path | None = None, rng: random.Random | None = None
) -> Reservation:
    """Reserve a block of HEAD_PORTS + `workers` ports (and the hard-coded `fixed` ones) for this job; PortsTaken
    when a fixed port is held or listened on, or when no block is free (module docstring)."""
    directory = shared_folder(directory or ports_dir())
    size, windows = HEAD_PORTS + workers, port_windows()
    lock = directory / "agentrepro-ray.lock"
    try:  # read-only: flock needs no write access, so the first user's lock serves every user
        guard = os.fdopen(_open_regular(lock, os.O_RDONLY | os.O_CREAT), "rb")
    except OSError as exc:
        raise UnsafeFolder(f"{lock} cannot be opened as the reservations' lock: {exc.strerror}") from None
    with guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        held = set().union(*_live_reservations(directory))
        busy = [port for port in fixed if port in held or not bindable(port)]
        if busy:
            raise PortsTaken(f"port {busy[0]}, which the framework hard-codes, is in use on this node (another job's?)")
        while True:
            base = _free_block(size, windows, held, rng or random.Random())
            path = directory / f"agentrepro-ray-{base}-{os.getuid()}.ports"
            try:  # never through a link, never over a file someone else left under this name
                fd = _open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                held.add(base)  # a name taken by a file this job cannot use: another base
                continue
            break
        handle = os.fdopen(fd, "w", encoding="utf-8")
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(" ".join(map(str, (base, size, *fixed))) + "\n")
        handle.flush()
    return Reservation(RayPorts(base, workers), tuple(fixed), path, handle)


def _free_block(size: int, windows: list[tuple[int, int]], held: set[int], rng: random.Random) -> int:
    """The first base at or after a random start (wrapping once over the windows' bases) whose `size` ports are
    neither held nor bound; NoRoom when no window holds `size` ports."""
    bases = [(low, high - size + 1) for low, high in windows if high - low >= size]  # [first, last + 1) of bases
    shown = ", ".join(f"{low}-{high - 1}" for low, high in windows) or "none"
    if not bases:
        raise NoRoom(
            f"a block of {size} ports fits nowhere this node lets Ray's ports lie (from {PORT_LOW}, outside the "
            f"kernel's ephemeral range {'-'.join(map(str, ephemeral_range()))} or in its reserved ports: {shown}); "
            "widen the room with sysctl net.ipv4.ip_local_port_range or net.ipv4.ip_local_reserved_ports"
        )
    total = sum(last - first for first, last in bases)
    offset, tried = rng.randrange(total), 0
    while tried < total:
        rest = offset
        for first, last in bases:  # the base at `offset` of all windows' bases
            if rest < last - first:
                break
            rest -= last - first
        base = first + rest
        clash = next((p for p in range(base, base + size) if p in held or not bindable(p)), None)
        if clash is None:
            return base
        step = min(clash - base + 1, last - base)  # every base up to the clash contains it; not past the window
        tried, offset = tried + step, (offset + step) % total
    raise PortsTaken(f"no {size} free consecutive ports in {shown}")


# --- the head --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def running_head(
    argv: list[str],
    reservation: Reservation,
    *,
    wait_for: tuple[int, ...],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: IO | None = None,
    stderr: IO | None = None,
    wait_s: float = 120,
    pid_file: Path | None = None,
    host: str = LOOPBACK,
) -> Iterator[subprocess.Popen]:
    """Run the head (or a worker node) in its own session while the block runs, holding the reservation's lock (the
    head inherits it, so it lasts as long as the head does); HeadFailed when it exits or does not listen on `wait_for`
    at `host` in time; stop only that session's process group afterwards (TERM, then KILL after 30 s)."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=stdout,
        stderr=stderr,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        pass_fds=(reservation.handle.fileno(),),
    )
    _OWN.add(proc.pid)
    try:
        if pid_file is not None:  # the PID and the namespace that counts it: a container's own under podman
            pid_file.write_text(f"{proc.pid} {pid_namespace()}\n")
        deadline = time.monotonic() + wait_s
        while not all(listening(port, host) for port in wait_for):
            if proc.poll() is not None:
                raise HeadFailed(
                    f"the Ray head exited with status {proc.returncode} before listening on {', '.join(map(str, wait_for))}"
                )
            if time.monotonic() > deadline:
                raise HeadFailed(
                    f"the Ray head did not listen on {', '.join(map(str, wait_for))} within {wait_s:.0f} s"
                )
            time.sleep(0.5)
        yield proc
    finally:
        stop_group(proc)
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)


def stop_group(proc: subprocess.Popen) -> None:
    """TERM the head's process group, wait up to 30 s for the head, then KILL whatever of the group is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# --- the job: a head, then the program against it ------------------------------------------------------------


PORT_WAIT_ENV = "AGENTREPRO_PORT_WAIT_S"
PORT_WAIT_DEFAULT = 900.0  # long enough for a job ending on the node to free its ports, short beside a GPU job's day
PORT_RETRY_S = 5.0


def reserve_waiting(
    key: str, workers: int, fixed: tuple[int, ...], wait_s: float, *, retry_s: float = PORT_RETRY_S
) -> Reservation:
    """`reserve`, tried again every `retry_s` while ports are taken (another job of the node holds a hard-coded port,
    or every block), for up to `wait_s` seconds, saying on stderr what it waits for once a minute; PortsTaken after."""
    deadline = time.monotonic() + wait_s
    said = None
    while True:
        try:
            return reserve(workers, fixed=fixed)
        except PortsTaken as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PortsTaken(f"{exc} (waited {wait_s:.0f} s)") from None
            if said is None or time.monotonic() - said >= 60:
                print(f"agentrepro: job {key} waits for Ray ports: {exc}; {left:.0f} s left", file=sys.stderr)
                said = time.monotonic()
            time.sleep(min(retry_s, max(0.1, left)))


def _reserved(key: str, workers: int, fixed: tuple[int, ...], port_wait_s: float) -> Reservation | int:
    """`reserve_waiting`, or the exit status when no ports came, said in one line: 75 (EX_TEMPFAIL) while they are
    taken, so that the scheduler's retry runs the job later; 1 when the node has no room or an untrusted folder."""
    try:
        return reserve_waiting(key, workers, fixed, port_wait_s)
    except PortsTaken as exc:
        print(f"agentrepro: no Ray ports for job {key}: {exc}; not starting", file=sys.stderr)
        return EX_TEMPFAIL
    except (NoRoom, UnsafeFolder) as exc:
        print(f"agentrepro: no Ray ports for job {key}: {exc}; not starting", file=sys.stderr)
        return 1


def _exit_on_sigterm(signum, frame):
    raise SystemExit(143)


def run(
    program: list[str],
    *,
    key: str,
    ray: str = "ray",
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    client: bool = True,
    dashboard: bool = False,
    worker_ports: int = 0,
    fixed_ports: tuple[int, ...] = (),
    pid_file: Path | None = None,
    wait_s: float = 120.0,
    port_wait_s: float = 0.0,
    memory_mb: int | None = None,
    owner_lock: Path | None = None,
    node_ip: str = LOOPBACK,
    address_file: Path | None = None,
) -> int:
    """The job's head on this node, then `program` against it (module docstring). With `address_file`, the head's GCS
    address (`node_ip`:port) is written there once it listens, for the job's worker nodes (`join`), and removed after."""
    reservation = _reserved(key, worker_ports, fixed_ports, port_wait_s)
    if isinstance(reservation, int):
        return reservation
    ports = reservation.ports
    argv = head_argv(
        key,
        ports,
        ray=ray,
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        dashboard=dashboard,
        client=client,
        memory_mb=memory_mb,
        node_ip=node_ip,
    )
    address = f"http://127.0.0.1:{ports.dashboard}" if dashboard else f"{node_ip}:{ports.head}"
    print(
        f"agentrepro: Ray head of job {key} on ports {ports.base}-{ports.base + ports.size - 1}, RAY_ADDRESS={address}",
        file=sys.stderr,
        flush=True,
    )
    child: subprocess.Popen | None = None
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if owner_lock is not None:
        watch_owner(owner_lock)
    if os.getpid() == 1:  # a container's first process: the orphans of the job are given to it
        reap_orphans()
    try:
        wait_for = (ports.head, ports.dashboard) if dashboard else (ports.head,)
        with running_head(argv, reservation, wait_for=wait_for, wait_s=wait_s, pid_file=pid_file, host=node_ip):
            if address_file is not None:
                write_address(address_file, f"{node_ip}:{ports.head}")
            child = subprocess.Popen(program, env={**os.environ, "RAY_ADDRESS": address})
            _OWN.add(child.pid)
            try:
                return child.wait()
            finally:
                if child.poll() is None:
                    child.terminate()
                    child.wait()
    except HeadFailed as exc:
        print(f"agentrepro: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        reservation.release()
        if address_file is not None:
            address_file.unlink(missing_ok=True)


# --- a worker node of the job: on each node of an allocation but the head's ---------------------------------


ADDRESS = re.compile(r"^([0-9]{1,3}(?:\.[0-9]{1,3}){3}):([0-9]{1,5})$")


def write_address(path: Path, address: str) -> None:
    """The head's address for the job's worker nodes, whole or not at all (written beside, then renamed)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(address + "\n", encoding="ascii")
    partial.replace(path)


def read_address(path: Path, wait_s: float) -> str:
    """The head's address from `path` (on a folder every node of the job sees), waited for up to `wait_s`; HeadFailed
    when it does not come or is not `IPv4:port`."""
    deadline = time.monotonic() + wait_s
    while not path.is_file():
        if time.monotonic() > deadline:
            raise HeadFailed(f"no Ray head address in {path} after {wait_s:.0f} s")
        time.sleep(0.5)
    text = path.read_text(encoding="ascii", errors="replace").strip()
    match = ADDRESS.match(text)
    if match is None or not 1 <= int(match[2]) <= PORT_MAX:
        raise HeadFailed(f"{path} holds {text[:80]!r}, not a Ray head address (IPv4:port)")
    return text


def _lists(path: Path, address: str) -> bool:
    """Whether `path` still holds the head's `address` (not removed, nor written by another attempt's head)."""
    try:
        return path.read_text(encoding="ascii", errors="replace").strip() == address
    except OSError:
        return False


def route_address(host: str) -> str:
    """This node's address on the route to `host` (the one the head's node sees this node's connections come from):
    what a worker node binds when its address is not given (`--node-ip auto`). No packet is sent."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, 9))
        return sock.getsockname()[0]


def join(
    address_file: Path,
    *,
    key: str,
    node_ip: str,
    ray: str = "ray",
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    worker_ports: int = 0,
    memory_mb: int | None = None,
    wait_s: float = 120.0,
    address_wait_s: float = ADDRESS_WAIT_S,
    port_wait_s: float = 0.0,
) -> int:
    """A worker node of the job's cluster on this node: its own block of this node's ports (reserved as a head's
    is), joined to the head whose address `address_file` holds, until the head has stopped (it removes that address:
    then exit 0, so that the `srun` which started the worker nodes ends by itself and cleanly), SIGTERM (the job step
    ending), or Ray's processes ending. `node_ip` "auto": this node's address on the route to the head. Exit status as
    `run`'s."""
    try:
        address = read_address(address_file, address_wait_s)
        if node_ip == AUTO:
            node_ip = route_address(address.rsplit(":", 1)[0])
    except (HeadFailed, OSError) as exc:  # OSError: no route to the head's address
        print(f"agentrepro: {exc}", file=sys.stderr)
        return 1
    reservation = _reserved(key, worker_ports, (), port_wait_s)
    if isinstance(reservation, int):
        return reservation
    ports = reservation.ports
    argv = worker_argv(
        address, ports, node_ip=node_ip, ray=ray, num_cpus=num_cpus, num_gpus=num_gpus, memory_mb=memory_mb
    )
    print(
        f"agentrepro: Ray worker node of job {key} at {node_ip} on ports {ports.base}-{ports.base + ports.size - 1}, "
        f"joining {address}",
        file=sys.stderr,
        flush=True,
    )
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with running_head(argv, reservation, wait_for=(ports.node_manager,), wait_s=wait_s, host=node_ip) as proc:
            while proc.poll() is None:
                if not _lists(address_file, address):
                    print(f"agentrepro: the head at {address} has stopped; so does this worker node", file=sys.stderr)
                    return 0
                time.sleep(HEAD_POLL_S)
            return proc.returncode
    except HeadFailed as exc:
        print(f"agentrepro: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        reservation.release()


OWNER_ENV = "AGENTREPRO_OWNER_LOCK"  # the file the agentrepro process running this program holds locked
OWNER_POLL_S = 2.0
REAP_EVERY_S = 1.0
_OWN: set[int] = set()  # the launcher's own children (the head, the program): their statuses are Popen.wait's


def orphan_zombies(proc: Path = Path("/proc")) -> list[int]:
    """Processes that ended after being given to this process (their parent died), not yet reaped, not its own."""
    me, found = os.getpid(), []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in _OWN:
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def reap_orphans(every_s: float = REAP_EVERY_S) -> threading.Thread:
    """Reap the orphans a container's first process is given (podman and docker run without --init, and Ray leaves
    some: a worker's children whose parent ended), so they do not pile up as zombies for the job's lifetime."""

    def reap() -> None:
        while True:
            for pid in orphan_zombies():
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            time.sleep(every_s)

    thread = threading.Thread(target=reap, name="agentrepro-reaper", daemon=True)
    thread.start()
    return thread


def _lock_free(fd: int) -> bool:
    """Whether no process holds an exclusive lock on `fd`'s file (a shared lock is taken and released at once)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def watch_owner(path: Path, poll_s: float = OWNER_POLL_S) -> threading.Thread | None:
    """Stop this job when the agentrepro process that runs it is gone: it holds an exclusive lock on `path` (the run's
    logs/<program>.owner, backends/ray_head.py `owned`) for as long as it lives, and the kernel releases it however that
    process ends, SIGKILL included, which leaves a container (and so this program, its head and its ports) running
    outside the dead job. Once the lock is free, SIGTERM to this process stops the program and the head. Watched only
    when the lock is held at start (a program started by hand has no owner)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode) or _lock_free(fd):
        os.close(fd)
        return None

    def watch() -> None:
        while not _lock_free(fd):
            time.sleep(poll_s)
        print(
            f"agentrepro: the process that ran this job is gone (its lock on {path} is free); stopping the program "
            "and its Ray head",
            file=sys.stderr,
            flush=True,
        )
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="agentrepro-owner", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentrepro_ray_head.py", description=__doc__.splitlines()[0])
    parser.add_argument("--key", required=True)
    parser.add_argument("--ray", default="ray")
    parser.add_argument("--num-cpus", type=int)
    parser.add_argument("--num-gpus", type=int)
    parser.add_argument("--memory-mb", type=int, help="the job's memory: Ray's object store and memory from it")
    parser.add_argument("--no-client", action="store_true")
    parser.add_argument("--dashboard", action="store_true", help="start the dashboard (job API); RAY_ADDRESS names it")
    parser.add_argument(
        "--worker-ports", type=int, default=0, help="ports reserved for Ray's workers (0: the kernel picks each)"
    )
    parser.add_argument("--fixed-port", type=int, action="append", default=[], help="a port the framework hard-codes")
    parser.add_argument(
        "--pid-file", type=Path, help="written while the head runs: its PID and the PID namespace counting it"
    )
    parser.add_argument(
        "--owner-lock",
        type=Path,
        help=f"a file the job's agentrepro process holds locked: stop once it is free (default ${OWNER_ENV})",
    )
    parser.add_argument(
        "--port-wait-s",
        help=f"seconds to wait for taken ports before exit 75 (default ${PORT_WAIT_ENV}, else {PORT_WAIT_DEFAULT:.0f})",
    )
    parser.add_argument(
        "--node-ip",
        default=None,
        help=f"the address this node's Ray binds (head: default {LOOPBACK}, a one-node job; --join: default "
        f"{AUTO!r}, the address on the route to the head)",
    )
    parser.add_argument(
        "--address-file", type=Path, help="head: write the head's address here once it listens (for --join)"
    )
    parser.add_argument(
        "--join",
        type=Path,
        metavar="ADDRESS_FILE",
        help="run a worker node of the job, joined to the head whose address this file holds (no program)",
    )
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if args.join is not None and program:
        parser.error("a worker node (--join) runs no program")
    if args.join is None and not program:
        parser.error("give the program after --")
    node_ip = args.node_ip or (AUTO if args.join is not None else LOOPBACK)
    if not ADDRESS.match(f"{node_ip}:1") and not (node_ip == AUTO and args.join is not None):
        print(f"agentrepro_ray_head.py: --node-ip {node_ip!r} is not an IPv4 address", file=sys.stderr)
        return 2
    bad = [p for p in args.fixed_port if not 1 <= p <= PORT_MAX]
    if bad or not 0 <= args.worker_ports <= PORT_MAX:
        what = f"--fixed-port {bad[0]}" if bad else f"--worker-ports {args.worker_ports}"
        print(f"agentrepro_ray_head.py: {what} is out of range (ports are 1-65535)", file=sys.stderr)
        return 2
    wait_text = args.port_wait_s or os.environ.get(PORT_WAIT_ENV) or str(PORT_WAIT_DEFAULT)
    try:
        port_wait_s = float(wait_text)
    except ValueError:
        port_wait_s = -1.0
    if not 0 <= port_wait_s < float("inf"):
        print(
            f"agentrepro_ray_head.py: {wait_text!r} is not a number of seconds (--port-wait-s, {PORT_WAIT_ENV})",
            file=sys.stderr,
        )
        return 2
    pythonpath = extended_pythonpath(os.environ)
    if pythonpath is not None:  # inherited by the head, its workers and the program
        os.environ["PYTHONPATH"] = pythonpath
    if args.join is not None:
        return join(
            args.join,
            key=args.key,
            node_ip=node_ip,
            ray=args.ray,
            num_cpus=args.num_cpus,
            num_gpus=args.num_gpus,
            worker_ports=args.worker_ports,
            memory_mb=args.memory_mb,
            port_wait_s=port_wait_s,
        )
    return run(
        program,
        key=args.key,
        ray=args.ray,
        num_cpus=args.num_cpus,
        num_gpus=args.num_gpus,
        client=not args.no_client,
        dashboard=args.dashboard,
        worker_ports=args.worker_ports,
        fixed_ports=tuple(args.fixed_port),
        pid_file=args.pid_file,
        port_wait_s=port_wait_s,
        memory_mb=args.memory_mb,
        owner_lock=args.owner_lock or (Path(os.environ[OWNER_ENV]) if os.environ.get(OWNER_ENV) else None),
        node_ip=node_ip,
        address_file=args.address_file,
    )


__all__ = [
    "EX_TEMPFAIL",
    "HEAD_PORTS",
    "OWNER_ENV",
    "PORT_WAIT_ENV",
    "PYTHONPATH_ENV",
    "HeadFailed",
    "NoRoom",
    "PortsTaken",
    "RayPorts",
    "Reservation",
    "UnsafeFolder",
    "extended_pythonpath",
    "head_argv",
    "job_key",
    "join",
    "listening",
    "main",
    "ports_dir",
    "private_mount",
    "reserve",
    "reserve_waiting",
    "run",
    "running_head",
    "shared_folder",
    "stop_group",
    "temp_dir",
    "worker_argv",
]


if __name__ == "__main__":
    raise SystemExit(main())
