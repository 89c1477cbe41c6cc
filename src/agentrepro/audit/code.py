"""Which code the study's jobs ran, against the code its lock names: every job's newest attempt (provenance.json
`software`, agentrepro.software.running) compared with the lock's `harness` and `python`.

`code_differences(study, root)` returns one line per set of differences, with the jobs that share it, one line
naming each kind of machine (CPU, vector instruction sets, BLAS and its version) when the jobs ran on more than one,
and one naming the jobs that ran on another kind than the machine that froze the lock (where the lock records it). They are not
problems of the outputs (nothing was changed after it was written, and the audit still passes): a reviewer weighs
them, since a job that ran another commit or other package versions is not the job the lock describes.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from agentrepro.attempts import PROVENANCE, machine_words, newest_attempt
from agentrepro.audit.tree import EXAMPLES, load_object, walk
from agentrepro.layout import RunFiles, locate
from agentrepro.lockfile import MACHINE
from agentrepro.software import differences

SHOWN = 10  # differences said per group (a whole other environment differs in a hundred packages)


def _folders(jobs: list[str]) -> str:
    more = f" and {len(jobs) - EXAMPLES} more" if len(jobs) > EXAMPLES else ""
    return ", ".join(jobs[:EXAMPLES]) + more


def code_differences(study: str, root: str | os.PathLike = ".") -> list[str]:
    """Lines of `<n> job(s) ran <what differs>: <their folders>` (empty when every job ran what the lock names),
    and, when the jobs ran on more than one kind of machine, one line naming each with its jobs: the same code and
    seed can end a few tasks apart on another CPU or BLAS."""
    root = Path(root)
    home = locate(study, root)
    lock, _ = load_object(home.lock)
    if lock is None:
        return []  # the audit reports the lock
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    machines: dict[str, list[str]] = defaultdict(list)
    for path in sorted(walk(home.runs).files):
        if path.name != PROVENANCE or RunFiles.LOGS in path.relative_to(home.runs).parts:
            continue
        prov, _ = load_object(path)
        newest = newest_attempt(prov)
        found = tuple(differences(lock, newest.get("software")))
        job = path.parent.relative_to(root).as_posix()
        if found:
            groups[found].append(job)
        machines[machine_words(newest.get("machine"), threads=False)].append(job)
    lines = []
    for found, jobs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        said = "; ".join(found[:SHOWN]) + (f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else "")
        lines.append(f"{len(jobs)} job(s) ran {said}: {_folders(jobs)}")
    kinds = sorted(machines.items(), key=lambda kv: -len(kv[1]))
    if len(machines) > 1:
        lines.append(
            f"the jobs ran on {len(machines)} kinds of machine: "
            + "; ".join(f"{len(jobs)} on {said} ({_folders(jobs)})" for said, jobs in kinds)
        )
    frozen = machine_words(lock[MACHINE], threads=False) if MACHINE in lock else None
    elsewhere = [(said, jobs) for said, jobs in kinds if frozen is not None and said != frozen]
    if elsewhere:
        lines.append(
            f"{sum(len(jobs) for _, jobs in elsewhere)} job(s) ran on another kind of machine than the lock was frozen "
            f"on ({frozen}): " + "; ".join(f"{len(jobs)} on {said} ({_folders(jobs)})" for said, jobs in elsewhere)
        )
    return lines
