"""The links of the audit's chain above the runs: the analysis read these runs, the report shows this analysis.

* `check_analysis(analysis_dir, ...)`: analysis.json is an object whose `provenance` carries the lock hash and,
  for every planned method × seed and nothing else, the hash of every sealed file of the run it read
  (`outputs`, docs/internals.md "Analysis → report"); each must equal what the run's seals say now. An
  outcomes or metrics file edited and re-sealed after the analysis is caught here.
* `check_report(report_dir, analysis_dir)`: the report's REPORT_ANALYSIS_RECORD (sealed with the report) lists
  every file of the analysis directory, its seal included, with the hash it had when the report was
  rendered; each must equal the file now. An analysis edited and re-sealed after the report is caught here.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentrepro import layout
from agentrepro.audit.tree import EXAMPLES, Tree, load_object, read_seal, safe_entry
from agentrepro.fileio import sha256_file
from agentrepro.seal import OUTPUTS

ANALYSIS_JSON = "analysis.json"


def sealed_entries(run: Path, tree: Tree, root: Path) -> tuple[dict[str, str], set[str]]:
    """({root-relative path: sha256} of every readable seal under one run directory, as analyze records it; the
    root-relative directories whose seal is readable)."""
    out: dict[str, str] = {}
    readable: set[str] = set()
    inside = f"{run}{os.sep}"
    for seal in sorted(p for p in tree.files if p.name == OUTPUTS and str(p).startswith(inside)):
        entries, _ = read_seal(seal)
        if entries is None:
            continue  # reported by the seal check
        prefix = seal.parent.relative_to(root).as_posix()
        readable.add(prefix)
        out.update({f"{prefix}/{rel}": digest for rel, digest in entries.items() if safe_entry(rel)})
    return out, readable


def _unit(rel: str, run: str) -> str:
    """The sealed directory a run file belongs to: eval/step<N>/ for evaluations, else the run directory."""
    parts = rel[len(run) + 1 :].split("/")
    return f"{run}/eval/{parts[1]}" if len(parts) > 2 and parts[0] == "eval" else run


def _compare(recorded: dict[str, str], current: dict[str, str], root: Path, *, source: Path, reader: str) -> list[str]:
    """One line per differing file, at most EXAMPLES per kind, then one line counting the rest of that kind."""
    kinds: dict[str, list[str]] = {"gone": [], "added": [], "changed": []}
    for rel in sorted(set(recorded) | set(current)):
        was, now = recorded.get(rel), current.get(rel)
        if was == now:
            continue
        if now is None:
            kinds["gone"].append(
                f"{root / rel}: {source} records it, but no seal lists it now: deleted, or re-sealed out of chain"
            )
        elif was is None:
            kinds["added"].append(
                f"{root / rel}: sealed, but not recorded in {source}: added after {reader} ran, or re-sealed out of chain"
            )
        else:
            kinds["changed"].append(
                f"{root / rel}: {source} records {str(was)[:12]}, its seal now says {now[:12]}: "
                f"changed and re-sealed after {reader} read it"
            )
    found = []
    for kind, lines in kinds.items():
        found += lines[:EXAMPLES]
        if len(lines) > EXAMPLES:
            found.append(f"{source}: and {len(lines) - EXAMPLES} more file(s) {kind} since {reader} read them")
    return found


def check_analysis(
    analysis_dir: Path,
    *,
    root: Path,
    lock_hash: str | None,
    planned: set[tuple[str, int]],
    runs: dict[tuple[str, int], Path],
    tree: Tree,
) -> list[str]:
    """Problems of the analysis → runs link (see the module docstring). `runs`: the run directories on disk;
    `tree`: the walk of runs/<study>."""
    path = analysis_dir / ANALYSIS_JSON
    if not path.is_file() or path.is_symlink():
        return [] if path.is_symlink() else [f"{path}: missing: nothing says which runs the analysis read"]
    doc, problem = load_object(path)
    if doc is None:
        return [problem]
    prov = doc.get("provenance")
    if not isinstance(prov, dict):
        return [f"{path}: provenance: expected an object, got {type(prov).__name__}"]
    found = []
    if lock_hash is not None and prov.get("lock_sha256") != lock_hash:
        found.append(
            f"{path}: provenance.lock_sha256 is {prov.get('lock_sha256')!r}, not the lock's hash: analysed under another lock"
        )
    entries = prov.get("runs")
    if not isinstance(entries, list):
        return [*found, f"{path}: provenance.runs: expected a list, got {type(entries).__name__}"]
    read: dict[tuple[str, int], dict] = {}
    for i, entry in enumerate(entries):
        outputs = entry.get("outputs") if isinstance(entry, dict) else None
        if (
            not isinstance(outputs, dict)
            or not isinstance(entry.get("method"), str)
            or not isinstance(entry.get("seed"), int)
        ):
            found.append(f"{path}: provenance.runs[{i}]: expected an object with method, seed and outputs")
            continue
        read[(entry["method"], entry["seed"])] = outputs
    for method, seed in sorted(set(read) - planned):
        found.append(f"{path}: provenance.runs holds {method} seed {seed}, which the lock does not plan")
    for method, seed in sorted(planned - set(read)):
        found.append(f"{path}: provenance.runs has no {method} seed {seed}: the analysis did not read that run")
    for key in sorted(set(read) & planned):
        if key not in runs:
            continue  # a missing run is reported by the plan check
        current, readable = sealed_entries(runs[key], tree, root)
        run = runs[key].relative_to(root).as_posix()
        # a directory without a readable seal is reported by the seal check; its files are not compared here
        recorded = {rel: digest for rel, digest in read[key].items() if _unit(rel, run) in readable}
        found += _compare(recorded, current, root, source=path, reader="the analysis")
    return found


def check_report(report_dir: Path, analysis_dir: Path, *, root: Path) -> list[str]:
    """Problems of the report → analysis link: every file the record lists (the analysis seal among them, which
    covers the rest) must hash as it did when the report was rendered."""
    record = report_dir / layout.REPORT_ANALYSIS_RECORD
    if record.is_symlink():
        return []  # reported as a link
    if not record.is_file():
        return [f"{record}: missing: nothing ties the report to the analysis it shows"]
    recorded, problem = read_seal(record)
    if recorded is None:
        return [problem]
    prefix = analysis_dir.relative_to(root).as_posix() + "/"
    seal = prefix + OUTPUTS
    found = (
        []
        if seal in recorded
        else [f"{record}: does not record {root / seal}: the report is not tied to the analysis seal"]
    )
    for rel, digest in sorted(recorded.items()):
        path = root / rel
        if not rel.startswith(prefix) or not safe_entry(rel):
            found.append(f"{record}: lists {rel!r}, which is not a file of {analysis_dir}")
        elif path.is_symlink():
            continue  # reported as a link
        elif not path.is_file():
            found.append(f"{path}: the report was rendered from it ({record}), but it is gone")
        elif sha256_file(path) != digest:
            found.append(
                f"{path}: {record} records {digest[:12]}, it is now {sha256_file(path)[:12]}: changed after the report was rendered"
            )
    return found
