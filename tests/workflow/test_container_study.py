"""A study whose every job runs in a podman image, end to end through Snakemake (tests/workflow/manifests/wf-container.yaml).

The image is built here from this machine's Python (tests/podman_kit.py) and pinned by its digest; the command
backend's train and eval programs run in it (tests/workflow/image_trainer.py, standard library only), each job
records the digest the runtime says it ran, and the audit fails once the lock pins another image's digest.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import image_trainer
import pytest
import yaml
from helpers import run_cli
from podman_kit import leftover_containers
from wfkit import HERE, snakemake

from agentrepro.lockfile import seal

STUDY = "wf-container"
CONFIG = ("--config", f"manifest=manifests/{STUDY}.yaml", "freeze_flags=--allow-dirty", "pdf=false")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory, podman_images):
    """A working directory where the container study ran to its report (`snakemake --cores 2`), with its dry run's output."""
    workdir = tmp_path_factory.mktemp(STUDY)
    manifest = yaml.safe_load((HERE / "manifests" / f"{STUDY}.yaml").read_text())
    manifest["image"]["digest"] = podman_images["a"].digest
    (workdir / "manifests").mkdir()
    (workdir / "manifests" / f"{STUDY}.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (workdir / "tests" / "workflow").mkdir(parents=True)  # the templates name the trainer from the study root
    shutil.copy(HERE / "image_trainer.py", workdir / "tests" / "workflow" / "image_trainer.py")
    dry = snakemake(workdir, "-n", "-p", *CONFIG)
    assert dry.returncode == 0, (dry.stdout + dry.stderr)[-3000:]
    proc = snakemake(workdir, "--cores", "2", *CONFIG, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    return workdir, dry.stdout + dry.stderr


def _runs(workdir: Path):
    return sorted((workdir / "runs" / STUDY).glob("*/seed0"))


def test_the_dry_run_shows_each_job_as_it_runs_in_the_image(finished, podman_images):
    """`snakemake -n -p` shows each train job's program inside podman, the image by digest, as `agentrepro command` does."""
    workdir, dry = finished
    pinned = f"localhost/agentrepro-test/python@{podman_images['a'].digest}"
    shown = run_cli("command", f"manifests/{STUDY}.yaml", "--method", "grpo", "--seed", "0", cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    line = shown.stdout.splitlines()[2]
    words = shlex.split(line)
    assert words[:2] == ["podman", "run"] and pinned in words and words[-4:-2] == ["--run", str(_runs(workdir)[1])]
    assert line in dry


def test_every_job_ran_in_the_pinned_image_and_recorded_its_digest(finished, podman_images):
    """Each run's trainer read the image's own marker; each train and eval attempt recorded the pinned digest as
    resolved by podman; the outcomes are what the trainer computes; no container is left behind."""
    workdir, _ = finished
    digest, runs = podman_images["a"].digest, _runs(workdir)
    assert [r.parent.name for r in runs] == ["gigpo", "grpo"]
    for run in runs:
        assert (run / "image.txt").read_text() == "a\n"
        for directory in (run, run / "eval" / "step0", run / "eval" / "step2"):
            attempt = json.loads((directory / "provenance.json").read_text())["attempts"][-1]
            [record] = attempt["containers"]
            assert record["runtime"] == "podman" and record["requested"]["digest"] == digest
            assert (
                digest in record["resolved"]["digests"]
                and record["resolved"]["image_id"] == podman_images["a"].image_id
            )
        for step in (0, 2):
            rows = [
                json.loads(line) for line in (run / "eval" / f"step{step}" / "outcomes.jsonl").read_text().splitlines()
            ]
            assert len(rows) == 4 and [r["success"] for r in rows] == [
                image_trainer.succeeds(r["task_id"], 0, step) for r in rows
            ]
    assert leftover_containers() == []


def test_the_audit_passes_and_fails_once_the_lock_pins_another_image(finished, podman_images):
    """The audit passes on the study as run; with the lock re-sealed to pin image b's digest, it names every job's
    record as another image's."""
    workdir, _ = finished
    audit = run_cli("audit", f"manifests/{STUDY}.yaml", cwd=workdir)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    path = workdir / "manifests" / f"{STUDY}.lock.json"
    original = path.read_text()
    lock = json.loads(original)
    lock["manifest"]["image"]["digest"] = lock["resolved"]["image"]["digest"] = podman_images["b"].digest
    try:
        path.write_text(json.dumps(seal({k: v for k, v in lock.items() if k != "lock_self_sha256"}), indent=2))
        audit = run_cli("audit", f"manifests/{STUDY}.yaml", cwd=workdir)
    finally:
        path.write_text(original)
    assert audit.returncode == 1
    mismatched = [
        line
        for line in audit.stdout.splitlines()
        if f"not the lock's {podman_images['b'].digest}" in line and podman_images["a"].digest in line
    ]
    assert len(mismatched) == 6, audit.stdout  # 2 runs x (train, eval step 0, eval step 2)


def test_the_image_was_prepared_once_before_the_jobs_on_the_submitting_host(finished, podman_images):
    """The workflow's `images` rule (a local rule: on a cluster, the host that submits the jobs) prepared the study's
    one image before any train job, so no GPU job pulls or converts; the dry run planned it."""
    workdir, dry = finished
    record = json.loads((workdir / "logs" / STUDY / "images.json").read_text())
    [image] = record["images"]
    assert image["runtime"] == "podman" and image["image"].endswith(podman_images["a"].digest)
    assert image["action"] == "present" and "rule images" in dry
