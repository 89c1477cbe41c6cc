"""What code runs (agentrepro.software): the harness's git state (commit, dirt, untracked included, ignored outputs and
the lock excluded), the package's files, and what a job ran unlike its lock, as the audit says it (audit/code.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import run_cli
from study_kit import git, git_commit_all

from agentrepro.attempts import ISA_FLAGS, machine, start_attempt
from agentrepro.audit.code import code_differences
from agentrepro.fileio import sha256_json
from agentrepro.software import (
    PACKAGE_DIR,
    changed_between,
    differences,
    harness_state,
    package_sha256,
    python_environment,
)


def test_clean_repository(tmp_path):
    """A fully committed tree reports HEAD and no dirt."""
    (tmp_path / "a.txt").write_text("a")
    head = git_commit_all(tmp_path)
    assert harness_state(tmp_path) == {"commit": head, "dirty": False, "dirty_paths": []}


def test_changes_untracked_and_renames_are_dirt_but_ignored_and_excluded_paths_are_not(tmp_path):
    """Modified, untracked and renamed files count; git-ignored outputs and the `ignore` paths do not."""
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    git_commit_all(tmp_path)
    (tmp_path / "a.txt").write_text("changed")
    git(tmp_path, "mv", "b.txt", "c.txt")
    (tmp_path / "new.txt").write_text("new")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "out.jsonl").write_text("{}")  # git-ignored by the kit's .gitignore
    (tmp_path / "x.lock.json").write_text("{}")
    state = harness_state(tmp_path, ignore=[tmp_path / "x.lock.json"])
    assert state["dirty"] is True
    assert state["dirty_paths"] == ["a.txt", "c.txt", "new.txt"]


def test_not_a_repository(tmp_path):
    """Outside git there is no commit, and the state says why."""
    state = harness_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is True and "not inside a git repository" in state["note"]


def _lock(packages: list[str], commit: str | None = "a" * 40) -> dict:
    return {
        "harness": {"commit": commit, "dirty": False},
        "python": {"version": "3.11.7", "packages": packages, "packages_sha256": sha256_json(packages)},
    }


def _ran(packages: list[str], commit: str | None = "a" * 40, dirty: bool = False, version: str = "3.11.7") -> dict:
    return {
        "harness": {"commit": commit, "dirty": dirty},
        "python": {"version": version, "packages": packages, "packages_sha256": sha256_json(packages)},
    }


def test_differences_name_each_package_commit_and_interpreter():
    """The same environment differs in nothing; otherwise every changed, added and removed package, the commit,
    uncommitted changes and the interpreter are each one phrase with the lock's value beside it."""
    frozen = ["numpy==2.2.0", "scipy==1.15.0", "torch==2.5.0"]
    assert differences(_lock(frozen), _ran(frozen)) == []
    ran = _ran(["numpy==2.3.1", "scipy==1.15.0", "tqdm==4.66.0"], commit="b" * 40, dirty=True, version="3.12.1")
    assert differences(_lock(frozen), ran) == [
        f"harness commit {'b' * 12} (the lock: {'a' * 12})",
        "harness with uncommitted changes (the lock: none)",
        "Python 3.12.1 (the lock: 3.11.7)",
        "numpy 2.3.1 (the lock: 2.2.0)",
        "torch absent (the lock: 2.5.0)",
        "tqdm 4.66.0 (the lock: absent)",
    ]


def test_the_package_hash_follows_its_files(tmp_path):
    """A copy of the package hashes as the package does; one changed byte, or a file added, changes the hash;
    compiled caches do not."""
    copy = tmp_path / "agentrepro"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert package_sha256(copy) == package_sha256()
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert package_sha256(copy) == package_sha256()
    (copy / "layout.py").write_text((copy / "layout.py").read_text() + "\n")
    assert package_sha256(copy) != package_sha256()


def test_the_machine_is_recorded_as_this_cpu_and_blas():
    """On Linux: the CPU's model name from /proc/cpuinfo, the vector instruction sets it has among those listed, and
    the BLAS numpy was built with, with the threads of every loaded library."""
    import numpy

    found = machine()
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert found["cpu_model"] and found["cpu_model"] in cpuinfo
    flags = set(next(line for line in cpuinfo.splitlines() if line.startswith("flags")).split(":")[1].split())
    assert found["isa"] == [flag for flag in ISA_FLAGS if flag in flags]
    assert found["blas"]["name"] == numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    assert all(lib["num_threads"] >= 1 for lib in found["blas"]["threads"])


def test_a_job_at_another_commit_than_its_lock_is_said_by_the_audit(tmp_path, monkeypatch):
    """A study frozen at one commit, its lock committed after (as a shipped lock is), and jobs started as `train`
    starts them (real attempts): a job at the lock's commit or at the commit that only added the lock is not named;
    a job after a commit that changed code is, with the commit and the changed file."""
    root = tmp_path / "study"
    root.mkdir()
    (root / "README").write_text("a")
    frozen = git_commit_all(root)
    (root / "manifests").mkdir()
    lock_file = "manifests/s.lock.json"
    lock = {"harness": harness_state(root, ignore=[root / lock_file]), "python": python_environment()}
    (root / lock_file).write_text(json.dumps(lock))
    monkeypatch.chdir(root)
    base = {"lock_path": lock_file}
    start_attempt(root / "runs/s/m/seed0", stage="train", command="agentrepro train", base=base)  # the lock untracked
    git_commit_all(root)  # the lock committed: nothing else changed
    start_attempt(root / "runs/s/m/seed1", stage="train", command="agentrepro train", base=base)
    (root / "README").write_text("b")
    later = git_commit_all(root)
    start_attempt(root / "runs/s/m/seed2", stage="train", command="agentrepro train", base=base)
    attempt = json.loads((root / "runs/s/m/seed2/provenance.json").read_text())["attempts"][-1]
    assert attempt["software"]["harness"] == {"commit": later, "dirty": False, "changed_since_lock": ["README"]}
    assert attempt["machine"]["cpu_model"]
    said = f"1 job(s) ran harness commit {later[:12]} (the lock: {frozen[:12]}, 1 file(s) changed: README)"
    assert code_differences("s", root) == [f"{said}: runs/s/m/seed2"]
    result = run_cli("audit", "s", cwd=root)
    assert f"differs from the lock: {said}" in result.stdout, result.stdout


def test_jobs_on_two_kinds_of_machine_are_said_with_their_folders(tmp_path):
    """Jobs whose attempts ran on another CPU: one line naming each kind with its jobs; jobs on one kind of machine
    (whatever threads their loaded libraries had at the start) say nothing of it."""
    (tmp_path / "manifests").mkdir()
    lock = {"harness": {"commit": None, "dirty": True}, "python": python_environment()}
    (tmp_path / "manifests" / "s.lock.json").write_text(json.dumps(lock))
    software = {"harness": {"commit": None, "dirty": True}, "python": lock["python"]}

    def job(seed: int, cpu: str, threads: int) -> None:
        blas = {"name": "openblas", "version": "0.3.30", "threads": [{"num_threads": threads}]}
        attempt = {"software": software, "machine": {"cpu_model": cpu, "isa": ["avx2"], "blas": blas}}
        run = tmp_path / "runs" / "s" / "m" / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "provenance.json").write_text(json.dumps({"attempts": [attempt]}))

    job(0, "AMD EPYC 9654", 16)
    job(1, "AMD EPYC 9654", 1)  # the threads of the libraries loaded at the start: not another machine
    assert code_differences("s", tmp_path) == []
    job(2, "Intel Xeon 8480", 16)
    assert code_differences("s", tmp_path) == [
        "the jobs ran on 2 kinds of machine: 2 on AMD EPYC 9654 (avx2); openblas 0.3.30 (runs/s/m/seed0, "
        "runs/s/m/seed1); 1 on Intel Xeon 8480 (avx2); openblas 0.3.30 (runs/s/m/seed2)"
    ]


def test_jobs_on_another_machine_than_the_lock_was_frozen_on_are_said(tmp_path):
    """A lock that records its freezing machine (as `freeze` writes it: no threads): the jobs that ran on another
    kind are named beside it; jobs on the same CPU and BLAS, whatever their threads, are not."""
    (tmp_path / "manifests").mkdir()
    blas = {"name": "openblas", "version": "0.3.30"}
    frozen = {"cpu_model": "AMD EPYC 9654", "architecture": "x86_64", "isa": ["avx2"], "blas": blas}
    lock = {"harness": {"commit": None, "dirty": True}, "python": python_environment(), "machine": frozen}
    (tmp_path / "manifests" / "s.lock.json").write_text(json.dumps(lock))
    software = {"harness": lock["harness"], "python": lock["python"]}
    for seed, cpu in enumerate(["AMD EPYC 9654", "Intel Xeon 8480", "Intel Xeon 8480"]):
        ran = {**frozen, "cpu_model": cpu, "blas": {**blas, "threads": [{"num_threads": 8}]}}
        run = tmp_path / "runs" / "s" / "m" / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "provenance.json").write_text(json.dumps({"attempts": [{"software": software, "machine": ran}]}))
    assert code_differences("s", tmp_path)[-1] == (
        "2 job(s) ran on another kind of machine than the lock was frozen on (AMD EPYC 9654 (avx2); openblas 0.3.30): "
        "2 on Intel Xeon 8480 (avx2); openblas 0.3.30 (runs/s/m/seed1, runs/s/m/seed2)"
    )
    (tmp_path / "runs" / "s" / "m" / "seed1" / "provenance.json").unlink()
    (tmp_path / "runs" / "s" / "m" / "seed2" / "provenance.json").unlink()
    assert code_differences("s", tmp_path) == []


def test_a_lock_commit_that_is_no_commit_never_reaches_git(tmp_path):
    """changed_between runs git only on two 40-hex commits: an option, a branch name or a short hash read from a
    forged lock gives None (not known), and git writes nothing."""
    (tmp_path / "a.txt").write_text("a")
    head = git_commit_all(tmp_path)
    out = tmp_path / "written"
    for forged in (f"--output={out}", "main", head[:7], head + "\n"):
        assert changed_between(tmp_path, forged, head) is None
    assert not out.exists()
    assert changed_between(tmp_path, head, head) == []
