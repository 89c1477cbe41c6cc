"""Preparing an image once per node (or per study, with a shared cache), not once per job.

`prepare(container)` makes the pinned image runnable here and says what that took, as `{action, seconds}`:

* podman, docker, registry image: `present` if `image inspect REPOSITORY@sha256:...` finds it, else `pulled`
  (`pull REPOSITORY@sha256:...`); the run itself never pulls (`--pull never`).
* podman, docker, image archive: `present` if the archive's image ID is in the store, else `loaded` (`load
  --input FILE`, after checking the file's SHA-256 against the pin), and the ID must then be there.
* apptainer, registry image: `present` if the cache holds its SIF (`<cache>/apptainer/<digest>.sif`), else
  `converted` (`apptainer pull` of `docker://REPOSITORY@sha256:...` into a temporary name, then renamed).
* apptainer, SIF file: `present` (the file runs as it is; it is hashed when it runs).

Jobs that start together on one node wait for each other through a lock file in the cache, so the image is
pulled, loaded or converted once; the others find it present. The job that did the work records its time.

`prepare_images(images)` does the same for a study's images before its jobs (`agentrepro images`, the workflow's
`images` rule on the host that submits the jobs): Apptainer's conversion (up to hours, with the network, into the
cache) then never falls to a GPU job on an offline node, when the cache (AGENTREPRO_IMAGE_CACHE) is a folder the
nodes share; a podman or docker store is the node's own, so on nodes without a network give those runtimes an image
file.
"""

from __future__ import annotations

import contextlib
import fcntl
import shlex
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from agentrepro.containers.image import Image, archive_image_id, file_sha256
from agentrepro.containers.job import Container, image_cache
from agentrepro.errors import Failure

QUERY_TIMEOUT_S = 300
PULL_TIMEOUT_S = 6 * 3600  # a framework image is tens of GB


def ask(argv: list[str], *, timeout: float = QUERY_TIMEOUT_S) -> str:
    """Run one runtime query and return its stdout; Failure naming the command and its last stderr line."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failure(f"{shlex.join(argv)}: {exc}") from None
    if done.returncode != 0:
        tail = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["no message"]
        raise Failure(f"{shlex.join(argv)} failed with exit status {done.returncode}: {tail[0][:300]}")
    return done.stdout


def succeeds(argv: list[str]) -> bool:
    try:
        ask(argv)
    except Failure:
        return False
    return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(container: Container) -> dict[str, Any]:
    """Make `container.image` runnable on this node; `{"action": present|pulled|loaded|converted, "seconds": ...}`."""
    image, runtime = container.image, container.runtime
    key = image.sha256 if image.is_file else str(image.digest).removeprefix("sha256:")
    start = time.monotonic()
    with _locked(container.cache / "locks" / f"{image.runtime}-{key}.lock"):
        if image.runtime == "apptainer":
            action = "present" if image.is_file else _convert(container)
        elif image.is_file:
            action = _load(container)
        elif succeeds(runtime.image_exists_argv(image.pinned)):
            action = "present"
        else:
            ask(runtime.pull_argv(image.pinned), timeout=PULL_TIMEOUT_S)
            action = "pulled"
    return {"action": action, "seconds": round(time.monotonic() - start, 3)}


def _load(container: Container) -> str:
    image, runtime = container.image, container.runtime
    file = image.local_file
    wanted = archive_image_id(file)
    if succeeds(runtime.image_exists_argv(wanted)):
        return "present"
    actual = file_sha256(file)
    if actual != image.sha256:
        raise Failure(f"{file} hashes to {actual}, not the pinned {image.sha256}: the image file changed since freeze")
    ask(runtime.load_argv(Path(file)), timeout=PULL_TIMEOUT_S)
    if not succeeds(runtime.image_exists_argv(wanted)):
        raise Failure(f"{runtime.name} loaded {file}, but its image {wanted} is not in the store")
    return "loaded"


def _convert(container: Container) -> str:
    target = container.converted_sif
    if target.is_file():
        return "present"
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    runtime = container.runtime
    ask(runtime.pull_argv(partial, runtime.source(container.image)), timeout=PULL_TIMEOUT_S)
    partial.rename(target)
    return "converted"


def prepare_images(images: Iterable[Image], *, say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """`prepare` each image into this host's cache and store, saying what each took; their records (runtime, image,
    action, seconds, host, cache). A Failure stops at the image that failed, naming its command."""
    records = []
    cache = image_cache()
    for image in images:
        say(f"{image.runtime} {image.pinned}: preparing")
        done = prepare(Container(image, (), cache=cache))
        say(f"{image.runtime} {image.pinned}: {done['action']} in {done['seconds']:.1f} s")
        records.append(
            {"runtime": image.runtime, "image": image.pinned, **done, "host": socket.gethostname(), "cache": str(cache)}
        )
    return records
