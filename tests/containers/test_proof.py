"""The proof rule on its own: which records prove the pinned image, and what the audit says about a provenance."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrepro import containers

DIGEST, OTHER = "sha256:" + "ab" * 32, "sha256:" + "cd" * 32
PINNED = {"runtime": "podman", "ref": "ghcr.io/org/t:1", "digest": DIGEST}
FILE = {"runtime": "docker", "file": "images/t.tar", "sha256": "ef" * 32}
PATH = Path("runs/s/m/seed0/provenance.json")


def entry(block: dict, resolved: dict, label: str = "train") -> dict:
    image = containers.image_of(block)
    assert image is not None
    return containers.record(
        label=label,
        image=image,
        reference=image.pinned,
        version="4.3.1",
        resolved=resolved,
        obtained="test",
        prepared={"action": "present", "seconds": 0.0},
    )


def provenance(*attempts: list[dict] | None) -> dict:
    return {"attempts": [{"number": n, **({} if a is None else {"containers": a})} for n, a in enumerate(attempts, 1)]}


@pytest.mark.parametrize(
    "block, resolved, why",
    [
        (PINNED, {"digests": [OTHER, DIGEST]}, None),
        (PINNED, {"digests": [OTHER]}, f"the runtime resolved {OTHER}, not the lock's {DIGEST}"),
        (PINNED, {}, f"the runtime resolved no digest, not the lock's {DIGEST}"),
        (FILE, {"file_sha256": "ef" * 32, "image_id": "sha256:1", "archive_image_id": "sha256:1"}, None),
        (
            FILE,
            {"file_sha256": "00" * 32},
            f"images/t.tar hashed to {'00' * 32} when it ran, the lock pins {'ef' * 32}",
        ),
        (
            FILE,
            {"file_sha256": "ef" * 32, "image_id": "sha256:2", "archive_image_id": "sha256:1"},
            "the container ran image sha256:2, the archive holds sha256:1",
        ),
    ],
)
def test_a_record_proves_the_pin_only_with_the_runtimes_own_answer(block, resolved, why):
    """A registry pin is proven by a digest the runtime resolved; a file by its hash as it ran and, for an archive,
    by the container running the image the archive holds."""
    assert containers.mismatch(containers.image_of(block), entry(block, resolved)) == why


def test_the_audit_rules_over_a_provenance():
    """Every record of every attempt is checked; the last training attempt must have one; a placement without a
    container must record none; a malformed field is named."""
    good, bad = entry(PINNED, {"digests": [DIGEST]}), entry(PINNED, {"digests": [OTHER]}, label="eval_step5")
    assert containers.problems(PATH, provenance([good]), PINNED, must_run=True) == []
    assert containers.problems(PATH, provenance([bad], [good]), PINNED, must_run=True) == [
        f"{PATH}: attempt 1, program 'eval_step5': the runtime resolved {OTHER}, not the lock's {DIGEST}"
    ]
    assert containers.problems(PATH, provenance([good], None), PINNED, must_run=True) == [
        f"{PATH}: the lock runs this method in podman image ghcr.io/org/t@{DIGEST}, but the last attempt recorded no "
        "program run in a container"
    ]
    assert containers.problems(PATH, provenance(None), PINNED, must_run=False) == []
    assert containers.problems(PATH, provenance([good]), {"none": "CPU"}, must_run=True) == [
        f"{PATH}: attempt 1 ran 'train' in a container, but the lock's placement of this method runs without one"
    ]
    assert containers.problems(PATH, {"attempts": [{"number": 1, "containers": "x"}]}, PINNED, must_run=False) == [
        f"{PATH}: attempt 1: `containers` is not a list"
    ]
