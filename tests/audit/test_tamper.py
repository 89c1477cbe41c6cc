"""The tamper suite: one real finished tiny study, copied per case, tampered one way, and audited.

The study is tests/workflow/manifests/wf-tiny.yaml (builtin trainer, 2 methods x 1 seed, 2 training steps,
evaluated at steps 0 and 2, 4 tasks) with a reference (an earlier run, REFERENCE) taken through the verbs a user runs: freeze, resolve, warmstart (the seed's
shared warm start), train --from-warmstart, eval, analyze, report --no-pdf. It is built once per session of this module; every case copies it, applies one
tampering and runs `agentrepro audit` as a subprocess, which must exit 1 with a line naming the tampered path.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import REPO, run_cli

from agentrepro.audit.study import audit_study
from agentrepro.cli import main
from agentrepro.fileio import atomic_write_jsonl, sha256_file, sha256_json
from agentrepro.layout import locate
from agentrepro.lockfile import seal as seal_lock
from agentrepro.planning import StudyPlan
from agentrepro.reading import iter_jsonl, load_yaml
from agentrepro.seal import write_outputs_manifest

STUDY = "wf-tiny"
MANIFEST = REPO / "tests" / "workflow" / "manifests" / f"{STUDY}.yaml"
REFERENCE = (
    "kind: earlier run\npaper: 'none: a made-up earlier run'\nmetric: success_rate\nvalues:\n"
    "  grpo: {value: 0.5, std: null, seeds: null, source: made up, checked: false}\n"
    "  graphgpo: {value: 0.5, std: null, seeds: null, source: made up, checked: false}\n"
)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A root where the tiny study went through every verb to its report, and `agentrepro audit` finds nothing."""
    return _finish(tmp_path_factory.mktemp("tamper") / "study", MANIFEST.read_text())


def _finish(root: Path, manifest: str) -> Path:
    """The tiny study of `manifest` (its text) taken through every verb to its report in `root`."""
    (root / "manifests" / "references").mkdir(parents=True)
    (root / "manifests" / MANIFEST.name).write_text(manifest + "reference: references/earlier.yaml\n")
    (root / "manifests" / "references" / "earlier.yaml").write_text(REFERENCE)
    warm = str(
        locate(STUDY).warmstart_dir(
            0, StudyPlan(load_yaml(root / "manifests" / MANIFEST.name), "m").warmstarts[("grpo", 0)]
        )
    )
    with pytest.MonkeyPatch.context() as patch:  # the freeze and jobs below run in the study's folder
        patch.chdir(root)
        assert main(["freeze", f"manifests/{STUDY}.yaml", "--allow-dirty"]) == 0
        for method in ("grpo", "graphgpo"):
            run = f"runs/{STUDY}/{method}/seed0"
            assert (
                main(
                    [
                        "resolve",
                        f"manifests/{STUDY}.lock.json",
                        "--method",
                        method,
                        "--seed",
                        "0",
                        "-o",
                        f"{run}/config.yaml",
                    ]
                )
                == 0
            )
            if method == "grpo":
                assert main(["warmstart", "--config", f"{run}/config.yaml", "--out", warm]) == 0
            assert main(["train", "--config", f"{run}/config.yaml", "--out", run, "--from-warmstart", warm]) == 0
            for step in (0, 2):
                assert main(["eval", "--run", run, "--step", str(step)]) == 0
        assert main(["analyze", STUDY]) == 0
        assert main(["report", STUDY, "--no-pdf"]) == 0
    return root


@pytest.fixture
def study(finished, tmp_path) -> Path:
    """A fresh copy of the finished study (links copied as links)."""
    copy = tmp_path / "study"
    shutil.copytree(finished, copy, symlinks=True)
    return copy


def audit(root: Path, *args: str):
    """`agentrepro audit` as a subprocess, as a user runs it."""
    return run_cli("audit", STUDY, "--root", root, *args)


def problems(root: Path) -> list[str]:
    """The problem lines `agentrepro audit` prints (exit 1 when there is any), from the same function, in this
    process: the many tampering cases below need not start Python and its statistics each time."""
    return audit_study(STUDY, root)


RUN = f"runs/{STUDY}/grpo/seed0"
EVAL = f"{RUN}/eval/step2"


def _edit_jsonl(path: Path, change) -> None:
    rows = [row for _, row in iter_jsonl(path)]
    change(rows)
    atomic_write_jsonl(path, rows)


def _flip_outcome(root: Path) -> None:
    _edit_jsonl(root / EVAL / "outcomes.jsonl", lambda rows: rows[0].update(success=1 - rows[0]["success"]))


def _resealed(change: Callable[[Path], None], unit: str, **exclude) -> Callable[[Path], None]:
    """`change`, then the seal of `unit` rewritten over the changed files, as a forger who recomputes checksums."""

    def apply(root: Path) -> None:
        change(root)
        write_outputs_manifest(root / unit, **exclude)

    return apply


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _link(path: Path, target: Path) -> None:
    """Replace `path` by a symbolic link to `target` (a copy of `path`'s content made first, when it is a file)."""
    if path.is_file() and not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    elif path.is_dir() and not target.exists():
        shutil.copytree(path, target)
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    path.symlink_to(target)


def _relock(root: Path) -> None:
    """Edit the lock and recompute its self-hash, as a careful forger would."""
    path = root / "manifests" / f"{STUDY}.lock.json"
    lock = json.loads(path.read_text())
    lock["task_panel"][0]["category"] = "other"
    path.write_text(json.dumps(seal_lock(lock), indent=2))


def _swap_checkpoint(root: Path, *, reseal: bool) -> None:
    shutil.copy(root / RUN / "checkpoints" / "step0.pt", root / RUN / "checkpoints" / "step2.pt")
    if reseal:
        write_outputs_manifest(root / RUN, exclude_dirs={"eval", "logs"})


def _change_task_hash(root: Path) -> None:
    _edit_jsonl(root / EVAL / "outcomes.jsonl", lambda rows: rows[1].update(task_hash=sha256_json("another map")))
    write_outputs_manifest(root / EVAL)


def _reseal_analysis(root: Path) -> None:
    path = root / "analysis" / STUDY / "verdicts.csv"
    path.write_text(path.read_text() + "\n")
    write_outputs_manifest(root / "analysis" / STUDY)


def _drop_run_from_analysis(root: Path) -> None:
    path = root / "analysis" / STUDY / "analysis.json"
    doc = json.loads(path.read_text())
    doc["provenance"]["runs"] = [r for r in doc["provenance"]["runs"] if r["method"] != "graphgpo"]
    path.write_text(json.dumps(doc))
    write_outputs_manifest(root / "analysis" / STUDY)


def _drop_report_record(root: Path) -> None:
    (root / "reports" / STUDY / "analysis.sha256").unlink()
    write_outputs_manifest(root / "reports" / STUDY)


ANALYSIS = f"analysis/{STUDY}"
REPORT = f"reports/{STUDY}"


def _rechain(root: Path) -> None:
    """Seal the analysis again and the report again, with the report's record of the analysis rewritten: every hash
    above the runs made consistent, as a careful forger would."""
    write_outputs_manifest(root / ANALYSIS)
    files = sorted(p for p in (root / ANALYSIS).iterdir() if p.is_file())
    (root / REPORT / "analysis.sha256").write_text(
        "".join(f"{sha256_file(p)}  {p.relative_to(root).as_posix()}\n" for p in files)
    )
    write_outputs_manifest(root / REPORT)


def _edit_csv(root: Path, name: str, change) -> None:
    """Change rows of analysis/<study>/<name> (a list of dicts, edited in place by `change`)."""
    path = root / ANALYSIS / name
    rows = list(csv.DictReader(path.open()))
    change(rows)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _forge_outcome(root: Path) -> None:
    """One failed episode made a success, its evaluation sealed again, the hash analysis.json records for it replaced,
    and the analysis and report sealed again: every seal and recorded hash agrees; only the counts do not."""
    _edit_jsonl(
        root / EVAL / "outcomes.jsonl", lambda rows: next(r for r in rows if r["success"] == 0).update(success=1)
    )
    write_outputs_manifest(root / EVAL)
    path = root / ANALYSIS / "analysis.json"
    doc = json.loads(path.read_text())
    for run in doc["provenance"]["runs"]:
        for rel in run["outputs"]:
            if rel.startswith(EVAL):
                run["outputs"][rel] = sha256_file(root / rel)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    _rechain(root)


def _forge_methods_csv(root: Path) -> None:
    """methods.csv: a mean raised by 9 points, then every hash above made consistent."""
    _edit_csv(root, "methods.csv", lambda rows: rows[-1].update(mean=str(float(rows[-1]["mean"]) + 0.09)))
    _rechain(root)


def _forge_verdict(root: Path, *, everywhere: bool) -> None:
    """A verdict turned into 'reproduced' in verdicts.csv (and, `everywhere`, in analysis.json and in the report's
    printed verdict too), then every hash made consistent."""
    _edit_csv(root, "verdicts.csv", lambda rows: rows[0].update(verdict="reproduced"))
    if everywhere:
        path = root / ANALYSIS / "analysis.json"
        doc = json.loads(path.read_text())
        before = doc["tables"]["verdicts"][0]["verdict"]
        doc["tables"]["verdicts"][0]["verdict"] = "reproduced"
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        page = root / REPORT / "report.html"
        mark = 'data-at="tables/verdicts/0/verdict" data-f="verdict">'
        words = {"reproduced": "✔ reproduced", "not_reproduced": "✘ not reproduced", "inconclusive": "? inconclusive"}
        page.write_text(page.read_text().replace(mark + words[before], mark + words["reproduced"]))
    _rechain(root)


def _forge_printed_rate(root: Path) -> None:
    """The report's first printed mean rate replaced after rendering, the report sealed again (nothing sits above it)."""
    page = root / REPORT / "report.html"
    text = page.read_text()
    at = text.index('data-f="pct">', text.index('data-at="tables/methods/'))
    start = at + len('data-f="pct">')
    end = text.index("</data>", start)
    page.write_text(text[:start] + "74.4%" + text[end:])
    write_outputs_manifest(root / REPORT)


def _strip_marks(root: Path) -> None:
    """The report's marks removed (the numbers left as plain text), the report sealed again."""
    page = root / REPORT / "report.html"
    page.write_text(re.sub(r"<data [^>]*>|</data>", "", page.read_text()))
    write_outputs_manifest(root / REPORT)


def _added_and_resealed(root: Path, rel: str) -> None:
    """A file added to the builtin run after it ran, the seal of its folder written again over it, the analysis and
    report rechained: only the rule of which files a run holds can tell it from the run's own."""
    _write(root / RUN / rel, "{}")
    folder = root / RUN / "/".join(rel.split("/")[:2]) if rel.startswith("eval/") else root / RUN
    write_outputs_manifest(folder, exclude_dirs=set() if rel.startswith("eval/") else {"eval", "logs"})
    _rechain(root)


# (case id, tampering, the path (relative to the root) a problem line must start with, a word that line must hold)
CASES = [
    ("run-deleted", lambda r: shutil.rmtree(r / RUN), RUN, "missing"),
    ("eval-deleted", lambda r: shutil.rmtree(r / EVAL), EVAL, "missing"),
    ("analysis-deleted", lambda r: shutil.rmtree(r / "analysis"), f"analysis/{STUDY}", "missing"),
    ("reports-deleted", lambda r: shutil.rmtree(r / "reports"), f"reports/{STUDY}", "missing"),
    (
        "stray-file-beside-seeds",
        lambda r: _write(r / f"runs/{STUDY}/grpo/notes.txt", "x"),
        f"runs/{STUDY}/grpo/notes.txt",
        "stray",
    ),
    ("stray-folder-beside-seeds", lambda r: shutil.copytree(r / RUN, r / f"{RUN}.bak"), f"{RUN}.bak", "stray"),
    ("stray-file-beside-methods", lambda r: _write(r / f"runs/{STUDY}/README", "x"), f"runs/{STUDY}/README", "stray"),
    ("stray-file-beside-evals", lambda r: _write(r / f"{RUN}/eval/notes.txt", "x"), f"{RUN}/eval/notes.txt", "stray"),
    ("stray-file-in-a-run", lambda r: _write(r / f"{RUN}/extra/more.jsonl", "{}"), RUN, "extra/more.jsonl"),
    *(
        (
            f"file-added-to-a-run-and-resealed:{rel}",
            lambda r, rel=rel: _added_and_resealed(r, rel),
            f"{RUN}/{rel}",
            "neither the harness nor the builtin backend",
        )
        for rel in ("notes.txt", "checkpoints/step9.bin", "batches/notes.jsonl", "eval/step2/extra.json")
    ),
    (
        "stray-file-in-analysis",
        lambda r: _write(r / f"analysis/{STUDY}/extra.csv", "a\n"),
        f"analysis/{STUDY}",
        "extra.csv",
    ),
    (
        "stray-file-in-reports",
        lambda r: _write(r / f"reports/{STUDY}/figures/extra.png", "x"),
        f"reports/{STUDY}",
        "figures/extra.png",
    ),
    (
        "method-not-in-lock",
        lambda r: shutil.copytree(r / f"runs/{STUDY}/grpo", r / f"runs/{STUDY}/ppo"),
        f"runs/{STUDY}/ppo",
        "not a method",
    ),
    (
        "seed-not-in-lock",
        lambda r: shutil.copytree(r / RUN, r / f"runs/{STUDY}/grpo/seed1"),
        f"runs/{STUDY}/grpo/seed1",
        "not a seed",
    ),
    (
        "extra-eval-step",
        lambda r: shutil.copytree(r / EVAL, r / f"{RUN}/eval/step1"),
        f"{RUN}/eval/step1",
        "not an evaluated step",
    ),
    ("outcomes-edited", _flip_outcome, f"{EVAL}/outcomes.jsonl", "changed"),
    (
        "outcomes-edited-and-resealed",
        _resealed(_flip_outcome, EVAL),
        f"{EVAL}/outcomes.jsonl",
        "re-sealed",
    ),
    (
        "metrics-edited-and-resealed",
        _resealed(
            lambda r: _edit_jsonl(r / RUN / "metrics.jsonl", lambda rows: rows[0].update(reward_mean=9.0)),
            RUN,
            exclude_dirs={"eval", "logs"},
        ),
        f"{RUN}/metrics.jsonl",
        "re-sealed",
    ),
    ("checkpoint-swapped", lambda r: _swap_checkpoint(r, reseal=False), f"{RUN}/checkpoints/step2.pt", "changed"),
    (
        "checkpoint-swapped-and-resealed",
        lambda r: _swap_checkpoint(r, reseal=True),
        f"{EVAL}/provenance.json",
        "re-sealed",
    ),
    ("task-hash-changed-and-resealed", _change_task_hash, f"{EVAL}/outcomes.jsonl", "task_hash"),
    ("run-seal-removed", lambda r: (r / RUN / "OUTPUTS.sha256").unlink(), RUN, "no OUTPUTS.sha256"),
    ("eval-seal-removed", lambda r: (r / EVAL / "OUTPUTS.sha256").unlink(), EVAL, "no OUTPUTS.sha256"),
    (
        "analysis-seal-removed",
        lambda r: (r / f"analysis/{STUDY}/OUTPUTS.sha256").unlink(),
        f"analysis/{STUDY}",
        "no OUTPUTS.sha256",
    ),
    (
        "report-seal-removed",
        lambda r: (r / f"reports/{STUDY}/OUTPUTS.sha256").unlink(),
        f"reports/{STUDY}",
        "no OUTPUTS.sha256",
    ),
    (
        "seal-lists-outside-path",
        lambda r: _write(
            r / EVAL / "OUTPUTS.sha256",
            (r / EVAL / "OUTPUTS.sha256").read_text() + "0" * 64 + "  ../../../../../../x\n",
        ),
        f"{EVAL}/OUTPUTS.sha256",
        "outside",
    ),
    (
        "seal-malformed",
        lambda r: (r / RUN / "OUTPUTS.sha256").write_bytes(b"\xff\xfe not a seal\n"),
        f"{RUN}/OUTPUTS.sha256",
        "UTF-8",
    ),
    ("analysis-resealed-after-report", _reseal_analysis, f"analysis/{STUDY}/verdicts.csv", "after the report"),
    ("analysis-missing-a-run", _drop_run_from_analysis, f"analysis/{STUDY}/analysis.json", "graphgpo"),
    ("report-record-removed-and-resealed", _drop_report_record, f"reports/{STUDY}/analysis.sha256", "missing"),
    (
        "lock-hand-edited",
        lambda r: _write(
            r / f"manifests/{STUDY}.lock.json",
            (r / f"manifests/{STUDY}.lock.json").read_text().replace('"frozenlake"', '"sokoban"', 1),
        ),
        f"manifests/{STUDY}.lock.json",
        "lock_self_sha256",
    ),
    ("lock-edited-and-self-hash-recomputed", _relock, f"{RUN}/provenance.json", "lock_sha256"),
    (
        "manifest-edited",
        lambda r: _write(
            r / f"manifests/{STUDY}.yaml",
            (r / f"manifests/{STUDY}.yaml").read_text().replace("lr: 1.0e-3", "lr: 2.0e-3"),
        ),
        f"manifests/{STUDY}.yaml",
        "changed since it was frozen",
    ),
    (
        "run-provenance-not-an-object",
        _resealed(lambda r: _write(r / RUN / "provenance.json", "[1, 2]"), RUN, exclude_dirs={"eval", "logs"}),
        f"{RUN}/provenance.json",
        "expected a JSON object",
    ),
    (
        "eval-provenance-not-an-object",
        _resealed(lambda r: _write(r / EVAL / "provenance.json", "null"), EVAL),
        f"{EVAL}/provenance.json",
        "expected a JSON object",
    ),
    (
        "analysis-json-not-an-object",
        _resealed(lambda r: _write(r / f"analysis/{STUDY}/analysis.json", '"text"'), f"analysis/{STUDY}"),
        f"analysis/{STUDY}/analysis.json",
        "expected a JSON object",
    ),
    (
        "sealed-link-out-of-the-study",
        lambda r: _link(r / EVAL / "outcomes.jsonl", r.parent / "elsewhere" / "outcomes.jsonl"),
        f"{EVAL}/outcomes.jsonl",
        "symbolic link",
    ),
    (
        "link-within-the-study",
        lambda r: _link(r / f"analysis/{STUDY}/runs.csv", r / f"analysis/{STUDY}/.runs.csv"),
        f"analysis/{STUDY}/runs.csv",
        "symbolic link",
    ),
    (
        "run-directory-linked-elsewhere",
        lambda r: _link(r / RUN, r.parent / "elsewhere" / "seed0"),
        RUN,
        "symbolic link",
    ),
    (
        "outcome-forged-with-every-hash-recomputed",
        _forge_outcome,
        f"{ANALYSIS}/runs.csv",
        "recomputed from the outcomes",
    ),
    ("outcome-forged-provenance-counts", _forge_outcome, f"{EVAL}/provenance.json", "outcomes.jsonl holds"),
    ("methods-csv-forged-and-rehashed", _forge_methods_csv, f"{ANALYSIS}/methods.csv", "mean is"),
    (
        "verdicts-csv-forged-and-rehashed",
        lambda r: _forge_verdict(r, everywhere=False),
        f"{ANALYSIS}/verdicts.csv",
        "verdict is reproduced",
    ),
    (
        "verdict-forged-everywhere",
        lambda r: _forge_verdict(r, everywhere=True),
        f"{ANALYSIS}/analysis.json",
        "tables.verdicts[0].verdict (method grpo) is 'reproduced'",
    ),
    (
        "verdict-forged-in-the-report",
        lambda r: _forge_verdict(r, everywhere=True),
        f"{REPORT}/report.html",
        "tables/verdicts/0/verdict",
    ),
    ("printed-rate-edited-and-report-resealed", _forge_printed_rate, f"{REPORT}/report.html", "prints '74.4%'"),
    ("report-marks-stripped-and-resealed", _strip_marks, f"{REPORT}/report.html", "does not show bottom_line/0"),
    (
        "unsealed-link-beside-seeds",
        lambda r: os.symlink("/etc/hostname", r / f"runs/{STUDY}/grpo/hostname"),
        f"runs/{STUDY}/grpo/hostname",
        "symbolic link",
    ),
]


def test_the_untampered_study_passes(study):
    """The control: the finished study, copied, passes `agentrepro audit` (exit 0), so every failure below is the tampering's."""
    result = audit(study)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("case, tamper, path, word", CASES, ids=[c[0] for c in CASES])
def test_tampering_is_caught(study, case, tamper, path, word):
    """One kind of tampering: the audit finds a problem, and one line names the tampered path and says what is wrong."""
    tamper(study)
    lines = problems(study)
    assert lines, f"{case}: the audit found nothing"
    assert any(line.startswith(str(study / path)) and word in line for line in lines), (
        f"{case}: no line names {path} with {word!r}:\n" + "\n".join(lines)
    )


def test_a_forged_outcome_passes_every_hash_and_fails_only_the_recount(study):
    """The forgery of an outcome with every seal and recorded hash recomputed leaves nothing for the hash chain to
    find: every problem the audit reports is the recount's (recounted counts, recomputed tables, the report rendered
    again from them), none a hash's."""
    _forge_outcome(study)
    result = audit(study)
    lines = [line for line in result.stdout.splitlines()[:-1] if not line.startswith("card: ")]  # last: the count
    assert result.returncode == 1 and lines, result.stdout
    recount = (
        "recomputed from the outcomes",
        "differ from the recomputation",
        "outcomes.jsonl holds",
        "rendered again from the recomputed analysis",
    )
    assert all(any(words in p for words in recount) for p in lines), result.stdout
    assert any(p.startswith(str(study / f"{ANALYSIS}/analysis.json")) and "bottom_line" not in p for p in lines)


def test_require_runs_is_explicit(study):
    """Before the analysis exists the workflow may audit with `--require runs` (OK, said in the summary); the default
    still requires the analysis and the report."""
    shutil.rmtree(study / "analysis")
    shutil.rmtree(study / "reports")
    scoped = audit(study, "--require", "runs")
    assert scoped.returncode == 0 and "required up to: runs" in scoped.stdout, scoped.stdout + scoped.stderr
    assert audit(study).returncode == 1


def test_bundle_never_ships_a_link_target(study, tmp_path):
    """A sealed link to a file outside the study is left out of the bundle (its content is nowhere in the archive),
    and `audit --bundle` reports it (exit 1)."""
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("never ship me\n")
    target = study / RUN / "command.txt"
    target.unlink()
    target.symlink_to(secret)
    made = run_cli("bundle", STUDY, "--root", study, "-o", tmp_path / "b.tar.gz")
    assert made.returncode == 0, made.stderr
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        names = tar.getnames()
        contents = b"".join(tar.extractfile(m).read() for m in tar if m.isfile())
    assert f"{RUN}/command.txt" not in names and b"never ship me" not in contents
    checked = run_cli("audit", "--bundle", tmp_path / "b.tar.gz")
    assert checked.returncode == 1 and f"{RUN}/command.txt: a symbolic link" in checked.stdout, checked.stdout


def test_the_studys_own_failures_are_said_beside_an_intact_audit(tmp_path):
    """A study whose training seeds overlap its evaluation panel (a failed parity check of the analysis, not a
    changed file): `audit` passes its files (exit 0) and says the study's own failure, and that it is no tampering."""
    overlapping = MANIFEST.read_text().replace(
        "warmstart_val_seeds: 8}", "warmstart_val_seeds: 8, train_first_seed: 10000, train_num_seeds: 10}"
    )
    assert overlapping != MANIFEST.read_text()
    root = _finish(tmp_path / "study", overlapping)
    result = audit(root)
    assert result.returncode == 0, result.stdout
    assert "the study's own failure: the parity check 'training and evaluation task seeds are disjoint' failed" in (
        result.stdout
    )
    assert "the study itself reports 1 failure(s), above: results, not tampering" in result.stdout
