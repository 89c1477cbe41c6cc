"""Bundles built adversarially: `audit --bundle` reads nothing outside the archive and accepts only what the lock plans.

Each forged bundle is consistent (its BUNDLE.sha256 re-made over the forged members), so only the defence the
test names can catch it: a study or manifest named by an absolute or traversing path, a member outside the plan,
a member larger than the bound (refused from its header, before it is written), and file names with the
characters that break line-splitting readers (U+2028, U+0085, a line feed, a backslash).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import sys
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import run_cli, tar_members
from hostile_kit import forge_bundle, record

from agentrepro.audit.bundle import BUNDLE_JSON, audit_bundle, write_bundle

_OPENED: list[str] | None = None


def _record_open(event: str, args: tuple) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], (str, bytes, Path)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_record_open)


@contextlib.contextmanager
def files_opened() -> Iterator[list[str]]:
    """Every path opened inside the block (Python's `open` audit event: builtins, io and os.open)."""
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


def _complete_study(root: Path, extra: dict[str, list] | None = None) -> Path:
    """study_kit's demo study, frozen, with all four runs (`extra` files in grpo seed 0), analysis and report."""
    from study_kit import fake_run, write_study

    from agentrepro.jobs.freeze import freeze

    write_study(root)
    lock, _, _ = freeze(root / "manifests" / "demo.yaml", root=root, allow_dirty=True)
    for method in ("grpo", "gigpo"):
        for seed in (0, 1):
            fake_run(root, lock, method, seed, extra=extra if (method, seed) == ("grpo", 0) else None)
    return root


@pytest.fixture(scope="module")
def complete_study(tmp_path_factory) -> Path:
    from study_kit import fake_outputs

    root = _complete_study(tmp_path_factory.mktemp("complete"))
    fake_outputs(root)
    return root


@pytest.fixture(scope="module")
def good_bundle(complete_study, tmp_path_factory) -> dict[str, bytes]:
    """The members of a bundle of a complete study that verifies (the base every forgery edits)."""
    path = tmp_path_factory.mktemp("bundle") / "good.tar.gz"
    write_bundle("demo", path, complete_study)
    assert audit_bundle(path) == []
    return tar_members(path)


def _with_info(members: dict[str, bytes], **changes) -> dict[str, bytes]:
    info = json.loads(members[BUNDLE_JSON])
    info.update(changes)
    return {**members, BUNDLE_JSON: (json.dumps(info, indent=2) + "\n").encode()}


def _decoy(tmp_path: Path, frozen_study: Path) -> Path:
    """A copy of the study's manifest and lock outside any bundle: what an absolute `study` would make audit read."""
    outside = tmp_path / "host"
    (outside / "manifests").mkdir(parents=True)
    for name in ("demo.yaml", "demo.lock.json"):
        (outside / "manifests" / name).write_bytes((frozen_study / "manifests" / name).read_bytes())
    return outside / "manifests" / "demo.yaml"


@pytest.mark.parametrize("field", ["study", "manifest"])
@pytest.mark.parametrize(
    "value", ["{decoy}", "../../../etc", "/etc/passwd.yaml", "../host/manifests/demo.yaml", "demo/../../x.yaml"]
)
def test_a_study_or_manifest_outside_the_archive_is_refused_naming_the_bundle(
    good_bundle, complete_study, tmp_path, field, value
):
    """BUNDLE.json naming an absolute or traversing study or manifest: one problem naming the bundle; nothing outside read."""
    decoy = _decoy(tmp_path, complete_study)
    value = value.replace("{decoy}", str(decoy))
    path = forge_bundle(_with_info(good_bundle, **{field: value}), tmp_path / "b.tar.gz")
    with files_opened() as opened:
        problems = audit_bundle(path)
    assert len(problems) == 1 and problems[0].startswith(f"{path}:{BUNDLE_JSON}: unreadable or unsafe"), problems
    assert not [p for p in opened if p.startswith((str(decoy.parent.parent), "/etc"))], opened
    record("bundles", f"bundle:{field}")


def test_a_traversing_study_as_a_subprocess(good_bundle, tmp_path):
    """`audit --bundle` of a bundle whose study is ../../../etc: exit 1, the bundle named, no traceback."""
    path = forge_bundle(_with_info(good_bundle, study="../../../etc"), tmp_path / "b.tar.gz")
    done = run_cli("audit", "--bundle", path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{path}:{BUNDLE_JSON}" in done.stdout and "not a study slug" in done.stdout


@pytest.mark.parametrize("name", ["notes/extra.txt", "manifests/other.yaml", "runs/other-study/x.json", "BUNDLE.extra"])
def test_a_member_outside_the_plan_is_refused_even_when_listed(good_bundle, tmp_path, name):
    """A member listed in BUNDLE.sha256 but not planned by the lock (outside the study's folders) is a problem."""
    path = forge_bundle({**good_bundle, name: b"{}\n"}, tmp_path / "b.tar.gz")
    assert f"{path}:{name}: not a file the lock plans: refused" in audit_bundle(path)
    record("bundles", "bundle:unplanned")


def test_a_lock_that_hashes_a_file_outside_the_archive_is_not_read(good_bundle, tmp_path):
    """A lock naming /etc/passwd among its files (self-hash re-made): reported, and never hashed."""
    from agentrepro.lockfile import seal

    lock = json.loads(good_bundle["manifests/demo.lock.json"])
    lock["resolved"]["files"]["/etc/passwd"] = "0" * 64
    forged = seal({k: v for k, v in lock.items() if k != "lock_self_sha256"})
    path = forge_bundle(
        {**good_bundle, "manifests/demo.lock.json": (json.dumps(forged, indent=2) + "\n").encode()},
        tmp_path / "b.tar.gz",
    )
    with files_opened() as opened:
        problems = audit_bundle(path)
    assert (
        f"{path}:{BUNDLE_JSON}: the lock hashes '/etc/passwd', outside the bundle, and it is not listed as left out"
        in problems
    )
    assert "/etc/passwd" not in opened and any(p.endswith("demo.lock.json") for p in opened)


def _bomb(path: Path, big: int, *, first: dict[str, bytes]) -> Path:
    """A .tar.gz holding `first`, then one member of `big` zero bytes (compressed: about big / 1000 bytes)."""
    squeeze = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip framing
    with open(path, "wb") as out:

        def put(data: bytes) -> None:
            out.write(squeeze.compress(data))

        for name, data in first.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            put(info.tobuf(tarfile.GNU_FORMAT) + data + b"\0" * (-len(data) % 512))
        info = tarfile.TarInfo("runs/demo/grpo/seed0/metrics.jsonl")
        info.size = big
        put(info.tobuf(tarfile.GNU_FORMAT))
        zeros = bytes(1 << 20)
        for _ in range(big >> 20):
            put(zeros)
        put(b"\0" * 1024)
        out.write(squeeze.flush())
    return path


def test_a_one_gib_member_in_a_small_archive_is_refused_from_its_header(good_bundle, tmp_path):
    """A 1 GiB member (the archive about 1 MiB) is refused before extraction: the problem names its header's size."""
    path = _bomb(tmp_path / "bomb.tar.gz", 1 << 30, first={BUNDLE_JSON: good_bundle[BUNDLE_JSON]})
    assert path.stat().st_size < 5 << 20
    problems = audit_bundle(path)
    assert problems == [
        f"{path}: member 'runs/demo/grpo/seed0/metrics.jsonl' is 1,073,741,824 bytes, more than a member may have "
        "(67,108,864; --max-file-mb): refusing to extract it"
    ]
    record("bundles", "bundle:oversized")


def test_the_member_bound_is_an_option(good_bundle, tmp_path):
    """`audit --bundle --max-file-mb 1` refuses a 2 MiB member that the default accepts (subprocess)."""
    path = _bomb(tmp_path / "b.tar.gz", 2 << 20, first={BUNDLE_JSON: good_bundle[BUNDLE_JSON]})
    done = run_cli("audit", "--bundle", path, "--max-file-mb", "1")
    assert done.returncode == 1 and "is 2,097,152 bytes, more than a member may have (1,048,576" in done.stdout, (
        done.stdout
    )
    done = run_cli("audit", "--bundle", path)
    assert done.returncode == 1 and "more than a member may have" not in done.stdout


@pytest.mark.parametrize("member", ["runs/demo/grpo/seed0/x.json", "./runs/demo/grpo/seed0/x.json"])
def test_a_member_given_twice_is_refused(good_bundle, tmp_path, member):
    """Two members with one name (also spelled ./name) are refused: the second would replace a checked first."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("runs/demo/grpo/seed0/x.json", member):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
    path = tmp_path / "twice.tar.gz"
    path.write_bytes(gzip.compress(buffer.getvalue()))
    assert audit_bundle(path) == [f"{path}: member {member!r} appears twice: refusing to extract it"]


ODD_NAMES = ["odd\u2028name.jsonl", "odd\u0085name.jsonl", "odd\u2029name.jsonl", "back\\slash.jsonl"]


def test_file_names_with_line_separators_survive_audit_and_bundle(tmp_path):
    """A study whose sealed run files and live logs are named with U+2028, U+0085, U+2029, a backslash (and a line
    feed in a log) passes `audit` and its bundle passes `audit --bundle` (seals and sums read as they are written)."""
    from study_kit import fake_outputs

    from agentrepro.audit.study import audit_study

    root = _complete_study(tmp_path / "root", extra={name: [{"a": 1}] for name in ODD_NAMES})
    (root / "runs" / "demo" / "grpo" / "seed0" / "logs" / "line\nfeed\u2028.log").write_text("live\n")
    fake_outputs(root)
    assert audit_study("demo", root) == []
    path = tmp_path / "odd.tar.gz"
    write_bundle("demo", path, root)
    assert all(f"runs/demo/grpo/seed0/{name}" in tar_members(path) for name in ODD_NAMES)
    assert audit_bundle(path) == []
    record("bundles", "bundle:separators")


def _run_member(members: dict[str, bytes], name: str) -> str:
    return next(m for m in sorted(members) if m.startswith("runs/") and m.endswith("/" + name))


@pytest.mark.parametrize(
    ("member", "reason", "size"),
    [
        ("metrics.jsonl", "checkpoint weights or training state (its hash is in the run's seal)", 10),
        ("command.txt", "an experiment tracker's directory (its numbers are in the run's own files)", 10),
        ("metrics.jsonl", "outside the root directory", 10),
        ("command.txt", "larger than 67108864 bytes", 100),
        ("metrics.jsonl", "not needed", 10),
    ],
)
def test_a_removed_member_excused_by_a_forged_left_out_fails_the_audit(good_bundle, tmp_path, member, reason, size):
    """A run file removed from a resealed bundle and listed in BUNDLE.json's left_out with a reason that does not hold
    for it (or none of the bundle's own): the audit names the entry, and the member is missing."""
    name = _run_member(good_bundle, member)
    members = {k: v for k, v in good_bundle.items() if k != name}
    info = json.loads(members[BUNDLE_JSON])
    members = _with_info(members, left_out=[*info["left_out"], {"path": name, "bytes": size, "reason": reason}])
    problems = audit_bundle(forge_bundle(members, tmp_path / "b.tar.gz"))
    assert any(f"left_out excuses {name!r}" in p for p in problems), problems
    assert any(name in p and "missing" in p for p in problems), problems
