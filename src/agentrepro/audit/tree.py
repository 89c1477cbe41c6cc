"""What a study's output trees hold, read without following a single link, and whether each seal covers its directory.

* `walk(top) -> Tree`: every file, directory and symbolic link under `top` (links are listed, never followed:
  a sealed link could point anywhere, and hashing it would vouch for a file outside the study).
* `check_seal(unit, tree, own=...)`: the OUTPUTS.sha256 of one sealed directory must list exactly the
  directory's own files (not nested sealed directories, live logs, temporary files or Snakemake's marker),
  each with its current hash: missing, changed, extra (written after sealing) and paths outside the
  directory are each reported.
* `read_seal(seal)` / `load_object(path)`: a seal's entries or a JSON object, or one problem line when the file is
  malformed, unreadable or of the wrong shape (never an exception).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_file
from agentrepro.layout import RunFiles
from agentrepro.reading import load_json
from agentrepro.seal import OUTPUTS, read_outputs_manifest

EXAMPLES = 3  # per kind of problem per file, so that one bad file does not drown the others
# Snakemake touches this marker inside every directory() output after the job, i.e. after the seal.
SNAKEMAKE_MARKER = ".snakemake_timestamp"
UNSEALED_DIR = RunFiles.LOGS  # a unit's live logs (seal.write_outputs_manifest leaves them out)


@dataclass
class Tree:
    """Everything under one directory: plain files, real directories and links (to files, directories or nothing)."""

    top: Path
    files: set[Path] = field(default_factory=set)
    dirs: set[Path] = field(default_factory=set)
    links: set[Path] = field(default_factory=set)


def walk(top: Path) -> Tree:
    """List `top` recursively without following links (an absent `top`, or `top` itself a link, gives an empty tree)."""
    tree = Tree(top)
    if top.is_symlink() or not top.is_dir():
        return tree
    for current, dirnames, filenames in os.walk(top, followlinks=False):
        here = Path(current)
        for name in dirnames:
            (tree.links if (here / name).is_symlink() else tree.dirs).add(here / name)
        for name in filenames:
            path = here / name
            if path.is_symlink():
                tree.links.add(path)
            elif path.is_file():
                tree.files.add(path)
            else:
                tree.links.add(path)  # a fifo, socket or device: never hashed, reported like a link
    return tree


def link_problem(path: Path) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        return f"{path}: not a regular file or directory: the audit never reads it and bundle never ships it"
    return f"{path}: a symbolic link (to {target}): the audit never follows links and bundle never ships them"


def unsealable(rel: PurePosixPath) -> bool:
    """Files no seal lists: a unit's live logs, temporary files of atomic writes, Snakemake's marker."""
    return (
        (len(rel.parts) > 1 and rel.parts[0] == UNSEALED_DIR)
        or (rel.name.startswith(".") and rel.name.endswith(".tmp"))
        or rel.name == SNAKEMAKE_MARKER
    )


def safe_entry(rel: str) -> bool:
    """Whether a path listed in a seal or record stays inside its directory (relative, no `..`)."""
    path = PurePosixPath(rel)
    return bool(rel) and not path.is_absolute() and ".." not in path.parts


def read_seal(seal: Path) -> tuple[dict[str, str] | None, str]:
    """(entries, "") or (None, one problem line) for a malformed, undecodable or unreadable seal."""
    try:
        return read_outputs_manifest(seal), ""
    except BadInput as exc:
        return None, str(exc)
    except UnicodeDecodeError:
        return None, f"{seal}: not UTF-8 text: expected '<sha256>  <path>' lines"
    except OSError as exc:
        return None, f"{seal}: unreadable ({exc.strerror or exc})"


def load_object(path: Path) -> tuple[dict[str, Any] | None, str]:
    """(object, "") or (None, one problem line) for a JSON file that is malformed, unreadable or not an object."""
    try:
        doc = load_json(path)
    except BadInput as exc:
        return None, str(exc)
    except (UnicodeDecodeError, OSError) as exc:
        return None, f"{path}: unreadable ({type(exc).__name__})"
    if not isinstance(doc, dict):
        return None, f"{path}: expected a JSON object, got {type(doc).__name__}"
    return doc, ""


def own_files(unit: Path, tree: Tree, nested: Callable[[PurePosixPath], bool] = lambda rel: False) -> dict[str, Path]:
    """The files `unit`'s seal must list, by relative path: all files under it except the seal, unsealable files and
    files for which `nested(rel)` is true (they belong to a nested sealed directory)."""
    found = {}
    inside = f"{unit}{os.sep}"
    for path in tree.files:
        if not str(path).startswith(inside):
            continue
        rel = PurePosixPath(path.relative_to(unit).as_posix())
        if str(rel) == OUTPUTS or unsealable(rel) or nested(rel):
            continue
        found[str(rel)] = path
    return found


def check_seal(
    unit: Path,
    tree: Tree,
    *,
    nested: Callable[[PurePosixPath], bool] = lambda rel: False,
    not_bundled: Set[Path] = frozenset(),
    why_missing: str = "unfinished or never sealed",
) -> list[str]:
    """Problems of one sealed directory: no seal, a malformed seal, and every file missing, changed, extra or outside it."""
    seal = unit / OUTPUTS
    if seal in tree.links:
        return []  # reported as a link
    if seal not in tree.files:
        return [f"{unit}: no {OUTPUTS}: {why_missing}, so its files cannot be vouched for"]
    entries, problem = read_seal(seal)
    if entries is None:
        return [problem]
    own = own_files(unit, tree, nested)
    found: list[str] = []
    for rel, digest in sorted(entries.items()):
        if not safe_entry(rel):
            found.append(f"{seal}: lists {rel!r}, a path outside its directory")
            continue
        file = unit / rel
        if file in not_bundled or (tree.links and (file in tree.links or any(p in tree.links for p in file.parents))):
            continue  # left out of a bundle on purpose, or a link (reported as such)
        if rel not in own:
            found.append(
                f"{file}: missing (listed in {seal})"
                if not file.exists()
                else f"{file}: listed in {seal}, but it belongs to a nested sealed directory or to the live logs"
            )
        elif sha256_file(file) != digest:
            found.append(f"{file}: changed after it was sealed in {seal}")
    extra = sorted(rel for rel in own if rel not in entries)
    if extra:
        more = f" and {len(extra) - EXAMPLES} more" if len(extra) > EXAMPLES else ""
        found.append(
            f"{unit}: {len(extra)} file(s) not listed in its {OUTPUTS} (written after sealing?): {', '.join(extra[:EXAMPLES])}{more}"
        )
    return found
