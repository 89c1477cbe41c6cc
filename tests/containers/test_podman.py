"""Real podman: a program wrapped for its pinned image runs there, and the runtime's own answer is the recorded proof.

The images are built here (tests/podman_kit.py): `a` and `b`, two Python images with two digests.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import REPO
from podman_kit import build, leftover_containers, podman

from agentrepro import containers
from agentrepro.containers.proof import records_path
from agentrepro.errors import Failure
from agentrepro.fileio import sha256_file

HOSTILE = {"NOTE": "$(touch /tmp/pwned) `id` ; | & 'q' \"dq\" \\ newline\nend", "EMPTY": "", "EQUALS": "a=b=c"}
PROBE = """
import json, os, sys
json.dump({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in sys.argv[1:]}, "cwd": os.getcwd(),
           "image": open("/etc/agentrepro-image").read().strip(), "host_visible": os.path.exists(sys.argv[-1])},
          open(os.path.join(os.environ["OUT"], "probe.json"), "w"))
"""


def _run(program: containers.Program, job: Path) -> None:
    with containers.proven(program, job):
        subprocess.run(
            list(program.argv),
            cwd=program.cwd,
            env={**os.environ, **program.env},
            check=True,
            capture_output=True,
            timeout=300,
        )


def test_a_wrapped_program_runs_in_its_pinned_image_and_proves_it(podman_images, tmp_path, monkeypatch):
    """The program sees its image, its env values and argv words exactly as given (shell syntax inert), its working
    directory and the mounted run directory but not the rest of the host; the record's digest is the pinned one."""
    image = podman_images["a"]
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "runs" / "s" / "m" / "seed0"
    run_dir.mkdir(parents=True)
    config = {"image": image.block(), "resources": {"gpus": 0}}
    env = {**HOSTILE, "OUT": str(run_dir)}
    argv = ["python3", "-c", PROBE, *sorted(HOSTILE), str(REPO)]  # the checkout: on the host, not mounted
    program = containers.program(config, argv, env, None, run_dir=run_dir, job_dir=run_dir, label="train")
    assert program.argv[:2] == ("podman", "run") and f"{image.ref.split(':')[0]}@{image.digest}" in program.argv
    _run(program, run_dir)

    probe = json.loads((run_dir / "probe.json").read_text())
    assert probe["image"] == "a" and probe["cwd"] == str(tmp_path)
    assert probe["env"] == {name: HOSTILE[name] for name in sorted(HOSTILE)} | {str(REPO): None}
    assert probe["argv"] == [*sorted(HOSTILE), str(REPO)] and probe["host_visible"] is False
    assert not Path("/tmp/pwned").exists()
    [record] = containers.attempt_extra(run_dir)["containers"]
    assert record["requested"] == image.block() and record["resolved"]["image_id"] == image.image_id
    assert (
        image.digest in record["resolved"]["digests"]
        and containers.mismatch(containers.image_of(image.block()), record) is None
    )
    assert record["version"] == podman("version", "--format", "{{.Client.Version}}").stdout.strip()
    assert leftover_containers() == [] and not (run_dir / "logs" / "train.cid").exists()


THREADS = """
import json, os, threading
stop, started = threading.Event(), 0
try:
    for _ in range(int(os.environ["COUNT"])):
        threading.Thread(target=stop.wait).start()
        started += 1
except RuntimeError:  # can't start new thread: the container's process limit
    pass
stop.set()
json.dump(started, open(os.path.join(os.environ["OUT"], "threads.json"), "w"))
"""


def test_a_job_runs_more_threads_than_podmans_default_limit(podman_images, tmp_path, monkeypatch):
    """A framework's Ray actors run about 25 threads each, and a recipe's 256 env workers about 6,400 together: past
    podman's default of 2,048 processes a container, where thread creation fails and `ray.get` never returns. The
    container has no limit of the runtime's own (the node's cgroups bound the job): 3,000 threads start."""
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = {"image": podman_images["a"].block(), "resources": {"gpus": 0}}
    env = {"OUT": str(run_dir), "COUNT": "3000"}
    program = containers.program(
        config, ["python3", "-c", THREADS], env, None, run_dir=run_dir, job_dir=run_dir, label="threads"
    )
    _run(program, run_dir)
    assert json.loads((run_dir / "threads.json").read_text()) == 3000


SNAPSHOT_READER = """
import json, os, sys
model, data = sys.argv[1:]
json.dump({"config": open(os.path.join(model, "config.json")).read(), "games": sorted(os.listdir(data))},
          open(os.path.join(os.environ["OUT"], "read.json"), "w"))
"""


def test_a_model_and_data_given_through_symlinks_are_found_inside_the_container(podman_images, tmp_path, monkeypatch):
    """A hub cache's `snapshots/<rev>/` (its files links into `../../blobs/`) given as model.path through a symlink
    outside every mount, and a data folder given through a symlinked folder: the program opens both at the paths it
    is given, and the snapshot's links resolve inside the container."""
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "0f3a").write_text('{"model_type": "qwen2"}\n')
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(Path("..") / ".." / "blobs" / "0f3a")
    links = tmp_path / "links"
    links.mkdir()
    (links / "model").symlink_to(snapshot)
    (tmp_path / "real-data" / "games").mkdir(parents=True)
    (tmp_path / "real-data" / "games" / "g1.tw-pddl").write_text("{}\n")
    (links / "data").symlink_to(tmp_path / "real-data")
    run_dir = tmp_path / "study" / "run"
    run_dir.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "study")
    config = {
        "image": podman_images["a"].block(),
        "resources": {"gpus": 0},
        "model": {"path": str(links / "model")},
        "data": {"games": {"path": str(links / "data" / "games")}},
    }
    argv = ["python3", "-c", SNAPSHOT_READER, str(links / "model"), str(links / "data" / "games")]
    program = containers.program(
        config, argv, {"OUT": str(run_dir)}, None, run_dir=run_dir, job_dir=run_dir, label="read"
    )
    _run(program, run_dir)
    assert json.loads((run_dir / "read.json").read_text()) == {
        "config": '{"model_type": "qwen2"}\n',
        "games": ["g1.tw-pddl"],
    }


def test_another_images_digest_is_detected(podman_images, tmp_path, monkeypatch):
    """A run proven for image `a` is no proof of image `b`: the mismatch names the digest the runtime resolved and b's."""
    a, b = podman_images["a"], podman_images["b"]
    monkeypatch.chdir(tmp_path)
    program = containers.program(
        {"image": a.block()}, ["python3", "-c", "pass"], {}, None, run_dir=tmp_path, job_dir=tmp_path, label="train"
    )
    _run(program, tmp_path)
    [record] = containers.attempt_extra(tmp_path)["containers"]
    b_record = {**record, "requested": containers.image_of(b.block()).identity()}  # as if the lock had pinned b
    why = containers.mismatch(containers.image_of(b.block()), b_record)
    assert why is not None and a.digest in why and why.endswith(f"not the lock's {b.digest}")


def test_an_image_archive_is_loaded_once_and_proven_by_its_hash(podman_images, tmp_path, monkeypatch):
    """An OCI archive pinned by its sha256: the first job loads it (recorded), the next finds it present; the container
    ran the image ID the archive holds, and the record carries the file's hash."""
    monkeypatch.chdir(tmp_path)
    image = build(tmp_path, "archive")  # an image of its own: the session's images stay in the store for other tests
    archive = tmp_path / "images" / "python-archive.tar"
    archive.parent.mkdir()
    podman("save", "--format", "oci-archive", "--output", str(archive), image.ref)
    block = {"runtime": "podman", "file": "images/python-archive.tar", "sha256": sha256_file(archive)}
    held = containers.archive_image_id(archive)
    assert held == image.image_id
    podman("rmi", "--force", held)  # not in the store: the first job must load it
    actions = []
    for job in ("first", "second"):
        program = containers.program(
            {"image": block},
            ["python3", "-c", "print(open('/etc/agentrepro-image').read())"],
            {},
            None,
            run_dir=tmp_path / job,
            job_dir=tmp_path / job,
            label="train",
        )
        assert held in program.argv
        (tmp_path / job).mkdir()
        _run(program, tmp_path / job)
        [record] = containers.attempt_extra(tmp_path / job)["containers"]
        actions.append(record["prepared"]["action"])
        assert record["resolved"]["image_id"] == record["resolved"]["archive_image_id"] == held
        assert containers.mismatch(containers.image_of(block), record) is None
    assert actions == ["loaded", "present"]
    changed = {**block, "sha256": "0" * 64}
    assert "hashed to" in containers.mismatch(
        containers.image_of(changed), {**record, "requested": containers.image_of(changed).identity()}
    )


def test_a_registry_image_that_is_not_here_fails_naming_the_pull(podman_images, tmp_path, monkeypatch):
    """No outside registry is reachable: an image that is not in the store fails before the program, naming the pull."""
    monkeypatch.chdir(tmp_path)
    block = {"runtime": "podman", "ref": "registry.invalid/nothing:1", "digest": "sha256:" + "1" * 64}
    program = containers.program(
        {"image": block}, ["python3", "-c", "pass"], {}, None, run_dir=tmp_path, job_dir=tmp_path, label="train"
    )
    with pytest.raises(Failure, match=r"podman pull registry.invalid/nothing@sha256:1{64} failed"):
        with containers.proven(program, tmp_path):
            pytest.fail("the program must not run")
    assert not records_path(tmp_path).exists()


def test_a_failing_program_is_still_proven_and_its_container_removed(podman_images, tmp_path, monkeypatch):
    """The program exits 3: the failure reaches the caller, the record of what ran is kept, no container is left."""
    monkeypatch.chdir(tmp_path)
    program = containers.program(
        {"image": podman_images["b"].block()},
        ["python3", "-c", "raise SystemExit(3)"],
        {},
        None,
        run_dir=tmp_path,
        job_dir=tmp_path,
        label="eval_step2",
    )
    with pytest.raises(subprocess.CalledProcessError):
        _run(program, tmp_path)
    [record] = containers.attempt_extra(tmp_path)["containers"]
    assert record["label"] == "eval_step2" and podman_images["b"].digest in record["resolved"]["digests"]
    assert leftover_containers() == []


def test_a_program_that_rewrites_its_cidfile_never_reaches_rm(podman_images, tmp_path, monkeypatch):
    """The job's logs/ are mounted into its container, so its program can write its own cidfile: `--all` written there
    is not a container ID and never becomes a word of `podman rm --force` (which would remove every container of the
    user): the run fails naming the missing ID, and another container of the store is left alone."""
    monkeypatch.chdir(tmp_path)
    bystander = podman("create", podman_images["a"].ref, "true").stdout.strip()
    try:
        cidfile = tmp_path / "logs" / "train.cid"
        program = containers.program(
            {"image": podman_images["a"].block()},
            ["python3", "-c", f"open({str(cidfile)!r}, 'w').write('--all')"],
            {},
            None,
            run_dir=tmp_path,
            job_dir=tmp_path,
            label="train",
        )
        with pytest.raises(Failure, match="wrote no container ID"):
            _run(program, tmp_path)
        assert bystander in podman("ps", "--all", "--quiet", "--no-trunc").stdout.split()
    finally:
        podman("rm", "--all", "--force", check=False)
