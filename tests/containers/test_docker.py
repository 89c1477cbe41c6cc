"""Real docker (a private daemon, tests/docker_kit.py): a program wrapped for an image archive pinned by its hash runs
in that image as the calling user, with HOME in the job's scratch folder, and docker's own answer is the recorded
proof. The image is podman's test image `a` saved as a docker archive; a registry-pinned image
(`REPOSITORY@sha256:...`) is pulled from a registry of the tests' own in test_registry.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from docker_kit import docker, leftover_containers
from helpers import REPO

from agentrepro import containers

HOSTILE = {"NOTE": "$(touch /tmp/pwned-docker) `id` ; | & 'q' \"dq\" \\ newline\nend", "EMPTY": "", "LIST": "a,b=c"}
PROBE = """
import json, os, sys
home = os.environ["HOME"]
open(os.path.join(home, "written"), "w").write("x")
out = os.path.join(os.environ["OUT"], "probe.json")
json.dump({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in sys.argv[1:]}, "cwd": os.getcwd(),
           "image": open("/etc/agentrepro-image").read().strip(), "host_visible": os.path.exists(sys.argv[-1]),
           "ids": [os.getuid(), os.getgid()], "home": home}, open(out, "w"))
"""


def _run(program: containers.Program, job: Path) -> None:
    with containers.proven(program, job):
        subprocess.run(list(program.argv), cwd=program.cwd, env={**os.environ, **program.env}, check=True, timeout=300)


def _program(block: dict, argv: list[str], env: dict[str, str], run_dir: Path) -> containers.Program:
    config = {"image": block, "resources": {"gpus": 0}}
    return containers.program(config, argv, env, None, run_dir=run_dir, job_dir=run_dir, label="train")


def test_a_docker_archive_runs_as_the_caller_and_is_loaded_once_and_proven(docker_image, tmp_path, monkeypatch):
    """The first job loads the archive, the second finds it present; each program sees its image, its env values and
    argv words exactly as given (shell syntax and commas inert), its working directory, the run directory but not the
    rest of the host, runs as the caller's user and group, and writes to HOME, in the job's scratch folder; each record
    names the image ID the archive holds and the file's hash, and no container is left."""
    monkeypatch.chdir(tmp_path)
    block = docker_image.place(tmp_path)
    held = containers.archive_image_id(tmp_path / block["file"])
    docker("rmi", "--force", held, check=False)  # not in the daemon's store: the first job must load it
    actions = []
    for job in ("first", "second"):
        run_dir = tmp_path / "runs" / job
        run_dir.mkdir(parents=True)
        argv = ["python3", "-c", PROBE, *sorted(HOSTILE), str(REPO)]  # the checkout: on the host, not mounted
        program = _program(block, argv, {**HOSTILE, "OUT": str(run_dir)}, run_dir)
        assert program.argv[:2] == ("docker", "run") and held in program.argv
        assert "--user" in program.argv and "--cgroup-parent" not in program.argv  # not inside a SLURM job
        _run(program, run_dir)

        probe = json.loads((run_dir / "probe.json").read_text())
        assert probe["image"] == "a" and probe["cwd"] == str(tmp_path) and probe["host_visible"] is False
        assert probe["env"] == {name: HOSTILE[name] for name in sorted(HOSTILE)} | {str(REPO): None}
        assert probe["argv"] == [*sorted(HOSTILE), str(REPO)]
        assert probe["ids"] == [os.getuid(), os.getgid()] and (run_dir / "probe.json").stat().st_uid == os.getuid()
        assert Path(probe["home"]).parent == containers.job_scratch(run_dir)  # written there; removed after the job
        [record] = containers.attempt_extra(run_dir)["containers"]
        assert record["runtime"] == "docker" and record["requested"] == block
        assert record["resolved"]["image_id"] == record["resolved"]["archive_image_id"] == held
        assert record["version"] == docker("version", "--format", "{{.Server.Version}}").stdout.strip()
        assert containers.mismatch(containers.image_of(block), record) is None
        actions.append(record["prepared"]["action"])
        assert leftover_containers() == [] and not (run_dir / "logs" / "train.cid").exists()
    assert actions == ["loaded", "present"]
    assert not Path("/tmp/pwned-docker").exists()
    changed = {**block, "sha256": "0" * 64}
    assert "hashed to" in containers.mismatch(
        containers.image_of(changed), {**record, "requested": containers.image_of(changed).identity()}
    )


def test_a_failing_docker_program_is_still_proven_and_its_container_removed(docker_image, tmp_path, monkeypatch):
    """The program exits 3: the failure reaches the caller, the record of what ran is kept, no container is left."""
    monkeypatch.chdir(tmp_path)
    block = docker_image.place(tmp_path)
    program = _program(block, ["python3", "-c", "raise SystemExit(3)"], {}, tmp_path)
    with pytest.raises(subprocess.CalledProcessError) as failed:
        _run(program, tmp_path)
    assert failed.value.returncode == 3
    [record] = containers.attempt_extra(tmp_path)["containers"]
    assert record["resolved"]["image_id"] == containers.archive_image_id(tmp_path / block["file"])
    assert leftover_containers() == []
