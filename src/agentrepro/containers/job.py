"""A job's container and the programs it runs in it: from a run config to the command line exactly as it runs.

`container_for(config, run_dir=)` reads the run config's `image` block (the method's placement, as the lock pins
it) and what the job must see: the run directory and the study root (the harness's working directory, where the
workflow runs: read-write), the framework checkout `backend.workdir` (read-write: frameworks write into it), the
data files or folders and a local model directory (read-only), any folder the caller adds (`extra`, read-only: the
harness's stdlib-only hooks, a backend's own data paths) and any folder the job shares with the node's other jobs
(`shared`, read-write: the Ray heads' port reservations), each mounted at its own path. Nothing else of the host is
there.
`program(...)` wraps one program (argv, env, cwd: a backend's `Launch`) for it; without a container
(`image: {none: ...}`) the program is returned as it is. Its working directory `cwd`, when relative, is under the
study root; an absolute one outside every mount is a directory of the image (where an image holds its checkout).

A job's scratch folder (`job_scratch`: under $TMPDIR, which SLURM points at node-local disk, else /tmp) holds what
the program writes outside its mounts where the runtime would put it somewhere too small or unwritable: Apptainer's
--workdir (/tmp, /var/tmp and $HOME) and docker's HOME. It is made private when the program starts and removed when
it ends (running.py).

The image cache (`AGENTREPRO_IMAGE_CACHE`, default `~/.cache/agentrepro/images`) holds what prepare.py makes once
per node: Apptainer's SIFs converted from registry images, and the locks that keep two jobs from pulling at once.
Put it on a shared file system to prepare once per study instead.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrepro import cgroups
from agentrepro.containers import rehearsal
from agentrepro.containers.image import Image, archive_image_id, image_of
from agentrepro.containers.runtimes import (
    FORBIDDEN_IN_PATH,
    RUNTIME,
    Mount,
    RunRequest,
    allocated_gpus,
    merged_mounts,
)
from agentrepro.errors import BadInput

CACHE_VARIABLE = "AGENTREPRO_IMAGE_CACHE"


def image_cache() -> Path:
    """Where prepared images live on this node (AGENTREPRO_IMAGE_CACHE, else ~/.cache/agentrepro/images)."""
    configured = os.environ.get(CACHE_VARIABLE)
    return Path(configured).resolve() if configured else Path.home() / ".cache" / "agentrepro" / "images"


@dataclass(frozen=True)
class Container:
    """The image a job's programs run in, with the job's mounts and GPUs (`gpu_devices`: allocated_gpus, None where
    the environment names none)."""

    image: Image
    mounts: tuple[Mount, ...]
    gpus: bool = False
    gpu_devices: tuple[str, ...] | None = None
    cache: Path = field(default_factory=image_cache)

    @property
    def runtime(self) -> Any:
        return RUNTIME[self.image.runtime]

    @property
    def converted_sif(self) -> Path:
        """Apptainer: the SIF converted from a registry image, named by its digest in the cache."""
        return self.cache / "apptainer" / (str(self.image.digest).removeprefix("sha256:") + ".sif")

    def reference(self) -> str:
        """The image as the runtime's command line names it: pinned by digest, by image ID or by file."""
        if self.image.runtime == "apptainer":
            return self.runtime.reference(self.image, self.converted_sif)
        return self.runtime.reference(
            self.image, archive_image_id(self.image.local_file) if self.image.is_file else None
        )


@dataclass(frozen=True)
class Program:
    """A program as it runs: argv, environment added to the host's, working directory on the host; with the
    container (None: on the host) and the file where the runtime writes the container's ID."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    container: Container | None = None
    cidfile: Path | None = None
    label: str = ""
    scratch: Path | None = None  # the job's scratch folder, when the runtime uses one (module docstring)
    cgroup_parent: str | None = None  # the SLURM job's cgroup the container's is made under (`job_cgroup`)


def job_cgroup(runtime: Any) -> str | None:
    """Where the container's cgroup goes: under the SLURM job's (`cgroups.container_parent`) where the runtime makes it
    itself (docker, rootful podman) with the cgroupfs manager; None outside a job and where the container stays in the
    job's cgroups anyway (Apptainer, rootless podman). A systemd manager takes slice names only, so its containers
    stay outside the job's limits: said on stderr, as is a runtime that does not say which manager it uses."""
    parent = cgroups.container_parent() if runtime.own_cgroups else None
    if parent is None:
        return None
    argv = runtime.manager_argv()
    manager = _cgroup_manager(tuple(argv))
    if manager == "cgroupfs":
        return parent
    print(
        f"agentrepro: {shlex.join(argv)} says the cgroup manager is {manager or 'nothing'!r}, not cgroupfs: the "
        f"container's cgroup cannot be made under this SLURM job's ({parent}), so the job's memory and CPU limits do "
        "not hold it",
        file=sys.stderr,
    )
    return None


@functools.cache
def _cgroup_manager(argv: tuple[str, ...]) -> str:
    """The runtime's answer to `argv` (its `info` of the cgroup manager), asked once per process: a workflow shows
    every job's command line, each of which would ask again. "" where it did not answer."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def job_scratch(job_dir: Path) -> Path:
    """The node-local scratch folder of the job whose records go to `job_dir` (module docstring)."""
    digest = hashlib.sha256(str(Path(job_dir).resolve()).encode()).hexdigest()[:12]
    return Path(os.environ.get("TMPDIR") or "/tmp").resolve() / f"agentrepro-{os.getuid()}-{digest}"


def mounted_fields(config: dict[str, Any]) -> dict[str, str]:
    """The run config's fields whose paths every framework job's container mounts (besides the run directory and the
    study root): the framework's checkout, each data file or folder, and a model folder; a backend adds its own
    (Backend.mounted_fields)."""
    fields = {"backend.workdir": (config.get("backend") or {}).get("workdir")}
    fields |= {f"data.{name}.path": (spec or {}).get("path") for name, spec in (config.get("data") or {}).items()}
    fields["model.path"] = (config.get("model") or {}).get("path")
    return {where: path for where, path in fields.items() if isinstance(path, str) and path}


def check_mount(given: str | os.PathLike, *, where: str, root: Path | None = None) -> None:
    """The mount rule, applied at freeze and before every container starts: BadInput naming `where` for a path no
    runtime can mount (':' and ',' split their mount options; control characters), or one that would show the host
    to the container: its root, or a folder that holds the study root (`root`, the working directory by default),
    which would show every file beside the study. A relative path is taken under `root`."""
    study = Path(os.path.abspath(root or Path.cwd()))
    absolute = Path(os.path.abspath(study / given))
    real, study = absolute.resolve(), study.resolve()
    for path in (absolute, real):
        if FORBIDDEN_IN_PATH.search(str(path)):
            raise BadInput(
                f"{str(path)!r} cannot be mounted: the runtimes split their mount options at ':' and ',' (and no "
                "control character passes)",
                where=where,
            )
    if real == Path(real.anchor) or (real != study and study.is_relative_to(real)):
        what = "the host's root" if real == Path(real.anchor) else f"a folder that holds the study ({study})"
        raise BadInput(
            f"{given} is {what}: mounted, it would show the host's files to the job's container; give a folder of its own",
            where=where,
        )


def checked_mounts(fields: dict[str, str]) -> tuple[Path, ...]:
    """The paths of a backend block's `fields` (field -> path), each held to the mount rule by its field's name."""
    for where, path in fields.items():
        check_mount(path, where=where)
    return tuple(Path(path).absolute() for path in fields.values())


def container_for(
    config: dict[str, Any], *, run_dir: Path, extra: Iterable[Path] = (), shared: Iterable[Path] = ()
) -> Container | None:
    """The container of a job of this run config, or None when its placement runs without one (or the config, written
    by hand outside a study, names no image); BadInput naming the field for an image block or a path that cannot be used."""
    image = image_of(config["image"]) if "image" in config else None
    if image is None:
        return None
    mounts = [*given_at(run_dir, read_only=False), Mount(Path.cwd(), read_only=False)]
    for where, given in mounted_fields(config).items():
        check_mount(given, where=where)
        # frameworks write into their checkout (Hydra's outputs/); a data or model folder's links are followed
        checkout = where == "backend.workdir"
        mounts += given_at(given, read_only=not checkout, links=not checkout)
    for path in extra:  # the backend checks its own fields first (Backend.mounted_fields), naming them
        check_mount(path, where="backend")
        mounts += given_at(path)
    for path in shared:
        mounts += given_at(path, read_only=False)
    gpus = int((config.get("resources") or {}).get("gpus") or 0) > 0
    return Container(image, merged_mounts(mounts), gpus=gpus, gpu_devices=allocated_gpus() if gpus else None)


LINK_WALK_LIMIT = 100_000  # entries of a data or model folder looked at for links that lead out of it


def given_at(given: str | os.PathLike, *, read_only: bool = True, links: bool = False) -> list[Mount]:
    """The mounts that show `given` inside the container where the program looks for it: its real location at its
    own path, and, when a symlink leads there, the same folder at the path the program is given (the config's value
    and the environment that carries it, HF_CHECKPOINT or ALFWORLD_DATA, name that one). `links`: a folder whose
    symlinks point out of it (a hub cache's `snapshots/<rev>/` into `../../blobs/`) gets their targets' folders too,
    read-only, where the links lead from either path, so no link inside the container dangles."""
    absolute = Path(os.path.abspath(given))
    real = absolute.resolve()
    mounts = [Mount(real, read_only)]
    alias = absolute if absolute != real else None
    if alias is not None:
        mounts.append(Mount(alias, read_only, source=real))
    if links and real.is_dir():
        mounts += _outside_links(real, alias)
    return mounts


def _outside_links(folder: Path, alias: Path | None) -> list[Mount]:
    """Mounts of the folders that hold the targets of `folder`'s symlinks leading out of it (a link to a folder
    gives that folder), at their own paths and, for a relative link, where it leads from `alias` (the path the
    program is given for `folder`); the first LINK_WALK_LIMIT entries are looked at."""
    mounts: dict[Path, Mount] = {}
    seen = 0
    for root, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            seen += 1
            entry = Path(root) / name
            if not entry.is_symlink():
                continue
            target = entry.resolve()
            if not target.exists() or target.is_relative_to(folder):
                continue
            held = target if target.is_dir() else target.parent
            mounts[held] = Mount(held)
            text = os.readlink(entry)
            if alias is not None and not os.path.isabs(text):
                lexical = Path(os.path.normpath(alias / entry.parent.relative_to(folder) / text))
                lexical = lexical if target.is_dir() else lexical.parent
                if lexical != held:
                    mounts[lexical] = Mount(lexical, source=held)
        if seen > LINK_WALK_LIMIT:
            break
    return list(mounts.values())


def program(
    config: dict[str, Any],
    argv: Iterable[str],
    env: Mapping[str, str],
    cwd: str | Path | None,
    *,
    run_dir: Path,
    job_dir: Path,
    label: str,
    extra: Iterable[Path] = (),
    shared: Iterable[Path] = (),
) -> Program:
    """One program of a job as it runs: inside the job's container (its command line from the runtime, the container's
    ID written to `job_dir/logs/<label>.cid`), or unchanged when the placement has no container."""
    gpus = int((config.get("resources") or {}).get("gpus") or 0)
    rehearsing = rehearsal.folder()  # a rehearsal: its variables, its folder, no network, no GPU devices
    env = {**env, **rehearsal.program_env(label, gpus)}
    shared = [*shared, *([rehearsing] if rehearsing else [])]
    container = container_for(config, run_dir=run_dir, extra=extra, shared=shared)
    if container is None:
        return Program(tuple(argv), dict(env), Path(cwd) if cwd else None, label=label)
    if rehearsing is not None:  # a machine without GPUs: the hook tells torch the job's count instead
        container = dataclasses.replace(container, gpus=False, gpu_devices=None)
    workdir = (
        Path.cwd() / cwd if cwd else Path.cwd()
    )  # relative: under the mounted study root; absolute elsewhere: in the image
    cidfile = (Path(job_dir) / "logs" / f"{label}.cid").resolve() if container.image.runtime != "apptainer" else None
    runtime = container.runtime
    scratch = job_scratch(job_dir) if runtime.uses_scratch else None
    cgroup_parent = job_cgroup(runtime)
    request = RunRequest(
        container.reference(),
        tuple(argv),
        dict(env),
        workdir,
        container.mounts,
        container.gpus,
        container.gpu_devices,
        scratch,
        cidfile,
        "host" if rehearsing is None else "none",
        cgroup_parent,
    )
    wrapped, host_env = runtime.run_argv(request)
    return Program(tuple(wrapped), host_env, None, container, cidfile, label, scratch, cgroup_parent)
