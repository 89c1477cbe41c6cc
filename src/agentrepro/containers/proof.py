"""The proof that a job's programs ran in the pinned image: what each run records, and what the audit checks.

Each program run in a container adds one record (`record`) to `<job dir>/logs/containers.jsonl` during its
attempt; the `train` / `eval` verb moves them into the attempt (`attempt_extra`), so provenance.json, which the
seal covers, says for every attempt:

```json
"containers": [{"label": "train", "runtime": "podman", "version": "4.3.1",
                "requested": {"runtime": "podman", "ref": "ghcr.io/org/t:1", "digest": "sha256:..."},
                "reference": "ghcr.io/org/t@sha256:...",
                "resolved": {"image_id": "sha256:...", "digests": ["sha256:..."]},
                "obtained": "podman container inspect <id> (.Image, .ImageDigest); podman image inspect <image id> (.Digest, .RepoDigests)",
                "prepared": {"action": "present", "seconds": 0.04}}]
```

`resolved` comes from the runtime itself after the run (podman, docker: the container's image and the digests of that
image; apptainer: the digest a converted SIF's definition names), and for a local image file from the file, hashed
as the program starts (`file_sha256`; podman and docker: with the image ID the archive holds, `archive_image_id`,
which must be the one the container ran). `mismatch` is the one rule that says whether a record proves the pinned
image; `problems` applies it to a run's or an evaluation's provenance for the audit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrepro.containers.image import Image, image_of
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_jsonl
from agentrepro.reading import read_jsonl

RECORDS = "containers.jsonl"  # in the job directory's logs/, for the attempt that is running
KEY = "containers"  # the attempt's field


def record(
    *,
    label: str,
    image: Image,
    reference: str,
    version: str,
    resolved: dict[str, Any],
    obtained: str,
    prepared: dict[str, Any],
) -> dict[str, Any]:
    """One program's proof: the runtime and its version, what was pinned and the reference the runtime was given,
    what the runtime says it ran, how that was asked, and how the image was prepared on this node."""
    return {
        "label": label,
        "runtime": image.runtime,
        "version": version,
        "requested": image.identity(),
        "reference": reference,
        "resolved": resolved,
        "obtained": obtained,
        "prepared": prepared,
    }


def mismatch(pinned: Image, entry: Any) -> str | None:
    """Why `entry` (one record) does not prove that its program ran in `pinned`; None when it does."""
    if not isinstance(entry, dict) or not isinstance(entry.get("resolved"), dict):
        return "not a container record (an object with `resolved`)"
    if entry.get("runtime") != pinned.runtime:
        return f"ran with {entry.get('runtime')!r}, the lock pins runtime {pinned.runtime!r}"
    resolved = entry["resolved"]
    if not pinned.is_file and pinned.digest not in (digests := resolved.get("digests") or []):
        return f"the runtime resolved {', '.join(map(str, digests)) or 'no digest'}, not the lock's {pinned.digest}"
    if pinned.is_file and resolved.get("file_sha256") != pinned.sha256:
        return f"{pinned.file} hashed to {resolved.get('file_sha256')} when it ran, the lock pins {pinned.sha256}"
    if pinned.is_file and "archive_image_id" in resolved and resolved.get("image_id") != resolved["archive_image_id"]:
        return f"the container ran image {resolved.get('image_id')}, the archive holds {resolved['archive_image_id']}"
    if entry.get("requested") != pinned.identity():
        requested = entry.get("requested")
        return f"asked for {_shown(requested if isinstance(requested, dict) else {})}, the lock pins {_shown(pinned.identity())}"
    return None


def _shown(identity: dict[str, Any]) -> str:
    """`runtime ref (digest)` or `runtime file (sha256 ...)`, for a message."""
    if "file" in identity:
        return f"{identity.get('runtime')} {identity.get('file')} (sha256 {identity.get('sha256')})"
    return f"{identity.get('runtime')} {identity.get('ref')} ({identity.get('digest')})"


def problems(path: Path, provenance: dict[str, Any], image_block: dict[str, Any], *, must_run: bool) -> list[str]:
    """The audit of one provenance.json against its placement's pinned image block: every recorded run must prove
    the pinned image, a placement without a container must record none, and with `must_run` (a training job) the
    last attempt must have run its programs in the image at all."""
    try:
        pinned = image_of(image_block)
    except BadInput as exc:
        return [f"{path}: the lock's image cannot be checked ({exc})"]
    attempts = [a for a in provenance.get("attempts") or [] if isinstance(a, dict)]
    found = []
    for attempt in attempts:
        entries = attempt.get(KEY) or []
        if not isinstance(entries, list):
            found.append(f"{path}: attempt {attempt.get('number')}: `{KEY}` is not a list")
            continue
        for entry in entries:
            label = entry.get("label") if isinstance(entry, dict) else None
            if pinned is None:
                found.append(
                    f"{path}: attempt {attempt.get('number')} ran {label!r} in a container, but the lock's placement "
                    "of this method runs without one"
                )
            elif (why := mismatch(pinned, entry)) is not None:
                found.append(f"{path}: attempt {attempt.get('number')}, program {label!r}: {why}")
    if pinned is not None and must_run and attempts and not attempts[-1].get(KEY):
        found.append(
            f"{path}: the lock runs this method in {pinned.runtime} image {pinned.pinned}, but the last attempt "
            "recorded no program run in a container"
        )
    return found


def records_path(job_dir: Path) -> Path:
    return Path(job_dir) / "logs" / RECORDS


def clear_records(job_dir: Path) -> None:
    """Forget an earlier attempt's records, so that the attempt now starting collects only its own."""
    records_path(job_dir).unlink(missing_ok=True)


def add_record(job_dir: Path, entry: dict[str, Any]) -> None:
    path = records_path(job_dir)
    atomic_write_jsonl(path, [*(read_jsonl(path) if path.is_file() else []), entry])


def attempt_extra(job_dir: Path) -> dict[str, Any]:
    """`{"containers": [...]}` for the attempt's closing record when programs ran in a container, else {}."""
    path = records_path(job_dir)
    return {KEY: read_jsonl(path)} if path.is_file() else {}
