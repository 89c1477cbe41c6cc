"""`agentrepro audit` checks the image each job recorded against the image its lock pins (agentrepro.containers)."""

from __future__ import annotations

import json

from helpers import run_cli
from study_kit import COMMIT_B, DIGEST

from agentrepro.audit import audit_study
from agentrepro.seal import write_outputs_manifest

OTHER = "sha256:" + "cd" * 32


def _edit_attempt(run, change) -> None:
    """Change the run's last attempt as a job would have recorded it, and re-seal, so only the container check can tell."""
    path = run / "provenance.json"
    prov = json.loads(path.read_text())
    change(prov["attempts"][-1])
    path.write_text(json.dumps(prov))
    write_outputs_manifest(run, exclude_dirs={"eval", "logs"})


def test_a_run_that_ran_another_image_fails_the_audit(frozen):
    """A recorded digest other than the lock's is reported with the run, the program and both digests (subprocess, exit 1)."""
    root, lock = frozen
    run = root / "runs" / "demo" / "grpo" / "seed0"
    _edit_attempt(run, lambda attempt: attempt["containers"][0]["resolved"].update(digests=[OTHER]))
    result = run_cli("audit", "demo", "--root", root)
    assert result.returncode == 1
    assert (
        f"{run / 'provenance.json'}: attempt 1, program 'train': the runtime resolved {OTHER}, not the lock's "
        f"{lock['resolved']['image']['digest']}"
    ) in result.stdout, result.stdout


def test_a_run_that_recorded_no_container_fails_the_audit(frozen):
    """A training job of a placement with a container that recorded no program run in it is reported."""
    root, _ = frozen
    run = root / "runs" / "demo" / "gigpo" / "seed1"
    _edit_attempt(run, lambda attempt: attempt.pop("containers"))
    problems = audit_study("demo", root)
    assert any(
        p.startswith(
            f"{run / 'provenance.json'}: the lock runs this method in apptainer image example.org/verl-agent@sha256:"
        )
        and "recorded no program run in a container" in p
        for p in problems
    ), problems


def test_a_run_that_asked_for_another_runtime_or_pin_fails_the_audit(frozen):
    """A record whose runtime or requested image differs from the lock's pin is reported even when its digest matches."""
    root, _ = frozen
    run = root / "runs" / "demo" / "grpo" / "seed1"
    _edit_attempt(run, lambda attempt: attempt["containers"][0].update(runtime="podman"))
    run2 = root / "runs" / "demo" / "gigpo" / "seed0"
    _edit_attempt(
        run2, lambda attempt: attempt["containers"][0]["requested"].update(ref=f"example.org/other:{COMMIT_B[:6]}")
    )
    problems = audit_study("demo", root)
    assert (
        f"{run / 'provenance.json'}: attempt 1, program 'train': ran with 'podman', the lock pins runtime 'apptainer'"
        in problems
    )
    assert any(
        p.startswith(f"{run2 / 'provenance.json'}: attempt 1, program 'train': asked for apptainer example.org/other:")
        and p.endswith(f"the lock pins apptainer example.org/verl-agent:1.0 ({DIGEST})")
        for p in problems
    ), problems
