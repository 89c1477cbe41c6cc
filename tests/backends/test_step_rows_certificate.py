"""The parity certificate end to end: each framework integration writes step rows and the advantages the
framework computed, and the analysis recomputes them in both episode-statistics modes.

verl-agent: the stand-in module tree of verl_standin.py (the names and signatures of verl-agent @ 20bd331,
tests/fixtures/frameworks/verl-agent-20bd331.patched.json: RayPPOTrainer.fit, compute_advantage) replays one
rollout batch through its `fit`, entered through the real integration (sitecustomize, AGENTREPRO_VERL_OUT).
Relax: a stand-in `examples/graphgpo/custom_advantage.py` with the signature of redai-infra/Relax eaf262f
(`compute_custom_advantage(metadata_by_slot)`, one call per rollout group, one {turn_NNN: metadata} per trajectory),
called through the harness's wrapper as `--agentic-custom-advantage-path` names it.
The "framework" advantages are the original implementation's (tests/fixtures/advantages/random_batches.jsonl,
GraphGPO ω 0.1, episode statistics over rows), or ours in the other mode, or one of them perturbed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml
from helpers import head_pythonpath, load_file_module

from agentrepro.algorithms import StepBatch, estimate
from agentrepro.analysis.parity import certificate, parity_checks
from agentrepro.backends import step_rows
from agentrepro.backends.relax import backend as relax
from agentrepro.backends.relax import recipe as relax_recipe
from agentrepro.backends.verl_agent import integration
from agentrepro.hooks import HOOKS_DIR
from agentrepro.layout import batch_dump

FIXTURES = Path(__file__).parents[1] / "fixtures" / "advantages" / "random_batches.jsonl"
SRC = Path(__file__).parents[2] / "src"
verl_standin = load_file_module("verl_standin", Path(__file__).with_name("verl_standin.py"))
OPTIONS: dict[str, Any] = {
    "estimator": "graphgpo",
    "omega": 0.1,
    "norm": "std",
    "invalid_penalty": 0.1,
    "step_weight": 1.0,
    "episode_weight": 1.0,
}


def fixture_case(name: str) -> dict:
    for line in FIXTURES.read_text().splitlines():
        case = json.loads(line)
        p = case["params"]
        if case["case"] == name and p["estimator"] == "graphgpo" and p["norm"] == "std" and p["omega"] == 0.1:
            return case
    raise AssertionError(name)


def advantages(case: dict, kind: str) -> list[float]:
    """The framework's advantages: the reference's, ours in `trajectories` mode, or the reference's with one perturbed."""
    if kind == "trajectories":
        options = {k: v for k, v in OPTIONS.items() if k != "estimator"}
        return [
            float(a)
            for a in estimate(
                StepBatch.from_rows(case["rows"]), "graphgpo", episode_stats="trajectories", **options
            ).advantage
        ]
    values = [e["advantage"] for e in case["expected"]]
    if kind == "perturbed":
        values[7] += 0.01
    return values


def run_dir(tmp_path: Path, method: str, declared: str) -> tuple[Path, dict]:
    run = tmp_path / "runs" / "study" / method / "seed0"
    run.mkdir(parents=True)
    config = {
        "study": "study",
        "method": method,
        "seed": 0,
        "train": {**OPTIONS, "steps": 2, "step_rows": [1], "episode_stats": declared},
    }
    (run / "resolved_config.yaml").write_text(yaml.safe_dump(config))
    return run, config


def run_verl(tmp_path: Path, kind: str) -> tuple[Path, dict]:
    """The stand-in verl-agent trains two steps with train.step_rows [1]; returns the run directory and the case."""
    case = fixture_case("random_batch_011_interleaved")  # round-robin row order: turns come from batch order
    run, config = run_dir(tmp_path, "graphgpo", "rows")
    tree = tmp_path / "verl-agent"
    tree.mkdir()
    verl_standin.stand_in_tree(tree)
    (tree / "fit.py").write_text(
        textwrap.dedent("""
        from recipe.GraphGPO.graphgpo_ray_trainer import RayPPOTrainer
        RayPPOTrainer(None).fit()
    """)
    )
    (tmp_path / "batch.json").write_text(json.dumps(case["rows"]))
    (tmp_path / "advantages.json").write_text(json.dumps(advantages(case, kind)))
    env = {
        **integration.env(run),
        **step_rows.hook_env(config, run),
        "PATH": "/usr/bin:/bin",
        "STANDIN_BATCH": str(tmp_path / "batch.json"),
        "STANDIN_ADVANTAGES": str(tmp_path / "advantages.json"),
    }
    env["PYTHONPATH"] = head_pythonpath(env, tree)
    result = subprocess.run([sys.executable, "fit.py"], cwd=tree, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return run, case


CUSTOM_ADVANTAGE = """
import json, os
from collections.abc import Mapping, Sequence
from typing import Any

def compute_custom_advantage(
    metadata_by_slot: Sequence[Mapping[str, Mapping[str, Any]]],
) -> list[dict[str, float]]:
    values = json.loads(open(os.environ["STANDIN_ADVANTAGES"]).read())   # "traj/turn" -> the "framework's" advantage
    return [{unit: values["%s/%d" % (meta["trajectory_id"], meta["turn_index"])] for unit, meta in slot.items()}
            for slot in metadata_by_slot]
"""
DRIVER = """
import json, sys
import agentrepro_relax_advantage
from agentrepro import runconfig
for group in json.loads(open(sys.argv[1]).read()):
    agentrepro_relax_advantage.compute_custom_advantage(group)
"""


def relax_groups(rows: list[dict], policy_version: str) -> list[list[dict]]:
    """The fixture's rows as Relax passes them: per rollout group, one {turn_NNN: sample.metadata} per trajectory."""
    groups: dict[str, dict[str, dict]] = {}
    for r in rows:
        slot = groups.setdefault(r["group"], {}).setdefault(r["traj"], {})
        slot[f"turn_{r['turn']:03d}"] = {
            "row_id": f"{r['traj']}/{r['turn']}",
            "rollout_group_id": r["group"],
            "policy_version": policy_version,
            "task_id": r["group"],
            "trajectory_id": r["traj"],
            "turn_index": r["turn"],
            "state_key": r["state"],
            "action": "go",
            "next_state_key": "__GRAPHGPO_SUCCESS__" if r["next_state"] == "success" else r["next_state"],
            "is_action_valid": r["valid"],
            "success": r["success"],
            "terminal": False,
            "truncated": False,
            "episode_return": r["episode_reward"],
        }
    return [list(slots.values()) for slots in groups.values()]


def run_relax(tmp_path: Path, kind: str) -> tuple[Path, dict]:
    """Relax's advantage hook wrapped by the harness at the training rollout of step 1; returns the run and the case."""
    case = fixture_case("random_batch_014")
    run, config = run_dir(tmp_path, "graphgpo@relax", "trajectories")  # the recipe's default: trajectory_once
    tree = tmp_path / "relax"
    (tree / "examples" / "graphgpo").mkdir(parents=True)
    for name in ("examples/__init__.py", "examples/graphgpo/__init__.py"):
        (tree / name).write_text("")
    (tree / "examples" / "graphgpo" / "custom_advantage.py").write_text(textwrap.dedent(CUSTOM_ADVANTAGE))
    (tree / "driver.py").write_text(textwrap.dedent(DRIVER))
    values = advantages(case, {"rows": "reference", "trajectories": "trajectories"}.get(kind, kind))
    (tmp_path / "advantages.json").write_text(
        json.dumps({f"{r['traj']}/{r['turn']}": v for r, v in zip(case["rows"], values)})
    )
    rollout = relax_recipe.rollout_of_step(1)  # rows stamped as Relax does: str(weight_version) of their rollout
    versions = [str(relax_recipe.weight_version_of_rollout(r)) for r in (rollout, rollout + 1)]
    (tmp_path / "groups.json").write_text(
        json.dumps(relax_groups(case["rows"], versions[0]) + relax_groups(case["rows"], versions[1]))
    )
    env = {
        **step_rows.hook_env(config, run),
        "AGENTREPRO_POLICY_VERSION_OFFSET": str(relax_recipe.POLICY_VERSION_OFFSET),
        "PYTHONPATH": f"{relax.HOOKS}:{HOOKS_DIR}:{tree}",
        "PATH": "/usr/bin:/bin",
        "STANDIN_ADVANTAGES": str(tmp_path / "advantages.json"),
    }
    result = subprocess.run(
        [sys.executable, "driver.py", str(tmp_path / "groups.json")], cwd=tree, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return run, case


def test_verl_reference_advantages_pass_in_rows_mode(tmp_path):
    """verl-agent's rows at step 1 only, in the step-row format with the framework's advantages; the reference's
    advantages fit episode statistics over rows (the declared mode), not over trajectories: the certificate passes."""
    run, case = run_verl(tmp_path, "reference")
    assert not batch_dump(run, 2).exists()
    rows = [json.loads(x) for x in batch_dump(run, 1).read_text().splitlines()]
    keys = ("group", "traj", "turn", "state", "next_state", "reward", "episode_reward", "valid", "success")
    assert [{k: r[k] for k in keys} for r in rows] == [{k: r[k] for k in keys} for r in case["rows"]]
    [entry] = certificate([run])
    assert entry["status"] == "pass" and entry["implements"] == "rows", entry
    assert entry["max_abs_difference"]["rows"] < 1e-4 < entry["max_abs_difference"]["trajectories"]
    [check] = parity_checks([run])
    assert check["status"] == "pass" and "rows" in check["detail"]


def test_verl_perturbed_advantage_fails_naming_the_row(tmp_path):
    """One framework advantage off by 0.01: neither mode fits; the detail names the difference and its row."""
    run, case = run_verl(tmp_path, "perturbed")
    [entry] = certificate([run])
    row = case["rows"][7]
    assert entry["status"] == "fail" and entry["implements"] is None
    assert abs(entry["max_abs_difference"]["rows"] - 0.01) < 1e-4
    assert entry["worst"]["rows"]["traj"] == row["traj"] and entry["worst"]["rows"]["turn"] == row["turn"]
    assert f"trajectory {row['traj']!r} turn {row['turn']}" in entry["detail"]


def test_verl_other_episode_statistics_fail_naming_the_mode(tmp_path):
    """Advantages computed with each trajectory counted once fail a run that declares rows, saying which mode they fit."""
    run, _ = run_verl(tmp_path, "trajectories")
    [entry] = certificate([run])
    assert entry["status"] == "fail" and entry["implements"] == "trajectories"
    assert "implements episode statistics over trajectories, but the run declares rows" in entry["detail"]


def test_relax_wrapper_rows_pass_in_the_declared_mode(tmp_path):
    """The Relax wrapper writes the rows of step 1's rollout (policy_version "1", the weights after the sync before
    rollout 0) and none of step 2's; advantages
    with each trajectory once pass the recipe's declared trajectory_once (episode_stats: trajectories)."""
    run, case = run_relax(tmp_path, "trajectories")
    assert not batch_dump(run, 2).exists()
    rows = [json.loads(x) for x in batch_dump(run, 1).read_text().splitlines()]
    assert len(rows) == len(case["rows"]) and {r["policy_version"] for r in rows} == {"1"}
    by_key = {(r["traj"], r["turn"]): r for r in rows}
    for r in case["rows"]:
        mine = by_key[(r["traj"], r["turn"])]
        assert (
            mine["state"],
            mine["next_state"],
            mine["valid"],
            mine["success"],
            mine["reward"],
            mine["episode_reward"],
        ) == (r["state"], r["next_state"], r["valid"], r["success"], r["reward"], r["episode_reward"])
    [entry] = certificate([run])
    assert (
        entry["status"] == "pass" and entry["implements"] == "trajectories" and entry["declared"] == "trajectories"
    ), entry


def test_relax_rows_mode_and_perturbation_fail(tmp_path):
    """The reference's (rows) advantages fail a port that declares trajectory_once, naming rows; a perturbed one fails in both."""
    run, _ = run_relax(tmp_path / "a", "rows")
    [entry] = certificate([run])
    assert entry["status"] == "fail" and entry["implements"] == "rows"
    run, _ = run_relax(tmp_path / "b", "perturbed")
    [entry] = certificate([run])
    assert entry["status"] == "fail" and entry["implements"] is None and "0.01" in entry["detail"]


def test_a_named_step_without_rows_is_reported_not_invented(tmp_path):
    """A step named in train.step_rows with no dump is a not_run entry saying so, with no difference reported."""
    run, _ = run_dir(tmp_path, "graphgpo", "rows")
    [entry] = certificate([run])
    assert (
        entry["status"] == "not_run" and "wrote no step rows" in entry["detail"] and "max_abs_difference" not in entry
    )


def test_the_hooks_write_where_the_layout_says(monkeypatch):
    """hooks/agentrepro_step_rows.py names step N's file as layout.batch_dump does (the hook cannot import layout)."""
    from agentrepro.hooks import agentrepro_step_rows as hook

    env = step_rows.hook_env({"train": {"steps": 9, "step_rows": [9, 3]}}, Path("/tmp/run"))
    assert env[hook.STEPS] == "3,9" and (hook.STEPS, hook.FOLDER) == (step_rows.STEPS, step_rows.FOLDER)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert hook.path(3) == str(batch_dump(Path("/tmp/run").resolve(), 3)) and hook.wanted_steps() == {3, 9}


def test_relax_wrapper_hands_over_to_the_function_the_recipe_names():
    """The wrapper calls the function the recipe's --agentic-custom-advantage-path names (relax.args.json, script
    line 212), and it replaces exactly that flag; a recipe function with other parameters is refused."""
    from agentrepro.backends.relax.hooks import agentrepro_relax_advantage as wrapper

    facts = json.loads((Path(__file__).parents[1] / "fixtures" / "frameworks" / "relax.args.json").read_text())
    [flag] = [f for f in facts["graphgpo_recipe"]["flags"] if f["flag"] == relax_recipe.ADVANTAGE_FLAG]
    assert flag["value"] == wrapper.HANDOVER
    assert (
        relax_recipe.ADVANTAGE_HOOK
        == f"{wrapper.__name__.rsplit('.', 1)[-1]}.{wrapper.compute_custom_advantage.__name__}"
    )


def test_step_rows_field_is_validated_naming_it():
    """train.step_rows outside [1, steps], repeated or not a list of integers is refused naming the field, by the
    builtin trainer's config and by the verl-agent and Relax backends alike; no step rows, no hook environment."""
    import pytest

    from agentrepro import runconfig
    from agentrepro.errors import BadInput
    from agentrepro.trainer.config import TrainConfig

    for bad in ([0], [11], [3, 3], ["1"], 5):
        with pytest.raises(BadInput, match=r"train.step_rows"):
            TrainConfig.from_dict({"steps": 10, "step_rows": bad})
        with pytest.raises(BadInput, match=r"train.step_rows"):
            runconfig.step_rows({"train": {"steps": 10, "step_rows": bad}})
    assert TrainConfig.from_dict({"steps": 10, "step_rows": [10, 1]}).to_dict()["step_rows"] == [10, 1]
    assert step_rows.hook_env({"train": {"steps": 10}}, Path("run")) == {}


def test_dumps_are_input_of_the_advantages_verb(tmp_path):
    """`agentrepro advantages` (subprocess) reads a framework's dump as it is, and in each --episode-stats mode
    gives the advantages the certificate measured its differences against."""
    from helpers import run_cli

    run, case = run_verl(tmp_path, "reference")
    [entry] = certificate([run])
    theirs = [e["advantage"] for e in case["expected"]]
    for mode in ("rows", "trajectories"):
        out = tmp_path / f"{mode}.jsonl"
        result = run_cli(
            "advantages",
            "--estimator",
            "graphgpo",
            "--omega",
            "0.1",
            "--episode-stats",
            mode,
            batch_dump(run, 1),
            "-o",
            out,
        )
        assert result.returncode == 0, result.stderr
        ours = [json.loads(x)["advantage"] for x in out.read_text().splitlines()]
        assert abs(max(abs(a - b) for a, b in zip(ours, theirs)) - entry["max_abs_difference"][mode]) < 1e-12


def test_a_batch_without_the_recipe_columns_is_recorded_not_fatal(tmp_path):
    """A batch lacking a column the rows need (here `episode_rewards`) does not stop training: the step's error is
    recorded and the certificate reports that step as not run, with the reason."""
    case = fixture_case("random_batch_014")
    for row in case["rows"]:
        row.pop("episode_reward")
    run, config = run_dir(tmp_path, "graphgpo", "rows")
    tree = tmp_path / "verl-agent"
    tree.mkdir()
    verl_standin.stand_in_tree(tree)
    (tree / "fit.py").write_text(
        "from recipe.GraphGPO.graphgpo_ray_trainer import RayPPOTrainer\nRayPPOTrainer(None).fit()\n"
    )
    trainer = tree / "recipe" / "GraphGPO" / "graphgpo_ray_trainer.py"
    trainer.write_text(trainer.read_text().replace('"episode_rewards": "episode_reward", ', ""))
    (tmp_path / "batch.json").write_text(json.dumps(case["rows"]))
    (tmp_path / "advantages.json").write_text(json.dumps([0.0] * len(case["rows"])))
    env = {
        **integration.env(run),
        **step_rows.hook_env(config, run),
        "PATH": "/usr/bin:/bin",
        "STANDIN_BATCH": str(tmp_path / "batch.json"),
        "STANDIN_ADVANTAGES": str(tmp_path / "advantages.json"),
    }
    env["PYTHONPATH"] = head_pythonpath(env, tree)
    result = subprocess.run([sys.executable, "fit.py"], cwd=tree, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    [entry] = certificate([run])
    assert entry["status"] == "not_run" and "episode_rewards" in entry["detail"] and "max_abs_difference" not in entry
