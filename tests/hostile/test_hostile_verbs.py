"""Every verb, given one hostile input file: exit 2 (audit: 1 or 2) naming the file, never a traceback.

In-process (`agentrepro.cli.main`) for many examples per verb, and as a subprocess for a few, as a user
would run it. The hostile edits are those of hostile_kit.attacks(): a value no contract accepts, bytes that
are not UTF-8, or a key given twice.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers import run_cli
from hostile_kit import attacks, record, refused, step_rows
from hypothesis import HealthCheck, given, settings

from agentrepro.reading import load_json

EXAMPLES = int(os.environ.get("AGENTREPRO_HOSTILE_EXAMPLES", "60"))
SUBPROCESS_EXAMPLES = max(3, EXAMPLES // 12)
SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
IN_PROCESS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
SUBPROCESS = settings(max_examples=SUBPROCESS_EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)

STEP_ROWS = step_rows(2)
SEQUENCES = [{"id": "a", "rewards": [0.0, 1.0], "values": [0.1, 0.2], "mask": [1, 1]}]


@pytest.fixture(scope="module")
def analysis_study(tmp_path_factory) -> Path:
    """analysis_synth's toy study (runs with every side file, no analysis yet)."""
    from analysis_synth import make_study

    return make_study(tmp_path_factory.mktemp("astudy"), study="toy", n_tasks=6, steps=(5,))


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _case(verb: str, work: Path, study: Path, astudy: Path, analysis_doc: dict):
    """(argv, hostile file, its format, the valid document, allowed exit statuses) for one verb."""
    from study_kit import BASE, write_study

    run = study / "runs" / "demo" / "grpo" / "seed0"
    if verb == "freeze-manifest":
        write_study(work)
        path = work / "manifests" / "demo.yaml"
        return ["freeze", path, "--root", work, "--allow-dirty"], path, "yaml", BASE, (2,)
    if verb == "freeze-reference":
        write_study(work)
        path = work / "manifests" / "references" / "demo.yaml"
        return (
            ["freeze", work / "manifests" / "demo.yaml", "--root", work, "--allow-dirty"],
            path,
            "yaml",
            yaml.safe_load(path.read_text()),
            (2,),
        )
    if verb == "command":
        write_study(work)
        path = work / "manifests" / "demo.yaml"
        return ["command", path, "--method", "grpo", "--seed", "0"], path, "yaml", BASE, (2,)
    if verb == "resolve":
        path = work / "demo.lock.json"
        return (
            ["resolve", path, "--method", "grpo", "--seed", "0", "-o", work / "c.yaml"],
            path,
            "json",
            load_json(study / "manifests" / "demo.lock.json"),
            (2,),
        )
    if verb == "train":
        path = work / "config.yaml"
        return (
            ["train", "--config", path, "--out", work / "run"],
            path,
            "yaml",
            yaml.safe_load((run / "config.yaml").read_text()),
            (2,),
        )
    if verb == "eval":
        target = _copy(run, work / "run")
        path = target / "resolved_config.yaml"
        return ["eval", "--run", target, "--step", "10"], path, "yaml", yaml.safe_load(path.read_text()), (2,)
    if verb == "analyze-outcomes":
        path = work / "outcomes.jsonl"
        rows = [json.loads(line) for line in (run / "eval" / "step10" / "outcomes.jsonl").read_text().splitlines()]
        return ["analyze", "--outcomes", path, "--out", work / "out"], path, "jsonl", rows, (2,)
    if verb == "analyze-reference":
        outcomes = work / "outcomes.jsonl"
        shutil.copy(run / "eval" / "step10" / "outcomes.jsonl", outcomes)
        path = work / "ref.yaml"
        doc = yaml.safe_load((study / "manifests" / "references" / "demo.yaml").read_text())
        doc["values"] = {"grpo": doc["values"]["gigpo"]}
        return ["analyze", "--outcomes", outcomes, "--reference", path, "--out", work / "out"], path, "yaml", doc, (2,)
    if verb == "analyze-study":
        root = _copy(astudy, work / "root")
        which = [
            "runs/toy/grpo/seed0/metrics.jsonl",
            "runs/toy/graphgpo/seed1/provenance.json",
            "manifests/toy.lock.json",
            "runs/toy/grpo/seed1/timings.jsonl",
        ]
        rel = which[len(str(work)) % len(which)]
        path = root / rel
        fmt = "json" if rel.endswith(".json") else "jsonl"
        doc = load_json(path) if fmt == "json" else [json.loads(x) for x in path.read_text().splitlines()]
        return ["analyze", "toy", "--root", root], path, fmt, doc, (2,)
    if verb == "report":
        path = work / "analysis" / "demo" / "analysis.json"
        path.parent.mkdir(parents=True)
        return ["report", "demo", "--root", work, "--no-pdf"], path, "json", analysis_doc, (2,)
    if verb == "audit":
        root = _copy(study, work / "root")
        which = [
            "manifests/demo.lock.json",
            "runs/demo/grpo/seed0/provenance.json",
            "runs/demo/grpo/seed0/eval/step10/outcomes.jsonl",
            "runs/demo/gigpo/seed1/resolved_config.yaml",
            "manifests/demo.yaml",
        ]
        rel = which[len(str(work)) % len(which)]
        path = root / rel
        fmt = {"json": "json", "jsonl": "jsonl", "yaml": "yaml"}[rel.rsplit(".", 1)[1]]
        doc = (
            load_json(path)
            if fmt == "json"
            else [json.loads(x) for x in path.read_text().splitlines()]
            if fmt == "jsonl"
            else yaml.safe_load(path.read_text())
        )
        return ["audit", "demo", "--root", root], path, fmt, doc, (1, 2)
    if verb == "bundle":
        root = _copy(study, work / "root")
        path = root / "manifests" / "demo.lock.json"
        return ["bundle", "demo", "--root", root, "-o", work / "b.tar.gz"], path, "json", load_json(path), (2,)
    if verb == "advantages":
        path = work / "rows.jsonl"
        return ["advantages", "--estimator", "grpo", path, "-o", work / "out.jsonl"], path, "jsonl", STEP_ROWS, (2,)
    if verb == "gae":
        path = work / "seqs.jsonl"
        return ["gae", "--gamma", "1", "--lam", "1", path, "-o", work / "out.jsonl"], path, "jsonl", SEQUENCES, (2,)
    if verb == "env-replay":
        path = work / "episodes.jsonl"
        return (
            ["env", "replay", "--env", "frozenlake", "--episodes", path],
            path,
            "jsonl",
            [{"seed": 1, "responses": ["Up"]}],
            (2,),
        )
    raise AssertionError(verb)


VERBS = [
    "freeze-manifest",
    "freeze-reference",
    "command",
    "resolve",
    "train",
    "eval",
    "analyze-outcomes",
    "analyze-reference",
    "analyze-study",
    "report",
    "audit",
    "bundle",
    "advantages",
    "gae",
    "env-replay",
]


def _attack(verb, attack, frozen_study, analysis_study, analysis_doc, *, subprocess: bool):
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        argv, path, fmt, doc, allowed = _case(verb, work, frozen_study, analysis_study, analysis_doc)
        path.write_bytes(attack.render(fmt, doc))
        if subprocess:
            done = run_cli(*argv, cwd=work)
            status, stderr = done.returncode, done.stderr + done.stdout
        else:
            from hostile_kit import invoke

            status, stderr = invoke(*argv)
        ok = refused(status, stderr, path, allowed=allowed)
        record(attack.klass_for(fmt, doc), f"verb:{verb.split('-')[0]}", ok)
        assert ok, f"{verb}: exit {status}, stderr: {stderr[-2000:]}"


@pytest.mark.parametrize("verb", VERBS)
@IN_PROCESS
@given(data=attacks())
def test_verb_refuses_a_hostile_file(frozen_study, analysis_study, analysis_doc, verb, data):
    """The verb exits 2 (audit 1 or 2) with a message naming the hostile file, whatever the attack (in-process)."""
    _attack(verb, data, frozen_study, analysis_study, analysis_doc, subprocess=False)


@pytest.mark.slow
@pytest.mark.parametrize("verb", VERBS)
@SUBPROCESS
@given(data=attacks())
def test_verb_refuses_a_hostile_file_as_a_subprocess(frozen_study, analysis_study, analysis_doc, verb, data):
    """The same, run as a user would (`python -m agentrepro ...`): exit 2 naming the file, no traceback."""
    _attack(verb, data, frozen_study, analysis_study, analysis_doc, subprocess=True)


@pytest.mark.parametrize("verb", ["advantages", "gae", "env-replay"])
@IN_PROCESS
@given(data=attacks())
def test_hostile_stdin_is_refused_naming_stdin(tmp_path, verb, data):
    """Hostile step rows, sequences or episodes on standard input: exit 2 naming <stdin>."""
    from hostile_kit import invoke

    doc = {"advantages": STEP_ROWS, "gae": SEQUENCES, "env-replay": [{"seed": 1, "responses": ["Up"]}]}[verb]
    argv = {
        "advantages": ["advantages", "--estimator", "grpo", "-", "-o", "-"],
        "gae": ["gae", "--gamma", "1", "--lam", "1", "-", "-o", "-"],
        "env-replay": ["env", "replay", "--env", "frozenlake", "--episodes", "-"],
    }[verb]
    status, stderr = invoke(*argv, stdin=data.render("jsonl", doc))
    ok = refused(status, stderr, "<stdin>", "-")
    record(data.klass_for("jsonl", doc), f"verb:{verb.split('-')[0]}:stdin", ok)
    assert ok, f"exit {status}: {stderr}"
