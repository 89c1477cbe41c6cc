"""The container runtimes, each described once: how it runs a pinned image, how it is asked what it ran.

Every runtime takes the same request (`RunRequest`: the image reference, the program's argv, its environment,
working directory, mounts, GPUs) and writes its own command line, so that `agentrepro command` shows exactly
what runs. Nothing is ever joined into shell text: an environment value is one argv word (`--env NAME=VALUE`
for podman and docker; for Apptainer, whose `--env` splits at commas and evaluates `$NAME`, the program runs
under `env NAME=VALUE ...` inside the image), and a mount path is checked (`Mount`) before it becomes one.
Paths keep their host names inside the container, so the program's own argv needs no rewriting.

* podman, docker: `RUNTIME run --cidfile FILE --pull never --network host --ipc host --pids-limit -1
  [--cgroup-parent JOB-CGROUP] [GPUs] --volume SRC:SRC[:ro] ... --workdir DIR --env NAME=VALUE ... IMAGE ARGV`. The image is `REPOSITORY@sha256:<digest>` or the image ID of
  a loaded archive. No `--rm`: after the program ends, `container inspect` of the container named in the cidfile
  says which image ID it ran and `image inspect` of that ID the digests the runtime knows it by; then the
  container is removed. GPUs: only the job's own (`allocated_gpus`: SLURM's SLURM_STEP_GPUS or SLURM_JOB_GPUS, the
  node's indices, else CUDA_VISIBLE_DEVICES), never every GPU of the node: podman `--device nvidia.com/gpu=ID` per
  device (CDI names, as `nvidia-ctk cdi generate` writes them: an index or a UUID), docker `--gpus "device=ID,..."`;
  inside, they are devices 0..n-1, and CUDA_VISIBLE_DEVICES says so. docker also runs as the calling user (`--user UID:GID`) so the run
  directory stays the user's, with HOME in the job's scratch folder (the caller has no home in the image, and HOME=/
  is not writable); rootful podman runs as root, rootless podman maps root to the user. Under a SLURM job, where the
  runtime makes the container's cgroup itself with the cgroupfs manager, `--cgroup-parent` puts it under the job's
  (cgroups.py), so the job's memory and CPU limits hold the container.
  Host settings (OCI runtime, cgroup manager, default ulimits) belong in containers.conf (podman) or the daemon's
  configuration (docker), not in the study.
* apptainer: `apptainer exec --cleanenv --contain --workdir SCRATCH --home SCRATCH/home [--nv] --bind SRC:SRC[:ro]
  ... --pwd DIR IMAGE env -- NAME=VALUE ... ARGV`. With --contain alone, /tmp, /var/tmp and $HOME are on the
  session's tmpfs (apptainer.conf `sessiondir max size`, 64 MiB by default), too small for Ray's temp dir and spilled
  objects and the Triton, inductor and Hugging Face caches; `--workdir` and `--home` put them in the job's node-local
  scratch folder instead (`--home` too, as SingularityCE's --workdir leaves $HOME out). `--nv` binds the host's GPU devices and the host's CUDA_VISIBLE_DEVICES selects among them, as on the
  host (under SLURM the job's device cgroup leaves only its own GPUs usable). The image is a SIF: the study's own file, or the SIF converted once from `docker://REPOSITORY@sha256:...`
  into the image cache (prepare.py). Proof: `apptainer inspect --deffile` of a converted SIF names the digest it was
  built from, and a study's own SIF is hashed before it runs.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
PASSED_BY_NAME = ("CUDA_VISIBLE_DEVICES",)  # the scheduler's choice of GPUs for this job, when the job has GPUs
# where a job's GPUs are named, first match first: SLURM's step, SLURM's job (the node's indices, which the runtimes'
# device names use), a local run's CUDA_VISIBLE_DEVICES (workflow/scripts/gpu_slots.py sets the node's IDs)
GPU_SOURCES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")
GPU_ID = re.compile(
    r"^(?:\d{1,4}|(?:GPU|MIG)-[0-9A-Za-z-]{1,80})\Z"
)  # an index or a UUID, as nvidia-smi -L prints them
UNNAMED_GPUS = "<job-gpus>"  # shown for review where no GPU is named; a job never runs with it (running.py)
FORBIDDEN_IN_PATH = re.compile(r"[:,\x00-\x1f\x7f]")  # ':' and ',' separate the runtimes' mount fields and lists


@dataclass(frozen=True)
class Mount:
    """A host directory or file bound at `path` inside the container: the host's `path` itself, or `source` (the
    real location of a path the program is given through a symlink that no other mount shows)."""

    path: Path
    read_only: bool = True
    source: Path | None = None

    def __post_init__(self) -> None:
        for path in (self.path, self.source or self.path):
            text = str(path)
            if not path.is_absolute() or FORBIDDEN_IN_PATH.search(text) or ".." in path.parts:
                raise BadInput(
                    f"{text!r} cannot be mounted: a mount path must be absolute, without '..', ':', ',' or "
                    "control characters (the runtimes split their mount options at ':' and ',')",
                    where="mount",
                )

    @property
    def host(self) -> Path:
        return self.source or self.path

    def spec(self) -> str:
        return f"{self.host}:{self.path}" + (":ro" if self.read_only else "")


@dataclass(frozen=True)
class RunRequest:
    """One program to run in an image: what every runtime needs to write its command line."""

    reference: str  # the image as the runtime names it (runtime.reference)
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = Path("/")
    mounts: tuple[Mount, ...] = ()
    gpus: bool = False
    devices: tuple[str, ...] | None = None  # the job's GPUs when `gpus` (allocated_gpus); None: not named here
    scratch: Path | None = None  # the job's node-local folder: Apptainer's --workdir, docker's HOME (job.job_scratch)
    cidfile: Path | None = None  # podman / docker: where the runtime writes the container's ID
    network: str = "host"  # the node's network; "none" (a rehearsal: containers/rehearsal.py): loopback only
    cgroup_parent: str | None = None  # podman / docker: the job's cgroup the container's goes under (cgroups.py)

    def __post_init__(self) -> None:
        for name in self.env:
            if not ENV_NAME.match(name):
                raise BadInput(f"{name!r} is not an environment variable name", where="env")
        if not self.argv:
            raise BadInput("no program to run", where="argv")
        if not self.cwd.is_absolute():
            raise BadInput(f"the working directory must be absolute, got {str(self.cwd)!r}", where="cwd")
        if self.network not in ("host", "none"):
            raise ValueError(f"network is 'host' or 'none', not {self.network!r}")


def allocated_gpus(environ: Mapping[str, str] | None = None) -> tuple[str, ...] | None:
    """The GPUs this job was given, by the node's names (GPU_SOURCES), or None where none is named (a review of the
    command on a login node). BadInput naming the variable for a value that is not a list of GPU IDs."""
    environ = os.environ if environ is None else environ
    for name in GPU_SOURCES:
        value = environ.get(name, "").strip()
        if not value:
            continue
        ids = tuple(part.strip() for part in value.split(","))
        bad = [part for part in ids if not GPU_ID.match(part)]
        if bad:
            raise BadInput(f"{bad[0]!r} is not a GPU index or UUID", where=name)
        return ids
    return None


def merged_mounts(mounts: list[Mount]) -> tuple[Mount, ...]:
    """One mount per path (read-write wins over read-only), parents before children, in path order; a path inside
    a mounted one is mounted again only to change its mode (a read-only data folder inside the read-write root).
    A mount from another source (a symlinked path) is dropped under a mounted parent, which shows the link itself."""
    by_path: dict[Path, Mount] = {}
    for mount in mounts:
        prior = by_path.get(mount.path)
        by_path[mount.path] = (
            mount if prior is None else Mount(mount.path, prior.read_only and mount.read_only, prior.source)
        )
    kept: list[Mount] = []
    for path, mount in sorted(by_path.items(), key=lambda item: item[0].parts):
        enclosing = [m for m in kept if m.path in path.parents]
        if not enclosing or (mount.source is None and enclosing[-1].read_only != mount.read_only):
            kept.append(mount)
    return tuple(kept)


@dataclass(frozen=True)
class OciEngine:
    """podman or docker: the same command line but for GPUs, the user, and the fields their inspect prints."""

    name: str
    cdi: bool  # GPUs as CDI devices (podman), or docker's --gpus
    version_format: str
    manager_format: str  # `info --format`: the cgroup manager (cgroupfs takes --cgroup-parent as a path)
    run_as_caller: bool = False

    @property
    def executable(self) -> str:
        return self.name

    @property
    def uses_scratch(self) -> bool:
        """Whether the program needs the job's scratch folder: for HOME, when it runs as the caller."""
        return self.run_as_caller

    @property
    def own_cgroups(self) -> bool:
        """Whether the runtime makes its containers' cgroups itself, outside the caller's: docker's daemon and rootful
        podman do; rootless podman makes them below the caller's own, inside a job's (cgroups.py)."""
        return self.run_as_caller or os.geteuid() == 0

    @property
    def binds_host_mqueue(self) -> bool:
        """Whether `--ipc host` binds the node's /dev/mqueue, so the node must have one: rootless podman does (seen
        failing with `statfs /dev/mqueue` on a node without it); rootful podman and docker make their own."""
        return not self.own_cgroups

    def reference(self, image: Any, archive_id: str | None = None) -> str:
        """`REPOSITORY@sha256:...`, or the image ID of a loaded archive (`archive_id`)."""
        if not image.is_file:
            return image.pinned
        if archive_id is None:
            raise ValueError("an image file runs by the image ID its archive holds: archive_id is needed")
        return archive_id

    def run_argv(self, request: RunRequest) -> tuple[list[str], dict[str, str]]:
        argv = [self.executable, "run"]
        if request.cidfile is not None:
            argv += ["--cidfile", str(request.cidfile)]
        argv += ["--pull", "never", "--network", request.network, "--ipc", "host"]
        # no limit of the runtime's own on processes (podman's default is 2,048 a container, docker's none): Ray runs
        # about 25 threads an actor, and a recipe's 256 env workers need about 6,400; the node's cgroups still bound it
        argv += ["--pids-limit", "-1"]
        if request.cgroup_parent is not None:  # inside the SLURM job's cgroup, under its memory and CPU limits
            argv += ["--cgroup-parent", request.cgroup_parent]
        if self.run_as_caller:
            argv += ["--user", f"{os.getuid()}:{os.getgid()}"]
            if request.scratch is not None:  # the caller has no home in the image: HOME would be /, not writable
                argv += ["--volume", Mount(request.scratch, read_only=False).spec()]
                argv += ["--env", f"HOME={request.scratch / 'home'}"]
        if request.gpus:
            argv += self.gpu_argv(request.devices)
        for mount in request.mounts:
            argv += ["--volume", mount.spec()]
        argv += ["--workdir", str(request.cwd)]
        for name, value in sorted(request.env.items()):
            argv += ["--env", f"{name}={value}"]
        return [*argv, request.reference, *request.argv], {}

    def gpu_argv(self, devices: tuple[str, ...] | None) -> list[str]:
        """The job's GPUs and nothing else of the node's, numbered 0..n-1 inside (CUDA_VISIBLE_DEVICES)."""
        if self.cdi:
            argv = [word for device in devices or (UNNAMED_GPUS,) for word in ("--device", f"nvidia.com/gpu={device}")]
        else:  # docker splits the value at commas unless it is quoted: the quotes are part of the value
            argv = ["--gpus", f'"device={",".join(devices or (UNNAMED_GPUS,))}"']
        if devices:
            argv += ["--env", "CUDA_VISIBLE_DEVICES=" + ",".join(str(i) for i in range(len(devices)))]
        return argv

    def version_argv(self) -> list[str]:
        return [self.executable, "version", "--format", self.version_format]

    def manager_argv(self) -> list[str]:
        return [self.executable, "info", "--format", self.manager_format]

    def container_argv(self, container_id: str) -> list[str]:
        return [self.executable, "container", "inspect", container_id]

    def image_argv(self, image_id: str) -> list[str]:
        return [self.executable, "image", "inspect", image_id]

    def remove_argv(self, container_id: str) -> list[str]:
        return [self.executable, "rm", "--force", container_id]

    def stop_argv(self, container_id: str, seconds: int) -> list[str]:
        """SIGTERM to the container's first process, SIGKILL to every process of it after `seconds`."""
        return [self.executable, "stop", "--time", str(seconds), container_id]

    def cgroup_parent_argv(self, container_id: str) -> list[str]:
        """The `--cgroup-parent` the container was made with ("" where none was given)."""
        return [self.executable, "container", "inspect", "--format", "{{.HostConfig.CgroupParent}}", container_id]

    def image_exists_argv(self, reference: str) -> list[str]:
        return [self.executable, "image", "inspect", "--format", "{{.Id}}", reference]

    def pull_argv(self, reference: str) -> list[str]:
        return [self.executable, "pull", reference]

    def load_argv(self, file: Path) -> list[str]:
        return [self.executable, "load", "--input", str(file)]

    @staticmethod
    def image_id_of(container_json: str) -> str:
        """The image ID a container ran, from `container inspect` (`sha256:<hex>`; podman prints it bare)."""
        image_id = _with_prefix(str(_first_object(container_json, "container inspect").get("Image", "")))
        if not re.match(r"^sha256:[0-9a-f]{64}$", image_id):
            raise ValueError(f"container inspect names no image ID ({image_id!r})")
        return image_id

    @classmethod
    def resolved(cls, container_json: str, image_json: str) -> dict[str, Any]:
        """From `container inspect` and `image inspect` output: the image ID that ran and every digest the runtime
        knows it by (podman's ImageDigest and Digest, both runtimes' RepoDigests)."""
        container, image = (
            _first_object(container_json, "container inspect"),
            _first_object(image_json, "image inspect"),
        )
        image_id = cls.image_id_of(container_json)
        digests = {d for d in (container.get("ImageDigest"), image.get("Digest")) if isinstance(d, str) and d}
        digests |= {str(d).rsplit("@", 1)[-1] for d in image.get("RepoDigests") or [] if "@" in str(d)}
        if _with_prefix(str(image.get("Id", ""))) != image_id:
            raise ValueError(f"image inspect describes {image.get('Id')!r}, not the container's image {image_id!r}")
        return {"image_id": image_id, "digests": sorted(digests)}


@dataclass(frozen=True)
class Apptainer:
    """apptainer (and Singularity ≥ 3.6 under its own name): runs SIF files; a registry image through its SIF."""

    name: str = "apptainer"
    uses_scratch: bool = True  # --workdir
    own_cgroups: bool = False  # its containers are the caller's processes, in the caller's cgroups (cgroups.py)
    binds_host_mqueue: bool = False  # it shares the host's IPC without binding anything

    @property
    def executable(self) -> str:
        return self.name

    def reference(self, image: Any, sif: Path | None = None) -> str:
        """The SIF that runs: the study's own file (absolute), or the one converted from the registry image."""
        return str(Path(image.file).resolve()) if image.is_file else str(sif)

    def source(self, image: Any) -> str:
        """What a registry image is converted from: `docker://REPOSITORY@sha256:...`."""
        return f"docker://{image.pinned}"

    def run_argv(self, request: RunRequest) -> tuple[list[str], dict[str, str]]:
        argv = [self.executable, "exec", "--cleanenv", "--contain"]
        if request.scratch is not None:  # /tmp, /var/tmp and $HOME there, not on the session's small tmpfs
            argv += ["--workdir", str(request.scratch), "--home", str(request.scratch / "home")]
        if request.network == "none":  # a network namespace with loopback only (documented; not run here)
            argv += ["--net", "--network", "none"]
        env = dict(request.env)
        if request.gpus:
            argv.append("--nv")
            env.update({name: os.environ[name] for name in PASSED_BY_NAME if name in os.environ})
        for mount in request.mounts:
            argv += ["--bind", mount.spec()]
        argv += ["--pwd", str(request.cwd), request.reference]
        if env:  # `env` inside the image sets each value literally; apptainer's own --env would parse it
            if "=" in request.argv[0]:
                raise BadInput(
                    f"{request.argv[0]!r}: a program name holding '=' would be read by env as a variable", where="argv"
                )
            argv += ["env", "--", *(f"{name}={value}" for name, value in sorted(env.items()))]
        return [*argv, *request.argv], {}

    def version_argv(self) -> list[str]:
        return [self.executable, "--version"]

    def pull_argv(self, target: Path, source: str) -> list[str]:
        return [self.executable, "pull", str(target), source]

    def deffile_argv(self, sif: Path) -> list[str]:
        return [self.executable, "inspect", "--deffile", str(sif)]

    @staticmethod
    def deffile_digest(text: str) -> str | None:
        """The digest in a converted SIF's definition (`From: REPOSITORY@sha256:...`), or None."""
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() == "from" and "@sha256:" in value:
                return "sha256:" + value.strip().rsplit("@sha256:", 1)[1]
        return None


def _first_object(text: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError:
        raise ValueError(f"{what} did not print JSON") from None
    doc = doc[0] if isinstance(doc, list) and doc else doc
    if not isinstance(doc, dict):
        raise ValueError(f"{what} printed no object")
    return doc


def _with_prefix(image_id: str) -> str:
    return image_id if image_id.startswith("sha256:") or not image_id else f"sha256:{image_id}"


PODMAN = OciEngine("podman", cdi=True, version_format="{{.Client.Version}}", manager_format="{{.Host.CgroupManager}}")
DOCKER = OciEngine(
    "docker", cdi=False, version_format="{{.Server.Version}}", manager_format="{{.CgroupDriver}}", run_as_caller=True
)
APPTAINER = Apptainer()
RUNTIME = {"apptainer": APPTAINER, "podman": PODMAN, "docker": DOCKER}
