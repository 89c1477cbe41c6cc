"""A registry-pinned image (`REPOSITORY@sha256:...`) pulled for real: a registry of the tests' own (Debian's
docker-registry, the CNCF distribution 2.8, on a port of 127.0.0.1 with its storage in a temporary folder) holds the
test image pushed by podman, and an index of two platforms (the image as linux/amd64, image `b` as linux/arm64), as a
framework's multi-architecture image is published. A job's image is pinned by the image manifest's digest or by the
index's; the job pulls it once (`prepared.action` pulled, then present), runs the amd64 image, and the record lists
the digests the runtime knows it by, which the audit checks against the pin. podman and docker each pull for real.

The registry speaks plain HTTP on loopback, which a site configures as its registries' TLS: podman through
registries.conf (`insecure = true`, named in CONTAINERS_REGISTRIES_CONF), docker by its rule that 127.0.0.0/8 is
insecure. Not run: a registry over TLS with credentials, and pulling on a node without a route to the registry (which
fails at the pull, in one line naming the command)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from docker_kit import docker
from helpers import require
from podman_kit import podman

from agentrepro import containers


@pytest.fixture(scope="module")
def registry(podman_images, tmp_path_factory):
    """(host:port, {name: digest}) of a running registry holding the test image `a` as `python:a` (its manifest's
    digest under "a") and the index of `a` (amd64) and `b` (arm64) as `python:multi` (under "index", and the arm64
    manifest's under "arm64"), with podman told that it is reached over HTTP."""
    require("registry", shutil.which("docker-registry") is not None, "Debian's docker-registry is missing")
    folder = Path(tmp_path_factory.mktemp("registry"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = f"127.0.0.1:{port}"
    config = f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\nhttp:\n  addr: {host}\n"
    (folder / "config.yml").write_text(config)
    log = (folder / "registry.log").open("w")
    server = subprocess.Popen(["docker-registry", "serve", str(folder / "config.yml")], stdout=log, stderr=log)
    saved = os.environ.get("CONTAINERS_REGISTRIES_CONF")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://{host}/v2/", timeout=2).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, (folder / "registry.log").read_text()
                time.sleep(0.2)
        (folder / "registries.conf").write_text(f'[[registry]]\nlocation = "{host}"\ninsecure = true\n')
        os.environ["CONTAINERS_REGISTRIES_CONF"] = str(folder / "registries.conf")
        digests = {}
        a, b = podman_images["a"].ref, podman_images["b"].ref
        podman("push", "--quiet", "--digestfile", str(folder / "a"), a, f"docker://{host}/agentrepro-test/python:a")
        digests["a"] = (folder / "a").read_text().strip()
        index = f"localhost/agentrepro-test/index-{port}"
        podman("manifest", "create", index)
        podman("manifest", "add", index, f"containers-storage:{a}")
        podman("manifest", "add", "--arch", "arm64", index, f"containers-storage:{b}")
        target = f"docker://{host}/agentrepro-test/python:multi"
        podman("manifest", "push", "--quiet", "--all", "--digestfile", str(folder / "index"), index, target)
        digests["index"] = (folder / "index").read_text().strip()
        listed = json.loads(podman("manifest", "inspect", index).stdout)["manifests"]
        digests["arm64"] = next(m["digest"] for m in listed if m["platform"]["architecture"] == "arm64")
        podman("manifest", "rm", index)
        yield host, digests
    finally:
        server.terminate()
        server.wait(timeout=30)
        if saved is None:
            os.environ.pop("CONTAINERS_REGISTRIES_CONF", None)
        else:
            os.environ["CONTAINERS_REGISTRIES_CONF"] = saved


def _run_twice(block: dict, run_dir: Path) -> list[dict]:
    """The records of the program run twice in the image `block` pins: the variant it found, and how it was prepared."""
    config = {"image": block, "resources": {"gpus": 0}}
    for label in ("first", "second"):
        program = containers.program(
            config,
            ["python3", "-c", "import os; open(os.environ['OUT'], 'w').write(open('/etc/agentrepro-image').read())"],
            {"OUT": str(run_dir / label)},
            None,
            run_dir=run_dir,
            job_dir=run_dir,
            label=label,
        )
        with containers.proven(program, run_dir):
            subprocess.run(list(program.argv), env={**os.environ, **program.env}, check=True, timeout=300)
        assert (run_dir / label).read_text() == "a\n"  # the amd64 image, also where the pin is the index's
    return containers.attempt_extra(run_dir)["containers"]


def _audited(records: list[dict], block: dict, other: str) -> None:
    """The audit finds every record the pin's, and none once the lock pins `other` instead."""
    provenance = {"attempts": [{"number": 1, "containers": records}]}
    assert containers.problems(Path("provenance.json"), provenance, block, must_run=True) == []
    swapped = containers.problems(Path("provenance.json"), provenance, {**block, "digest": other}, must_run=True)
    assert len(swapped) == len(records) and all(f"not the lock's {other}" in p for p in swapped), swapped


@pytest.mark.parametrize("pin", ["a", "index"])
def test_podman_pulls_the_pinned_image_once_and_its_record_proves_the_pin(pin, registry, tmp_path):
    """Pinned by the image manifest's digest or the index's: pulled, then present; the record lists the pin among the
    image's digests (pulled by the index's, podman knows the image by both), and the audit holds it to the pin."""
    host, digests = registry
    block = {"runtime": "podman", "ref": f"{host}/agentrepro-test/python", "digest": digests[pin]}
    records = _run_twice(block, tmp_path)
    assert [r["prepared"]["action"] for r in records] == ["pulled", "present"]
    expected = {digests["a"], digests["index"]} if pin == "index" else {digests["a"]}
    assert all(expected <= set(r["resolved"]["digests"]) for r in records), records
    _audited(records, block, digests["arm64"])


@pytest.mark.parametrize("pin", ["a", "index"])
def test_docker_pulls_the_pinned_image_once_and_its_record_proves_the_pin(pin, registry, docker_image, tmp_path):
    """The same through docker's daemon (tests/docker_kit.py), from the registry podman pushed to. Pulled by the
    index's digest, docker knows the image by that digest alone (podman by the platform manifest's too)."""
    host, digests = registry
    ref = f"{host}/agentrepro-test/python"
    for pulled in ("a", "index"):  # by the other parameter's test
        docker("rmi", "--force", f"{ref}@{digests[pulled]}", check=False)
    block = {"runtime": "docker", "ref": ref, "digest": digests[pin]}
    records = _run_twice(block, tmp_path)
    assert [r["prepared"]["action"] for r in records] == ["pulled", "present"]
    assert all(r["resolved"]["digests"] == [digests[pin]] for r in records), records  # the index's alone, if pinned
    _audited(records, block, digests["arm64"])
