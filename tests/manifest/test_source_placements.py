"""Source parity for every backend of a study: a command-backend default and a verl-agent placement, each with its
own git checkout (real repositories made with `git init`), frozen, run, audited, analysed and reported as subprocesses."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import run_cli
from study_kit import BASE, DIGEST, fake_run, git, git_commit_all, write_study

pytestmark = pytest.mark.slow


def checkout(path, files: dict[str, str]) -> str:
    """A git repository at `path` holding `files`, committed; returns its commit."""
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pinned")
    return git(path, "rev-parse", "HEAD")


@pytest.fixture
def two_checkouts(tmp_path):
    """The study root (committed) and the two checkouts: the default's (command) and the verl-agent placement's."""
    port, official = tmp_path / "port", tmp_path / "verl-agent"
    port.mkdir()
    official.mkdir()
    port_commit = checkout(port, {"train.py": "print('port')\n", "advantage.py": "def adv():\n    return 0\n"})
    official_commit = checkout(
        official, {"recipe/GraphGPO/core_graph.py": "def graph():\n    return 1\n", "README.md": "x\n"}
    )
    manifest = {
        **BASE,
        "backend": {
            "name": "command",
            "repo": "example/port",
            "commit": port_commit,
            "command": "{python} train.py",
            "workdir": str(port),
            "sources": ["advantage.py", "train.py"],
        },
        "image": {"none": "a test command in the harness's own environment"},
        "backends": {
            "verl-agent": {
                "backend": {
                    "name": "verl-agent",
                    "repo": "langfengQ/verl-agent",
                    "commit": official_commit,
                    "workdir": str(official),
                    "sources": ["recipe/GraphGPO/core_graph.py"],
                },
                "image": {"runtime": "apptainer", "ref": "example.org/verl-agent:1.0", "digest": DIGEST},
            }
        },
        "methods": {
            "grpo": {"estimator": "grpo"},
            "gigpo": {"estimator": "gigpo", "gamma": 0.95},
            "gigpo@verl-agent": {"estimator": "gigpo", "gamma": 0.95},
        },
        "seeds": [0],
    }
    root = tmp_path / "root"
    root.mkdir()
    write_study(root, manifest)
    git_commit_all(root)
    return root, port, official


def freeze_and_run(root):
    result = run_cli("freeze", "manifests/demo.yaml", cwd=root)
    assert result.returncode == 0, result.stderr
    lock = json.loads((root / "manifests" / "demo.lock.json").read_text())
    for method in lock["manifest"]["methods"]:
        fake_run(root, lock, method, 0)
    return lock


def test_every_placement_is_pinned_run_and_audited(two_checkouts):
    """freeze pins both backends' sources; runs of each placement audit clean; an uncommitted edit of one algorithm file
    in the verl-agent checkout fails the audit naming the method, the placement and the file, and the report shows it."""
    root, port, official = two_checkouts
    lock = freeze_and_run(root)
    pinned = lock["backend_sources"]
    assert sorted(pinned) == ["command", "verl-agent"]
    assert pinned["command"]["files"] == {p: git(port, "hash-object", p) for p in ("advantage.py", "train.py")}
    assert pinned["verl-agent"] == {
        "commit": git(official, "rev-parse", "HEAD"),
        "workdir": str(official),
        "files": {"recipe/GraphGPO/core_graph.py": git(official, "hash-object", "recipe/GraphGPO/core_graph.py")},
    }
    recorded = json.loads((root / "runs" / "demo" / "gigpo@verl-agent" / "seed0" / "backend_sources.json").read_text())
    assert recorded["backend"] == "verl-agent" and recorded["files"] == pinned["verl-agent"]["files"]
    clean = run_cli("audit", "demo", "--require", "runs", cwd=root)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    (official / "recipe" / "GraphGPO" / "core_graph.py").write_text("def graph():\n    return 2  # patched locally\n")
    shutil.rmtree(root / "runs" / "demo" / "gigpo@verl-agent")
    fake_run(root, lock, "gigpo@verl-agent", 0)  # the job runs the patched checkout
    audit = run_cli("audit", "demo", "--require", "runs", cwd=root)
    assert audit.returncode == 1
    problems = [line for line in audit.stdout.splitlines() if "backend_sources.json" in line]
    run = "runs/demo/gigpo@verl-agent/seed0"
    assert sorted(
        line.split(": ")[0] for line in problems
    ) == sorted(  # the training and each evaluation by the backend
        f"{d}/backend_sources.json" for d in (run, f"{run}/eval/step0", f"{run}/eval/step5", f"{run}/eval/step10")
    ), audit.stdout
    assert all(
        "gigpo@verl-agent on verl-agent: recipe/GraphGPO/core_graph.py ran as blob" in line for line in problems
    ), audit.stdout

    assert run_cli("analyze", "demo", cwd=root).returncode == 0
    rows = json.loads((root / "analysis" / "demo" / "analysis.json").read_text())["provenance"]["source_parity"]
    by_method = {r["method"]: r for r in rows}
    assert {m: (r["placement"], r["status"]) for m, r in by_method.items()} == {
        "grpo": ("command", "pass"),
        "gigpo": ("command", "pass"),
        "gigpo@verl-agent": ("verl-agent", "fail"),
    }
    assert [(d["seed"], d["job"], d["path"]) for d in by_method["gigpo@verl-agent"]["differences"]] == [
        (0, job, "recipe/GraphGPO/core_graph.py") for job in ("train", "eval step 0", "eval step 5", "eval step 10")
    ]
    report = run_cli("report", "demo", "--no-pdf", cwd=root)
    assert report.returncode == 0, report.stderr
    html = (root / "reports" / "demo" / "report.html").read_text()
    section = html[html.index('<section id="sources">') : html.index('<section id="appendix">')]
    failed = [row for row in section.split("<tr") if "parity-fail" in row]
    assert len(failed) == 1 and "gigpo@verl-agent" in failed[0] and "<td>verl-agent</td>" in failed[0]
    assert "recipe/GraphGPO/core_graph.py" in failed[0] and section.count("parity-pass") == 2
    summary = html[html.index('<section id="summary">') : html.index('<section id="equivalence">')]
    assert "gigpo@verl-agent (verl-agent) did not run the pinned sources: recipe/GraphGPO/core_graph.py" in summary


def test_a_lock_from_before_placements_asks_for_a_new_freeze(two_checkouts):
    """A lock whose backend_sources are the old one-backend form {commit, files}: audit and analyze exit 2 with one
    line asking to freeze again, no traceback; freezing again replaces it with the per-placement form."""
    from agentrepro.fileio import atomic_write_json
    from agentrepro.lockfile import seal

    root, _, _ = two_checkouts
    lock = freeze_and_run(root)
    old = dict(lock, backend_sources=lock["backend_sources"]["command"])
    del old["backend_sources"]["workdir"]
    atomic_write_json(
        root / "manifests" / "demo.lock.json", seal({k: v for k, v in old.items() if k != "lock_self_sha256"})
    )
    for verb in (("audit", "demo"), ("analyze", "demo")):
        result = run_cli(*verb, cwd=root)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "demo.lock.json: backend_sources:" in lines[0] and "freeze again" in lines[0], (
            result.stderr
        )
    assert (
        run_cli("freeze", "manifests/demo.yaml", cwd=root).returncode == 0
    )  # as the line says: the new lock pins both
    assert sorted(json.loads((root / "manifests" / "demo.lock.json").read_text())["backend_sources"]) == [
        "command",
        "verl-agent",
    ]
