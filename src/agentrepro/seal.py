"""The seal of a directory of outputs (docs/design.md §3.3): OUTPUTS.sha256, written last.

`write_outputs_manifest` hashes every file under a directory (except the seal itself, temporary files of
atomic writes and live logs) into OUTPUTS.sha256 in sha256sum format; `verify_outputs` re-hashes and lists
every difference. An evaluation writes its own seal inside eval/step<N>/, so that evaluations of different
checkpoints can run at the same time: a nested seal belongs to its own directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text, sha256_file
from agentrepro.layout import RunFiles
from agentrepro.reading import read_lines

OUTPUTS = RunFiles.OUTPUTS
# Never sealed: live logs (and, below, the seal itself and temporary files of atomic writes).
_UNSEALED_DIRS = {RunFiles.LOGS}


def _sealable(root: Path, exclude_dirs: set[str]) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(root)
        if rel.name == OUTPUTS and rel.parent != Path("."):
            continue  # a nested seal (eval/step<N>/) belongs to its own directory
        if rel.name == OUTPUTS or rel.name.startswith(".") and rel.name.endswith(".tmp"):
            continue
        if rel.parts[0] in exclude_dirs:
            continue
        files.append(path)
    return files


def write_outputs_manifest(root: str | os.PathLike, *, exclude_dirs: set[str] | None = None) -> Path:
    """Hash every file under `root` into `root`/OUTPUTS.sha256 (sha256sum format, sorted paths)."""
    root = Path(root)
    exclude = _UNSEALED_DIRS | set(exclude_dirs or ())
    lines = [f"{sha256_file(p)}  {p.relative_to(root).as_posix()}\n" for p in _sealable(root, exclude)]
    return atomic_write_text(root / OUTPUTS, "".join(lines))


def read_outputs_manifest(path: str | os.PathLike) -> dict[str, str]:
    path = Path(path)
    entries: dict[str, str] = {}
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64:
            raise BadInput("expected '<sha256>  <path>'", path=path, where=f"line {number}")
        entries[rel] = digest
    return entries


def verify_outputs(seal: str | os.PathLike) -> list[str]:
    """Problems with the files a seal lists: changed, missing. One message per problem, with the path."""
    seal = Path(seal)
    root = seal.parent
    problems = []
    for rel, digest in read_outputs_manifest(seal).items():
        path = root / rel
        if not path.is_file():
            problems.append(f"{path}: missing (listed in {seal})")
        elif sha256_file(path) != digest:
            problems.append(f"{path}: changed after it was sealed in {seal}")
    return problems
