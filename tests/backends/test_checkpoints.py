"""Checkpoints at the evaluated steps, the Hugging Face directory of (backend, step), and pruning once evaluated.

The fake checkpoint trees are laid out as the facts say each framework writes them
(tests/fixtures/frameworks/verl-agent-20bd331.outputs.json `checkpoint.layout`, relax.outputs.json `checkpoint`).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from helpers import FIXTURES, run_cli, step_checkpoint

from agentrepro import runconfig, seal
from agentrepro.backends import checkpoints, get_backend
from agentrepro.backends.relax import backend as relax
from agentrepro.backends.relax import recipe as relax_recipe
from agentrepro.backends.verl_agent import recipes as verl_recipes
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import sha256_file
from agentrepro.layout import outcomes_path
from agentrepro.runconfig import checkpoint_steps

VERL = json.loads((FIXTURES / "frameworks" / "verl-agent-20bd331.outputs.json").read_text())
RELAX = json.loads((FIXTURES / "frameworks" / "relax.outputs.json").read_text())
HASH = "b" * 64


def verl_config(tmp_path, steps=10, every=5, **evaluation):
    return {
        "study": "graphgpo-alfworld",
        "method": "gigpo",
        "seed": 1,
        "backend": {"name": "verl-agent", "workdir": str(tmp_path), "model_path": str(tmp_path / "qwen")},
        "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
        "env": {"name": "alfworld"},
        "train": {"estimator": "gigpo", "steps": steps, "groups": 16, "group_size": 8},
        "eval": {
            "every": every,
            "tasks": 3,
            **evaluation,
            "task_panel": [{"task_id": f"alf-{i}", "task_hash": HASH, "category": "pick_and_place"} for i in range(3)],
        },
        "resources": {"gpus": 2},
    }


def relax_config(tmp_path):
    return {
        "study": "s",
        "method": "graphgpo@relax",
        "seed": 0,
        "backend": {"name": "relax", "workdir": str(tmp_path), "model_path": str(tmp_path / "base")},
        "train": {"estimator": "graphgpo", "steps": 10},
        "eval": {"every": 5},
    }


def verl_root(run_dir: Path) -> Path:
    """trainer.default_local_dir as the harness appends it."""
    appended = {o.key: o.value for o in verl_recipes.appended(verl_config(run_dir), run_dir, resume=True)}
    return Path(appended["trainer.default_local_dir"])


def fake_verl_step(run_dir: Path, step: int, world: int = 2) -> None:
    """global_step_<N>/ as verl-agent @ 20bd331 writes it with hf_model in actor.checkpoint.contents (facts' layout)."""
    root = verl_root(run_dir)
    names = []
    for entry in VERL["checkpoint"]["layout"]:
        path = entry["path"].replace("<root>", str(root)).replace("{N}", str(step))
        if "{W}" in path:
            names += [path.replace("{W}", str(world)).replace("{R}", str(r)) for r in range(world)]
        elif path.endswith("/actor/huggingface/"):
            names += [path + "config.json", path + "model.safetensors", path + "tokenizer.json"]
        elif path.endswith(("data.pt", "latest_checkpointed_iteration.txt")):
            names.append(path)
        elif "{config.json," in path:
            names.append(path.split("{")[0] + "config.json")
    for name in names:
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_text(f"bytes of {Path(name).name} at {step}")


def sealed_run(run_dir: Path, config: dict, steps: list[int]) -> None:
    runconfig.write_resolved_config(run_dir, config)
    for step in steps:
        outcomes_path(run_dir, step).parent.mkdir(parents=True, exist_ok=True)
        outcomes_path(run_dir, step).write_text('{"task_id": "alf-0"}\n')
    seal.write_outputs_manifest(run_dir, exclude_dirs={"eval", "logs"})


# --- which steps are saved -----------------------------------------------------------------------------------


def facts_rule(freq: int, step: int, last: int) -> bool:
    """verl's save rule exactly as the facts state it (checkpoint.enabled_when.rule), evaluated."""
    rule = VERL["checkpoint"]["enabled_when"]["rule"]
    assert rule == "trainer.save_freq > 0 and (last step or global_steps % save_freq == 0)"
    expression = rule.replace("trainer.save_freq", "save_freq").replace("last step", "last_step")
    return eval(expression, {}, {"save_freq": freq, "global_steps": step, "last_step": step == last})


@pytest.mark.parametrize(
    ("steps", "every", "evaluation"),
    [
        (150, 5, {}),
        (12, 5, {}),
        (10, 1, {}),
        (30, 5, {"checkpoint": "all"}),
        (
            150,
            5,
            {"checkpoint": "all"},
        ),  # train.checkpoint_every below: 10, which once became save_freq and missed 5, 15, ...
    ],
)
def test_verl_saves_exactly_the_evaluated_steps(tmp_path, steps, every, evaluation):
    """trainer.save_freq (appended) makes verl-agent save, by the facts' rule, exactly the evaluated steps after 0."""
    config = verl_config(tmp_path, steps=steps, every=every, **evaluation)
    config["train"]["checkpoint_every"] = 10
    freq = {o.key: o.value for o in verl_recipes.appended(config, tmp_path, resume=True)}["trainer.save_freq"]
    saved = [s for s in range(1, steps + 1) if facts_rule(freq, s, steps)]
    assert saved == verl_recipes.saved_steps(freq, steps) == [s for s in checkpoint_steps(config) if s > 0]
    from agentrepro.backends.verl_agent.backend import VerlAgentBackend

    VerlAgentBackend().validate_config(config)  # the same check, where a study is refused


def test_relax_saves_the_evaluated_steps_by_its_own_rule(tmp_path):
    """--save-interval of the export (facts' rule, 0-based rollout_id) saves exactly the evaluated steps after 0."""
    config = relax_config(tmp_path)
    args = relax_recipe.hf_export_args(relax.save_dir(tmp_path))
    interval, steps = int(args[args.index("--save-interval") + 1]), config["train"]["steps"]
    assert "(rollout_id+1) % save_interval == 0 or rollout_id+1 == num_rollout" in RELAX["checkpoint"]["when"]["rule"]
    saved = [r for r in range(steps) if (r + 1) % interval == 0 or r + 1 == steps]
    assert [relax_recipe.step_of_rollout(r) for r in saved] == relax.RelaxBackend().checkpoint_steps(config)[1:]


# --- (backend, step) -> the Hugging Face directory ------------------------------------------------------------


def test_hf_dir_follows_each_framework_layout(tmp_path):
    """verl: <default_local_dir>/global_step_N/actor/huggingface/; Relax: --save-hf formatted with rollout_id N - 1, its
    Megatron iter_{rollout_id:07d} under --save as the state; step 0 the base model; builtin checkpoints/hf/step<N>/."""
    run = tmp_path / "run"
    hf_layout = next(e["path"] for e in VERL["checkpoint"]["layout"] if e["path"].endswith("huggingface/"))
    assert (
        "hf_model"
        in {o.key: o.value for o in verl_recipes.appended(verl_config(tmp_path), run, resume=True)}[
            "actor_rollout_ref.actor.checkpoint.contents"
        ]
    )
    expected = Path(hf_layout.replace("<root>", str(verl_root(run))).replace("{N}", "5"))
    assert step_checkpoint(verl_config(tmp_path), run, 5).hf == expected
    assert step_checkpoint(verl_config(tmp_path), run, 5).state == (expected.parent.parent,)
    verl_base = verl_config(tmp_path)
    verl_base["backend"]["model_path"] = str(tmp_path / "qwen")
    assert step_checkpoint(verl_base, run, 0).hf == tmp_path / "qwen"

    config = relax_config(tmp_path)
    args = relax_recipe.hf_export_args(relax.save_dir(run))
    template = args[args.index("--save-hf") + 1]
    assert RELAX["checkpoint"]["hf_export"]["flag"] == "--save-hf" and "{rollout_id}" in template
    assert step_checkpoint(config, run, 10).hf == Path(template.format(rollout_id=9))
    megatron = RELAX["checkpoint"]["layout"][0].replace(
        "<save>", str(relax_recipe.checkpoint_dir(relax.save_dir(run), config))
    )
    assert step_checkpoint(config, run, 10).state == (Path(megatron.format(rollout_id=9)),)
    assert step_checkpoint(config, run, 0).hf == tmp_path / "base" and not step_checkpoint(config, run, 0).state

    builtin = {"backend": {"name": "builtin"}}
    assert step_checkpoint(builtin, run, 3).hf == run / "checkpoints" / "hf" / "step3"


# --- pruning --------------------------------------------------------------------------------------------------


def test_prune_keeps_the_hf_copy_by_default(tmp_path):
    """keep hf: step 5's FSDP shards, optimizer, extra state and data.pt go, its huggingface/ stays; step 10 and the
    tracker are untouched; the record lists every removed file with the seal's hash and the kept copy's hashes."""
    run = tmp_path / "run"
    config = verl_config(tmp_path)
    fake_verl_step(run, 5)
    fake_verl_step(run, 10)
    sealed_run(run, config, [5])
    sealed = seal.read_outputs_manifest(run / "OUTPUTS.sha256")
    record = checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5))
    step5 = verl_root(run) / "global_step_5"
    left = sorted(p.relative_to(step5).as_posix() for p in step5.rglob("*") if p.is_file())
    assert left == [
        "actor/huggingface/config.json",
        "actor/huggingface/model.safetensors",
        "actor/huggingface/tokenizer.json",
    ]
    assert any(re.search(r"optim_world_size_2_rank_1\.pt$", p) for p in record["removed"])
    assert record["removed"] == {
        p: d for p, d in sealed.items() if p.startswith("checkpoints/global_step_5/") and "/huggingface/" not in p
    }
    assert set(record["kept"]) == {f"checkpoints/global_step_5/{name}" for name in left}
    assert record["outcomes_sha256"] == sha256_file(outcomes_path(run, 5)) and record["removed_bytes"] > 0
    assert json.loads((outcomes_path(run, 5).parent / "pruned.json").read_text()) == record
    assert (verl_root(run) / "global_step_10" / "actor" / "optim_world_size_2_rank_0.pt").is_file()
    assert (verl_root(run) / "latest_checkpointed_iteration.txt").is_file()
    pruned, problems = checkpoints.pruned_files(run, get_backend(config["backend"]["name"]).pruned_in_training(run))
    assert problems == [] and pruned == {run / rel for rel in record["removed"]}
    with pytest.raises(BadInput, match="cannot resume"):
        checkpoints.refuse_resume(run)


def test_prune_none_and_all(tmp_path):
    """keep none removes the whole global_step_N/ (HF copy too); keep all removes nothing and writes no record."""
    run = tmp_path / "run"
    config = verl_config(tmp_path, keep_checkpoints="none")
    fake_verl_step(run, 5)
    sealed_run(run, config, [5])
    record = checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5))
    assert not (verl_root(run) / "global_step_5").exists() and any("/huggingface/" in p for p in record["removed"])
    assert record["kept"] == {}
    run2 = tmp_path / "run2"
    config = verl_config(tmp_path, keep_checkpoints="all")
    fake_verl_step(run2, 5)
    sealed_run(run2, config, [5])
    assert checkpoints.prune(config, run2, step_checkpoint(config, run2, 5), outcomes=outcomes_path(run2, 5)) is None
    assert (verl_root(run2) / "global_step_5" / "data.pt").is_file() and not (
        outcomes_path(run2, 5).parent / "pruned.json"
    ).exists()
    checkpoints.refuse_resume(run2)  # nothing pruned: resuming is allowed


def test_prune_relax_and_builtin(tmp_path):
    """Relax: the Megatron iter_0000004/ goes, relax/hf/4/ stays; builtin: its step<N>.pt is its weights (kept under
    hf, removed under none)."""
    run = tmp_path / "run"
    config = relax_config(tmp_path)
    ckpt = step_checkpoint(config, run, 5)
    for path in (ckpt.state[0] / "__0_0.distcp", ckpt.state[0] / "common.pt", ckpt.hf / "model.safetensors"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{path.name}")
    sealed_run(run, config, [5])
    record = checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5))
    assert not ckpt.state[0].exists() and (ckpt.hf / "model.safetensors").is_file() and len(record["removed"]) == 2

    run = tmp_path / "builtin"
    config = {"study": "s", "method": "grpo", "seed": 0, "backend": {"name": "builtin"}, "eval": {}}
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "step5.pt").write_text("weights and optimizer")
    sealed_run(run, config, [5])
    assert checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5)) is None
    config["eval"]["keep_checkpoints"] = "none"
    assert list(
        checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5))["removed"]
    ) == ["checkpoints/step5.pt"]


def test_prune_refuses_a_changed_or_unsealed_checkpoint(tmp_path):
    """A shard changed after the seal, or a file the seal does not list, stops the prune before anything is deleted;
    an unsealed run is not pruned."""
    run = tmp_path / "run"
    config = verl_config(tmp_path)
    fake_verl_step(run, 5)
    sealed_run(run, config, [5])
    shard = verl_root(run) / "global_step_5" / "actor" / "model_world_size_2_rank_0.pt"
    shard.write_text("edited")
    with pytest.raises(Failure, match="changed after it was sealed"):
        checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5))
    assert (shard.parent / "optim_world_size_2_rank_0.pt").is_file()
    sealed_run(run, config, [5])
    (shard.parent / "late.pt").write_text("after the seal")
    with pytest.raises(Failure, match="not listed in"):
        checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5))
    assert shard.is_file()
    (run / "OUTPUTS.sha256").unlink()  # not sealed: nothing can be checked, nothing is pruned
    assert (
        checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5)) is None
        and shard.is_file()
    )


def test_pruned_files_reports_a_record_that_disagrees_with_the_seal(tmp_path):
    """A record naming a hash the run's seal does not have is a problem, and that file is not excused."""
    run = tmp_path / "run"
    config = verl_config(tmp_path)
    fake_verl_step(run, 5)
    sealed_run(run, config, [5])
    record = checkpoints.prune(config, run, step_checkpoint(config, run, 5), outcomes=outcomes_path(run, 5))
    forged = copy.deepcopy(record)
    rel = sorted(forged["removed"])[0]
    forged["removed"][rel] = "0" * 64
    (outcomes_path(run, 5).parent / "pruned.json").write_text(json.dumps(forged))
    pruned, problems = checkpoints.pruned_files(run, get_backend(config["backend"]["name"]).pruned_in_training(run))
    assert run / rel not in pruned and len(problems) == 1 and rel in problems[0]


def test_keep_checkpoints_is_validated(tmp_path):
    """An unknown eval.keep_checkpoints is BadInput naming the key."""
    with pytest.raises(BadInput, match=r"eval.keep_checkpoints"):
        checkpoints.keep_setting({"eval": {"keep_checkpoints": "some"}})


def test_eval_verb_prunes_after_the_outcomes_and_never_after_a_failure(tmp_path, write_config):
    """`agentrepro eval` (subprocess) of a sealed verl-agent run: a failed evaluation keeps the checkpoint; a good one
    writes outcomes, prunes step 5's training state into a sealed pruned.json, and `train` then refuses to resume."""
    run = tmp_path / "run"
    config = verl_config(tmp_path)
    fake_verl_step(run, 5)
    runconfig.write_resolved_config(run, config)
    (run / "verl_validation").mkdir()
    (run / "verl_validation" / "5.jsonl").write_text(
        '{"task_id": "alf-0", "won": true}\n'
    )  # no reward, no turns: bad input
    seal.write_outputs_manifest(run, exclude_dirs={"eval", "logs"})
    optim = verl_root(run) / "global_step_5" / "actor" / "optim_world_size_2_rank_0.pt"
    result = run_cli("eval", "--run", run, "--step", 5)
    assert result.returncode == 2 and "5.jsonl: line 1" in result.stderr and optim.is_file()
    lines = [
        {"task_id": f"alf-{i}", "won": i == 0, "reward": 10.0 * (i == 0), "turns": 3, "tokens": 30} for i in range(3)
    ]
    (run / "verl_validation" / "5.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    seal.write_outputs_manifest(run, exclude_dirs={"eval", "logs"})
    result = run_cli("eval", "--run", run, "--step", 5)
    assert result.returncode == 0, result.stderr
    assert not optim.exists() and (optim.parent / "huggingface" / "model.safetensors").is_file()
    step_dir = outcomes_path(run, 5).parent
    assert (
        "pruned.json" in seal.read_outputs_manifest(step_dir / "OUTPUTS.sha256")
        and seal.verify_outputs(step_dir / "OUTPUTS.sha256") == []
    )
    attempt = json.loads((step_dir / "provenance.json").read_text())["attempts"][-1]
    assert (
        attempt["pruned"]["keep"] == "hf" and attempt["pruned"]["files"] == 8
    )  # 3 kinds x 2 ranks, config.json, data.pt
    result = run_cli("train", "--config", write_config(config), "--out", run)
    assert result.returncode == 2 and "cannot resume" in result.stderr


def test_relax_export_is_a_recorded_deviation_beside_verl_agents(tmp_path):
    """The lock's deviations of graphgpo-alfworld (verl-agent and @relax methods) name Relax's changed --save-interval
    (the recipe's 10, from the facts), the added --save-hf and the eval hook, and still verl's trainer.save_freq."""
    from helpers import REPO

    from agentrepro.planning import StudyPlan

    args = json.loads((FIXTURES / "frameworks" / "relax.args.json").read_text())
    recipe = {f["flag"]: f.get("value") for f in args["graphgpo_recipe"]["flags"]}
    records = {r["key"]: r for r in relax_recipe.deviations(relax_config(tmp_path), tmp_path)}
    assert (
        records["--save-interval"]["official"] == recipe["--save-interval"] == "10"
        and records["--save-interval"]["value"] == 5
    )
    assert (
        records[relax_recipe.HOOK_FLAG]["official"] == recipe[relax_recipe.HOOK_FLAG]
        and records["--save-hf"]["official"] is None
    )
    manifest_file = REPO / "manifests" / "graphgpo-alfworld.yaml"
    sentences = StudyPlan.load(manifest_file).deviations()
    assert any(s.startswith("--save-interval = 5 (the script sets 10;") and "@relax" in s for s in sentences), sentences
    assert any(s.startswith("trainer.save_freq = 5 (the script sets -1;") for s in sentences), sentences
