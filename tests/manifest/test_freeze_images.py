"""freeze pins each placement's container: a runtime always, a registry image by digest, a local image file by its hash."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from helpers import run_cli
from study_kit import BASE, set_key, write_study

from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_file
from agentrepro.jobs.freeze import build_lock

CONFIG_ID = "ef" * 32


def docker_archive(path, config_id: str = CONFIG_ID) -> str:
    """A minimal docker-archive (what `docker save` writes): manifest.json naming its config; returns the file's sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, data in (
            ("manifest.json", json.dumps([{"Config": f"{config_id}.json", "Layers": []}]).encode()),
            (f"{config_id}.json", b"{}"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return sha256_file(path)


def _with_image(tmp_path, image: dict):
    return write_study(tmp_path, set_key(BASE, "image", image))


def test_an_image_archive_is_hashed_like_a_data_file(tmp_path):
    """A podman archive pinned by its sha256 is checked and recorded in resolved.image and resolved.files."""
    sha = docker_archive(tmp_path / "images" / "verl.tar")
    path = _with_image(tmp_path, {"runtime": "podman", "file": "images/verl.tar", "sha256": sha})
    lock = build_lock(path, root=tmp_path, allow_dirty=True)
    assert lock["resolved"]["image"] == {"runtime": "podman", "file": "images/verl.tar", "sha256": sha}
    assert lock["resolved"]["files"]["images/verl.tar"] == sha


@pytest.mark.parametrize(
    "image, field, words",
    [
        (
            {"runtime": "podman", "file": "images/verl.tar"},
            "image.sha256",
            "missing: pin the image file by its hash (sha256: ",
        ),
        ({"runtime": "podman", "file": "images/verl.tar", "sha256": "0" * 64}, "image.sha256", "hashes to"),
        ({"runtime": "podman", "file": "images/absent.tar", "sha256": "0" * 64}, "image.file", "image file not found"),
        ({"runtime": "apptainer", "file": "images/verl.tar", "sha256": None}, "image.file", "is not a SIF image"),
    ],
)
def test_an_image_file_that_is_not_pinned_or_not_an_image_is_refused(tmp_path, image, field, words):
    """No hash (the message gives it), another hash, no file, or a file the runtime cannot run (a docker archive for
    apptainer, pinned by its right hash, shown as None here): exit 2 naming the field (subprocess)."""
    sha = docker_archive(tmp_path / "images" / "verl.tar")
    path = _with_image(tmp_path, {**image, "sha256": sha} if image.get("sha256", "") is None else image)
    result = run_cli("freeze", path, "--allow-dirty", cwd=tmp_path)
    assert result.returncode == 2 and f"{field}: " in result.stderr and words in result.stderr, result.stderr


def test_a_registry_image_needs_a_runtime_and_a_reference_that_is_not_an_option(tmp_path):
    """Without image.runtime the manifest does not load; a reference that a runtime would read as an option is refused."""
    with pytest.raises(BadInput, match=r"image.runtime: missing required key"):
        build_lock(
            _with_image(tmp_path, {"ref": "example.org/v:1", "digest": "sha256:" + "ab" * 32}),
            root=tmp_path,
            allow_dirty=True,
        )
    with pytest.raises(BadInput, match=r"image.ref: expected a registry reference"):
        build_lock(
            _with_image(tmp_path, {"runtime": "docker", "ref": "-v/:/host", "digest": "sha256:" + "ab" * 32}),
            root=tmp_path,
            allow_dirty=True,
        )


def test_the_builtin_backend_takes_no_container(tmp_path):
    """The builtin backend trains in the harness's own process: a container image there is refused, naming image."""
    manifest = set_key(
        set_key(BASE, "backend", {"name": "builtin"}), "model", {"name": "tiny-gpt2", "config": {"d_model": 8}}
    )
    with pytest.raises(BadInput, match=r"image: the builtin backend trains inside the harness's own process"):
        build_lock(write_study(tmp_path, manifest), root=tmp_path, allow_dirty=True)
