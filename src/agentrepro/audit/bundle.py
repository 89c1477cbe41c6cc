"""`bundle`: everything a reviewer needs in one deterministic .tar.gz, and its offline verification.

Members keep their paths relative to the root (manifests/..., runs/<study>/..., analysis/<study>/...,
reports/<study>/...), so that `audit --bundle` can extract into an empty directory and run the very same
`audit_study` there (the recount included). Added at the top: BUNDLE.json (study slug, the manifest's
root-relative path, lock hash, files left out and why, the audit result at bundling time), BUNDLE.sha256
(sha256sum lines of every other member, in the seal's format: seal.sums_text, read back with seal.read_sums) and,
when the author signs it (`--sign KEY`), BUNDLE.sha256.sig: an OpenSSH signature of BUNDLE.sha256 (audit/sign.py),
checked by every audit of the bundle, against an allowed-signers file when the reviewer gives one. The bundle's
short digest (`sign.digest`, of BUNDLE.sha256) names its content in a paper or a review thread.

Verification stays inside the archive. Each member's header is checked before the member is extracted: a
regular file with a relative path that stays inside, given once, at most `max_file_bytes` (`--max-file-mb`, the
bundle's own default), and together at most `MAX_BUNDLE_BYTES` in `MAX_MEMBERS` members; anything else stops
the verification at that member. BUNDLE.json's study must be a slug and its manifest a relative path inside
the archive (never a path on the verifier's disk); only the members the lock plans are accepted (the
manifest, the lock, the files it hashed, BUNDLE.*, and the study's runs/, analysis/ and reports/ folders);
a file the lock hashed under a path outside the archive is never read (listed as left out, or reported).

Left out: the weights and training state in checkpoints/ (its small text files stay: tokenizers, model and
generation configs), except each run's final checkpoint where its files are small (`CHECKPOINT_BYTES`,
`--checkpoint-mb`: the builtin trainer's, which `audit --bundle --re-eval` plays again), wandb/ directories, and
any file over `max_file_bytes`; they are listed in BUNDLE.json with their size and why, and the audit of a bundle
does not count their absence as a problem.
Symbolic links (and anything reached through one) are never followed: they are left out and listed too,
and `audit --bundle` reports each as a problem, as the audit of the study does.
The archive is deterministic: members sorted, mtime 0, uid/gid 0, no user names, gzip header without a
name or time, so the same study bundles to the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentrepro.audit import sign
from agentrepro.audit.code import code_differences
from agentrepro.audit.failures import failures_of
from agentrepro.audit.reeval import (
    ReEvaluation,
    TaskSample,
    declared_final_step,
    final_checkpoint_files,
    kept_checkpoints,
    re_evaluate,
)
from agentrepro.audit.study import audit_study
from agentrepro.audit.tree import load_object, safe_entry, walk
from agentrepro.bounds import number
from agentrepro.errors import BadInput, shown
from agentrepro.fileio import atomic_binary, sha256_bytes, sha256_file
from agentrepro.layout import SLUG_RE, RunFiles, locate
from agentrepro.lockfile import lock_sha256, read_lock
from agentrepro.reading import load_json
from agentrepro.seal import read_sums, sums_text

BUNDLE_JSON = "BUNDLE.json"
BUNDLE_SHA256 = "BUNDLE.sha256"
BUNDLE_SIG = "BUNDLE.sha256.sig"
TRACKER_DIRS = {"wandb"}
# Files of checkpoints/ that are shipped: a tokenizer and the model's configs, text a reviewer can read and hash.
CHECKPOINT_TEXT = {".json", ".txt", ".model", ".jinja", ".yaml", ".yml"}
MAX_FILE_BYTES = 64 << 20  # a member, packed or accepted (bundle and audit --bundle: --max-file-mb)
# Each run's final checkpoint is shipped where every file of it is at most this (bundle --checkpoint-mb), so that
# `audit --bundle --re-eval` can play it again: the builtin trainer's small models, not a framework's gigabytes.
CHECKPOINT_BYTES = 16 << 20
MAX_BUNDLE_BYTES = 16 << 30  # all members of a bundle together, extracted
MAX_MEMBERS = 1_000_000  # members of a bundle
LINK_REASON = "a symbolic link (never followed: its target could lie outside the study)"
OUTSIDE_REASON = "outside the root directory"
TRACKER_REASON = "an experiment tracker's directory (its numbers are in the run's own files)"
CHECKPOINT_REASON = "checkpoint weights or training state (its hash is in the run's seal)"
SIZE_REASON = re.compile(r"larger than (\d{1,20}) bytes")


def may_leave_out(rel: str, reason: object, size: object) -> bool:
    """Whether `bundle` leaves out `rel` for `reason` (a BUNDLE.json left_out entry, `size` its bytes): the reason is one
    of the bundle's own and holds for that path, so that a forged BUNDLE.json cannot excuse a member it removed."""
    parts = PurePosixPath(rel).parts
    if reason in (LINK_REASON, OUTSIDE_REASON):
        return reason == LINK_REASON or not safe_entry(rel)  # a link is reported by the audit whatever it is
    if reason == TRACKER_REASON:
        return any(part in TRACKER_DIRS for part in parts[:-1])
    if reason == CHECKPOINT_REASON:
        return RunFiles.CHECKPOINTS in parts[:-1] and PurePosixPath(rel).suffix not in CHECKPOINT_TEXT
    bound = SIZE_REASON.fullmatch(reason) if isinstance(reason, str) else None
    return bound is not None and isinstance(size, int) and not isinstance(size, bool) and size > int(bound[1])


def _files_under(top: Path, root: Path) -> list[str]:
    """Root-relative paths of every file and link under `top` (links are listed so that they are left out by name)."""
    tree = walk(top)
    entries = tree.files | tree.links | ({top} if top.is_symlink() else set())
    return sorted(
        p.relative_to(root).as_posix() for p in entries if not (p.name.startswith(".") and p.name.endswith(".tmp"))
    )


def _through_link(root: Path, rel: str) -> bool:
    """Whether `rel` or any folder on its way from `root` is a symbolic link (bundle never follows one)."""
    parts = PurePosixPath(rel).parts
    return any(root.joinpath(*parts[:i]).is_symlink() for i in range(1, len(parts) + 1))


def final_checkpoints(study: str, root: Path, limit: int, lock: dict[str, Any]) -> set[str]:
    """Root-relative paths of the files of each run's final evaluated checkpoint (`Backend.checkpoint(...).weights`:
    what an evaluation reads), for the runs whose every such file is at most `limit` bytes."""
    shipped: set[str] = set()
    for files in final_checkpoint_files(study, root, declared_final_step(lock)).values():
        if files and all(f.stat().st_size <= limit for f in files):
            shipped |= {f.relative_to(root).as_posix() for f in files}
    return shipped


def collect(
    study: str,
    root: str | os.PathLike = ".",
    *,
    max_file_bytes: int = MAX_FILE_BYTES,
    checkpoint_bytes: int = CHECKPOINT_BYTES,
) -> tuple[list[str], list[dict[str, Any]], dict]:
    """(root-relative paths to pack, files left out with reason, the lock). BadInput if the lock is unusable."""
    root = Path(root)
    home = locate(study, root)
    lock = read_lock(home.lock)
    shipped = final_checkpoints(study, root, checkpoint_bytes, lock) if checkpoint_bytes else set()
    candidates = {_manifest_name(home.manifest, root), home.lock.relative_to(root).as_posix()}
    candidates |= set(lock["resolved"]["files"])  # reference and data files, as frozen
    for top in (home.runs, home.analysis, home.reports):
        candidates |= set(_files_under(top, root))
    packed, left_out = [], []
    for rel in sorted(candidates):
        path = root / rel
        if safe_entry(rel) and _through_link(root, rel):
            left_out.append({"path": rel, "bytes": 0, "reason": LINK_REASON})
            continue
        if not path.is_file():
            continue  # audit reports what is missing
        parts = PurePosixPath(rel).parts
        if not safe_entry(rel):
            left_out.append({"path": rel, "bytes": path.stat().st_size, "reason": OUTSIDE_REASON})
        elif any(part in TRACKER_DIRS for part in parts[:-1]):
            left_out.append({"path": rel, "bytes": path.stat().st_size, "reason": TRACKER_REASON})
        elif (
            RunFiles.CHECKPOINTS in parts[:-1]
            and PurePosixPath(rel).suffix not in CHECKPOINT_TEXT
            and rel not in shipped
        ):
            left_out.append({"path": rel, "bytes": path.stat().st_size, "reason": CHECKPOINT_REASON})
        elif path.stat().st_size > max_file_bytes:
            left_out.append(
                {"path": rel, "bytes": path.stat().st_size, "reason": f"larger than {max_file_bytes} bytes"}
            )
        else:
            packed.append(rel)
    return packed, left_out, lock


def add_max_file_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--max-file-mb`, the one bound of a member's size, for `bundle` and `audit --bundle`."""
    parser.add_argument(
        "--max-file-mb",
        type=number(0, 1 << 30, low_open=True),
        default=MAX_FILE_BYTES / (1 << 20),
        help=f"{what} (default: %(default)s)",
    )


def max_file_bytes(args: argparse.Namespace) -> int:
    return int(args.max_file_mb * (1 << 20))


def _manifest_name(manifest: Path, root: Path) -> str:
    """The manifest's path relative to the root (where the bundle keeps it); BadInput when it lies elsewhere."""
    rel = Path(os.path.relpath(manifest.resolve(), root.resolve())).as_posix()
    if not safe_entry(rel):
        raise BadInput(
            f"the manifest lies outside the root directory {root}: a bundle holds the study's manifest", path=manifest
        )
    return rel


def _add(tar: tarfile.TarFile, name: str, fileobj, size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, fileobj)


def write_bundle(
    study: str,
    out: str | os.PathLike,
    root: str | os.PathLike = ".",
    *,
    max_file_bytes: int = MAX_FILE_BYTES,
    key: str | os.PathLike | None = None,
    checkpoint_bytes: int = CHECKPOINT_BYTES,
) -> dict[str, Any]:
    """Write the bundle atomically, signed with the SSH `key` when given; return BUNDLE.json's content with the
    archive's SHA-256, the bundle's short `digest` and, when signed, the key's fingerprint (`signed_by`) added."""
    root = Path(root)
    packed, left_out, lock = collect(study, root, max_file_bytes=max_file_bytes, checkpoint_bytes=checkpoint_bytes)
    home = locate(study, root)
    info = {
        "bundle_version": 1,
        "study": home.name,
        "manifest": _manifest_name(home.manifest, root),
        "lock_sha256": lock_sha256(lock),
        "left_out": left_out,
        "audit_at_bundling": [p.replace(str(root) + os.sep, "") for p in audit_study(study, root)],
    }
    info_bytes = (json.dumps(info, indent=2, sort_keys=True) + "\n").encode("utf-8")
    digests = {rel: sha256_file(root / rel) for rel in packed}
    digests[BUNDLE_JSON] = sha256_bytes(info_bytes)
    sums = sums_text(digests).encode("utf-8")
    signature = (
        sign.sign(sums, key) if key is not None else None
    )  # before anything is written: a refused key costs nothing
    out = Path(out)
    with atomic_binary(out) as raw:  # streamed file by file, then renamed: a killed bundle never looks complete
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
                _add(tar, BUNDLE_SHA256, io.BytesIO(sums), len(sums))
                if signature is not None:
                    _add(tar, BUNDLE_SIG, io.BytesIO(signature), len(signature))
                for name in sorted(digests):
                    if name == BUNDLE_JSON:
                        _add(tar, name, io.BytesIO(info_bytes), len(info_bytes))
                        continue
                    with open(root / name, "rb") as fh:
                        _add(tar, name, fh, os.fstat(fh.fileno()).st_size)
    return {
        **info,
        "files": len(digests),
        "sha256": sha256_file(out),
        "digest": sign.digest(sums),
        "signed_by": sign.fingerprint(key) if key is not None else None,
    }


def _extract(bundle: Path, into: Path, max_file_bytes: int) -> list[str]:
    """Extract the members, each header checked before its member is written (plain file, relative path inside,
    given once, within the bounds); problems stop here (an unsafe or unreadable archive)."""
    seen: set[str] = set()
    total = 0
    try:
        with tarfile.open(bundle, mode="r:gz") as tar:
            for member in tar:
                name = PurePosixPath(member.name).as_posix()
                total += member.size
                refused = (
                    "is not a plain file with a relative path inside the bundle"
                    if not member.isfile() or not safe_entry(member.name)
                    else "appears twice"
                    if name in seen
                    else f"is {member.size:,} bytes, more than a member may have ({max_file_bytes:,}; --max-file-mb)"
                    if member.size > max_file_bytes
                    else f"takes the members past {MAX_BUNDLE_BYTES:,} bytes together"
                    if total > MAX_BUNDLE_BYTES
                    else f"is past the {MAX_MEMBERS:,} members a bundle may have"
                    if len(seen) >= MAX_MEMBERS
                    else None
                )
                if refused:
                    return [f"{bundle}: member {member.name!r} {refused}: refusing to extract it"]
                seen.add(name)
                target = into / name
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None  # a plain file: refused above otherwise
                with source as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        return [f"{bundle}: unreadable or corrupted archive ({type(exc).__name__}: {exc})"]
    return []


def _bundle_info(bundle: Path, root: Path) -> tuple[dict[str, Any] | None, str]:
    """(BUNDLE.json with `manifest` filled in, "") or (None, the problem): the study a slug, its manifest a
    relative path inside the archive, `left_out` a list of objects with string paths."""
    try:
        info = load_json(root / BUNDLE_JSON)
        study = info["study"]
        manifest = info.get("manifest", f"manifests/{study}.yaml")
        left_out = info.get("left_out", [])
        if not isinstance(study, str) or not SLUG_RE.match(study):
            raise ValueError(f"study {study!r} is not a study slug (letters, digits, '.', '_', '-')")
        if not isinstance(manifest, str) or not safe_entry(manifest) or not manifest.endswith((".yaml", ".yml")):
            raise ValueError(f"manifest {manifest!r} is not a .yaml path inside the bundle")
        if PurePosixPath(manifest).stem != study:
            raise ValueError(f"manifest {manifest!r} is not the manifest of study {study!r}")
        if not isinstance(left_out, list) or not all(
            isinstance(e, dict) and isinstance(e.get("path"), str) for e in left_out
        ):
            raise ValueError("left_out must list objects with a string path")
    except (BadInput, AttributeError, KeyError, TypeError, ValueError) as exc:
        return None, f"{bundle}:{BUNDLE_JSON}: unreadable or unsafe ({type(exc).__name__}: {exc})"
    return {**info, "manifest": manifest, "left_out": left_out}, ""


def _planned(root: Path, info: dict[str, Any], lock: dict[str, Any] | None) -> tuple[set[str], tuple[str, ...]]:
    """(member names, folder prefixes) the lock plans: BUNDLE.*, the manifest, the lock, the files the lock hashed,
    and everything under the study's runs/, analysis/ and reports/ (the audit checks what lies there)."""
    home = locate(root / info["manifest"], root)
    names = {BUNDLE_JSON, BUNDLE_SHA256, BUNDLE_SIG, info["manifest"], home.lock.relative_to(root).as_posix()}
    files = ((lock or {}).get("resolved") or {}).get("files") or {}
    names |= {rel for rel in (files if isinstance(files, dict) else {}) if isinstance(rel, str)}
    folders = tuple(f"{top.relative_to(root).as_posix()}/" for top in (home.runs, home.analysis, home.reports))
    return names, folders


@dataclass
class Verification:
    """What `verify_bundle` found: problems (one line each), the bundle's short digest, and its signature in words."""

    problems: list[str]
    digest: str | None = None
    signature: str = "not signed"
    differences: list[str] = field(default_factory=list)  # jobs that ran other code than the lock names (audit/code.py)
    failures: list[str] = field(default_factory=list)  # the study's own, when its files all match (audit/failures.py)
    re_evaluation: ReEvaluation | None = None  # with re_eval: what was played again (audit/reeval.py)
    kept: tuple[int, int] = (0, 0)  # runs whose final checkpoint the bundle ships, of all runs


def _signature(bundle: Path, root: Path, sums: bytes, allowed_signers) -> tuple[list[str], str]:
    """(problems, words) of the bundle's signature: checked whenever present; required when an allowed-signers file is given."""
    sig = root / BUNDLE_SIG
    if not sig.is_file():
        return (
            [f"{bundle}: not signed, but an allowed-signers file was given: a signed bundle was expected"]
            if allowed_signers is not None
            else []
        ), "not signed"
    problem, words = sign.check(sums, sig.read_bytes(), allowed_signers)
    return ([f"{bundle}:{BUNDLE_SIG}: {problem}"] if problem else []), words


def audit_bundle(
    bundle: str | os.PathLike,
    *,
    require: str = "report",
    max_file_bytes: int = MAX_FILE_BYTES,
    allowed_signers: str | os.PathLike | None = None,
) -> list[str]:
    """The problems `verify_bundle` finds (an empty list: the bundle is intact)."""
    return verify_bundle(
        bundle, require=require, max_file_bytes=max_file_bytes, allowed_signers=allowed_signers
    ).problems


def verify_bundle(
    bundle: str | os.PathLike,
    *,
    require: str = "report",
    max_file_bytes: int = MAX_FILE_BYTES,
    allowed_signers: str | os.PathLike | None = None,
    re_eval: bool = False,
    sample: TaskSample | None = None,
) -> Verification:
    """Verify a bundle offline: every member against BUNDLE.sha256 and the lock's plan, its signature (when present,
    or required by `allowed_signers`), then `audit_study` on the extracted copy; with `re_eval`, each run's final
    outcomes played again from the shipped checkpoints (on the whole panel or `sample`). Nothing outside the archive is
    read."""
    bundle = Path(bundle)
    if not bundle.is_file():
        raise BadInput("bundle not found", path=bundle)
    with tempfile.TemporaryDirectory(prefix="agentrepro-bundle-") as tmp:
        root = Path(tmp)
        found = _extract(bundle, root, max_file_bytes)
        if found:
            return Verification(found)
        sums = root / BUNDLE_SHA256
        if not sums.is_file():
            return Verification([f"{bundle}: no {BUNDLE_SHA256}: not an agentrepro bundle"])
        try:
            listed = read_sums(sums)
        except BadInput as exc:
            return Verification([f"{bundle}: {BUNDLE_SHA256}: unreadable ({exc})"])
        result = Verification(found, sign.digest(sums.read_bytes()))  # `found` is result.problems from here on
        problems, result.signature = _signature(bundle, root, sums.read_bytes(), allowed_signers)
        found += problems
        for name, digest in sorted(listed.items()):
            path = root / name
            if not safe_entry(name):
                found.append(f"{bundle}: {BUNDLE_SHA256} lists {name!r}, a path outside the bundle")
            elif not path.is_file():
                found.append(f"{bundle}:{name}: missing (listed in {BUNDLE_SHA256})")
            elif sha256_file(path) != digest:
                found.append(f"{bundle}:{name}: changed (its hash differs from {BUNDLE_SHA256})")
        members = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
        for name in sorted(members - set(listed) - {BUNDLE_SHA256, BUNDLE_SIG}):
            found.append(f"{bundle}:{name}: not listed in {BUNDLE_SHA256}")
        info, problem = _bundle_info(bundle, root)
        if info is None:
            found.append(problem)
            return result
        lock, _ = load_object(
            locate(root / info["manifest"], root).lock
        )  # an unreadable lock is audit_study's to report
        names, folders = _planned(root, info, lock)
        found += [
            f"{bundle}:{name}: not a file the lock plans: refused"
            for name in sorted(members)
            if name not in names and not name.startswith(folders)
        ]
        left_out = {entry["path"]: entry.get("reason") for entry in info["left_out"]}
        for entry in info["left_out"]:
            if not may_leave_out(entry["path"], entry.get("reason"), entry.get("bytes")):
                found.append(
                    f"{bundle}:{BUNDLE_JSON}: left_out excuses {entry['path']!r} ({shown(entry.get('reason'))}), which "
                    "the bundle packs: a member removed, or a forged list"
                )
                left_out.pop(entry["path"], None)
        not_bundled = set(left_out)
        for rel in sorted(names - {BUNDLE_JSON, BUNDLE_SHA256, BUNDLE_SIG}):
            if not safe_entry(rel):  # a path the lock hashed outside the archive: never read
                not_bundled.add(rel)
                if left_out.get(rel) != OUTSIDE_REASON:
                    found.append(
                        f"{bundle}:{BUNDLE_JSON}: the lock hashes {rel!r}, outside the bundle, and it is not listed as left out"
                    )
        found += [
            f"{bundle}:{path}: {LINK_REASON}, left out of the bundle"
            for path, why in left_out.items()
            if why == LINK_REASON
        ]
        prefix = str(root) + os.sep
        for problem in audit_study(str(root / info["manifest"]), root, require=require, not_bundled=not_bundled):
            found.append(problem.replace(prefix, f"{bundle}:"))
        result.differences = code_differences(str(root / info["manifest"]), root)
        result.kept = kept_checkpoints(str(root / info["manifest"]), root)
        if re_eval:
            replay = re_evaluate(str(root / info["manifest"]), root, sample=sample)
            found += [f"{bundle}:{line}" for line in replay.problems]
            replay.lines = [f"{bundle}:{line}" for line in replay.lines]
            result.re_evaluation = replay
        if not found:
            result.failures = failures_of(str(root / info["manifest"]), root)
        return result
