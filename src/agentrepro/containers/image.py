"""A study's container image as the manifest pins it: which runtime runs it, and which bytes it is.

Three forms of a placement's `image:` block (workflow/schemas/manifest.schema.json, `$defs.image_*`):

```yaml
image: {runtime: podman, ref: ghcr.io/org/trainer:1.2, digest: sha256:<64 hex>}   # a registry image, by digest
image: {runtime: apptainer, file: images/trainer.sif, sha256: <64 hex>}           # a local image file, by its hash
image: {none: "why no container is needed"}                                        # builtin / command backends only
```

A registry image always runs as `REPOSITORY@sha256:<digest>` (the tag in `ref` names it for people; it is never
what runs). A local file is an Apptainer SIF, or for podman and docker an image archive (`podman save` /
`docker save`: a docker-archive or an OCI archive), pinned by the file's SHA-256; an archive runs as the image
ID it holds (the SHA-256 of its config), which `archive_image_id` reads from the file itself.
"""

from __future__ import annotations

import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agentrepro.containers.runtimes import RUNTIME
from agentrepro.errors import BadInput, shown
from agentrepro.fileio import sha256_file
from agentrepro.reading import parse_json

RUNTIMES = tuple(RUNTIME)  # manifest.schema.json's image.runtime says the same (a test keeps them equal)
NO_RUNTIME = "none"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
# A registry reference as the distribution grammar writes it (host[:port]/path[:tag]), and never an option.
REFERENCE = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(?::[0-9]+)?(?:/[A-Za-z0-9._-]+)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?\Z"
)
WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*\Z")  # a digest or hash: one word of the reference, no '/' or '@'
SIF_MAGIC = b"SIF_MAGIC"  # in the first 64 bytes of every SIF file (after its launch line)


@dataclass(frozen=True)
class Image:
    """One pinned image: `runtime` and either (`ref`, `digest`) or (`file`, `sha256`)."""

    runtime: str
    ref: str | None = None
    digest: str | None = None
    file: str | None = None
    sha256: str | None = None

    @property
    def is_file(self) -> bool:
        return self.file is not None

    @property
    def local_file(self) -> str:
        """`file`, for an image pinned as a local file (an error for a registry image)."""
        if self.file is None:
            raise ValueError(f"{self.ref} is a registry image, not a local file")
        return self.file

    @property
    def repository(self) -> str:
        """`ref` without its tag or digest: `ghcr.io:443/org/name:1.2@sha256:...` -> `ghcr.io:443/org/name`."""
        name = (self.ref or "").split("@", 1)[0]
        last = name.rsplit("/", 1)
        if ":" in last[-1]:
            name = name[: len(name) - len(last[-1])] + last[-1].split(":", 1)[0]
        return name

    @property
    def pinned(self) -> str:
        """The registry reference that runs, `REPOSITORY@sha256:...`; for a file, its path."""
        return f"{self.repository}@{self.digest}" if not self.is_file else str(self.file)

    def identity(self) -> dict[str, str]:
        """What the lock pins, as the proof record and the audit compare it."""
        if self.is_file:
            return {"runtime": self.runtime, "file": str(self.file), "sha256": str(self.sha256)}
        return {"runtime": self.runtime, "ref": str(self.ref), "digest": str(self.digest)}


def image_of(block: dict[str, Any], *, where: str = "image") -> Image | None:
    """The `Image` of a placement's image block, or None for `{none: why}`; BadInput naming the field for a block
    that cannot make a command line (an unknown runtime, a reference that is not one or could be read as an option,
    a digest or hash missing or holding more than one word). Whether the pin is immutable is freeze's rule
    (agentrepro.manifest.identifiers): a manifest's placeholder (`TODO-...`) is shown as it is by `agentrepro
    command`, and can never reach a job, whose config comes from a lock."""
    if not isinstance(block, dict):
        raise BadInput("expected a mapping", where=where)
    if "none" in block:
        if block.get("runtime", NO_RUNTIME) != NO_RUNTIME:
            raise BadInput(f"an image without a container has runtime {NO_RUNTIME!r}", where=f"{where}.runtime")
        return None
    runtime = block.get("runtime")
    if runtime not in RUNTIMES:
        raise BadInput(
            f"expected one of {', '.join(RUNTIMES)} (the runtime every job of this placement runs in), got {runtime!r}",
            where=f"{where}.runtime",
        )
    if "file" in block:
        file, sha = block.get("file"), block.get("sha256")
        if not isinstance(file, str) or not file or "\n" in file:
            raise BadInput("expected the path of a local image file", where=f"{where}.file")
        if not isinstance(sha, str) or not WORD.match(sha):
            raise BadInput(
                f"expected the file's SHA-256 (64 lower-case hex digits), got {sha!r}", where=f"{where}.sha256"
            )
        return Image(runtime, file=file, sha256=sha)
    ref, digest = block.get("ref"), block.get("digest")
    if not isinstance(ref, str) or not REFERENCE.match(ref.split("@", 1)[0]):
        raise BadInput(f"expected a registry reference (registry/name[:tag]), got {ref!r}", where=f"{where}.ref")
    if not isinstance(digest, str) or not WORD.match(digest):
        raise BadInput(
            f"expected the image digest sha256:<64 hex>, got {digest!r}: a tag alone can be re-pushed",
            where=f"{where}.digest",
        )
    return Image(runtime, ref=ref, digest=digest)


_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}


def file_sha256(path: str | Path) -> str:
    """The sha256 of a local image file, read once in a process for as long as the file keeps its identity (device,
    inode, size, modification time): every program of a job runs the same SIF or archive, often tens of GB, which is
    not read again for each of them unless it changed."""
    real = Path(path).resolve()
    info = real.stat()
    key = (str(real), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = sha256_file(real)
    return _DIGESTS[key]


def archive_image_id(path: str | Path) -> str:
    """The image ID (`sha256:<config digest>`) of a docker-archive or OCI archive: what podman and docker run after
    loading it. BadInput naming the file, in one line, for anything else: a file that is no readable tar, an archive
    of more than one image, an index or manifest of another shape, a blob it names and does not hold."""
    path = Path(path)
    try:
        with tarfile.open(path) as tar:
            names = set(tar.getnames())
            if "manifest.json" in names:  # docker-archive (`docker save`, `podman save --format docker-archive`)
                entries = _member_json(tar, "manifest.json")
                if not isinstance(entries, list) or len(entries) != 1:
                    raise BadInput("manifest.json: expected exactly one image in the archive")
                config = _field(_field(entries, 0, "manifest.json", dict), "Config", "manifest.json[0]", str)
                digest = "sha256:" + PurePosixPath(config).name.removesuffix(".json").removeprefix("sha256:")
            elif "index.json" in names:  # OCI archive (`podman save --format oci-archive`)
                manifests = _field(_member_json(tar, "index.json"), "manifests", "index.json", list)
                if len(manifests) != 1:
                    raise BadInput("index.json: expected exactly one image manifest in the archive")
                entry = _field(manifests, 0, "index.json manifests", dict)
                blob = _blob(_field(entry, "digest", "index.json manifests[0]", str))
                config = _field(_member_json(tar, blob), "config", blob, dict)
                digest = _field(config, "digest", f"{blob} config", str)
            else:
                raise BadInput("not an image archive: no manifest.json (docker-archive) or index.json (OCI archive)")
    except BadInput as exc:
        raise BadInput(exc.message if exc.where is None else f"{exc.where}: {exc.message}", path=path) from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise BadInput(f"not a readable image archive ({' '.join(str(exc).split())[:200]})", path=path) from None
    if not DIGEST.match(digest):
        raise BadInput(f"the archive's image config is not named by a sha256 digest ({digest!r})", path=path)
    return digest


def _field(container: Any, key: str | int, what: str, kind: type) -> Any:
    """`container[key]`, which must be a `kind`: BadInput naming `what` otherwise."""
    found = (
        container.get(key)
        if isinstance(container, dict)
        else container[key]
        if isinstance(container, list) and isinstance(key, int) and key < len(container)
        else None
    )
    if not isinstance(found, kind):
        expected = "an object" if kind is dict else "a list" if kind is list else "a string"
        raise BadInput(f"{what}: expected {expected} at {key!r}, got {shown(found)}")
    return found


def _blob(digest: str) -> str:
    if not DIGEST.match(digest):
        raise BadInput(f"index.json: expected a sha256 digest, got {shown(digest)}")
    return "blobs/sha256/" + digest.removeprefix("sha256:")


MEMBER_JSON_BYTES = 1 << 20  # an archive's index or manifest is a few kilobytes


def _member_json(tar: tarfile.TarFile, name: str) -> Any:
    """The JSON member `name` (a link inside the archive followed), parsed with the readers' bounds."""
    try:
        member = tar.extractfile(name)
    except KeyError:  # named by the index, not in the archive; or a link whose target is not
        raise BadInput(f"{name}: named in the archive but not held by it") from None
    if member is None:
        raise BadInput(f"{name} is not a file in the archive")
    data = member.read(MEMBER_JSON_BYTES + 1)
    if len(data) > MEMBER_JSON_BYTES:
        raise BadInput(f"{name} is larger than {MEMBER_JSON_BYTES:,} bytes: no image index or manifest is")
    try:
        return parse_json(data.decode("utf-8"), where=name)
    except UnicodeDecodeError:
        raise BadInput(f"{name} in the archive is not UTF-8 JSON") from None


def file_problem(image: Image, path: Path) -> str | None:
    """Why `path` is not an image file `image.runtime` can run (None if it is): a SIF for apptainer, an archive
    for podman and docker. Freeze asks, so a wrong file fails before any job."""
    if image.runtime == "apptainer":
        try:
            with open(path, "rb") as fh:
                head = fh.read(128)
        except OSError as exc:
            return f"cannot read {path} ({exc.strerror or exc})"
        return None if SIF_MAGIC in head else f"{path} is not a SIF image (no {SIF_MAGIC.decode()} in its header)"
    try:
        archive_image_id(path)
    except BadInput as exc:
        return exc.message
    return None
