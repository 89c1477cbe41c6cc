"""Real podman for the tests: a private image store, and images built here from this machine's own Python.

No registry is reachable from the test machines, so the images are made locally: `python_rootfs` writes a root
file system holding Debian's /usr/bin/python3, the shared libraries it and its extension modules load (as
`ldd` lists them) and its standard library, Debian's bash (/usr/bin/bash with its libraries, /usr/bin/sh a link to it,
and /bin a link to usr/bin as in Debian, so /bin/bash and /bin/sh too) for the framework backends' scripts, plus /etc/agentrepro-image naming the
variant; `podman import` turns it into an image whose digest the tests pin. Two variants differ in that one file,
so they are two images with two digests.

Podman runs as root with runc, the cgroupfs manager and explicit ulimits (crun refuses these machines' cgroup
layout and podman's default limits exceed what they allow): a containers.conf says so, and a storage.conf
keeps the tests' images and containers in a temporary store, both named through CONTAINERS_CONF and
CONTAINERS_STORAGE_CONF, which every podman started by the tests (through agentrepro and Snakemake too) reads.
Debian's `podman` and `runc` are installed by scripts/system-deps.sh; without them the tests are skipped,
or fail under AGENTREPRO_REQUIRE=podman (CI).

`derive` builds an image on one of them (`podman build`, FROM it, COPY files in), as a framework's image adds its
framework to a base. `stand_in_gpus` is how a job that asks for GPUs (`--device nvidia.com/gpu=ID` per GPU of the
job, CDI) runs on these machines, which have none: the command runs in a private mount namespace whose /etc (an
overlay of the host's, which stays as it is) holds a CDI specification of GPUs `0` to `7` that gives the container no
device, only AGENTREPRO_STAND_IN_GPU_<ID>=<ID> in its environment for each GPU it was given (`stand_in_gpus_given`); podman 4.3 reads CDI specifications from /etc/cdi and /var/run/cdi
only, as a GPU node's `nvidia-ctk cdi generate` writes them.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import in_private_mounts, require

from agentrepro import containers

PYTHON = Path("/usr/bin/python3")
BASH = Path("/usr/bin/bash")
SKIP_DIRS = {
    "__pycache__",
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "site-packages",
    "dist-packages",
}
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=20000:20000", "nproc=20000:20000"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""


STAND_IN_GPU_ENV = "AGENTREPRO_STAND_IN_GPU"  # what each stand-in GPU device puts into a container: its only effect
STAND_IN_GPU_SPEC = 'cdiVersion: "0.3.0"\nkind: nvidia.com/gpu\ndevices:\n' + "".join(
    f'  - name: "{i}"\n    containerEdits:\n      env: ["{STAND_IN_GPU_ENV}_{i}={i}"]\n' for i in range(8)
)


def stand_in_gpus_given(environ: dict[str, str]) -> str:
    """The stand-in GPUs a container's environment shows it was given, as "1,3" ("" for none)."""
    return ",".join(sorted(v for k, v in environ.items() if k.startswith(f"{STAND_IN_GPU_ENV}_")))


OVERLAY_ETC = 'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"'


@dataclass(frozen=True)
class TestImage:
    ref: str  # localhost/agentrepro-test/python:<variant>
    digest: str  # sha256:<64 hex>, as `podman image inspect` gives it
    image_id: str  # sha256:<64 hex>
    variant: str

    def block(self, **extra) -> dict:
        """The image block of a manifest or run config that pins this image for podman."""
        return {"runtime": "podman", "ref": self.ref, "digest": self.digest, **extra}


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check, timeout=300)


def require_podman() -> None:
    """Skip (or under AGENTREPRO_REQUIRE=podman fail) unless podman, runc and Debian's python3 and bash are here."""
    for tool in ("podman", "runc"):
        require(
            "podman", shutil.which(tool) is not None, f"`{tool}` is not on PATH (scripts/system-deps.sh installs it)"
        )
    for program in (PYTHON, BASH):
        require("podman", program.is_file(), f"{program} (the test image's) is missing")


def _libraries(paths: list[Path]) -> set[Path]:
    found: set[Path] = set()
    for path in paths:
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        found |= {Path(m) for m in re.findall(r"(/\S+\.so[^\s]*)", out)}
    return found


def python_rootfs(target: Path, variant: str, trees: dict[str, Path] | None = None) -> Path:
    """A tar of a root file system that runs `python3` (this machine's Debian Python) and `bash`, and names `variant`;
    each host folder of `trees` copied to its image path, with the shared libraries its extension modules load."""
    stdlib = Path(
        subprocess.run(
            [str(PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    dynload = sorted((stdlib / "lib-dynload").glob("*.so"))
    binary, bash = PYTHON.resolve(), BASH.resolve()

    members: dict[str, tuple[tarfile.TarInfo, bytes | Path | None]] = {}

    def add(name: str, data: bytes | Path | None = None, mode: int = 0o755, link: str | None = None) -> None:
        for parent in reversed(Path(name).parents[:-1]):
            if str(parent) not in members:
                add(str(parent))
        info = tarfile.TarInfo(name.lstrip("/"))
        info.mode, info.mtime = (0o1777 if name == "/tmp" else mode), 0
        if link is not None:
            info.type, info.linkname = tarfile.SYMTYPE, link
        elif data is None:
            info.type = tarfile.DIRTYPE
        else:
            info.size = len(data) if isinstance(data, bytes) else data.stat().st_size
        members[name] = (info, data)

    def add_file(host: Path, name: str | None = None, mode: int = 0o644) -> None:
        add(name or str(host), host.read_bytes(), mode)

    for directory in ("/tmp", "/etc", "/root"):
        add(directory)
    add_file(binary, "/usr/bin/python3", 0o755)
    add_file(bash, "/usr/bin/bash", 0o755)
    add("/usr/bin/sh", link="bash")  # /bin/sh, which Ray's job supervisor runs an entrypoint with (bash as sh)
    add("/bin", link="usr/bin")
    extensions: list[Path] = []
    for image_path, host in (trees or {}).items():
        for path in sorted(host.rglob("*")):
            name = f"{image_path}/{path.relative_to(host)}"
            if path.is_symlink():
                add(name, link=os.readlink(path))
            elif path.is_file():  # streamed into the tar when it is written (gigabytes, for a framework's packages)
                add(name, path, 0o755 if os.access(path, os.X_OK) else 0o644)
                extensions += [path] if path.suffix == ".so" or ".so." in path.name else []
    system = [lib for lib in _libraries(extensions) if not any(t in lib.parents for t in (trees or {}).values())]
    for library in _libraries([binary, bash, *dynload]) | set(system):
        add_file(library.resolve(), str(library), 0o755)
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            path = Path(root) / name
            if path.is_file() and not path.is_symlink() and not name.endswith(".pyc"):
                add_file(path)
    add("/etc/agentrepro-image", f"{variant}\n".encode(), 0o644)
    with tarfile.open(target, "w") as tar:
        for name in sorted(members, key=lambda n: Path(n).parts):
            info, data = members[name]
            if isinstance(data, Path):
                with data.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info, None if data is None else io.BytesIO(data))
    return target


def configure(directory: Path) -> dict[str, str]:
    """Write containers.conf and a private storage.conf under `directory`; the environment that names them, and the
    image cache of agentrepro (AGENTREPRO_IMAGE_CACHE) in the same place."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "containers.conf").write_text(CONTAINERS_CONF)
    (directory / "storage.conf").write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{directory / "graph"}"\nrunroot = "{directory / "run"}"\n'
    )
    return {
        "CONTAINERS_CONF": str(directory / "containers.conf"),
        "CONTAINERS_STORAGE_CONF": str(directory / "storage.conf"),
        "AGENTREPRO_IMAGE_CACHE": str(directory / "cache"),
    }


def build(directory: Path, variant: str) -> TestImage:
    """Import a Python root file system of `variant` and return its pinned identity."""
    ref = f"localhost/agentrepro-test/python:{variant}"
    tar = python_rootfs(directory / f"rootfs-{variant}.tar", variant)
    podman("import", str(tar), ref)
    return pinned(ref, variant)


RAY_IN_IMAGE = "/usr/local/bin/ray"
SITE_IN_IMAGE = "/usr/local/lib/python3.11/dist-packages"  # where Debian's python3 finds packages


def with_ray(directory: Path, python: str) -> TestImage:
    """The test image with real Ray (variant `ray`): the installed files of the `ray` distribution of the Python
    `python` (a venv's, the tests' real Ray) and of every distribution it and its `client` extra require (`ray start
    --head` starts Ray's client server, grpcio), at SITE_IN_IMAGE, and `ray` at
    RAY_IN_IMAGE run by the image's python3. Nothing is downloaded; the venv's Python and Debian's are both 3.11."""
    tree, bin_dir = directory / "ray-site", directory / "ray-bin"
    listed = subprocess.run(
        [python, "-c", DISTRIBUTION_FILES, "ray[client]"], capture_output=True, text=True, check=True
    )
    for line in listed.stdout.splitlines():
        source, relative = line.split("\t")
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, tree / relative)
    bin_dir.mkdir(parents=True)
    (bin_dir / "ray").write_text("#!/usr/bin/python3\nfrom ray.scripts.scripts import main\nmain()\n")
    (bin_dir / "ray").chmod(0o755)
    ref = "localhost/agentrepro-test/python:ray"
    tar = python_rootfs(
        directory / "rootfs-ray.tar", "ray", {SITE_IN_IMAGE: tree, str(Path(RAY_IN_IMAGE).parent): bin_dir}
    )
    podman("import", str(tar), ref)
    return pinned(ref, "ray")


# run by the Python whose packages go into an image: "<file>\t<path under site-packages>" for every installed file of
# the distribution argv[1] (a requirement: `ray[client]` with its extra's) and of those it requires, transitively
DISTRIBUTION_FILES = """
import sys
from importlib import metadata
from packaging.requirements import Requirement
seen, todo = set(), [Requirement(sys.argv[1])]
while todo:
    wanted = todo.pop()
    dist = metadata.distribution(wanted.name)
    name = dist.metadata["Name"].lower()
    if name in seen:
        continue
    seen.add(name)
    for text in dist.requires or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in ["", *wanted.extras]):
            todo.append(requirement)
    for file in dist.files or []:
        path = dist.locate_file(file)
        if not str(file).startswith("..") and "__pycache__" not in file.parts and path.is_file():
            print(f"{path}\t{file}")
"""


def pinned(ref: str, variant: str) -> TestImage:
    """The identity of the image `ref` in the store, as the tests pin it."""
    digest, image_id = podman("image", "inspect", "--format", "{{.Digest}} {{.Id}}", ref).stdout.split()
    return TestImage(ref, digest, f"sha256:{image_id.removeprefix('sha256:')}", variant)


def derive(
    base: TestImage, directory: Path, variant: str, files: dict[str, Path], env: dict[str, str] | None = None
) -> TestImage:
    """An image built FROM `base` with each host file copied to its path in the image (`files`: image path -> file)
    and the image's own environment `env` (ENV lines)."""
    context = directory / f"context-{variant}"
    context.mkdir(parents=True)
    lines = [f"FROM {base.ref}", *(f"ENV {name}={value}" for name, value in sorted((env or {}).items()))]
    for number, (target, source) in enumerate(sorted(files.items())):
        shutil.copy2(source, context / f"file{number}")
        lines.append(f"COPY file{number} {target}")
    (context / "Containerfile").write_text("\n".join(lines) + "\n")
    ref = f"localhost/agentrepro-test/python:{variant}"
    podman("build", "--pull=never", "--tag", ref, str(context))
    return pinned(ref, variant)


def stand_in_gpus(directory: Path) -> tuple[str, ...]:
    """The words that run a command where podman resolves `--device nvidia.com/gpu=ID` to the stand-in CDI
    specification (module docstring); skip (or under AGENTREPRO_REQUIRE=podman fail) where no private mount
    namespace with an overlay can be made."""
    upper, work = directory / "etc-upper", directory / "etc-work"
    (upper / "cdi").mkdir(parents=True)
    work.mkdir()
    (upper / "cdi" / "stand-in-gpu.yaml").write_text(STAND_IN_GPU_SPEC)
    require("podman", shutil.which("unshare") is not None, "`unshare` (util-linux) is not on PATH")
    words = in_private_mounts(OVERLAY_ETC, upper, work)
    probe = subprocess.run([*words, "test", "-f", "/etc/cdi/stand-in-gpu.yaml"], capture_output=True, text=True)
    require("podman", probe.returncode == 0, f"no private mount namespace with /etc overlaid: {probe.stderr.strip()}")
    return words


@pytest.fixture(scope="session")
def podman_images(tmp_path_factory):
    """Two images (variants `a` and `b`) in a private podman store, with the environment that selects that store set
    for the session (podman, agentrepro and Snakemake subprocesses inherit it)."""
    require_podman()
    directory = tmp_path_factory.mktemp("podman")
    env = configure(directory)
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield {variant: build(directory, variant) for variant in ("a", "b")}
    finally:
        podman("rm", "--all", "--force", check=False)
        podman("rmi", "--all", "--force", check=False)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_proof(path: Path, labels: list[str], image: TestImage, other: TestImage, *, must_run: bool) -> None:
    """The last attempt in provenance.json `path` recorded the programs `labels`, each run in `image` as podman resolved
    it; the audit's container rule (containers.problems) finds nothing, and finds every record another image's once
    the pin is `other`'s."""
    provenance = json.loads(path.read_text())
    records = provenance["attempts"][-1]["containers"]
    assert [r["label"] for r in records] == labels
    assert all(
        r["runtime"] == "podman"
        and image.digest in r["resolved"]["digests"]
        and r["resolved"]["image_id"] == image.image_id
        for r in records
    ), records
    assert containers.problems(path, provenance, image.block(), must_run=must_run) == []
    swapped = containers.problems(path, provenance, other.block(), must_run=must_run)
    assert len(swapped) == len(labels) and all(
        f"not the lock's {other.digest}" in p and image.digest in p for p in swapped
    ), swapped


def leftover_containers() -> list[str]:
    """IDs of containers in the test store (every job removes its own)."""
    return podman("ps", "--all", "--quiet").stdout.split()


__all__ = [
    "BASH",
    "PYTHON",
    "STAND_IN_GPU_ENV",
    "TestImage",
    "build",
    "check_proof",
    "configure",
    "derive",
    "leftover_containers",
    "pinned",
    "podman",
    "podman_images",
    "python_rootfs",
    "require_podman",
    "stand_in_gpus",
    "stand_in_gpus_given",
]
