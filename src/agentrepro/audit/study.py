"""`audit`: is every output of a study what the frozen lock planned and produced, unchanged since it was sealed?

`audit_study(study, root=".")` returns one problem per string, each naming a path. It follows a chain:
* the lock: present, valid against lock.schema.json, not edited by hand (its self-hash); the manifest still
  hashes to the lock's `manifest_sha256`; every file the lock hashed (data, reference) unchanged;
* the plan: the lock's manifest names methods × seeds and the evaluated steps (`agentrepro.planning.StudyPlan.steps`,
  the rule the workflow plans with and the trainer checkpoints by); every run directory and every eval/step<N>/ of the plan exists, and nothing else does:
  stray files and folders anywhere in runs/<study>, analysis/<study> and reports/<study> are reported (in
  analysis/ and reports/ against what the recount and the rendering write, whatever seal was written over them);
* the shared warm starts (runs/<study>/_warmstart/, audit/warmstart.py): each planned one is there, sealed and from
  the lock, and every method of its seed started from its step-0 checkpoint (same hash) with its step-0 outcomes;
* each seal (OUTPUTS.sha256) lists exactly the files of its directory with their current hashes (a checkpoint file
  pruned after its evaluation is absent with the seal's hash in that evaluation's pruned.json), and each
  provenance.json ties its directory to the lock and the run config (audit/runs.py); an evaluation records
  the training seal it evaluated; outcomes rows match the lock's task panel; every job ran the backend sources
  the lock pins for its method's placement (backend_sources.json, agentrepro.backends.sources; a lock from before
  sources were pinned per placement is BadInput: freeze again);
* the analysis records the hash of every sealed file of every run it read, equal to the seals now; the
  report records the analysis files it was rendered from, equal to them now (audit/chain.py);
* the recount (audit/recount.py): every evaluation's recorded counts equal its outcomes, and the analysis, recomputed
  from the outcomes by the code `analyze` runs, equals every file of analysis/<study>/, value by value;
* the report rendered again from the recomputation, byte for byte, and every value it prints formatted again from
  it (audit/report.py);
* no symbolic link anywhere in these trees (none is followed; `bundle` never ships one).

`require` says how far the study must have got: `lock`, `runs`, `analysis` or `report` (the default). What
is required and missing is reported; outputs of later stages are checked whenever they exist.
A local model directory is not re-hashed here (it can be many GB); freeze hashed it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from agentrepro.audit.chain import check_analysis, check_report
from agentrepro.audit.recount import check_analysis_files, check_counts, recompute
from agentrepro.audit.report import REPORT_HTML, check_rendering, check_report_values
from agentrepro.audit.result import REQUIRE, STAGES, result_of
from agentrepro.audit.runs import check_evaluation, check_outcomes, check_run
from agentrepro.audit.tree import UNSEALED_DIR, Tree, check_seal, link_problem, walk
from agentrepro.audit.warmstart import check_warmstarts
from agentrepro.backends import get_backend
from agentrepro.backends.checkpoints import pruned_files
from agentrepro.backends.sources import RUN_FILE as SOURCES_RECORD
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import sha256_file, sha256_json
from agentrepro.layout import SEED_DIR_RE, STEP_DIR_RE, WARMSTARTS, RunFiles, locate
from agentrepro.lockfile import lock_sha256, read_with_problems
from agentrepro.manifest.loading import load_manifest
from agentrepro.placement import method_placement
from agentrepro.planning import StudyPlan
from agentrepro.seal import OUTPUTS

_SEED_DIR = SEED_DIR_RE
_STEP_DIR = STEP_DIR_RE
__all__ = ["audit_result", "audit_study"]


# The harness's own files, which every run directory and every eval/step<N>/ holds whatever its backend (logs/ is
# unsealed and never checked); any other sealed file must be one the run's backend writes (Backend.run_file).
HARNESS_RUN_FILES = frozenset(
    {RunFiles.CONFIG, RunFiles.RESOLVED_CONFIG, RunFiles.COMMAND, RunFiles.PROVENANCE, OUTPUTS, SOURCES_RECORD}
)
HARNESS_EVAL_FILES = frozenset({RunFiles.PROVENANCE, OUTPUTS, RunFiles.OUTCOMES, RunFiles.PRUNED, SOURCES_RECORD})


def _not_written(run: Path, tree: Tree, lock: dict[str, Any] | None, method: str) -> list[str]:
    """Files of the run that neither the harness nor the run's backend writes: added after the run, whatever seal
    was written over them. Not checkable for a backend whose framework chooses its own files (said in the docs)."""
    if not lock:
        return []
    try:
        backend = get_backend(method_placement(lock["manifest"], method).name)
    except BadInput:
        return []  # reported with the run's pruned files
    found = []
    for path in sorted(p for p in tree.files if run in p.parents):
        rel = PurePosixPath(path.relative_to(run).as_posix())
        parts = rel.parts
        if parts[0] == UNSEALED_DIR or (len(parts) == 1 and parts[0] in HARNESS_RUN_FILES):
            continue
        if parts[0] == RunFiles.EVAL and (len(parts) < 3 or parts[2] == UNSEALED_DIR or rel.name in HARNESS_EVAL_FILES):
            continue  # an entry beside the evaluation folders is reported as such
        if backend.run_file(rel) is False:
            found.append(_stray(path, f"a file neither the harness nor the {backend.name} backend writes"))
    return found


def _pruned(run: Path, lock: dict[str, Any] | None, method: str) -> tuple[set[Path], list[str]]:
    """Checkpoint files of the run removed once evaluated, or during training by its framework (backends/checkpoints.py),
    and the problems with their records."""
    if not lock:
        return pruned_files(run)
    try:
        during = get_backend(method_placement(lock["manifest"], method).name).pruned_in_training(run)
    except BadInput as exc:
        pruned, problems = pruned_files(run)
        return pruned, [*problems, str(exc)]
    return pruned_files(run, during)


def _check_lock(study: str, root: Path, not_bundled: set[Path]) -> tuple[dict | None, list[str]]:
    found: list[str] = []
    home = locate(study, root)
    study, mpath, lpath = home.name, home.manifest, home.lock
    found += [link_problem(p) for p in (mpath, lpath) if p.is_symlink()]
    lock = None
    if not lpath.is_file():
        found.append(f"{lpath}: missing: the study was never frozen (agentrepro freeze {mpath})")
    else:
        lock, problems = read_with_problems(lpath)  # a lock of an older form: one line, freeze again
        found += problems
        if lock is not None and lock.get("study") != study:
            found.append(f"{lpath}: study is {lock.get('study')!r}, not {study!r}")
    if not mpath.is_file():
        found.append(f"{mpath}: missing")
    else:
        try:
            manifest = load_manifest(mpath)
        except BadInput as exc:
            found.append(str(exc))
        else:
            if lock is not None and sha256_json(manifest) != lock.get("manifest_sha256"):
                found.append(
                    f"{mpath}: changed since it was frozen (it hashes to {sha256_json(manifest)[:12]}, the lock says "
                    f"{str(lock.get('manifest_sha256'))[:12]}): freeze again and rerun"
                )
    files = ((lock or {}).get("resolved") or {}).get("files") or {}
    for rel, digest in sorted(files.items() if isinstance(files, dict) else []):
        path = root / rel
        if path in not_bundled:
            continue
        if path.is_symlink():
            found.append(link_problem(path))
        elif not path.is_file():
            found.append(f"{path}: missing (hashed in the lock)")
        elif sha256_file(path) != digest:
            found.append(f"{path}: changed since it was frozen (hash differs from the lock)")
    return lock, found


def _plan(lock: dict | None) -> tuple[list[str], list[int], list[int], list[str]]:
    """(methods, seeds, steps, problems) the lock plans; empty when there is no usable lock."""
    manifest = (lock or {}).get("manifest")
    if not isinstance(manifest, dict):
        return [], [], [], []
    methods = list(manifest.get("methods") or {})
    seeds = [s for s in manifest.get("seeds") or [] if isinstance(s, int)]
    try:
        return methods, seeds, list(StudyPlan(manifest, "the lock's manifest").steps), []
    except BadInput as exc:
        return methods, seeds, [], [str(exc)]


def _canonical(pattern: re.Pattern, name: str, prefix: str) -> re.Match | None:
    """`seed<k>` / `step<N>` exactly as the workflow writes them (`seed007` beside `seed7` would be a second copy)."""
    match = pattern.match(name)
    return match if match and name == f"{prefix}{int(match.group(1))}" else None


def _stray(path: Path, why: str) -> str:
    return f"{path}: {why}: not part of the study's layout (bundle would ship it)"


def _check_runs(
    study: str, root: Path, lock: dict | None, *, require: str, not_bundled: set[Path]
) -> tuple[list[str], Tree, dict]:
    """The runs tree against the plan: layout, seals, provenance, outcomes. Returns (problems, tree, runs on disk)."""
    top = locate(study, root).runs
    tree = walk(top)
    methods, seeds, steps, found = _plan(lock)
    planned = {(m, s) for m in methods for s in seeds}
    found += [link_problem(p) for p in sorted(tree.links | ({top} if top.is_symlink() else set()))]
    runs: dict[tuple[str, int], Path] = {}
    for path in sorted(tree.files | tree.dirs):
        rel = path.relative_to(top).parts
        if rel[0] == WARMSTARTS:
            continue  # the shared warm starts: audit_warmstart.py
        if len(rel) == 1 and path in tree.files:
            found.append(_stray(path, "a stray file beside the method directories"))
        elif len(rel) == 1 and lock is not None and rel[0] not in methods:
            found.append(f"{path}: {rel[0]!r} is not a method of the lock")
        elif len(rel) == 2 and (path in tree.files or not _canonical(_SEED_DIR, rel[1], "seed")):
            found.append(_stray(path, "a stray entry beside the seed directories"))
        elif len(rel) == 2 and lock is not None and int(rel[1][4:]) not in seeds:
            found.append(f"{path}: seed {int(rel[1][4:])} is not a seed of the lock")
        elif len(rel) == 2 and (lock is None or rel[0] in methods):
            runs[(rel[0], int(rel[1][4:]))] = path
    if require != "lock":
        for method, seed in sorted(planned - set(runs), key=lambda k: (methods.index(k[0]), k[1])):
            found.append(
                f"{top / method / f'seed{seed}'}: missing: the lock plans {method} seed {seed} (never trained, or deleted)"
            )
    panel = {
        t["task_id"]: t["task_hash"]
        for t in (lock or {}).get("task_panel") or []
        if isinstance(t, dict) and "task_id" in t
    }
    for (method, seed), run in sorted(runs.items()):
        problems, config_sha = check_run(run, lock)
        found += problems
        pruned, problems = _pruned(run, lock, method)
        found += problems + check_seal(
            run, tree, nested=lambda rel: rel.parts[0] == RunFiles.EVAL, not_bundled=not_bundled | pruned
        )
        found += _not_written(run, tree, lock, method)
        evals = run / RunFiles.EVAL
        on_disk = {}
        for path in sorted(p for p in tree.files | tree.dirs if p.parent == evals):
            match = _canonical(_STEP_DIR, path.name, "step")
            if path in tree.files or not match:
                found.append(_stray(path, "a stray entry beside the evaluation directories"))
            elif lock is not None and int(match.group(1)) not in steps:
                found.append(
                    f"{path}: step {int(match.group(1))} is not an evaluated step of the lock (planned: {', '.join(map(str, steps))})"
                )
            else:
                on_disk[int(match.group(1))] = path
        if require != "lock" and lock is not None:
            for step in sorted(set(steps) - set(on_disk)):
                found.append(f"{evals / f'step{step}'}: missing: the lock plans an evaluation of step {step}")
        for step, step_dir in sorted(on_disk.items()):
            found += check_evaluation(step_dir, lock, config_sha, run / OUTPUTS)
            found += check_seal(step_dir, tree, not_bundled=not_bundled)
            outcomes = step_dir / RunFiles.OUTCOMES
            if outcomes not in tree.files:
                found += [] if outcomes in tree.links else [f"{outcomes}: missing"]
            elif lock is not None:
                found += check_outcomes(outcomes, study=study, method=method, seed=seed, step=step, panel=panel)
    found += check_warmstarts(study, root, lock, tree, runs, require=require, not_bundled=not_bundled)
    return found, tree, runs


def _check_top(top: Path, stage: str, require: str) -> tuple[list[str], Tree | None]:
    """A sealed output directory (analysis/<study> or reports/<study>): present when required, sealed, no links."""
    if top.is_symlink():
        return [link_problem(top)], None
    if not top.is_dir():
        earlier = STAGES[STAGES.index(stage) - 1]
        return (
            [
                f"{top}: missing: auditing up to the {require} requires the {stage} (deleted, or not made yet: "
                f"`--require {earlier}` audits a study that has not got this far)"
            ]
            if STAGES.index(require) >= STAGES.index(stage)
            else []
        ), None
    tree = walk(top)
    return [link_problem(p) for p in sorted(tree.links)] + check_seal(top, tree, nested=lambda rel: False), tree


def _links_in_inputs(home, lock: dict, run_tree: Tree, analysis_tree: Tree) -> bool:
    """Whether anything the analysis reads is a symbolic link (the recount would follow it, so it does not run)."""
    files = [home.root / rel for rel in ((lock.get("resolved") or {}).get("files") or {})]
    return bool(
        run_tree.links
        or analysis_tree.links
        or any(p.is_symlink() for p in [home.manifest, home.lock, home.runs, *files])
    )


def audit_study(
    study: str,
    root: str | os.PathLike = ".",
    *,
    require: str = "report",
    not_bundled: set[str] | frozenset = frozenset(),
    check_reports: bool = True,
) -> list[str]:
    """Every problem found, one string each naming its path; empty when the study is intact.

    `study`: a slug or the path of the study's manifest (`agentrepro.layout.locate`).
    `require`: the last stage whose outputs must exist (`lock`, `runs`, `analysis`, `report`); later ones are
    checked when present. `not_bundled`: root-relative paths deliberately left out of a bundle (their absence
    is not a problem). `check_reports=False` leaves reports/<study> out entirely (the report stage, which
    embeds this result while it replaces that directory).
    """
    if require not in STAGES:
        raise BadInput(f"expected one of {', '.join(STAGES)}, got {require!r}", where="--require")
    root = Path(root)
    skipped = {root / PurePosixPath(p) for p in not_bundled}
    lock, found = _check_lock(study, root, skipped)
    home = locate(study, root)
    problems, run_tree, runs = _check_runs(home.name, root, lock, require=require, not_bundled=skipped)
    found += problems + check_counts(run_tree)
    analysis_dir = home.analysis
    problems, analysis_tree = _check_top(analysis_dir, "analysis", require)
    found += problems
    recomputed = None
    if analysis_tree is not None and lock is not None:
        methods, seeds, _, _ = _plan(lock)
        found += check_analysis(
            analysis_dir,
            root=root,
            lock_hash=lock_sha256(lock),
            planned={(m, s) for m in methods for s in seeds},
            runs=runs,
            tree=run_tree,
        )
        if _links_in_inputs(home, lock, run_tree, analysis_tree):
            found.append(
                f"{analysis_dir}: not recomputed from the outcomes: the study holds symbolic links (reported above), "
                "which the audit never follows"
            )
        else:
            recomputed, problems = recompute(study, root, analysis_dir)
            found += problems + (check_analysis_files(analysis_dir, recomputed) if recomputed is not None else [])
    if check_reports:
        audited = list(found)  # the study up to its analysis: what the report's appendix shows
        report_dir = home.reports
        problems, report_tree = _check_top(report_dir, "report", require)
        found += problems
        if report_tree is not None and analysis_tree is not None:  # a missing analysis is reported once, above
            found += check_report(report_dir, analysis_dir, root=root)
        page = report_dir / REPORT_HTML
        if recomputed is not None and report_tree is not None and page in report_tree.files:
            found += check_report_values(page, recomputed.document())
        if recomputed is not None and report_tree is not None:
            found += check_rendering(
                report_dir,
                report_tree,
                analysis_dir=analysis_dir,
                recomputed=recomputed,
                audited=audited,
                not_bundled=skipped,
            )
    return found


def audit_result(study: str, root: str | Path = ".") -> dict:
    """The audit a report shows (audit/result.py): the study up to its analysis, reports/<study> left out, or
    {"status": "error", "message": why} when the audit cannot run."""
    try:
        problems = list(audit_study(study, root=str(root), require=REQUIRE, check_reports=False))
    except (BadInput, Failure, OSError) as exc:
        return {"status": "error", "problems": [], "message": f"the audit could not run: {exc}"}
    return result_of(problems)
