"""Real docker for the tests: a private daemon, and the podman test image as a docker archive.

`docker_image` (a session fixture) starts a dockerd of the tests' own (Debian's docker.io, run as root: its data,
state and socket in a temporary folder, the cgroupfs driver, no bridge or iptables rules, so the host's networking
and any docker already running stay as they are), names its socket in DOCKER_HOST for the session (docker, agentrepro
and SLURM jobs started by the tests inherit it), and stops it after. No outside registry is reachable from the test
machines, so the image is podman_kit's image `a` saved as a docker archive (`podman save --format docker-archive`),
which a study pins by the file's sha256 and docker runs by the image ID the archive holds, as a cluster without a
registry would. Without dockerd, or not as root, the tests are skipped, or fail under AGENTREPRO_REQUIRE=docker (CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import require
from podman_kit import podman

from agentrepro.fileio import sha256_file


@dataclass(frozen=True)
class DockerArchive:
    path: Path  # the archive, outside any study: a test copies it into its study (`place`)
    variant: str

    def place(self, root: Path) -> dict:
        """Copy the archive into the study folder `root` (images/<name>) and return the image block that pins it."""
        target = root / "images" / self.path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.path, target)
        return {"runtime": "docker", "file": f"images/{target.name}", "sha256": sha256_file(target)}


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=300)


def _answers(env: dict[str, str]) -> bool:
    probe = subprocess.run(["docker", "version"], capture_output=True, text=True, env=env, timeout=30)
    return probe.returncode == 0


def start_daemon(directory: Path) -> tuple[subprocess.Popen, str]:
    """A dockerd whose every file is under `directory`; (its process, its DOCKER_HOST) once it answers."""
    for tool in ("dockerd", "docker", "containerd"):
        require(
            "docker", shutil.which(tool) is not None, f"`{tool}` is not on PATH (scripts/system-deps.sh installs it)"
        )
    require("docker", os.geteuid() == 0, "the tests' docker daemon runs as root")
    host = f"unix://{directory / 'docker.sock'}"
    argv = ["dockerd", "--host", host, "--data-root", str(directory / "data"), "--exec-root", str(directory / "exec")]
    argv += ["--pidfile", str(directory / "docker.pid"), "--exec-opt", "native.cgroupdriver=cgroupfs"]
    argv += ["--bridge", "none", "--iptables=false", "--ip-masq=false"]
    log = (directory / "dockerd.log").open("w")
    daemon = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    env = {**os.environ, "DOCKER_HOST": host}
    deadline = time.monotonic() + 60
    while not _answers(env):
        if daemon.poll() is not None or time.monotonic() > deadline:
            daemon.kill()
            tail = (directory / "dockerd.log").read_text()[-800:]
            require("docker", False, f"the tests' dockerd did not start: {tail}")
        time.sleep(0.5)
    return daemon, host


def stop_daemon(daemon: subprocess.Popen, directory: Path) -> None:
    """Stop the daemon, then unmount what it leaves mounted under `directory` (its default network namespace's
    `exec/netns/default`), deepest first, so the folder can be removed."""
    daemon.terminate()
    try:
        daemon.wait(timeout=60)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait(timeout=60)
    mounted = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounted if Path(m).is_relative_to(directory)), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def docker_image(podman_images, tmp_path_factory):
    """podman's test image `a` as a docker archive, with a private docker daemon running (module docstring)."""
    directory = Path(tmp_path_factory.mktemp("docker"))
    daemon, host = start_daemon(directory)
    saved = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = host
    try:
        archive = directory / "python-a.tar"
        podman("save", "--format", "docker-archive", "--output", str(archive), podman_images["a"].ref)
        yield DockerArchive(archive, "a")
    finally:
        docker("rm", "--force", *docker("ps", "--all", "--quiet", check=False).stdout.split(), check=False)
        stop_daemon(daemon, directory)
        if saved is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = saved


def leftover_containers() -> list[str]:
    return docker("ps", "--all", "--quiet").stdout.split()
