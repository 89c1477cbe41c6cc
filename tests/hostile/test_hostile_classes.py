"""One explicit test per failure class of hostile input, each through the command line as a subprocess.

(The property suites beside this file generate many inputs per class; these pin the cases the issue named.)
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO, run_cli
from hostile_kit import alias_bomb, record

STEP_ROWS = [
    {
        "group": "g0",
        "traj": f"t{i}",
        "turn": 0,
        "state": "s0",
        "next_state": "success",
        "reward": 1.0,
        "episode_reward": 1.0,
        "valid": True,
        "success": True,
    }
    for i in range(3)
]


def _demo(tmp_path: Path, **changes) -> Path:
    """study_kit's demo study under tmp_path with top-level or dotted keys changed; returns the manifest."""
    from study_kit import BASE, set_key, write_study

    manifest = BASE
    for key, value in changes.items():
        manifest = set_key(manifest, key.replace("__", "."), value)
    return write_study(tmp_path, manifest)


def _freeze(manifest: Path, *extra) -> subprocess.CompletedProcess:
    return run_cli("freeze", manifest, "--root", manifest.parent.parent, "--allow-dirty", *extra, timeout=300)


def _one_line(result: subprocess.CompletedProcess, *names: str, status: int = 2) -> None:
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) >= 1
    last = result.stderr.strip().splitlines()[-1]
    for name in names:
        assert name in last, last


# --------------------------------------------------------------------------------------------- encoding


def test_manifest_that_is_not_utf8_names_file_and_line(tmp_path):
    """A manifest with a byte that is not UTF-8 is refused naming the file and its line (not a UnicodeDecodeError traceback)."""
    manifest = _demo(tmp_path)
    lines = manifest.read_bytes().split(b"\n")
    manifest.write_bytes(b"\n".join([*lines[:3], lines[3] + b"\xff", *lines[4:]]))
    _one_line(_freeze(manifest), str(manifest), "line 4", "not UTF-8")
    record("encoding", "verb:freeze")


def test_control_character_in_yaml_is_refused_with_the_line(tmp_path):
    """A raw control character in a YAML file is refused naming the line (not a yaml.reader.ReaderError traceback)."""
    manifest = _demo(tmp_path)
    manifest.write_text(manifest.read_text().replace("title: a test study", "title: a test\x07study"))
    _one_line(_freeze(manifest), str(manifest), "control character U+0007")
    record("encoding", "verb:freeze")


def test_lone_surrogate_in_a_lock_is_refused(tmp_path):
    """A lone surrogate escape in a lock is refused on reading (not a UnicodeEncodeError in its canonical JSON)."""
    lock = tmp_path / "demo.lock.json"
    lock.write_text('{"lock_version": 1, "study": "\\udc80"}')
    _one_line(
        run_cli("resolve", lock, "--method", "grpo", "--seed", "0", "-o", tmp_path / "c.yaml"),
        str(lock),
        "study",
        "U+DC80",
    )
    record("encoding", "verb:resolve")


def test_argument_that_is_not_utf8_is_refused():
    """A command-line argument holding bytes that are not UTF-8 is refused in one line, naming its position."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrepro",
            "env",
            "show",
            "--env",
            "frozenlake",
            "--seed",
            "1",
            "--param",
            b"size=\xff",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 2 and "argument 8" in done.stderr and "Traceback" not in done.stderr
    record("encoding", "verb:env")


# --------------------------------------------------------------------------------- nesting and numbers


@pytest.mark.parametrize(
    "seed, shown",
    [(10**30, "outside the 64-bit range"), (1e30, "expected an integer"), (2**32, "expected a value <= 4294967295")],
)
def test_huge_seed_is_refused_at_freeze_naming_the_field(tmp_path, seed, shown):
    """A seed of 1e30 (as an integer or a float) or 2**32 is refused by freeze, naming seeds[1], before any run could fail on it in train."""
    manifest = _demo(tmp_path, seeds=[0, seed])
    _one_line(_freeze(manifest), str(manifest), "seeds[1]", shown)
    record("nesting_and_huge_numbers", "verb:freeze")


@pytest.mark.parametrize("tasks, shown", [(10**9, "expected a value <= 100000"), ("1e9", "expected an integer")])
def test_huge_task_count_is_refused_naming_eval_tasks(tmp_path, tasks, shown):
    """`eval.tasks: 1e9` is refused naming eval.tasks (not an OverflowError or MemoryError)."""
    manifest = _demo(tmp_path, eval__tasks=tasks)
    _one_line(_freeze(manifest), str(manifest), "eval.tasks", shown)
    record("nesting_and_huge_numbers", "verb:freeze")


def test_deeply_nested_manifest_is_refused(tmp_path):
    """A manifest nested 5,000 deep is refused naming the file (not a RecursionError)."""
    manifest = _demo(tmp_path)
    manifest.write_text(manifest.read_text() + "extra: " + "[" * 5000 + "]" * 5000 + "\n")
    _one_line(_freeze(manifest), str(manifest), "nested deeper than")
    record("nesting_and_huge_numbers", "verb:freeze")


def test_seed_range_of_a_trillion_is_refused():
    """`env show --seeds 0-1000000000000` is refused naming --seeds (not a MemoryError)."""
    _one_line(run_cli("env", "show", "--env", "frozenlake", "--seeds", "0-1000000000000"), "--seeds")
    record("nesting_and_huge_numbers", "verb:env")


def test_reward_beyond_int64_is_refused_with_the_line(tmp_path):
    """A step row whose reward is an integer beyond 64 bits is refused naming the file, line and field."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(json.dumps(r) + "\n" for r in STEP_ROWS).replace(
            '"reward": 1.0', '"reward": 123456789012345678901234567890', 1
        )
    )
    _one_line(
        run_cli("advantages", "--estimator", "grpo", rows, "-o", tmp_path / "o.jsonl"), str(rows), "line 1", "reward"
    )
    assert not (tmp_path / "o.jsonl").exists()
    record("nesting_and_huge_numbers", "verb:advantages")


# ------------------------------------------------------------------------------------- NaN and infinity


@pytest.mark.parametrize("verb", ["gae", "advantages"])
def test_gamma_nan_is_refused_naming_the_option(tmp_path, verb):
    """`--gamma nan` is refused by argparse naming --gamma (not a traceback in the JSON writer)."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "rewards": [1.0], "values": [0.0], "mask": [1]}) + "\n")
    extra = ["--lam", "1"] if verb == "gae" else ["--estimator", "gigpo"]
    _one_line(run_cli(verb, "--gamma", "nan", *extra, src, "-o", tmp_path / "o.jsonl"), "--gamma")
    record("nan_and_infinity", f"verb:{verb}")


def test_reward_near_float_max_is_refused(tmp_path):
    """Rewards of 1.7e308 (whose mean overflows to infinity) are refused naming the line and field."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({**r, "reward": 1.7e308, "episode_reward": -1.7e308}) + "\n" for r in STEP_ROWS))
    _one_line(
        run_cli("advantages", "--estimator", "grpo", rows, "-o", tmp_path / "o.jsonl"), str(rows), "line 1", "magnitude"
    )
    record("nan_and_infinity", "verb:advantages")


def test_epsilon_zero_on_a_zero_variance_group_gives_zero_advantages(tmp_path):
    """`--epsilon 0` on a group whose rewards are all equal gives advantages of exactly 0, not NaN (fixed at the source)."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in STEP_ROWS))
    done = run_cli("advantages", "--estimator", "grpo", "--epsilon", "0", rows, "-o", tmp_path / "o.jsonl")
    assert done.returncode == 0, done.stderr
    advantages = [json.loads(line)["advantage"] for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert advantages == [0.0, 0.0, 0.0]
    record("nan_and_infinity", "verb:advantages")


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-3"])
def test_tolerance_that_is_not_a_positive_finite_number_is_refused(tmp_path, value):
    """`--tolerance-pp nan|inf|0|-3` is refused naming the option."""
    _one_line(
        run_cli("analyze", "--outcomes", tmp_path / "x.jsonl", "--tolerance-pp", value, "--out", tmp_path / "o"),
        "--tolerance-pp",
    )
    record("nan_and_infinity", "verb:analyze")


def test_nan_reward_in_outcomes_is_refused(tmp_path, frozen_study):
    """An outcomes file with a NaN reward is refused naming the file and line (it was accepted silently)."""
    src = frozen_study / "runs" / "demo" / "grpo" / "seed0" / "eval" / "step10" / "outcomes.jsonl"
    bad = tmp_path / "outcomes.jsonl"
    lines = src.read_text().splitlines()
    lines[2] = lines[2].replace('"reward": 0.0', '"reward": NaN')
    bad.write_text("\n".join(lines) + "\n")
    _one_line(run_cli("analyze", "--outcomes", bad, "--out", tmp_path / "out"), str(bad), "line 3", "NaN")
    record("nan_and_infinity", "verb:analyze")


@pytest.mark.parametrize("std", [".nan", ".inf"])
def test_non_finite_std_in_a_reference_is_refused(tmp_path, std):
    """A reference whose std is .nan or .inf is refused naming the key (it was accepted silently)."""
    manifest = _demo(tmp_path)
    ref = tmp_path / "manifests" / "references" / "demo.yaml"
    ref.write_text(ref.read_text().replace("std: null", f"std: {std}"))
    _one_line(_freeze(manifest), str(ref), "values.gigpo.std", "not a finite number")
    record("nan_and_infinity", "verb:freeze")


def test_json_writer_names_a_computed_nan(tmp_path):
    """A NaN computed from valid input is not serialised: the writer fails naming the file and the field."""
    from agentrepro.errors import Failure
    from agentrepro.fileio import atomic_write_jsonl

    with pytest.raises(Failure, match=r"o.jsonl: advantage: computed value nan"):
        atomic_write_jsonl(tmp_path / "o.jsonl", [{"advantage": 1.0}, {"advantage": math.nan}])
    assert not (tmp_path / "o.jsonl").exists()


# ------------------------------------------------------------------------------------------ silent ones


def test_duplicate_yaml_key_is_refused_naming_both_lines(tmp_path):
    """A manifest with `seeds:` twice is refused naming the line of the second and the first (a YAML loader would let the last win silently)."""
    manifest = _demo(tmp_path)
    text = manifest.read_text()
    manifest.write_text(text + "seeds: [5]\n")
    first = 1 + text.splitlines().index(next(line for line in text.splitlines() if line.startswith("seeds:")))
    _one_line(_freeze(manifest), str(manifest), f"line {len(text.splitlines()) + 1}", f"first at line {first}")
    record("duplicates_and_aliases", "verb:freeze")


def test_alias_bomb_is_refused_without_expanding(tmp_path):
    """A YAML alias bomb (9^9 values) in a manifest is refused naming the file, instead of hanging freeze."""
    manifest = _demo(tmp_path)
    manifest.write_text(manifest.read_text() + alias_bomb(9, 9).replace("l", "bomb"))
    _one_line(_freeze(manifest), str(manifest), "alias")
    record("duplicates_and_aliases", "verb:freeze")


@pytest.mark.parametrize("alpha", ["0", "1", "2", "nan"])
def test_alpha_outside_the_open_unit_interval_is_refused(tmp_path, alpha):
    """`--alpha 0`, 1, 2 or nan is refused naming --alpha (0 and 2 were accepted)."""
    _one_line(
        run_cli("analyze", "--outcomes", tmp_path / "x.jsonl", "--alpha", alpha, "--out", tmp_path / "o"), "--alpha"
    )
    record("options", "verb:analyze")


@pytest.mark.parametrize("edit, where", [("values:\n  gigpo:", "values:\n  1:"), ("paper: test", "paper: 3")])
def test_reference_keys_and_paper_must_be_strings(tmp_path, edit, where):
    """A non-string method key or `paper` in a reference is refused naming the file (both were accepted)."""
    manifest = _demo(tmp_path)
    ref = tmp_path / "manifests" / "references" / "demo.yaml"
    ref.write_text(ref.read_text().replace(*(edit, where)))
    _one_line(_freeze(manifest), str(ref))
    record("duplicates_and_aliases", "verb:freeze")


def test_freeze_errors_name_the_manifest(tmp_path):
    """Freeze problems found after loading (a missing data file, a bad claim) name the manifest file."""
    manifest = _demo(tmp_path, data__eval__path="data/missing.jsonl")
    _one_line(_freeze(manifest), str(manifest), "data.eval.path")
    manifest = _demo(tmp_path / "b", analysis__claims=["ppo > grpo"])
    _one_line(_freeze(manifest), str(manifest), "analysis.claims[0]")


def test_schema_maximums_come_from_the_bounds_module():
    """The manifest schema's seed and task maximums are the values agentrepro.bounds owns."""
    from agentrepro.bounds import MAX_SEED, MAX_TASKS

    schema = json.loads((REPO / "workflow" / "schemas" / "manifest.schema.json").read_text())
    assert schema["properties"]["seeds"]["items"]["maximum"] == MAX_SEED
    assert schema["$defs"]["eval"]["properties"]["tasks"]["maximum"] == MAX_TASKS
    assert schema["$defs"]["eval"]["properties"]["first_seed"]["maximum"] == MAX_SEED
    train = json.loads((REPO / "workflow" / "schemas" / "train_config.schema.json").read_text())["properties"]
    assert train["train_first_seed"]["maximum"] == MAX_SEED == train["warmstart_val_first_seed"]["maximum"]


def test_manifest_round_trip_still_freezes(tmp_path):
    """The reading layer's bounds leave a valid manifest alone: it still freezes (exit 0)."""
    manifest = _demo(tmp_path)
    assert yaml.safe_load(manifest.read_text())["study"] == "demo"
    done = _freeze(manifest)
    assert done.returncode == 0, done.stderr
