"""Image files given as a user might, or forged: every one that is not an image the runtime can run is refused in one
line naming the file (and, at freeze, the field), never a traceback. The archives are built here: docker-archive and
OCI archive layouts whose index or manifest has another shape, is nested past the readers' bound, names a blob the
archive lacks, or reaches it through a dangling link; a text file, a SIF given to podman, a file that cannot be read."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from helpers import run_cli
from study_kit import BASE, write_study

from agentrepro.containers import archive_image_id
from agentrepro.containers.image import SIF_MAGIC
from agentrepro.errors import BadInput

CONFIG = "sha256:" + "c" * 64
MANIFEST = "sha256:" + "d" * 64


def archive(path: Path, members: dict[str, bytes | str]) -> Path:
    """A tar of `members` (bytes: a file; str: a symlink to that name)."""
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def oci(index: object, blob: object = None) -> dict[str, bytes | str]:
    members: dict[str, bytes | str] = {
        "oci-layout": b'{"imageLayoutVersion": "1.0.0"}',
        "index.json": json.dumps(index).encode(),
    }
    if blob is not None:
        members["blobs/sha256/" + MANIFEST.removeprefix("sha256:")] = json.dumps(blob).encode()
    return members


ONE = {"manifests": [{"digest": MANIFEST}]}
DEEP = ("[" * 100_000 + "]" * 100_000).encode()
CASES = {
    "index a string": oci("index"),
    "index a list": oci([ONE]),
    "manifests a string": oci({"manifests": "all"}),
    "manifest entry a string": oci({"manifests": [MANIFEST]}),
    "manifest digest a number": oci({"manifests": [{"digest": 7}]}),
    "two images": oci({"manifests": [{"digest": MANIFEST}, {"digest": MANIFEST}]}),
    "blob it lacks": oci(ONE),
    "blob a list": oci(ONE, [{"config": {"digest": CONFIG}}]),
    "config a string": oci(ONE, {"config": CONFIG}),
    "index nested 100,000 deep": {"index.json": DEEP},
    "dangling link": {**oci(ONE), "blobs/sha256/" + MANIFEST.removeprefix("sha256:"): "blobs/sha256/gone"},
    "index not UTF-8": {"index.json": b"\xff\xfe{}"},
    "docker manifest a mapping": {"manifest.json": json.dumps({"Config": "x.json"}).encode()},
    "docker Config nested": {"manifest.json": json.dumps([{"Config": {"a": {"b": [1]}}}]).encode()},
    "docker manifest nested 100,000 deep": {"manifest.json": DEEP},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_archive_of_another_shape_is_one_line_naming_the_file(tmp_path, case):
    path = archive(tmp_path / "image.tar", CASES[case])
    with pytest.raises(BadInput) as caught:
        archive_image_id(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value), str(caught.value)


def test_a_well_formed_oci_archive_gives_its_config_digest(tmp_path):
    """The same reader on a well-formed archive: the case above fail for their shape, not for being archives."""
    path = archive(tmp_path / "image.tar", oci(ONE, {"config": {"digest": CONFIG}}))
    assert archive_image_id(path) == CONFIG


@pytest.mark.parametrize(
    ("runtime", "content", "says"),
    [
        ("podman", b"just text\n", "not a readable image archive"),
        ("podman", b"#!/usr/bin/env run-singularity\n" + SIF_MAGIC + b"\0" * 100, "not a readable image archive"),
        ("apptainer", b"just text\n", "is not a SIF image"),
        ("podman", None, "cannot read the image file"),
        ("apptainer", None, "cannot read the image file"),
    ],
)
def test_freeze_refuses_an_image_file_the_runtime_cannot_run_in_one_line(tmp_path, runtime, content, says):
    """A text file, a SIF given to podman, and /proc/self/mem (there, and unreadable) as `image.file`: freeze stops
    naming image.file, one line, exit 2."""
    root = tmp_path / "study"
    if content is None:
        file = "/proc/self/mem"
    else:
        file = "image.bin"
        root.mkdir()
        (root / file).write_bytes(content)
    sha = hashlib.sha256(content or b"").hexdigest()
    manifest = write_study(root, {**BASE, "image": {"runtime": runtime, "file": file, "sha256": sha}})
    result = run_cli("freeze", manifest, "--allow-dirty", cwd=root)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "image.file" in lines[0] and says in lines[0], result.stderr
