"""The cgroups this process is in: the memory they leave it (`host_memory`), and where a container runtime that makes
its containers' cgroups itself must make them for a SLURM job's limits to hold the container.

A scheduler confines a job by the cgroups of its processes (SLURM's task/cgroup: the job's memory and cores;
proctrack/cgroup: what it signals and kills). Rootful podman and docker start a container through their monitor
(conmon) or daemon in a cgroup of their own (`/libpod_parent/libpod-ID`, `/docker/ID`), outside the job's: the
container could use the node's whole memory. `--cgroup-parent PARENT` (with the cgroupfs manager, which takes a path;
a systemd manager takes slice names only) makes the container's cgroup, and podman's conmon's (`PARENT/conmon`), under
the job's, in every hierarchy: the job's limits hold them. Apptainer's containers are the job's own processes, in
its cgroups; so are rootless podman's under cgroup v1, which makes them below the caller's own, where its user may
write: SLURM gives a job's cgroups to the job's user, so they are inside the job step's (under cgroup v2 with systemd
it puts them in the user's systemd slice, outside the job's: not handled).

The cgroups that stay behind are removed when the container is (`remove_left`): podman leaves `PARENT/conmon`, which
would keep SLURM from removing the job's cgroups when it ends, and in the hierarchies SLURM does not manage (cpu,
blkio, pids, ...) the runtime made the whole path, which nothing else would remove.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import psutil

ROOT = Path("/sys/fs/cgroup")
MEMBERSHIP = Path("/proc/self/cgroup")
MOUNTS = Path("/proc/self/mounts")


def groups(membership: Path = MEMBERSHIP) -> dict[str, str]:
    """{controller: path} of this process, from /proc/self/cgroup: cgroup v1's lines (`4:memory:/path`; a line of
    several controllers, `2:cpu,cpuacct:/path`, gives each) and v2's unified one (`0::/path`) under ''. Empty where
    the file cannot be read."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                found[controller] = parts[2].strip()
    return found


def host_memory(cgroup_root: Path = ROOT, membership: Path = MEMBERSHIP) -> tuple[int, int]:
    """(bytes this process may still take, the most it may hold): the host's available and total memory, each
    lowered by every memory limit of a cgroup above this process (its room: the limit less the group's use), under
    cgroup v2 (`memory.max`) or v1's memory controller (`memory.limit_in_bytes`). A SLURM job's cgroup is far
    smaller than the node; psutil reads only the node."""
    host = psutil.virtual_memory()
    available, total = int(host.available), int(host.total)
    found = groups(membership)
    for controller, base, files in (
        ("", cgroup_root, ("memory.max", "memory.current")),
        ("memory", cgroup_root / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")),
    ):
        if controller not in found:
            continue
        group = base / found[controller].lstrip("/")
        for folder in (group, *group.parents):
            if not folder.is_relative_to(base):
                break
            try:
                limit = (folder / files[0]).read_text().strip()
                used = int((folder / files[1]).read_text().strip())
            except (OSError, ValueError):
                continue
            if limit.isdigit() and int(limit) < 1 << 60:  # v1 writes "no limit" as a number near 2^63
                total = min(total, int(limit))
                available = min(available, max(0, int(limit) - used))
    return available, total


def container_parent(environ: Mapping[str, str] | None = None, membership: Path = MEMBERSHIP) -> str | None:
    """Under a SLURM job (SLURM_JOB_ID set), the cgroup under which a container's own keeps it inside the job's: the
    parent of this process's cgroup, cgroup v1's memory controller's (which holds the job's memory limit) or, where v1
    has none, v2's unified one; None outside a job, or where this process is in a root cgroup. The parent, not the
    cgroup itself: cgroup v2 lets no cgroup that holds processes give its controllers to children, and SLURM's leaf
    (`task_0`, `user/task_0`) holds this process; its parent is the job step's, under the job's limits."""
    environ = os.environ if environ is None else environ
    if not environ.get("SLURM_JOB_ID"):
        return None
    found = groups(membership)
    own = PurePosixPath(found.get("memory") or found.get("") or "/")
    return None if own.parent == PurePosixPath("/") else str(own.parent)


def hierarchies(mounts: Path = MOUNTS) -> list[Path]:
    """The mount points of this host's cgroup hierarchies (v1's `cgroup`, v2's `cgroup2`)."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return []
    return [
        Path(fields[1]) for fields in map(str.split, lines) if len(fields) > 2 and fields[2] in ("cgroup", "cgroup2")
    ]


def remove_left(parent: str, job_id: str, mounts: Path = MOUNTS) -> list[Path]:
    """After the containers made under `parent` are removed: in every hierarchy, `parent/conmon`, then `parent` and
    its parents up to the job's own (`job_<job_id>`), each where it is empty. rmdir refuses a cgroup that still holds
    a process or a child cgroup: the running step's own cgroups stay, and so does a conmon that another container of
    the job still uses. The folders removed."""
    path = PurePosixPath(parent)
    if not path.is_absolute() or ".." in path.parts or f"job_{job_id}" not in path.parts:
        return []  # only ever below the job's own cgroup
    chain = [path / "conmon", path]
    while chain[-1].name != f"job_{job_id}":
        chain.append(chain[-1].parent)
    removed = []
    for root in hierarchies(mounts):
        for group in chain:
            folder = root / group.relative_to("/")
            try:
                folder.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                break  # still used (or not ours): so are its parents
            removed.append(folder)
    return removed
