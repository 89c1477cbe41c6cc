"""Numeric options and output paths: any value exits 0 or 2 (naming the option or path), never a traceback.

Options get text drawn from numbers of every size, NaN, infinities and junk; output paths are a folder
where a file is expected, a path under a file, a missing parent. Refusals come before any work, so the
output is never written.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hostile_kit import invoke, record, step_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("AGENTREPRO_HOSTILE_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ROWS = step_rows(3)
NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(
        ["nan", "-inf", "inf", "1e999", "0", "1", "-0", "2", "0.5", "1e-320", "", " ", "0x10", "1_000", "½"]
    ),
    st.text(max_size=8),
)

# (verb argv before the option, option, argv after it)
OPTIONS = [
    (["advantages", "--estimator", "gigpo"], "--gamma"),
    (["advantages", "--estimator", "graphgpo"], "--omega"),
    (["advantages", "--estimator", "grpo"], "--epsilon"),
    (["advantages", "--estimator", "gigpo"], "--step-weight"),
    (["advantages", "--estimator", "grpo"], "--invalid-penalty"),
    (["gae", "--lam", "0.9"], "--gamma"),
    (["gae", "--gamma", "0.9"], "--lam"),
    (["env", "show", "--env", "frozenlake"], "--seed"),
    (["env", "show", "--env", "frozenlake"], "--seeds"),
    (["env", "seeds", "--name", "FrozenLake", "--directive", "[0, 5]"], "--n-envs"),
]


def _argv(prefix: list[str], option: str, value: str, work: Path) -> list[str]:
    argv = [*prefix, f"{option}={value}"]
    if prefix[0] in ("advantages", "gae"):
        src = work / "in.jsonl"
        rows = (
            ROWS
            if prefix[0] == "advantages"
            else [{"id": "a", "rewards": [1.0, 0.0], "values": [0.0, 0.5], "mask": [1, 1]}]
        )
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        argv += [str(src), "-o", str(work / "out.jsonl")]
    if prefix[:2] == ["env", "seeds"]:
        pass
    return argv


@pytest.mark.parametrize("prefix, option", OPTIONS, ids=[f"{p[0]}{o}" for p, o in OPTIONS])
@SETTINGS
@given(value=NUMBER_TEXT)
def test_numeric_option_exits_0_or_2_naming_it(prefix, option, value):
    """Any text given to a numeric option: exit 0 (with a finite output), or 2 naming the option; no traceback."""
    if option == "--seeds" and value.strip() in ("",):
        value = "x"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        status, message = invoke(*_argv(prefix, option, value, work))
        ok = "Traceback" not in message and (
            status == 0 or (status == 2 and option.lstrip("-").replace("-", "_") in message.replace("-", "_"))
        )
        record("options", f"verb:{prefix[0]}", ok)
        assert ok, f"{option}={value!r}: exit {status}: {message[-500:]}"
        out = work / "out.jsonl"
        if status == 0 and out.exists():  # whatever was accepted produced finite JSON
            for line in out.read_text().splitlines():
                json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} written for {option}={value!r}"))


def _outputs(work: Path, study: Path) -> list[tuple[list, str]]:
    """(argv, the output path) of every verb that writes where it is told; `{OUT}` marks the output."""
    rows = work / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    seqs = work / "seqs.jsonl"
    seqs.write_text(json.dumps({"id": "a", "rewards": [1.0], "values": [0.0], "mask": [1]}) + "\n")
    responses = work / "responses.jsonl"
    responses.write_text(json.dumps("<answer>up</answer>") + "\n")
    lock = study / "manifests" / "demo.lock.json"
    outcomes = study / "runs" / "demo" / "grpo" / "seed0" / "eval" / "step10" / "outcomes.jsonl"
    model = work / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}\n")
    return [
        (["advantages", "--estimator", "grpo", rows, "-o", "{OUT}"], "file"),
        (["advantages", "--estimator", "grpo", rows, "-o", work / "ok.jsonl", "--diagnostics", "{OUT}"], "file"),
        (["gae", "--gamma", "1", "--lam", "1", seqs, "-o", "{OUT}"], "file"),
        (["bundle", "demo", "--root", study, "-o", "{OUT}"], "file"),
        (["freeze", study / "manifests" / "demo.yaml", "--root", study, "--allow-dirty", "-o", "{OUT}"], "file"),
        (["resolve", lock, "--method", "grpo", "--seed", "0", "-o", "{OUT}"], "resolve"),
        (["analyze", "--outcomes", outcomes, "--out", "{OUT}"], "dir"),
        (["train", "--config", study / "runs" / "demo" / "grpo" / "seed0" / "config.yaml", "--out", "{OUT}"], "dir"),
        (["env", "show", "--env", "sokoban", "--seed", "0", "--image", "{OUT}"], "file"),
        (["env", "replay", "--env", "sokoban", "--seed", "0", "--responses", responses, "--images", "{OUT}"], "dir"),
        (
            [
                "eval",
                "--model",
                model,
                "--env",
                "frozenlake",
                "--seeds",
                "1",
                "--server",
                "http://127.0.0.1:9",
                "--out",
                "{OUT}",
            ],
            "dir",
        ),
    ]


def _bad_targets(work: Path, kind: str) -> list[Path]:
    folder = work / "a-folder"
    folder.mkdir(exist_ok=True)
    a_file = work / "a-file"
    a_file.write_text("x")
    targets = [a_file / "under-a-file" / "out"]
    if kind in ("file", "resolve"):
        targets.append(folder)  # a folder where a file is expected
    if kind == "file":
        targets.append(work / "missing" / "out")  # a missing parent
    if kind == "dir":
        targets.append(a_file)  # a file where a folder is expected
    return targets


def test_unusable_output_paths_exit_2_before_any_work(frozen_study):
    """Every verb refuses a folder for a file, a path under a file and a missing parent, naming the path; nothing is written."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for argv, kind in _outputs(work, frozen_study):
            for target in _bad_targets(work, kind):
                before = sorted(p.name for p in work.rglob("*"))
                status, message = invoke(*[str(target) if a == "{OUT}" else a for a in argv])
                ok = status == 2 and str(target) in message and "Traceback" not in message
                record("output_paths", f"verb:{argv[0]}", ok)
                assert ok, f"{argv[0]} -> {target}: exit {status}: {message}"
                assert sorted(p.name for p in work.rglob("*")) == before, f"{argv[0]} wrote something before refusing"


def test_report_refuses_a_file_in_place_of_its_folder(frozen_study, analysis_doc):
    """`report` with reports/<study> being a file exits 2 naming it, before rendering."""
    from agentrepro.fileio import atomic_write_json

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        atomic_write_json(root / "analysis" / "demo" / "analysis.json", analysis_doc)
        (root / "reports").mkdir()
        (root / "reports" / "demo").write_text("not a folder")
        status, message = invoke("report", "demo", "--root", root, "--no-pdf")
        ok = status == 2 and str(root / "reports" / "demo") in message
        record("output_paths", "verb:report", ok)
        assert ok, message


def test_outputs_the_system_will_not_hold_exit_2_in_one_line(frozen_study):
    """Every verb told to write under /proc (which passes an `os.access` check as root) exits 2 naming the path, no traceback."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for argv, kind in _outputs(work, frozen_study):
            target = "/proc/agentrepro-out" + ("" if kind == "dir" else ".x")
            status, message = invoke(*[target if a == "{OUT}" else a for a in argv])
            ok = (
                status == 2
                and target in message
                and "Traceback" not in message
                and len(message.strip().splitlines()) == 1
            )
            record("output_paths", f"verb:{argv[0]}", ok)
            assert ok, f"{argv[0]} -> {target}: exit {status}: {message}"


@pytest.mark.parametrize(
    "argv",
    [
        ["advantages", "--estimator", "grpo", "{ROWS}", "-o", "/proc/agentrepro-out.jsonl"],
        [
            "env",
            "replay",
            "--env",
            "sokoban",
            "--seed",
            "0",
            "--responses",
            "{RESPONSES}",
            "--images",
            "/proc/agentrepro-out",
        ],
    ],
)
def test_an_unwritable_output_as_a_subprocess(tmp_path, argv):
    """As a user runs it: `-o /proc/x` and `--images /proc/x` end in one line and exit 2, no traceback."""
    from helpers import run_cli

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps("<answer>up</answer>") + "\n")
    done = run_cli(*[{"{ROWS}": rows, "{RESPONSES}": responses}.get(a, a) for a in argv], cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "/proc/agentrepro-out" in lines[0], done.stderr


CLAIM_TEXT = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda a, op, b, m: f"{a} {op} {b}{m}",
        st.sampled_from(["grpo", "gigpo", "grpo@relax", "", "a b", "é"]),
        st.sampled_from([">", "<", "==", ">=", "=", "!="]),
        st.sampled_from(["gigpo", "grpo", "", "grpo@x@y"]),
        st.sampled_from(
            [
                "",
                " ± 3pp",
                " +- 1e308 pp",
                " ± nan pp",
                " ± -3pp",
                " ± 0pp",
                " ± 100 percentage points",
                " ± 1e-320pp",
                " ± 3",
                "±3pp ±3pp",
            ]
        ),
    ),
)


@SETTINGS
@given(claim=CLAIM_TEXT)
def test_any_claim_text_exits_0_or_2_naming_the_claim(frozen_study, claim):
    """`analyze --claim TEXT` with any text: exit 0, or 2 with a message naming --claim; never a traceback."""
    outcomes = frozen_study / "runs" / "demo" / "grpo" / "seed0" / "eval" / "step10" / "outcomes.jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        status, message = invoke("analyze", "--outcomes", outcomes, "--claim", claim, "--out", Path(tmp) / "out")
    ok = "Traceback" not in message and (status == 0 or (status == 2 and "--claim" in message))
    record("options", "verb:analyze", ok)
    assert ok, f"--claim {claim!r}: exit {status}: {message[-400:]}"


@pytest.mark.parametrize("folder", ["/proc/self/x", "/proc/1", "/sys/kernel/agentrepro", "/dev/null/x"])
def test_a_pictures_folder_under_proc_sys_or_a_device_is_refused_naming_images(tmp_path, folder):
    """`env replay --images DIR` where nothing can be written: exit 2, one line naming --images and the path."""
    responses = tmp_path / "r.jsonl"
    responses.write_text('"Up"\n')
    argv = ["env", "replay", "--env", "frozenlake", "--seed", "0", "--responses", responses, "--images", folder]
    status, message = invoke(*argv)
    lines = message.strip().splitlines()
    assert status == 2 and len(lines) == 1 and "--images: " in lines[0] and folder in lines[0], message
