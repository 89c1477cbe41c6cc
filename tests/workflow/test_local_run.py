"""The tiny study end to end on this machine: `snakemake --cores 2` from manifest to report, then reruns.

One real run of tests/workflow/manifests/wf-tiny.yaml (2 methods x 1 seed, 2 training steps, 4 tasks) is
shared by the tests of this module, which run in file order: the finished run, what `agentrepro status` says of it
and of a copy with a training stopped mid-run, a rerun that does nothing, and a deleted outcome that re-runs only
its evaluation (killed once and retried) and what depends on it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import run_cli
from wfkit import TINY, processes_in, snakemake

CONFIG = ("--config", "manifest=manifests/wf-tiny.yaml", "freeze_flags=--allow-dirty")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A working directory where the tiny study ran to its report (`snakemake --cores 2`)."""
    workdir = tmp_path_factory.mktemp("wf-local")
    (workdir / "manifests").mkdir()
    shutil.copy(TINY, workdir / "manifests" / TINY.name)
    proc = snakemake(workdir, "--cores", "2", *CONFIG, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    return workdir


def _dry_run_jobs(workdir: Path) -> list[str]:
    proc = snakemake(workdir, "-n", *CONFIG)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = []
    for block in re.split(r"^(?=(?:local)?rule \w+:)", proc.stdout, flags=re.M)[1:]:
        block = block.split("\n[", 1)[0]
        rule = re.match(r"(?:local)?rule (\w+):", block)
        assert rule, block
        name = rule.group(1)
        wildcards = re.search(r"^    wildcards: (.*)$", block, re.M)
        jobs.append(name + (f" {wildcards.group(1)}" if wildcards else ""))
    return jobs


def test_the_study_runs_to_its_report(finished):
    """Every run is trained and sealed, every checkpoint (0 and 2) evaluated, analysed and reported."""
    study = finished / "runs" / "wf-tiny"
    for method in ("grpo", "graphgpo"):
        run = study / method / "seed0"
        assert (run / "OUTPUTS.sha256").is_file() and (run / "config.yaml").is_file()
        for step in (0, 2):
            rows = [
                json.loads(line) for line in (run / "eval" / f"step{step}" / "outcomes.jsonl").read_text().splitlines()
            ]
            assert len(rows) == 4 and {r["method"] for r in rows} == {method} and {r["step"] for r in rows} == {step}
        attempts = json.loads((run / "provenance.json").read_text())["attempts"]
        assert attempts[-1]["status"] == "ok"
        assert attempts[-1]["cuda_visible_devices"] == ""  # gpus: 0 -> the GPU slot wrapper hides every GPU
        assert (run / "logs" / "train.log").is_file() and (run / "logs" / "train.benchmark.tsv").is_file()
    # one shared warm start for the seed: both methods start from its step-0 checkpoint and show its step-0 outcomes
    warm = sorted((study / "_warmstart").iterdir())
    assert [w.name[:6] for w in warm] == ["seed0-"] and (warm[0] / "OUTPUTS.sha256").is_file()
    step0 = [
        [
            {k: v for k, v in json.loads(line).items() if k != "method"}
            for line in (path / "eval" / "step0" / "outcomes.jsonl").read_text().splitlines()
        ]
        for path in (warm[0], study / "grpo" / "seed0", study / "graphgpo" / "seed0")
    ]
    assert step0[0] == step0[1] == step0[2]
    assert all(
        (study / m / "seed0" / "checkpoints" / "step0.pt").read_bytes()
        == (warm[0] / "checkpoints" / "step0.pt").read_bytes()
        for m in ("grpo", "graphgpo")
    )
    assert (finished / "manifests" / "wf-tiny.lock.json").is_file()
    assert (finished / "analysis" / "wf-tiny" / "analysis.json").is_file()
    assert (finished / "reports" / "wf-tiny" / "report.html").stat().st_size > 0
    assert (finished / "reports" / "wf-tiny" / "report.pdf").read_bytes()[:5] == b"%PDF-"


def status(root: Path) -> dict:
    shown = run_cli("status", "wf-tiny", "--root", root, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_status_names_every_job_where_it_stands_and_the_time_left(finished, study_dir, tmp_path):
    """`agentrepro status`: a study not begun is every job pending, with no time left to estimate; the finished study
    every job done, each attempt's duration known; a copy whose graphgpo training was started again is `running`
    while its process lives (stopped with SIGSTOP at its attempt's start) and `stopped` once it is killed, with the
    time left estimated from the grpo training's duration."""
    fresh = status(study_dir)
    names = [j["name"] for j in fresh["jobs"]]
    per_run = ["train {} seed0", "eval {} seed0 step0", "eval {} seed0 step2"]
    assert names == [
        "freeze",
        "warm start seed0",
        *(n.format("grpo") for n in per_run),
        *(n.format("graphgpo") for n in per_run),
        "analyze",
        "report",
    ]
    assert fresh["counts"] == {"pending": 10} and fresh["left_s"] is None
    done = status(finished)
    assert done["counts"] == {"done": 10} and done["not_estimated"] == 0
    trains = {j["method"]: j for j in done["jobs"] if j["kind"] == "train"}
    assert all(j["duration_s"] is not None and j["duration_s"] >= 0 for j in trains.values())
    copy = tmp_path / "copy"
    shutil.copytree(finished, copy, symlinks=True)
    run = copy / "runs" / "wf-tiny" / "graphgpo" / "seed0"
    (run / "OUTPUTS.sha256").unlink()
    provenance = run / "provenance.json"
    before = len(json.loads(provenance.read_text())["attempts"])
    train = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentrepro",
            "train",
            "--config",
            str(run / "config.yaml"),
            "--out",
            str(run),
            "--no-resume",
        ],
        cwd=copy,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            attempts = json.loads(provenance.read_text())["attempts"]
            if len(attempts) > before and attempts[-1]["status"] == "running":
                os.kill(train.pid, signal.SIGSTOP)
                break
            time.sleep(0.02)
        else:
            pytest.fail("the training's new attempt never opened")
        running = {j["name"]: j for j in status(copy)["jobs"]}["train graphgpo seed0"]
        assert running["state"] == "running" and f"pid {train.pid}" in running["detail"], running
        assert running["detail"].startswith("step 0 of 2") and running["attempts"] == before + 1
    finally:
        train.kill()
        train.wait()
    after = status(copy)
    stopped = {j["name"]: j for j in after["jobs"]}["train graphgpo seed0"]
    assert stopped["state"] == "stopped" and "never closed" in stopped["detail"]
    assert stopped["left_s"] == trains["grpo"]["duration_s"]  # the one finished training's duration
    # starting over removed its evaluations: pending again, each estimated from grpo's evaluations
    # and the analysis and report on disk read runs being redone: stale, as snakemake would run them again
    assert after["counts"] == {"done": 5, "stopped": 1, "pending": 2, "stale": 2}
    left = [j for j in after["jobs"] if j["state"] in ("stopped", "pending")]
    evals = [j["duration_s"] for j in done["jobs"] if j["kind"] == "eval" and j["method"] == "grpo"]
    assert [j["left_s"] for j in left[1:]] == [sorted(evals)[0] + (sorted(evals)[1] - sorted(evals)[0]) / 2] * 2
    assert after["left_s"] == pytest.approx(sum(j["left_s"] for j in left)) and after["not_estimated"] == 2
    table = run_cli("status", "wf-tiny", "--root", copy).stdout
    assert re.search(r"train graphgpo seed0 +stopped +step 0 of 2; its process is gone", table), table
    assert re.search(r"analyze +stale +analysis/wf-tiny/analysis.json reads jobs not done", table), table
    assert "10 jobs: 5 done, 1 stopped, 2 stale, 2 pending; about" in table


def test_rerunning_a_finished_study_does_nothing(finished):
    """`snakemake -n` on the finished study has nothing to do."""
    proc = snakemake(finished, "-n", *CONFIG)
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr


def _kill_first_attempt(workdir: Path, provenance: Path, stop: threading.Event, killed: list) -> None:
    """Wait until the evaluation's new attempt is running, then SIGKILL that process (the test's own child)."""
    before = len(json.loads(provenance.read_text())["attempts"]) if provenance.exists() else 0
    while not stop.is_set():
        try:
            attempts = json.loads(provenance.read_text())["attempts"]
        except (OSError, ValueError, KeyError):
            attempts = []
        if len(attempts) > before and attempts[-1]["status"] == "running":
            for pid in processes_in(workdir, "agentrepro eval --run runs/wf-tiny/grpo/seed0 --step 2"):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            if killed:
                return
        time.sleep(0.05)


def test_deleted_outcomes_rerun_only_that_evaluation_and_a_killed_attempt_is_retried(finished):
    """Deleting one outcome file re-runs that eval, analyze and report only; its killed attempt is recorded, and its
    retry asks more runtime and memory, as the manifest's resources.runtime_retry_min and mem_retry_mb say."""
    run = finished / "runs" / "wf-tiny" / "grpo" / "seed0"
    target = run / "eval" / "step2" / "outcomes.jsonl"
    others = {p: p.stat().st_mtime_ns for p in (finished / "runs").rglob("outcomes.jsonl") if p != target}
    seals = {p: p.stat().st_mtime_ns for p in (finished / "runs").rglob("seed0/OUTPUTS.sha256")}
    target.unlink()

    planned = _dry_run_jobs(finished)
    assert sorted(planned) == sorted(["eval method=grpo, seed=0, step=2", "analyze", "report", "all"]), planned

    stop, killed = threading.Event(), []
    killer = threading.Thread(
        target=_kill_first_attempt, args=(finished, run / "eval" / "step2" / "provenance.json", stop, killed)
    )
    killer.start()
    try:
        proc = snakemake(finished, "--cores", "2", "--retries", "1", *CONFIG, timeout=600)
    finally:
        stop.set()
        killer.join()
    assert killed, "the evaluation's first attempt was never seen running"
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    shown = [
        dict(kv.split("=", 1) for kv in line.split(", ")) for line in re.findall(r"^    resources: (.*)$", out, re.M)
    ]
    asked = [(r.get("mem_mb"), r.get("runtime")) for r in shown]
    # the retry asks resources.runtime_retry_min (5) minutes and resources.mem_retry_mb (250) MB more
    assert ("1000", "10") in asked and ("1250", "15") in asked, asked
    assert target.is_file()
    attempts = json.loads((run / "eval" / "step2" / "provenance.json").read_text())["attempts"]
    assert [a["status"] for a in attempts[-2:]] == ["killed", "ok"]
    assert all(p.stat().st_mtime_ns == t for p, t in others.items()), "another run's outcomes were rewritten"
    assert all(p.stat().st_mtime_ns == t for p, t in seals.items()), "a training run was redone"
    done = snakemake(finished, "-n", *CONFIG)
    assert "Nothing to be done" in done.stdout + done.stderr


def test_a_changed_manifest_stops_before_any_job(finished):
    """After the manifest changes, the old lock stops the workflow with the freeze instruction; nothing runs."""
    manifest = finished / "manifests" / "wf-tiny.yaml"
    original = manifest.read_text()
    manifest.write_text(original.replace("seeds: [0]", "seeds: [0, 1]"))
    try:
        proc = snakemake(finished, "--cores", "2", *CONFIG)
    finally:
        manifest.write_text(original)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "agentrepro freeze" in out
    assert not (finished / "runs" / "wf-tiny" / "grpo" / "seed1").exists()


def test_a_forged_outcome_passes_every_hash_and_fails_its_re_evaluation(finished, tmp_path):
    """The bundle ships each run's final checkpoint (step 2, not step 0), and `audit --bundle --re-eval` plays it
    again: every outcome as recorded. A forger who flips one final outcome, mends its attempt's count, re-seals that
    evaluation and runs analyze and report again passes the audit of hashes and recounts; played again, the checkpoint names the flipped task."""
    from helpers import run_cli, tar_members

    from agentrepro.audit.reeval import TaskSample
    from agentrepro.seal import write_outputs_manifest

    bundle = tmp_path / "wf-tiny.tar.gz"
    assert run_cli("bundle", "wf-tiny", "-o", bundle, cwd=finished).returncode == 0
    members = tar_members(bundle)
    run = "runs/wf-tiny/grpo/seed0/checkpoints/"
    assert run + "step2.pt" in members and run + "step0.pt" not in members
    honest = run_cli("audit", "--bundle", bundle, "--re-eval", cwd=tmp_path, timeout=600)
    assert honest.returncode == 0, honest.stdout + honest.stderr
    assert honest.stdout.count("4 episode(s) played again, each as recorded") == 2, honest.stdout
    assert "card: final checkpoints shipped: 2 of 2 run(s)" in honest.stdout
    assert "card: outcomes re-derived from the checkpoints: yes (2 run(s), each as recorded)" in honest.stdout

    forged = tmp_path / "forged"
    shutil.copytree(finished, forged, ignore=shutil.ignore_patterns(".snakemake"))
    evaluation = forged / "runs" / "wf-tiny" / "grpo" / "seed0" / "eval" / "step2"
    rows = [json.loads(line) for line in (evaluation / "outcomes.jsonl").read_text().splitlines()]
    rows[1]["success"] = 1 - rows[1]["success"]
    (evaluation / "outcomes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    provenance = json.loads((evaluation / "provenance.json").read_text())
    provenance["attempts"][-1]["successes"] = sum(r["success"] for r in rows)  # the count its attempt records
    (evaluation / "provenance.json").write_text(json.dumps(provenance, indent=2))
    write_outputs_manifest(evaluation)
    for verb in ("analyze", "report"):
        redone = run_cli(verb, "wf-tiny", "--root", forged, *(("--no-pdf",) if verb == "report" else ()), timeout=600)
        assert redone.returncode == 0, redone.stderr[-2000:]
    assert run_cli("bundle", "wf-tiny", "-o", tmp_path / "forged.tar.gz", cwd=forged).returncode == 0
    passes = run_cli("audit", "--bundle", tmp_path / "forged.tar.gz", cwd=tmp_path, timeout=600)
    assert passes.returncode == 0, passes.stdout + passes.stderr  # what the hashes and the recount cannot see
    seed = next(s for s in range(100) if 1 in TaskSample(2, s).positions(4))  # a sample holding the flipped task
    caught = run_cli(
        "audit", "--bundle", tmp_path / "forged.tar.gz", "--re-eval", "--tasks", "2", "--tasks-seed", seed, cwd=tmp_path
    )
    assert caught.returncode == 1, caught.stdout + caught.stderr
    flipped = f"runs/wf-tiny/grpo/seed0/eval/step2/outcomes.jsonl: task {rows[1]['task_id']} episode 0: success"
    assert flipped in caught.stdout and "not what the shipped checkpoint plays" in caught.stdout, caught.stdout
    assert f"2 episode(s) of 2 task(s) played again (--tasks 2 --tasks-seed {seed}: " in caught.stdout
    assert "), 1 not as recorded" in caught.stdout and rows[1]["task_id"] in caught.stdout
    assert "card: outcomes re-derived from the checkpoints: no (1 of 2 run(s) played otherwise)" in caught.stdout
