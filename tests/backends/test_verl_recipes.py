"""The verl-agent launches against the facts of verl-agent @ 20bd331 (tests/fixtures/frameworks/, see its README):
the shipped script table against the recorded scripts, and every appended key against the composed Hydra config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrepro.backends.verl_agent import backend as verl_agent
from agentrepro.backends.verl_agent import recipes as verl_recipes
from agentrepro.backends.verl_agent import scripts as verl_scripts
from agentrepro.errors import BadInput
from agentrepro.manifest.loading import load_manifest
from agentrepro.manifest.resolve import run_config

FACTS = Path(__file__).parents[1] / "fixtures" / "frameworks"
RECIPES = json.loads((FACTS / "verl-agent-20bd331.recipes.json").read_text())
CONFIGS = json.loads((FACTS / "verl-agent-20bd331.config.json").read_text())
RAY = json.loads((FACTS / "verl-agent-20bd331.ray.json").read_text())
MANIFEST = Path(__file__).parents[2] / "manifests" / "graphgpo-alfworld.yaml"
# The keys verl's config check (and the trainers' data loaders) need beyond their defaults: the issue's list.
REQUIRED = [
    "data.train_files",
    "data.val_files",
    "data.val_batch_size",
    "data.max_prompt_length",
    "data.return_raw_chat",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
]


def recorded(script: str) -> dict:
    return next(r for r in RECIPES["recipes"] if r["script"] == script)


def composed(script: verl_scripts.Script) -> dict:
    """The flattened config the script's entry composes (graphgpo_trainer or ppo_trainer)."""
    name = "graphgpo_trainer" if script.entry == "recipe.GraphGPO.main_graphgpo" else "ppo_trainer"
    return CONFIGS["configs"][name]["keys"]


def study_configs(tmp_path):
    manifest = load_manifest(MANIFEST)
    lock = {"manifest": manifest, "study": manifest["study"], "resolved": {"files": {}}, "task_panel": None}
    for method in manifest["methods"]:
        config = run_config(lock, method, 1, lock_path=tmp_path / "lock.json")
        if config["backend"]["name"] != verl_agent.VerlAgentBackend.name:
            continue  # the study's Relax port (tests/backends/test_relax.py)
        config["backend"]["workdir"] = str(tmp_path)
        yield method, config


def official_lines(script_path: str) -> dict[str, tuple[str, int]]:
    """{key: (value, line)} of every override the recorded script sets."""
    return {o["key"]: (o["value"], line(o["src"])) for o in recorded(script_path)["overrides"]}


def line(src: str) -> int:
    return int(src.rsplit(":", 1)[1])


def test_script_table_equals_the_recorded_scripts():
    """The shipped facts (verl_scripts.json) are the recorded scripts of 20bd331 (recipes.json), both ways: the same
    scripts, and for each its entry module and data-preparation arguments (with their lines) and exactly the keys it
    sets, each with its value and line; so no key a script sets is recorded as 'not set by the script'."""
    assert RECIPES["commit"] == verl_scripts.COMMIT == CONFIGS["commit"]
    assert sorted(s.path for s in verl_scripts.SCRIPTS.values()) == sorted(r["script"] for r in RECIPES["recipes"])
    for estimator, script in verl_scripts.SCRIPTS.items():
        facts = recorded(script.path)
        assert (script.entry, script.entry_line) == (facts["entry"]["module"], line(facts["entry"]["src"]))
        (prepare,) = facts["data_preparation"]
        assert (list(script.prepare), script.prepare_line) == (prepare["args"], line(prepare["src"]))
        recorded_keys = official_lines(script.path)
        assert sorted(script.official) == sorted(recorded_keys), script.path
        for key, official in script.official.items():
            assert official == recorded_keys[key], (script.path, key)
        assert script.official["algorithm.adv_estimator"][0] == estimator


def test_every_script_key_exists_in_the_composed_config():
    """Every key of the shipped facts is a key of the config its script's entry composes at 20bd331 (config.json)."""
    for script in verl_scripts.SCRIPTS.values():
        missing = sorted(set(script.official) - set(composed(script)))
        assert not missing, (script.path, missing)


def test_an_override_of_a_script_key_the_harness_leaves_records_the_scripts_value(tmp_path):
    """backend.overrides naming a key the script sets but the harness never appends (the rollout's GPU memory share)
    is recorded as a deviation from the script's value and line, not as 'not set by the script'."""
    for method, config in study_configs(tmp_path):
        if config["backend"]["name"] != verl_agent.VerlAgentBackend.name:
            continue
        key = "actor_rollout_ref.rollout.gpu_memory_utilization"
        assert key not in {o.key for o in verl_recipes.appended(config, tmp_path / "run", resume=True)}
        config["backend"]["overrides"] = {key: 0.4}
        record = {o.key: o for o in verl_recipes.appended(config, tmp_path / "run", resume=True)}[key]
        script = verl_recipes.script_for(config)
        assert (record.value, record.official) == (0.4, official_lines(script.path)[key][0]), method
        assert record.official in ("0.5", "0.6") and record.why == f"manifest backend.overrides.{key}"


def test_every_appended_key_exists_with_its_type(tmp_path):
    """For every method of graphgpo-alfworld (train and evaluation launches), each appended key exists in the config
    its entry composes at 20bd331 (config.json) and its value has the default's type (a None default takes any); a key
    added with `+` is one the composed config lacks and the framework reads with a default (ray.json `seeds`)."""
    for method, config in study_configs(tmp_path):
        script = verl_recipes.script_for(config)
        keys = composed(script)
        *_, evaluate = verl_agent.programs(config, tmp_path / "run", eval_step=5)
        program = evaluate.argv[evaluate.argv.index("--") + 1 :]
        words = program[3:]
        assert program[:3] == ("bash", script.path, "")
        for word in words:
            key, text = word.split("=", 1)
            if key.startswith("+"):
                assert key[1:] not in keys and key[1:] in ("actor_rollout_ref.rollout.seed", "data.seed"), (
                    method,
                    word,
                )
                assert (
                    "config.get('seed'" in RAY["seeds"]["rollout"]["fact"]
                    and "get('seed', 1)" in RAY["seeds"]["data"]["fact"]
                )
                continue
            assert key in keys, f"{method}: {key} is not a key of {script.entry}'s config"
            default = keys[key]["default"]
            if default is not None:
                value = verl_recipes.typed(text)
                if isinstance(default, float):
                    assert isinstance(value, (int, float)) and not isinstance(value, bool), (method, word)
                elif isinstance(default, str) and isinstance(value, (int, float)):
                    pass  # a path or name made only of digits would still be text to Hydra's str-typed key
                else:
                    assert type(value) is type(default), (method, word, default)


def test_methods_map_to_the_recipe_names(tmp_path):
    """GraphGPO and graph-only run the recipe's script, GiGPO and GRPO theirs; graph-only appends
    episode_advantage_w=0, ω equal to the script's 0.10 is not appended, and no run uses total_training_steps."""
    scripts, appended = {}, {}
    for method, config in study_configs(tmp_path):
        if "@" in method:  # the Relax port of the same study (graphgpo@relax, gigpo@relax) runs on its own backend
            continue
        scripts[method] = verl_recipes.script_for(config).path
        appended[method] = {o.key: o for o in verl_recipes.appended(config, tmp_path / "run", resume=True)}
    assert scripts == {
        "graphgpo": "recipe/GraphGPO/run_qwen2.5_1.5b_alfworld_train.sh",
        "graph_only": scripts["graphgpo"],
        "gigpo": "examples/gigpo_trainer/run_alfworld.sh",
        "grpo": "examples/grpo_trainer/run_alfworld.sh",
    }
    only = appended["graph_only"]["algorithm.graphgpo.episode_advantage_w"]
    assert (only.value, only.official, only.why) == (0, "1.0", "manifest train.episode_weight")
    assert "algorithm.graphgpo.episode_advantage_w" not in appended["graphgpo"]
    assert all("algorithm.gamma" not in a and "trainer.total_training_steps" not in a for a in appended.values())
    assert all(a["trainer.logger"].value == ["console"] and a["env.seed"].official == "0" for a in appended.values())


def test_required_keys_are_set(tmp_path):
    """Every key the trainer needs is set by the official script or appended, and the KL loss and validation sampling
    (do_sample for temperature 0.4) are on in the script the method runs."""
    for method, config in study_configs(tmp_path):
        script = verl_recipes.script_for(config)
        facts = {o["key"]: o["value"] for o in recorded(script.path)["overrides"]}
        facts.update({o.key: o.value for o in verl_recipes.appended(config, tmp_path / "run", resume=True)})
        assert all(key in facts for key in REQUIRED), method
        assert (
            facts["actor_rollout_ref.actor.use_kl_loss"] == "True"
            and facts["actor_rollout_ref.actor.kl_loss_type"] == "low_var_kl"
        )
        assert facts["actor_rollout_ref.rollout.val_kwargs.do_sample"] == "True"


def test_a_value_the_script_would_split_is_refused(tmp_path):
    """A value with a blank (the scripts pass extra arguments as an unquoted $@) or an estimator with no script is BadInput."""
    _, config = next(study_configs(tmp_path))
    config["backend"]["overrides"] = {"trainer.project_name": "two words"}
    with pytest.raises(BadInput, match=r"backend.overrides.trainer.project_name"):
        verl_recipes.appended(config, tmp_path / "run", resume=True)
    config["backend"]["overrides"] = {}
    config["train"]["estimator"] = "ppo"
    with pytest.raises(BadInput, match=r"train.estimator"):
        verl_recipes.appended(config, tmp_path / "run", resume=True)


def test_composed_configs_and_exports_are_the_recorded_facts():
    """The shipped composed configs (scripts.json `configs`) are config.json's keys with their resolved values, each
    script names its entry's config, and its literal exports are recipes.json's (VLLM_ATTENTION_BACKEND=XFORMERS)."""
    for name, config in CONFIGS["configs"].items():
        assert verl_scripts._FACTS["configs"][name] == {
            k: v.get("resolved", v["default"]) for k, v in config["keys"].items()
        }
    for script in verl_scripts.SCRIPTS.values():
        assert script.composed is verl_scripts._FACTS["configs"][composed_name(script)]
        literal = {
            e["name"]: (e["value_as_written"], line(e["src"]))
            for e in recorded(script.path)["env_exports"]
            if "$" not in e["value_as_written"]
        }
        assert script.exports == literal and script.exports["VLLM_ATTENTION_BACKEND"][0] == "XFORMERS"


def composed_name(script: verl_scripts.Script) -> str:
    return "graphgpo_trainer" if script.entry == "recipe.GraphGPO.main_graphgpo" else "ppo_trainer"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("trainer.total_epochs=999", 1, "'trainer.total_epochs=999' is not a Hydra key"),
        ("trainer.x;touch${IFS}pwned", 1, "is not a Hydra key"),
        ("", 1, "'' is not a Hydra key"),
        ("+trainer.total_epochs", 3, "is not a Hydra key"),
        ("~trainer.logger", 1, "is not a Hydra key"),
        ("trainer.no_such_key", 1, "composed config at 20bd331 has no the key 'trainer.no_such_key'"),
        (
            "algorithm.gigpo.episode_advantage_w",
            0.5,
            "has no the key",
        ),  # graphgpo's config has it, ppo_trainer does not
        ("trainer.project_name", "${oc.env:HOME}", "holds '$'"),
        ("trainer.project_name", "a*", "holds '*'"),
        ("trainer.project_name", "[a,b]", "holds '['"),
        ("trainer.project_name", "it's", 'holds "\'"'),
        ("trainer.project_name", "two words", "holds ' '"),
        ("trainer.logger", [["console"]], "a nested list"),
        ("trainer.logger", {"a": 1}, "a mapping"),
    ],
)
def test_hydra_shaped_override_keys_and_values_are_refused(tmp_path, key, value, message):
    """backend.overrides: a key must be a dotted identifier of the composed config; a value Hydra or the script's unquoted
    $@ would reinterpret (interpolation, glob, quote, blank, nested structure) is refused, naming backend.overrides.<key>."""
    config = dict(next(c for m, c in study_configs(tmp_path) if m == "gigpo"))
    config["backend"] = {**config["backend"], "overrides": {key: value}}
    with pytest.raises(BadInput) as caught:
        verl_recipes.appended(config, tmp_path / "run", resume=True)
    assert f"backend.overrides.{key}:" in str(caught.value) and message in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    "value, word",
    [
        ("a,b", "trainer.project_name='a,b'"),  # a comma would be a sweep or a list to Hydra
        ("choice(a,b)", "trainer.project_name='choice(a,b)'"),
        ("5", "trainer.project_name='5'"),  # text that Hydra would type as a number, a bool or null
        ("true", "trainer.project_name='true'"),
        ("null", "trainer.project_name='null'"),
        ("", "trainer.project_name=''"),
        ("run_1.x", "trainer.project_name=run_1.x"),  # a plain word stays as it is
        (None, "trainer.project_name=null"),
    ],
)
def test_override_values_are_quoted_for_hydra(tmp_path, value, word):
    """A text value Hydra would read as something else is single-quoted for Hydra (one word, no blank: it passes the
    script's unquoted $@ as it is), so it reaches the config as the manifest's text."""
    config = dict(next(c for m, c in study_configs(tmp_path) if m == "gigpo"))
    config["backend"] = {**config["backend"], "overrides": {"trainer.project_name": value}}
    found = {o.key: o for o in verl_recipes.appended(config, tmp_path / "run", resume=True)}["trainer.project_name"]
    assert found.word() == word


def test_seeds_reach_disjoint_game_streams_and_the_samplers(tmp_path):
    """Seeds 0, 1, 2: env.seed is seed x stride, so the training envs' streams (env.seed + i // group_n) and validation
    envs' (env.seed + 1000 + i) of two seeds never meet; vLLM's and the dataloader's seeds follow the seed."""
    streams, offset = {}, RAY["env_counts"]["val_seed_offset"]
    assert verl_recipes.VAL_SEED_OFFSET == offset and RAY["env_counts"]["graphgpo"][1].endswith(":734")
    for seed in (0, 1, 2):
        manifest = load_manifest(MANIFEST)
        lock = {"manifest": manifest, "study": manifest["study"], "resolved": {"files": {}}, "task_panel": None}
        config = run_config(lock, "graphgpo", seed, lock_path=tmp_path / "lock.json")
        values = verl_recipes.composed(config, tmp_path / f"run{seed}")
        env_seed, n = values["env.seed"], values["env.rollout.n"]
        train = {env_seed + i // n for i in range(values["data.train_batch_size"] * n)}
        val = {env_seed + offset + i for i in range(values["data.val_batch_size"])}
        streams[seed] = train | val
        assert (values["actor_rollout_ref.rollout.seed"], values["data.seed"]) == (seed, seed)
    assert not streams[0] & streams[1] and not streams[1] & streams[2] and not streams[0] & streams[2]
    assert min(streams[0]) == 0  # seed 0 keeps the script's env.seed=0


def test_a_resumed_job_does_not_validate_its_resumed_step_again(tmp_path):
    """With verl's checkpoint tracker in the run (a resume), trainer.val_before_train=false is appended to training, so
    step N's outcomes are not overwritten by a second validation; a fresh run and an evaluation validate as before."""
    _, config = next(study_configs(tmp_path))
    run = tmp_path / "run"
    train = lambda: verl_agent.programs(config, run)[-1].argv  # noqa: E731
    assert not any(w.startswith("trainer.val_before_train") for w in train())
    tracker = run / "checkpoints" / verl_recipes.TRACKER
    tracker.parent.mkdir(parents=True)
    tracker.write_text("5\n")
    assert "trainer.val_before_train=false" in train()
    evaluation = verl_agent.programs(config, run, eval_step=5)[-1].argv
    assert evaluation[-4:][0] == "trainer.val_before_train=true" or "trainer.val_before_train=true" in evaluation[-4:]
    assert (
        RAY["resume"]["tracker"]["graphgpo"].endswith(":959")
        and "latest_checkpointed_iteration.txt" in RAY["resume"]["tracker"]["fact"]
    )


def test_a_seed_whose_env_seeds_leave_the_seed_range_is_refused(tmp_path):
    """env.seed = seed x stride: a study seed whose game streams would pass MAX_SEED (2^32 - 1) is refused naming `seeds`."""
    from agentrepro.bounds import MAX_SEED

    manifest = load_manifest(MANIFEST)
    stride = 1000 + 128
    manifest["seeds"] = [MAX_SEED // stride - 1, MAX_SEED // stride]
    lock = {"manifest": manifest, "study": manifest["study"], "resolved": {"files": {}}, "task_panel": None}
    for seed, refused in zip(manifest["seeds"], (False, True)):
        config = run_config(lock, "gigpo", seed, lock_path=tmp_path / "lock.json")
        config["backend"]["workdir"] = str(tmp_path)
        if refused:
            with pytest.raises(BadInput, match=rf"seeds: seed {seed} gives env seeds up to \d+ .* above {MAX_SEED}"):
                verl_agent.VerlAgentBackend().validate_config(config)
        else:
            verl_agent.VerlAgentBackend().validate_config(config)


def test_a_list_word_that_bash_would_expand_in_the_checkout_is_refused(tmp_path):
    """`trainer.logger=[console]` reaches the script's unquoted $@, where bash replaces a [...] pattern by the files it
    matches: with a file `trainer.logger=c` in the checkout the launch is refused naming backend.workdir; without, it runs."""
    _, config = next(study_configs(tmp_path))
    assert "trainer.logger=[console]" in verl_agent.programs(config, tmp_path / "run")[-1].argv
    (tmp_path / "trainer.logger=c").write_text("")
    with pytest.raises(
        BadInput, match=r"backend.workdir: the official script passes 'trainer.logger=\[console\]' unquoted"
    ):
        verl_agent.programs(config, tmp_path / "run")
