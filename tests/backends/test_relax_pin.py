"""The Relax commit the shipped manifests pin, the recipe files they hash as `sources`, and how the harness's step
numbers meet Relax's rollout_id in training metrics, evaluation files and checkpoints.

Facts: tests/fixtures/frameworks/relax.pin.json (the recipe's files with the commit of each published version, the
evidence of their order, Relax's numbering rules with their source lines) and relax.args.json (the recipe's flags).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from helpers import FIXTURES, REPO, step_checkpoint

from agentrepro.backends.relax import backend as relax
from agentrepro.backends.relax import recipe as relax_recipe
from agentrepro.placement import declared

PIN = json.loads((FIXTURES / "frameworks" / "relax.pin.json").read_text())
ARGS = json.loads((FIXTURES / "frameworks" / "relax.args.json").read_text())
SHIPPED = ["graphgpo-alfworld-relax", "graphgpo-alfworld"]


def relax_block(study: str) -> dict:
    manifest = yaml.safe_load((REPO / "manifests" / f"{study}.yaml").read_text())
    return next(p.backend for p in declared(manifest).values() if p.backend["name"] == "relax")


@pytest.mark.parametrize("study", SHIPPED)
def test_shipped_relax_placement_pins_the_newest_commit_holding_the_recipe(study):
    """Each shipped Relax placement pins the commit where every recipe file exists (not the README's base, which
    holds none) and lists the recipe's algorithm files as sources, including every module the launched command
    loads by path (advantage hook, reward, eval logger) and the launch script itself."""
    block = relax_block(study)
    files = PIN["recipe_files"]
    assert block["commit"] == PIN["pin"] and re.fullmatch(r"[0-9a-f]{40}", block["commit"])
    assert set(files.values()) == {
        PIN["pin"],
        "eaf262ffe88a310759af255444176c1ad2a0a164",
    }  # one version each, two commits
    assert PIN["readme_base"]["commit"] not in files.values() and block["commit"] != PIN["readme_base"]["commit"]
    assert block["sources"] == PIN["sources"]["files"] and set(block["sources"]) <= set(files)
    flags = {entry["flag"]: entry["value"] for entry in ARGS["graphgpo_recipe"]["flags"]}
    loaded = [flags["--agentic-custom-advantage-path"], flags["--custom-rm-path"], relax_recipe.RECIPE_HOOK]
    modules = {value.rsplit(".", 1)[0].replace(".", "/") + ".py" for value in loaded}
    assert modules <= set(block["sources"]) and relax_recipe.RECIPE in block["sources"]


def test_the_two_shipped_relax_placements_agree():
    """graphgpo-alfworld.yaml's backends.relax is the same Relax (commit, sources) as graphgpo-alfworld-relax.yaml."""
    one, other = (relax_block(study) for study in SHIPPED)
    assert (one["repo"], one["commit"], one["sources"]) == (other["repo"], other["commit"], other["sources"])


def relax_rules(num_rollout: int, eval_interval: int, save_interval: int) -> dict[str, set[int]]:
    """Relax's own numbering, as relax.pin.json records it: rollout_ids whose training is logged, evaluated, saved."""
    rules = PIN["numbering"]
    assert "rollout_id = local_step" in rules["rollout_id"]["rule"]
    assert "compute_rollout_step(args, r) = r" in rules["train_metrics_step"]["rule"]
    assert (
        "(r+1) % eval_interval == 0" in rules["eval_after_training"]["rule"]
        and "rollout_id 0" in rules["eval_before_training"]["rule"]
    )
    assert "eval/{rollout_id}.jsonl" in rules["eval_file"]["rule"]
    assert (
        "(r+1) % save_interval == 0 or r+1 == num_rollout" in rules["checkpoint"]["rule"]
        and "iter_{r:07d}" in rules["checkpoint"]["rule"]
    )
    rollouts = range(num_rollout)
    return {
        "metrics": set(rollouts),
        "evaluated": {0} | {r for r in rollouts if (r + 1) % eval_interval == 0},
        "saved": {r for r in rollouts if (r + 1) % save_interval == 0 or r + 1 == num_rollout},
    }


def test_metrics_evaluations_and_checkpoints_of_one_step_share_one_rollout_id(tmp_path):
    """For the shipped study (150 updates, evaluation every 5, the export's --save-interval): the harness step N > 0
    reads the metrics Relax logged at rollout_id N - 1, the evaluation of rollout_id N - 1 (Relax's eval/{N - 1}.jsonl,
    the eval hook's {N - 1}.jsonl) and the checkpoint
    iter_{N - 1:07d} (its Hugging Face copy hf/{N - 1}), which Relax wrote for the same update; step 0 reads
    eval/0.jsonl, written before training, and the base model."""
    manifest = yaml.safe_load((REPO / "manifests" / "graphgpo-alfworld-relax.yaml").read_text())
    steps = manifest["train"]["steps"]
    run = tmp_path / "run"
    save = relax.save_dir(run)
    args = relax_recipe.hf_export_args(save)  # the --save-interval and --save-hf the job passes to Relax
    save_interval = int(args[args.index("--save-interval") + 1])
    relax_side = relax_rules(steps, relax_recipe.EVAL_INTERVAL, save_interval)
    assert {relax_recipe.step_of_rollout(r) for r in relax_side["metrics"]} == set(range(1, steps + 1))
    evaluated = relax_recipe.evaluated_rollouts(steps)
    assert {relax_recipe.rollout_of_step(n) for n in evaluated} == relax_side["evaluated"]
    assert {relax_recipe.rollout_of_step(n) for n in evaluated if n} <= relax_side["saved"]

    config = {
        "study": "s",
        "method": "graphgpo",
        "seed": 0,
        "train": {"estimator": "graphgpo", "steps": steps},
        "backend": {"name": "relax", "workdir": str(tmp_path), "model_path": str(tmp_path / "base")},
    }
    for n in evaluated[1:]:
        r = relax_recipe.rollout_of_step(n)
        point = step_checkpoint(config, run, n)
        assert point.state == (relax_recipe.checkpoint_dir(save, config) / f"iter_{r:07d}",)
        assert point.weights == (point.hf,) == (Path(args[args.index("--save-hf") + 1].format(rollout_id=r)),)
        assert (
            relax.outcome_file(run, config, n).name == f"{r}.jsonl"
        )  # the eval hook is called with Relax's rollout_id
        assert relax_recipe.step_of_rollout(r) == n  # the metrics row Relax logged at step r is harness step n
    assert (
        relax.outcome_file(run, config, 0).name == "0.jsonl" and step_checkpoint(config, run, 0).hf == tmp_path / "base"
    )


def test_training_rows_are_named_by_the_step_their_update_reaches():
    """Relax stamps a row with str(weight_version) of the weights that generated it (reward path at eaf262f); the
    counter starts at 0, the sync before rollout 0 makes it 1 and each training step adds 1, so rollout r carries
    r + 1: with the harness's offset that is step_of_rollout(r), the step whose metrics (Relax step r), checkpoint
    and evaluation (rollout_id r) the other tests tie to r. The wrapper reads Relax's decimal string."""
    from agentrepro.backends.relax.hooks import agentrepro_relax_advantage as wrapper

    fact = PIN["numbering"]["policy_version"]
    assert "str of the Sample's one weight_version" in fact["rule"] and fact["value_type"] == "str"
    assert "starts at 0, adds 1 at every update_weights" in fact["weight_version"]["rule"]
    assert "before rollout 0" in fact["updates"]["rule"] and "one after each training step" in fact["updates"]["rule"]
    version, stamped = 0, {}
    version += 1  # the sync when the rollout manager is attached
    for r in range(150):
        stamped[r] = str(version)  # rollout r is generated with these weights
        version += 1  # the update after training on rollout r
    for r, value in stamped.items():
        assert value == str(relax_recipe.weight_version_of_rollout(r))
        assert wrapper.policy_version(value) + relax_recipe.POLICY_VERSION_OFFSET == relax_recipe.step_of_rollout(r)
    assert [wrapper.policy_version(v) for v in ("7", 7, True, "7.0", "", None)] == [7, 7, None, None, None, None]


def test_a_resumed_run_names_its_rows_from_the_rollout_it_resumes_at(tmp_path):
    """Relax resumes at the saved iteration + 1 with a new weight-version counter (its first rollout carries "1"):
    after iteration 9 the offset is 10, so rollout 10's rows are step 11; no tracker: 0; an unreadable one: refused."""
    from agentrepro.errors import BadInput

    assert relax_recipe.policy_version_offset(tmp_path) == relax_recipe.POLICY_VERSION_OFFSET == 0
    (tmp_path / relax_recipe.TRACKER).write_text("9\n")
    offset = relax_recipe.policy_version_offset(tmp_path)
    assert offset == 10 and 1 + offset == relax_recipe.step_of_rollout(10)
    (tmp_path / relax_recipe.TRACKER).write_text("release\n")
    with pytest.raises(BadInput, match=r"latest_checkpointed_iteration.txt"):
        relax_recipe.policy_version_offset(tmp_path)
