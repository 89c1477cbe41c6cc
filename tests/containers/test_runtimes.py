"""Each runtime's command line, checked against what the runtime documents (podman's own --help, docker's and
Apptainer's recorded in tests/fixtures/containers/), and the checks on what becomes a word of it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import FIXTURES, REPO, require

from agentrepro import containers
from agentrepro.containers import running
from agentrepro.containers.running import private_folder
from agentrepro.containers.runtimes import (
    APPTAINER,
    DOCKER,
    GPU_SOURCES,
    PODMAN,
    UNNAMED_GPUS,
    Mount,
    RunRequest,
    allocated_gpus,
    merged_mounts,
)
from agentrepro.errors import BadInput, Failure
from agentrepro.reading import load_json

DIGEST = "sha256:" + "ab" * 32
UUID = "GPU-8f6d2a3c-1b2e-4c5d-9e8f-0a1b2c3d4e5f"  # as `nvidia-smi -L` and the CDI names of nvidia-ctk print one
REQUEST = RunRequest(
    "ghcr.io/org/trainer@" + DIGEST,
    ("python3", "-m", "train", "--lr", "$(x)"),
    {"NOTE": "a,b $PATH `id`", "WANDB_MODE": "offline"},
    Path("/srv/study"),
    merged_mounts(
        [
            Mount(Path("/srv/study"), read_only=False),
            Mount(Path("/srv/study/runs/s/m/seed0"), False),
            Mount(Path("/data/alfworld")),
        ]
    ),
    gpus=True,
    devices=("1", UUID),
    cidfile=Path("/srv/study/runs/s/m/seed0/logs/train.cid"),
)


def _options(argv: list[str], image: str) -> list[str]:
    """The runtime's own options: the words starting with -- before the image."""
    return [w for w in argv[: argv.index(image)] if w.startswith("--")]


def _documented(help_text: str) -> set[str]:
    return set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", help_text))


def test_podman_renders_only_flags_its_help_documents():
    """Every option of the podman command line is one `podman run --help` lists (podman itself, when installed)."""
    require("podman", shutil.which("podman") is not None, "`podman` is not on PATH")
    argv, env = PODMAN.run_argv(REQUEST)
    documented = _documented(
        subprocess.run(["podman", "run", "--help"], capture_output=True, text=True, check=True).stdout
    )
    assert set(_options(argv, REQUEST.reference)) <= documented and env == {}  # the whole line: the test below


def test_docker_renders_only_flags_its_help_documents():
    """Every option of the docker command line is one Docker CLI 28's `docker run --help` lists; version asks the daemon."""
    argv, _ = DOCKER.run_argv(REQUEST)
    documented = _documented((FIXTURES / "containers" / "docker-run-help.txt").read_text())
    assert set(_options(argv, REQUEST.reference)) <= documented
    assert argv[argv.index("--gpus") + 1] == f'"device=1,{UUID}"' and re.fullmatch(
        r"\d+:\d+", argv[argv.index("--user") + 1]
    )
    assert "--format" in _documented((FIXTURES / "containers" / "docker-version-help.txt").read_text())


def test_podman_and_docker_command_lines_in_full():
    """The whole podman line: cidfile, never pulling, host network and IPC, GPUs, mounts (parents first, read-only
    marked), working directory, each env value one `--env NAME=VALUE` word, the pinned image, then the argv as given."""
    argv, _ = PODMAN.run_argv(REQUEST)
    assert argv == [
        "podman",
        "run",
        "--cidfile",
        "/srv/study/runs/s/m/seed0/logs/train.cid",
        "--pull",
        "never",
        "--network",
        "host",
        "--ipc",
        "host",
        "--pids-limit",
        "-1",
        "--device",
        "nvidia.com/gpu=1",
        "--device",
        f"nvidia.com/gpu={UUID}",
        "--env",
        "CUDA_VISIBLE_DEVICES=0,1",
        "--volume",
        "/data/alfworld:/data/alfworld:ro",
        "--volume",
        "/srv/study:/srv/study",
        "--workdir",
        "/srv/study",
        "--env",
        "NOTE=a,b $PATH `id`",
        "--env",
        "WANDB_MODE=offline",
        REQUEST.reference,
        "python3",
        "-m",
        "train",
        "--lr",
        "$(x)",
    ]


def test_apptainer_command_line_follows_its_documented_cli(monkeypatch):
    """apptainer exec with --cleanenv --contain --nv, one --bind src:src[:ro] per mount, --pwd, the SIF, and the
    environment set by `env --` inside the image (apptainer's own --env would split at commas and evaluate $NAME);
    each flag is one Apptainer documents."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    request = RunRequest(
        "/cache/apptainer/" + "ab" * 32 + ".sif",
        *[getattr(REQUEST, k) for k in ("argv", "env", "cwd", "mounts", "gpus")],
    )
    argv, env = APPTAINER.run_argv(request)
    assert (
        argv
        == [
            "apptainer",
            "exec",
            "--cleanenv",
            "--contain",
            "--nv",
            "--bind",
            "/data/alfworld:/data/alfworld:ro",
            "--bind",
            "/srv/study:/srv/study",
            "--pwd",
            "/srv/study",
            request.reference,
            "env",
            "--",
            "CUDA_VISIBLE_DEVICES=2,3",
            "NOTE=a,b $PATH `id`",
            "WANDB_MODE=offline",
            "python3",
            "-m",
            "train",
            "--lr",
            "$(x)",
        ]
        and env == {}
    )
    facts = (FIXTURES / "containers" / "apptainer-cli.txt").read_text()
    documented = set(re.findall(r"(?m)^exec (--[a-z-]+)", facts))
    assert set(_options(argv, request.reference)) <= documented
    assert APPTAINER.pull_argv(Path("/c/x.sif"), "docker://ghcr.io/org/t@" + DIGEST)[1:] == [
        "pull",
        "/c/x.sif",
        "docker://ghcr.io/org/t@" + DIGEST,
    ]
    assert "inspect --deffile" in facts and APPTAINER.deffile_argv(Path("/c/x.sif"))[1:3] == ["inspect", "--deffile"]


def test_apptainer_refuses_a_program_name_that_env_would_read_as_a_variable():
    """`env` reads a first word holding '=' as an assignment: such a program name is refused, not run wrongly."""
    with pytest.raises(BadInput, match="would be read by env as a variable"):
        APPTAINER.run_argv(RunRequest("/x.sif", ("A=b", "run"), {"X": "1"}))


def test_an_apptainer_registry_image_runs_as_its_converted_sif(tmp_path, monkeypatch):
    """Apptainer runs the SIF converted once from docker://REPOSITORY@sha256:... (never the tag), named by the digest
    in the image cache; a study's own SIF runs by its absolute path."""
    monkeypatch.setenv("AGENTREPRO_IMAGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    config = {
        "image": {"runtime": "apptainer", "ref": "ghcr.io:443/org/verl:v1.2", "digest": DIGEST},
        "resources": {"gpus": 2},
    }
    program = containers.program(
        config, ["bash", "run.sh"], {}, None, run_dir=tmp_path / "run", job_dir=tmp_path / "run", label="train"
    )
    container = program.container
    assert APPTAINER.source(container.image) == "docker://ghcr.io:443/org/verl@" + DIGEST
    assert program.argv[program.argv.index("--pwd") + 2] == str(tmp_path / "cache" / "apptainer" / ("ab" * 32 + ".sif"))
    assert "--nv" in program.argv and program.cidfile is None
    sif = {"image": {"runtime": "apptainer", "file": "images/t.sif", "sha256": "cd" * 32}}
    hooks = REPO / "src" / "agentrepro" / "hooks"  # a folder a framework backend adds (its stdlib-only integrations)
    program = containers.program(
        sif, ["true"], {}, None, run_dir=tmp_path, job_dir=tmp_path, label="train", extra=[hooks]
    )
    assert str(tmp_path / "images" / "t.sif") in program.argv and "--nv" not in program.argv
    assert program.argv[program.argv.index(f"{hooks}:{hooks}:ro") - 1] == "--bind"


def test_deffile_digest_and_inspect_output_are_read_as_documented():
    """A converted SIF's definition names its digest; docker's inspect (no ImageDigest, `sha256:` IDs) and podman's
    (bare IDs) give the same resolved form; an image inspect of another image is refused."""
    assert APPTAINER.deffile_digest("bootstrap: docker\nfrom: ghcr.io/org/t@" + DIGEST + "\n") == DIGEST
    assert APPTAINER.deffile_digest("Bootstrap: localimage\nFrom: base.sif\n") is None
    image_id = "sha256:" + "12" * 32
    docker_container = json.dumps([{"Id": "c" * 64, "Image": image_id}])
    docker_image = json.dumps([{"Id": image_id, "RepoDigests": ["ghcr.io/org/t@" + DIGEST]}])
    assert DOCKER.resolved(docker_container, docker_image) == {"image_id": image_id, "digests": [DIGEST]}
    podman_container = json.dumps([{"Image": "12" * 32, "ImageDigest": DIGEST}])
    podman_image = json.dumps([{"Id": "12" * 32, "Digest": DIGEST, "RepoDigests": []}])
    assert PODMAN.resolved(podman_container, podman_image) == {"image_id": image_id, "digests": [DIGEST]}
    with pytest.raises(ValueError, match="not the container's image"):
        PODMAN.resolved(podman_container, json.dumps([{"Id": "34" * 32}]))


@pytest.mark.parametrize("path", ["relative/dir", "/a:b", "/a,b", "/a/../etc", "/a\nb"])
def test_a_path_no_runtime_could_mount_faithfully_is_refused(path):
    """Mount paths are absolute, without '..', ':', ',' or control characters (the runtimes split mount specs there)."""
    with pytest.raises(BadInput, match="cannot be mounted"):
        Mount(Path(path))


def test_one_mount_per_path_with_read_write_winning():
    """A path asked for read-only and read-write is mounted once, read-write; parents come before children; a path
    inside a mounted one is mounted again only to change its mode."""
    mounts = merged_mounts(
        [
            Mount(Path("/a/b")),
            Mount(Path("/a"), read_only=False),
            Mount(Path("/a/b"), read_only=False),
            Mount(Path("/a/c")),
            Mount(Path("/a/c/d"), read_only=False),
            Mount(Path("/a/c/e")),
            Mount(Path("/ab")),
        ]
    )
    assert [(str(m.path), m.read_only) for m in mounts] == [
        ("/a", False),
        ("/a/c", True),
        ("/a/c/d", False),
        ("/ab", True),
    ]


@pytest.mark.parametrize(
    "block, where",
    [
        ({"runtime": "singularity", "ref": "x/y:1", "digest": DIGEST}, "image.runtime"),
        ({"runtime": "podman", "ref": "--privileged", "digest": DIGEST}, "image.ref"),
        ({"runtime": "podman", "ref": "x/y:1"}, "image.digest"),
        ({"runtime": "docker", "ref": "x/y:1", "digest": "sha256:ab/../c"}, "image.digest"),
        ({"runtime": "apptainer", "file": "t.sif", "sha256": "ab cd"}, "image.sha256"),
        ({"runtime": "podman", "none": "why"}, "image.runtime"),
    ],
)
def test_an_image_block_that_cannot_run_names_its_field(block, where):
    """An unknown runtime, a reference that could be read as an option, a digest missing or not one word, a file
    hash that is not one word."""
    with pytest.raises(BadInput) as caught:
        containers.image_of(block)
    assert caught.value.where == where


def test_a_tag_never_runs():
    """The reference that runs drops the tag and names the digest, a registry port kept."""
    image = containers.image_of({"runtime": "podman", "ref": "registry.example.org:5000/a/b:2.1", "digest": DIGEST})
    assert image.pinned == "registry.example.org:5000/a/b@" + DIGEST
    assert containers.image_of({"none": "CPU", "runtime": "none"}) is None


def test_the_runtimes_are_the_schemas_runtimes():
    """The runtimes the package describes are exactly the ones the manifest and lock schemas accept."""
    manifest = load_json(REPO / "workflow" / "schemas" / "manifest.schema.json")
    lock = load_json(REPO / "workflow" / "schemas" / "lock.schema.json")
    assert tuple(manifest["$defs"]["runtime"]["enum"]) == containers.RUNTIMES == tuple(containers.RUNTIME)
    assert all(
        tuple(form["properties"]["runtime"]["enum"]) == containers.RUNTIMES
        for form in lock["$defs"]["image"]["oneOf"][:2]
    )


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"SLURM_STEP_GPUS": "2", "SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0"}, ("2",)),
        ({"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}, ("2", "3")),
        ({"CUDA_VISIBLE_DEVICES": f"3, {UUID}"}, ("3", UUID)),
        ({"SLURM_JOB_GPUS": "", "CUDA_VISIBLE_DEVICES": ""}, None),
        ({}, None),
    ],
)
def test_a_jobs_gpus_are_the_ones_its_scheduler_named(environ, expected):
    """SLURM's names of the node's GPUs (the indices CDI and docker name devices by) before CUDA_VISIBLE_DEVICES,
    which inside a SLURM job's device cgroup counts from 0 whatever GPUs the job holds; none named: None."""
    assert allocated_gpus(environ) == expected


@pytest.mark.parametrize("value", ["all", "0,all", "-1", "0;1", "GPU-$(id)", "1,,2", "0 1"])
def test_a_gpu_list_that_names_no_devices_is_refused_naming_its_variable(value):
    with pytest.raises(BadInput) as caught:
        allocated_gpus({"SLURM_JOB_GPUS": value, "CUDA_VISIBLE_DEVICES": "0"})
    assert caught.value.where == "SLURM_JOB_GPUS"


def test_a_job_whose_gpus_no_one_named_is_shown_but_never_runs(tmp_path, monkeypatch):
    """Reviewed where no GPU is named (`agentrepro command` on a login node), the line shows a marker where the
    devices go; run so, the job stops before its container starts instead of being given every GPU of the node."""
    for name in GPU_SOURCES:
        monkeypatch.delenv(name, raising=False)
    config = {
        "image": {"runtime": "podman", "ref": "ghcr.io/org/trainer", "digest": DIGEST},
        "resources": {"gpus": 2},
    }
    run_dir = tmp_path / "run"
    program = containers.program(
        config, ["python3", "-c", "pass"], {}, None, run_dir=run_dir, job_dir=run_dir, label="t"
    )
    assert f"nvidia.com/gpu={UNNAMED_GPUS}" in program.argv and not [w for w in program.argv if w.endswith("=all")]
    with pytest.raises(Failure, match="none of SLURM_STEP_GPUS, SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES names any"):
        with containers.proven(program, run_dir):
            pytest.fail("the program ran")
    monkeypatch.setenv("SLURM_JOB_GPUS", "5,7")
    program = containers.program(
        config, ["python3", "-c", "pass"], {}, None, run_dir=run_dir, job_dir=run_dir, label="t"
    )
    assert "nvidia.com/gpu=5" in program.argv and "nvidia.com/gpu=7" in program.argv


def test_rootless_podman_on_a_node_without_dev_mqueue_says_so_before_it_runs(tmp_path, monkeypatch):
    """Under --ipc host rootless podman binds the node's /dev/mqueue, and fails with `statfs /dev/mqueue: no such file
    or directory` where the node has none (seen under the local SLURM); the job says what is missing first. Root's
    podman makes its own and is not held to it."""
    monkeypatch.setattr(running, "MQUEUE", tmp_path / "mqueue")
    config = {"image": {"runtime": "podman", "ref": "ghcr.io/org/trainer", "digest": DIGEST}, "resources": {"gpus": 0}}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    program = containers.program(config, ["python3"], {}, None, run_dir=run_dir, job_dir=run_dir, label="t")
    monkeypatch.setattr(os, "geteuid", lambda: 1001)
    with pytest.raises(Failure, match=r"rootless podman .* mounts the node's .*/mqueue, which this node lacks"):
        with containers.proven(program, run_dir):
            pytest.fail("the program ran")

    def prepare(container):
        raise Failure("past the check, to the image")

    monkeypatch.setattr(running, "prepare", prepare)
    (tmp_path / "mqueue").mkdir()
    with pytest.raises(Failure, match="past the check"):
        with containers.proven(program, run_dir):
            pytest.fail("the program ran")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    (tmp_path / "mqueue").rmdir()
    with pytest.raises(Failure, match="past the check"):
        with containers.proven(program, run_dir):
            pytest.fail("the program ran")


def test_a_jobs_scratch_folder_takes_what_the_runtime_would_put_where_it_does_not_fit(tmp_path):
    """Apptainer's --contain puts /tmp, /var/tmp and $HOME on the session's tmpfs (64 MiB by default in
    apptainer.conf), too small for Ray's temp dir and spills and the compile and model caches: --workdir moves them to
    the job's scratch folder (Apptainer's documented --workdir; Apptainer does not run here). docker runs as the
    caller, whose HOME in the image is /: HOME goes to the scratch folder, mounted. podman keeps the image's user."""
    scratch = tmp_path / "scratch"
    request = RunRequest("/cache/x.sif", ("python3",), {}, Path("/srv/study"), gpus=True, scratch=scratch)
    argv, _ = APPTAINER.run_argv(request)
    assert argv[:8] == [
        "apptainer",
        "exec",
        "--cleanenv",
        "--contain",
        "--workdir",
        str(scratch),
        "--home",
        str(scratch / "home"),
    ]
    argv, _ = DOCKER.run_argv(replace(request, reference="ghcr.io/org/t@" + DIGEST))
    assert f"{scratch}:{scratch}" in argv and f"HOME={scratch / 'home'}" in argv
    documented = set(re.findall(r"(?m)^exec (--[a-z-]+)", (FIXTURES / "containers" / "apptainer-cli.txt").read_text()))
    assert {"--workdir", "--home"} <= documented
    argv, _ = PODMAN.run_argv(replace(request, reference="ghcr.io/org/t@" + DIGEST))
    assert str(scratch) not in " ".join(argv)


def test_the_scratch_folder_is_the_jobs_own_and_private(tmp_path, monkeypatch):
    """Under $TMPDIR (SLURM's node-local folder), one per job and user; made 0700 with a home in it, and refused
    when something else already holds its name in a shared /tmp (a link, another user's folder)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    a, b = containers.job_scratch(tmp_path / "runs" / "a"), containers.job_scratch(tmp_path / "runs" / "b")
    assert a.parent == tmp_path and a != b and a.name.startswith(f"agentrepro-{os.getuid()}-")
    private_folder(a)
    assert (a.stat().st_mode & 0o777, (a / "home").is_dir()) == (0o700, True)
    private_folder(a)  # a second program of the job
    (tmp_path / "elsewhere").mkdir()
    b.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Failure, match="not a folder of this user's"):
        private_folder(b)
    if os.getuid() == 0:  # a folder another user made under the name
        other = containers.job_scratch(tmp_path / "runs" / "c")
        other.mkdir()
        os.chown(other, 65534, 65534)
        with pytest.raises(Failure, match="not a folder of this user's"):
            private_folder(other)


def test_an_image_file_is_read_once_a_job_while_it_stays_the_same_file(tmp_path, monkeypatch):
    """A job's programs all run the same image file (a SIF or an archive of tens of GB): it is hashed for the first
    and not read again while its device, inode, size and modification time stay; a rewrite is hashed anew."""
    from agentrepro.containers import image as image_module

    reads: list[Path] = []
    real = image_module.sha256_file
    monkeypatch.setattr(image_module, "sha256_file", lambda path: reads.append(Path(path)) or real(path))
    sif = tmp_path / "trainer.sif"
    sif.write_bytes(b"SIF one")
    first = image_module.file_sha256(sif)
    assert image_module.file_sha256(tmp_path / "." / "trainer.sif") == first and len(reads) == 1
    sif.write_bytes(b"SIF two")
    os.utime(sif, ns=(0, sif.stat().st_mtime_ns + 1))
    assert image_module.file_sha256(sif) != first and len(reads) == 2
