"""The seal of a directory of outputs (docs/design.md §3.3): OUTPUTS.sha256, written last.

`write_outputs_manifest` hashes every file under a directory (except the seal itself, temporary files of
atomic writes and live logs) into OUTPUTS.sha256 in sha256sum format; `verify_outputs` re-hashes and lists
every difference. An evaluation writes its own seal inside eval/step<N>/, so that evaluations of different
checkpoints can run at the same time: a nested seal belongs to its own directory.
"""

from __future__ import annotations

import os
import re
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
        if rel.name == OUTPUTS or (rel.name.startswith(".") and rel.name.endswith(".tmp")):
            continue
        if rel.parts[0] in exclude_dirs:
            continue
        files.append(path)
    return files


def sums_text(entries: dict[str, str]) -> str:
    """sha256sum lines (`<sha256>  <path>`, sorted by path) of {path: digest}, as GNU sha256sum writes them: a
    path holding a backslash, a line feed or a carriage return is escaped (`\\\\`, `\\n`, `\\r`) on a line that
    starts with a backslash. Lines end with a line feed only, and nothing else ends a line (U+2028 is a character
    of a name), so `read_sums` reads back exactly these paths."""
    lines = []
    for rel, digest in sorted(entries.items()):
        escaped = rel.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        mark = "\\" if escaped != rel else ""
        lines.append(f"{mark}{digest}  {escaped}\n")
    return "".join(lines)


def read_sums(path: str | os.PathLike) -> dict[str, str]:
    """{path: digest} of a file in `sums_text`'s format; BadInput naming the line of anything else."""
    path = Path(path)
    entries: dict[str, str] = {}
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        escaped = line.startswith("\\")
        digest, sep, rel = line[escaped:].partition("  ")
        if not sep or len(digest) != 64:
            raise BadInput("expected '<sha256>  <path>'", path=path, where=f"line {number}")
        entries[_unescape(rel) if escaped else rel] = digest
    return entries


def _unescape(rel: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), rel)


def write_outputs_manifest(root: str | os.PathLike, *, exclude_dirs: set[str] | None = None) -> Path:
    """Hash every file under `root` into `root`/OUTPUTS.sha256 (`sums_text`)."""
    root = Path(root)
    exclude = _UNSEALED_DIRS | set(exclude_dirs or ())
    return atomic_write_text(
        root / OUTPUTS, sums_text({p.relative_to(root).as_posix(): sha256_file(p) for p in _sealable(root, exclude)})
    )


read_outputs_manifest = read_sums  # an OUTPUTS.sha256 is one such file


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


STUDY_MANIFEST = re.compile(rb"(?m)^study:")  # a manifest's first key names its study


def refuse_study_file(path: str | os.PathLike, *, option: str | None = None) -> Path:
    """Refuse, before any work, an output path that is a file of a study: inside a sealed folder (its seal would no
    longer hold), a lock, or a manifest. Verbs whose output is never part of a study call it (bundle, advantages,
    gae); BadInput names the option."""
    target = Path(path).absolute()
    for folder in target.parents:
        if (folder / OUTPUTS).is_file():
            raise BadInput(
                f"is inside {folder}, a sealed folder of a study: writing there would break its seal",
                path=path,
                where=option,
            )
    if target.is_file():
        if target.name.endswith(".lock.json"):
            raise BadInput("is a study's lock: choose another output", path=path, where=option)
        if target.suffix in (".yaml", ".yml"):
            with open(target, "rb") as fh:
                if STUDY_MANIFEST.search(fh.read(1 << 16)):
                    raise BadInput("is a study's manifest: choose another output", path=path, where=option)
    return Path(path)
