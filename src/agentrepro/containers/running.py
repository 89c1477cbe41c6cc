"""Around the run of one program in its container: prepare the image first, ask the runtime what ran afterwards.

```python
program = containers.program(config, argv, env, cwd, run_dir=..., job_dir=..., label="train")
with containers.proven(program, job_dir):
    run_logged(list(program.argv), ..., cwd=program.cwd, env=dict(program.env))
```

Before: every mount must exist (and, for rootless podman, the node's /dev/mqueue), the image is prepared on this
node (prepare.py), the runtime's version is asked, and a local image file is hashed (so the record says which bytes
ran). After the program ends: podman and
docker are asked which image the container (named in its cidfile) ran and which digests that image has, and the
container is removed; for apptainer, a converted SIF's definition is read. The record (proof.record) goes to the
job's records for the attempt. When the program fails, what can be recorded still is, and a failure to ask
never hides the program's own.

A job told to end while its program runs (scancel, its time limit: SIGTERM, which the verbs turn into an exception)
has its container stopped at once (`stop`, before the runtime's client is stopped and the container removed): the
container's processes are not the job's to SLURM, which signals only those in the job step's own cgroup (proctrack/
cgroup), not the container's below it (cgroups.py), and the client's forwarded SIGTERM does not end a first process
that has no handler for it (PID 1 ignores such signals). A job killed outright (SIGKILL) stops nothing: its container
is removed, with the cgroups it left in that job, by the next attempt on the node (`_remove_stale`); a Ray head's
launcher ends its program once the job's process is gone (hooks/agentrepro_ray_head.py `watch_owner`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentrepro import cgroups
from agentrepro.containers.image import archive_image_id, file_sha256
from agentrepro.containers.job import Container, Program
from agentrepro.containers.prepare import ask, prepare
from agentrepro.containers.proof import add_record, record
from agentrepro.containers.runtimes import GPU_SOURCES
from agentrepro.errors import Failure

MQUEUE = Path("/dev/mqueue")  # the node's POSIX message queues (runtimes' `binds_host_mqueue`)


@contextlib.contextmanager
def proven(program: Program, job_dir: Path) -> Iterator[None]:
    """Run the body (which runs `program`) with its image prepared and its proof recorded in `job_dir`'s records."""
    container = program.container
    if container is None:
        yield
        return
    if container.gpus and container.gpu_devices is None:
        raise Failure(
            f"the job asks for GPUs, but none of {', '.join(GPU_SOURCES)} names any: a container is never given "
            "every GPU of the node (set CUDA_VISIBLE_DEVICES to this job's, or run it under SLURM with --gpus)"
        )
    for mount in container.mounts:
        if not mount.host.exists():
            raise Failure(f"{mount.host} cannot be mounted into the container: it does not exist")
    if container.runtime.binds_host_mqueue and not MQUEUE.is_dir():
        raise Failure(
            f"rootless podman shares the node's IPC namespace (--ipc host) and so mounts the node's {MQUEUE}, which "
            f"this node lacks: a node's systemd mounts it (as root: mount -t mqueue mqueue {MQUEUE})"
        )
    if program.scratch is not None:
        private_folder(program.scratch)
    prepared = prepare(container)
    version = _version(container)
    before = _file_facts(container)
    if program.cidfile is not None:
        program.cidfile.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(container, program)  # the runtime refuses to overwrite the file
    finished = False
    try:
        yield
        finished = True
    finally:
        try:
            try:
                resolved, obtained = _ask(container, program)
                add_record(
                    job_dir,
                    record(
                        label=program.label,
                        image=container.image,
                        reference=container.reference(),
                        version=version,
                        resolved={**before, **resolved},
                        obtained=obtained,
                        prepared=prepared,
                    ),
                )
            finally:
                _remove(container, program)  # also after an interruption: `rm --force` stops a container still running
                if program.scratch is not None:
                    shutil.rmtree(program.scratch, ignore_errors=True)
        except Failure:
            if finished:
                raise


def private_folder(path: Path) -> Path:
    """`path` as a folder of this user's alone, made when missing; Failure when something else is there (a folder
    another user made in the shared /tmp, a link): a job never writes where someone else chose."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise Failure(f"{path} is not a folder of this user's: the job's scratch folder cannot be used")
    path.chmod(0o700)
    (path / "home").mkdir(exist_ok=True)
    return path


def _version(container: Container) -> str:
    text = ask(container.runtime.version_argv()).strip()
    return text.removeprefix(f"{container.runtime.name} version ").strip()


def _file_facts(container: Container) -> dict[str, Any]:
    """A local image file's hash as it runs (and, for an archive, the image ID it holds)."""
    image = container.image
    if not image.is_file:
        return {}
    facts: dict[str, Any] = {"file_sha256": file_sha256(image.local_file)}
    if image.runtime != "apptainer":
        facts["archive_image_id"] = archive_image_id(image.local_file)
    return facts


def _ask(container: Container, program: Program) -> tuple[dict[str, Any], str]:
    """What the runtime says ran, and how it was asked."""
    runtime = container.runtime
    if container.image.runtime == "apptainer":
        if container.image.is_file:
            return {}, "sha256 of the SIF file, hashed by the harness as the program started"
        digest = runtime.deffile_digest(ask(runtime.deffile_argv(container.converted_sif)))
        return (
            {"digests": [digest] if digest else [], "sif_sha256": file_sha256(container.converted_sif)},
            f"apptainer inspect --deffile {container.converted_sif} (From: ...@sha256:...), and the SIF's sha256",
        )
    container_id = _container_id(program)
    if container_id is None:
        raise Failure(f"{runtime.name} wrote no container ID to {program.cidfile}")
    try:
        container_json = ask(runtime.container_argv(container_id))
        image_id = runtime.image_id_of(container_json)
        resolved = runtime.resolved(container_json, ask(runtime.image_argv(image_id)))
    except ValueError as exc:
        raise Failure(f"{runtime.name} inspect of container {container_id}: {exc}") from None
    return resolved, (
        f"{runtime.name} container inspect {container_id} (.Image, .ImageDigest); "
        f"{runtime.name} image inspect {image_id} (.Id, .Digest, .RepoDigests)"
    )


CONTAINER_ID = re.compile(r"[0-9a-f]{12,64}")
# When a job is told to end (scancel, its time limit), SLURM sends SIGTERM and, KillWait later (30 s by default),
# SIGKILL; the container's first process gets SIGTERM, and this long to end, before the runtime kills the container
STOP_S = 2


def _container_id(program: Program) -> str | None:
    """The container ID the runtime wrote to the program's cidfile, or None: no file, or not an ID (the job's own
    programs can write in its logs/, and what is read here becomes a word of `rm --force` and `inspect`)."""
    if program.cidfile is None:
        return None
    try:
        text = program.cidfile.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if CONTAINER_ID.fullmatch(text) else None


def stop(program: Program, seconds: int = STOP_S) -> None:
    """Stop the program's container now (podman, docker), when the job is told to end while it runs (process.stop_tree
    stops only the runtime's client, and SLURM signals no process of the container: module docstring); nothing where
    the runtime has not written its ID yet, or for Apptainer, whose programs are the job's own processes."""
    container_id = _container_id(program)
    if program.container is not None and container_id is not None:
        with contextlib.suppress(Failure):  # ended already
            ask(program.container.runtime.stop_argv(container_id, seconds))


def _remove_stale(container: Container, program: Program) -> None:
    """Before the program starts: a container ID left in its cidfile by an earlier attempt that was killed (nothing
    removed its container, which its head launcher has stopped, or whose program runs on) is removed, said on stderr,
    with what the runtime left of its cgroups in that attempt's SLURM job (which SLURM could not remove above them);
    the file goes."""
    assert program.cidfile is not None
    container_id = _container_id(program)
    if container_id is not None:
        with contextlib.suppress(Failure):  # gone already, or made on another node
            parent = ask(container.runtime.cgroup_parent_argv(container_id)).strip()
            stop(program, seconds=0)  # its job is over: no grace (podman's `rm --force` would give it 10 s)
            ask(container.runtime.remove_argv(container_id))
            print(f"agentrepro: removed container {container_id[:12]}, left by a killed attempt", file=sys.stderr)
            killed_job = next((p.removeprefix("job_") for p in parent.split("/") if p.startswith("job_")), "")
            if killed_job:  # made under that attempt's SLURM job's cgroup
                cgroups.remove_left(parent, killed_job)
    program.cidfile.unlink(missing_ok=True)


def _remove(container: Container, program: Program) -> None:
    """Remove the stopped container (podman, docker) and its cidfile; apptainer leaves nothing behind."""
    if program.cidfile is None:
        return
    container_id = _container_id(program)
    if container_id is not None:
        ask(container.runtime.remove_argv(container_id))
    program.cidfile.unlink(missing_ok=True)
    if program.cgroup_parent is not None:  # what the runtime left of its cgroups in the job's
        cgroups.remove_left(program.cgroup_parent, os.environ.get("SLURM_JOB_ID", ""))
