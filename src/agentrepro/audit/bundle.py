"""`bundle`: everything a reviewer needs in one deterministic .tar.gz, and its offline verification.

Members keep their paths relative to the root (manifests/..., runs/<study>/..., analysis/<study>/...,
reports/<study>/...), so that `audit --bundle` can extract into an empty directory and run the very same
`audit_study` there (the recount included). Added at the top: BUNDLE.json (study, lock hash, files left out and
why, the audit result at bundling time), BUNDLE.sha256 (sha256sum lines of every other member) and, when the
author signs it (`--sign KEY`), BUNDLE.sha256.sig: an OpenSSH signature of BUNDLE.sha256 (audit/sign.py), checked
by every audit of the bundle, against an allowed-signers file when the reviewer gives one. The bundle's short
digest (`sign.digest`, of BUNDLE.sha256) names its content in a paper or a review thread.

Left out: the weights and training state in checkpoints/ (its small text files stay: tokenizers, model and
generation configs), wandb/ directories, and any file over `max_file_bytes`; they are listed in BUNDLE.json
with their size and why, and the audit of a bundle does not count their absence as a problem.
Symbolic links (and anything reached through one) are never followed: they are left out and listed too,
and `audit --bundle` reports each as a problem, as the audit of the study does.
The archive is deterministic: members sorted, mtime 0, uid/gid 0, no user names, gzip header without a
name or time, so the same study bundles to the same bytes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_binary, load_json, sha256_bytes, sha256_file
from agentrepro.audit import sign
from agentrepro.audit.study import audit_study
from agentrepro.audit.tree import walk
from agentrepro.layout import RunFiles, locate
from agentrepro.manifest.lock import lock_sha256, read_lock
from agentrepro.reading import read_lines

BUNDLE_JSON = "BUNDLE.json"
BUNDLE_SHA256 = "BUNDLE.sha256"
BUNDLE_SIG = "BUNDLE.sha256.sig"
TRACKER_DIRS = {"wandb"}
# Files of checkpoints/ that are shipped: a tokenizer and the model's configs, text a reviewer can read and hash.
CHECKPOINT_TEXT = {".json", ".txt", ".model", ".jinja", ".yaml", ".yml"}
MAX_FILE_BYTES = 64 << 20
LINK_REASON = "a symbolic link (never followed: its target could lie outside the study)"


def _files_under(top: Path, root: Path) -> list[str]:
    """Root-relative paths of every file and link under `top` (links are listed so that they are left out by name)."""
    tree = walk(top)
    entries = tree.files | tree.links | ({top} if top.is_symlink() else set())
    return sorted(p.relative_to(root).as_posix() for p in entries if not (p.name.startswith(".") and p.name.endswith(".tmp")))


def _through_link(root: Path, rel: str) -> bool:
    """Whether `rel` or any folder on its way from `root` is a symbolic link (bundle never follows one)."""
    parts = PurePosixPath(rel).parts
    return any(root.joinpath(*parts[:i]).is_symlink() for i in range(1, len(parts) + 1))


def collect(study: str, root: str | os.PathLike = ".", *, max_file_bytes: int = MAX_FILE_BYTES) -> tuple[list[str], list[dict[str, Any]], dict]:
    """(root-relative paths to pack, files left out with reason, the lock). BadInput if the lock is unusable."""
    root = Path(root)
    home = locate(study, root)
    mpath = home.manifest
    lock = read_lock(home.lock)
    candidates = {mpath.relative_to(root).as_posix(), home.lock.relative_to(root).as_posix()}
    candidates |= set(lock["resolved"]["files"])  # reference and data files, as frozen
    for top in (home.runs, home.analysis, home.reports):
        candidates |= set(_files_under(top, root))
    packed, left_out = [], []
    for rel in sorted(candidates):
        path = root / rel
        if _safe_name(rel) and _through_link(root, rel):
            left_out.append({"path": rel, "bytes": 0, "reason": LINK_REASON})
            continue
        if not path.is_file():
            continue  # audit reports what is missing
        parts = PurePosixPath(rel).parts
        if not _safe_name(rel):
            left_out.append({"path": rel, "bytes": path.stat().st_size, "reason": "outside the root directory"})
        elif any(part in TRACKER_DIRS for part in parts[:-1]):
            left_out.append({"path": rel, "bytes": path.stat().st_size, "reason": "an experiment tracker's directory (its numbers are in the run's own files)"})
        elif RunFiles.CHECKPOINTS in parts[:-1] and PurePosixPath(rel).suffix not in CHECKPOINT_TEXT:
            left_out.append({"path": rel, "bytes": path.stat().st_size, "reason": "checkpoint weights or training state (its hash is in the run's seal)"})
        elif path.stat().st_size > max_file_bytes:
            left_out.append({"path": rel, "bytes": path.stat().st_size, "reason": f"larger than {max_file_bytes} bytes"})
        else:
            packed.append(rel)
    return packed, left_out, lock


def _add(tar: tarfile.TarFile, name: str, fileobj, size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, fileobj)


def write_bundle(study: str, out: str | os.PathLike, root: str | os.PathLike = ".", *, max_file_bytes: int = MAX_FILE_BYTES,
                 key: str | os.PathLike | None = None) -> dict[str, Any]:
    """Write the bundle atomically, signed with the SSH `key` when given; return BUNDLE.json's content with the
    archive's SHA-256, the bundle's short `digest` and, when signed, the key's fingerprint (`signed_by`) added."""
    root = Path(root)
    packed, left_out, lock = collect(study, root, max_file_bytes=max_file_bytes)
    info = {"bundle_version": 1, "study": study, "lock_sha256": lock_sha256(lock), "left_out": left_out,
            "audit_at_bundling": [p.replace(str(root) + os.sep, "") for p in audit_study(study, root)]}
    info_bytes = (json.dumps(info, indent=2, sort_keys=True) + "\n").encode("utf-8")
    digests = {rel: sha256_file(root / rel) for rel in packed}
    digests[BUNDLE_JSON] = sha256_bytes(info_bytes)
    sums = "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items())).encode("utf-8")
    signature = sign.sign(sums, key) if key is not None else None   # before anything is written: a refused key costs nothing
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
    return {**info, "files": len(digests), "sha256": sha256_file(out), "digest": sign.digest(sums),
            "signed_by": sign.fingerprint(key) if key is not None else None}


def _safe_name(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def _extract(bundle: Path, into: Path) -> list[str]:
    """Extract regular files only; return problems (an unsafe or unreadable archive stops here)."""
    try:
        with tarfile.open(bundle, mode="r:gz") as tar:
            for member in tar:
                if not member.isfile() or not _safe_name(member.name):
                    return [f"{bundle}: member {member.name!r} is not a plain file with a relative path: refusing to extract"]
                target = into / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        return [f"{bundle}: unreadable or corrupted archive ({type(exc).__name__}: {exc})"]
    return []


@dataclass
class Verification:
    """What `verify_bundle` found: problems (one line each), the bundle's short digest, and its signature in words."""

    problems: list[str]
    digest: str | None = None
    signature: str = "not signed"


def _signature(bundle: Path, root: Path, sums: bytes, allowed_signers) -> tuple[list[str], str]:
    """(problems, words) of the bundle's signature: checked whenever present; required when an allowed-signers file is given."""
    sig = root / BUNDLE_SIG
    if not sig.is_file():
        return ([f"{bundle}: not signed, but an allowed-signers file was given: a signed bundle was expected"]
                if allowed_signers is not None else []), "not signed"
    problem, words = sign.check(sums, sig.read_bytes(), allowed_signers)
    return ([f"{bundle}:{BUNDLE_SIG}: {problem}"] if problem else []), words


def audit_bundle(bundle: str | os.PathLike, *, require: str = "report", allowed_signers: str | os.PathLike | None = None) -> list[str]:
    """The problems `verify_bundle` finds (an empty list: the bundle is intact)."""
    return verify_bundle(bundle, require=require, allowed_signers=allowed_signers).problems


def verify_bundle(bundle: str | os.PathLike, *, require: str = "report", allowed_signers: str | os.PathLike | None = None) -> Verification:
    """Verify a bundle offline: every member against BUNDLE.sha256, its signature (when present, or required by
    `allowed_signers`), then `audit_study` on the extracted copy."""
    bundle = Path(bundle)
    if not bundle.is_file():
        raise BadInput("bundle not found", path=bundle)
    with tempfile.TemporaryDirectory(prefix="agentrepro-bundle-") as tmp:
        root = Path(tmp)
        found = _extract(bundle, root)
        if found:
            return Verification(found)
        sums = root / BUNDLE_SHA256
        if not sums.is_file():
            return Verification([f"{bundle}: no {BUNDLE_SHA256}: not an agentrepro bundle"])
        listed = {}
        try:
            sum_lines = read_lines(sums)
        except BadInput as exc:
            return Verification([f"{bundle}: {BUNDLE_SHA256}: unreadable ({exc})"])
        for number, line in enumerate(sum_lines, start=1):
            digest, sep, name = line.partition("  ")
            if not sep or len(digest) != 64:
                return Verification([f"{bundle}: {BUNDLE_SHA256}: line {number}: expected '<sha256>  <path>'"])
            listed[name] = digest
        result = Verification(found, sign.digest(sums.read_bytes()))   # `found` is result.problems from here on
        problems, result.signature = _signature(bundle, root, sums.read_bytes(), allowed_signers)
        found += problems
        for name, digest in sorted(listed.items()):
            path = root / name
            if not path.is_file():
                found.append(f"{bundle}:{name}: missing (listed in {BUNDLE_SHA256})")
            elif sha256_file(path) != digest:
                found.append(f"{bundle}:{name}: changed (its hash differs from {BUNDLE_SHA256})")
        members = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
        for name in sorted(members - set(listed) - {BUNDLE_SHA256, BUNDLE_SIG}):
            found.append(f"{bundle}:{name}: not listed in {BUNDLE_SHA256}")
        try:
            info = load_json(root / BUNDLE_JSON)
            study = info["study"]
            left_out = {entry["path"] for entry in info.get("left_out", [])}
            if not isinstance(study, str) or not all(isinstance(p, str) for p in left_out):
                raise TypeError("study and left_out paths must be strings")
        except (BadInput, AttributeError, KeyError, TypeError) as exc:
            found.append(f"{bundle}:{BUNDLE_JSON}: unreadable ({type(exc).__name__}: {exc})")
            return result
        found += [f"{bundle}:{entry.get('path')}: {LINK_REASON}, left out of the bundle"
                  for entry in info.get("left_out", []) if entry.get("reason") == LINK_REASON]
        prefix = str(root) + os.sep
        for problem in audit_study(study, root, require=require, not_bundled=left_out):
            found.append(problem.replace(prefix, f"{bundle}:"))
        return result
