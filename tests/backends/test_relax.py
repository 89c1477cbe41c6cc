"""The relax backend against Relax's own facts: the GraphGPO recipe's knobs and flags, ports, the eval hook, steps.

Facts: tests/fixtures/frameworks/relax.args.json (the 313 flags of relax/utils/arguments.py; the recipe's
expanded flags, knobs, exports, script lines) and relax.outputs.json (per-turn export records, eval hook,
rollout numbering), from redai-infra/Relax (commits in the files; README there).
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import sys
import types
from pathlib import Path

import pytest
import yaml
from helpers import FIXTURES, REPO, load_file_module, run_cli, step_checkpoint, write_alfworld_games
from podman_kit import PYTHON as PYTHON_IN_IMAGE
from podman_kit import check_proof, derive, leftover_containers, stand_in_gpus, stand_in_gpus_given

from agentrepro import containers, runconfig
from agentrepro.backends import checkpoints, ray_head
from agentrepro.backends.launch import OFFLINE
from agentrepro.backends.relax import backend as relax
from agentrepro.backends.relax import recipe as relax_recipe
from agentrepro.backends.relax.hooks import agentrepro_relax_eval as hook
from agentrepro.backends.relax.hooks import agentrepro_relax_submit as submit_hook
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import sha256_file
from agentrepro.hooks import STARTUP_DIR
from agentrepro.hooks import agentrepro_ray_head as head_script
from agentrepro.jobs.freeze import freeze
from agentrepro.manifest.resolve import run_config
from agentrepro.outcomes import check_rows

ARGS = json.loads((FIXTURES / "frameworks" / "relax.args.json").read_text())
OUTPUTS = json.loads((FIXTURES / "frameworks" / "relax.outputs.json").read_text())
PIN = json.loads((FIXTURES / "frameworks" / "relax.pin.json").read_text())
RECIPE = ARGS["graphgpo_recipe"]
MANIFEST = REPO / "manifests" / "graphgpo-alfworld-relax.yaml"
TYPES = [
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
]
# How the recipe's printed flags depend on its knobs (run_alfworld_qwen2_5_1_5b.sh lines 182, 215-223, 252-276).
FLAG_KNOBS = {
    "--num-rollout": "OUTER_EPOCHS",
    "--rollout-batch-size": "TASK_GROUPS",
    "--n-samples-per-prompt": "GROUP_SIZE",
    "--global-batch-size": "GLOBAL_BATCH_SIZE",
    "--seed": "SEED",
    "--rollout-num-gpus-per-engine": "NUM_GPUS",
    "--tensor-model-parallel-size": "NUM_GPUS",
}


def game(i: int) -> str:
    """Game i's id in the frozen panel: its directory relative to the data directory (environments/alfworld_data.py)."""
    return f"json_2.1.1/valid_seen/{TYPES[i % 6]}-Obj{i}-None-Place-{300 + i}/trial_T2019_{i:04d}"


def relax_task(task_id: str) -> str:
    """The same game as Relax names it: the game file relative to ALFWORLD_DATA, as prepare_alfworld.py writes it into
    each prompt row's metadata.task_id (task.game.relative_path) and the agent copies into every sample's metadata."""
    return f"{task_id}/game.tw-pddl"


def stand_in_checkout(workdir: Path, sources: list[str]) -> str:
    """A git repository in `workdir` holding a stand-in for the recipe and each declared source; its commit."""
    import subprocess

    for path in {relax_recipe.RECIPE, *sources}:
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / path).write_text(f"# stand-in for {path}\n")

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(workdir), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    git("-c", "user.email=t@example.org", "-c", "user.name=t", "add", "-A")
    git("-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-q", "-m", "stand-in recipe")
    return git("rev-parse", "HEAD")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The shipped manifest frozen with test values: (lock, lock path, root)."""
    root = tmp_path_factory.mktemp("relax-study")
    for name in ("relax", "alfworld", "model"):
        (root / name).mkdir()
    (root / "model.lock.json").write_text("{}\n")
    manifest = yaml.safe_load(MANIFEST.read_text())
    commit = stand_in_checkout(root / "relax", manifest["backend"]["sources"])
    manifest["backend"].update(
        commit=commit,
        workdir=str(root / "relax"),
        alfworld_data=str(root / "alfworld"),
        alfworld_python="python3",
        model_path=str(root / "model"),
        model_lock=str(root / "model.lock.json"),
    )
    manifest["image"] = {"runtime": "apptainer", "ref": "ghcr.io/redai-infra/relaxrl", "digest": "sha256:" + "3f" * 32}
    manifest["model"].update(
        revision="775b11afaf83e0dc75bd5abaf90133e47b3ec082",
        tokenizer_revision="775b11afaf83e0dc75bd5abaf90133e47b3ec082",
    )
    manifest["data"]["eval"]["path"] = (
        "data/alfworld/eval_in_distribution.jsonl"  # the directory panel's ids, as a task list
    )
    (root / "manifests").mkdir()
    (root / "manifests" / MANIFEST.name).write_text(yaml.safe_dump(manifest, sort_keys=False))
    (root / "data" / "alfworld").mkdir(parents=True)
    (root / "data" / "alfworld" / "eval_in_distribution.jsonl").write_text(
        "".join(json.dumps({"task_id": game(i), "category": TYPES[i % 6]}) + "\n" for i in range(128))
    )
    lock, path, _ = freeze(root / "manifests" / MANIFEST.name, root=root, out=root / "lock.json", allow_dirty=True)
    return lock, path, root


def test_freeze_pins_the_recipe_sources_at_the_relax_commit(study):
    """The shipped manifest's sources (the recipe's algorithm files) are hashed at backend.commit in the checkout."""
    import subprocess

    lock, _, root = study
    pinned = lock["backend_sources"]["relax"]
    sources = yaml.safe_load(MANIFEST.read_text())["backend"]["sources"]

    def blob(path):
        return subprocess.run(
            ["git", "-C", str(root / "relax"), "hash-object", path], check=True, capture_output=True, text=True
        ).stdout.strip()

    assert pinned["commit"] == lock["manifest"]["backend"]["commit"] and sorted(pinned["files"]) == sorted(sources)
    assert pinned["files"] == {path: blob(path) for path in sources}


def resolved(study, method: str, seed: int = 0) -> dict:
    lock, path, _ = study
    config = runconfig.resolve_config(
        run_config(lock, method, seed, lock_path=path), relax.RelaxBackend().default_config()
    )
    relax.RelaxBackend().validate_config(config)
    return config


def test_step_rows_offset_follows_relax_resume(study, tmp_path):
    """The advantage wrapper's AGENTREPRO_POLICY_VERSION_OFFSET is 0 for a fresh --save and the saved iteration + 1
    when Relax will resume from it (relax_recipe.policy_version_offset)."""
    config = resolved(study, "graphgpo")
    run = tmp_path / "run"
    offset = lambda: relax.programs(config, run)[2].env["AGENTREPRO_POLICY_VERSION_OFFSET"]  # noqa: E731 - the head's
    assert config["train"]["step_rows"] and offset() == "0"
    tracker = relax_recipe.checkpoint_dir(relax.save_dir(run), config) / relax_recipe.TRACKER
    tracker.parent.mkdir(parents=True)
    tracker.write_text("49\n")
    assert offset() == "50"


def recipe_line(knobs: dict[str, str], workdir: Path) -> str:
    """The recipe's DRY_RUN=1 line as the facts record it, with this run's knobs where the script puts them."""
    paths = {
        "${SAVE_DIR}": knobs["SAVE_DIR"],
        "${DATA_ARTIFACT_DIR}": knobs["DATA_ARTIFACT_DIR"],
        "${PROJECT_ROOT}": str(workdir),
        "${HF_CHECKPOINT}": knobs["HF_CHECKPOINT"],
        "${ALFWORLD_DATA}": knobs["ALFWORLD_DATA"],
    }

    def fill(value: str) -> str:
        for name, path in paths.items():
            value = value.replace(name, path)
        return value.replace("/graphgpo/seed-0", f"/{knobs['METHOD']}/seed-{knobs['SEED']}")

    words = [*RECIPE["launcher"], "--", *RECIPE["entry"].split()]
    for entry in RECIPE["flags"]:
        value = entry["value"]
        words.append(entry["flag"])
        if entry["flag"] in FLAG_KNOBS:
            words.append(knobs[FLAG_KNOBS[entry["flag"]]])
        elif entry["flag"] == "--resource":
            words.append(
                json.dumps(
                    {"actor": [1, int(knobs["NUM_GPUS"])], "rollout": [1, int(knobs["NUM_GPUS"])]},
                    separators=(",", ":"),
                )
            )
        elif isinstance(value, list):
            words += [fill(v) for v in value]
        elif value is not True:
            words.append(fill(value))
    return shlex.join(words)


def submitted(launch) -> list[str]:
    """The `--flag value` words the job's submit step sets in the recipe's command (after `submit EXPANDED_FILE`)."""
    program = list(launch.argv[launch.argv.index("--") + 1 :])
    return program[program.index(str(relax.SUBMIT)) + 2 :]


def flag_pairs(words: list[str]) -> list[tuple[str, list[str]]]:
    pairs: list[tuple[str, list[str]]] = []
    for word in words:
        if word.startswith("--"):
            pairs.append((word, []))
        else:
            pairs[-1][1].append(word)
    return pairs


PARSERS = {"int": int, "float": float, "str": str, "json.loads": json.loads, "None": str}


@pytest.mark.parametrize("method", ["grpo", "gigpo", "graphgpo", "graph_only"])
def test_every_method_renders_knobs_and_flags_the_parser_accepts(study, method, tmp_path):
    """Each method: the recipe's required knobs set within its choices, GRAPHGPO_* on the head, and every submitted
    flag a flag of Relax's parser (or of Megatron/SGLang as the recipe passes it) with a value of its type and choices."""
    config = resolved(study, method)
    prepare, expand, head = relax.programs(config, tmp_path / "run")
    assert all(isinstance(w, str) for launch in (prepare, expand, head) for w in launch.argv)
    knobs = expand.env
    assert (
        expand.argv == ("bash", relax_recipe.RECIPE)
        and knobs["DRY_RUN"] == "1"
        and expand.cwd == Path(config["backend"]["workdir"])
    )
    required = [name for name in RECIPE["required_env"] if " " not in name]
    derived = dict.fromkeys(
        ("TRAIN_DATA", "TRAIN_MANIFEST", "PREPARE_LOCK", "EVAL_DATA", "EVAL_MANIFEST"), "DATA_ARTIFACT_DIR"
    )
    for name in required:
        assert knobs.get(name) or knobs.get(derived.get(name, name)), name
    choices = RECIPE["validated_choices"]
    for name in ("METHOD", "ENABLE_EVAL", "EPISODE_WEIGHTING"):
        assert knobs[name] in choices[name], name
    for name in ("TASK_GROUPS", "GROUP_SIZE", "GLOBAL_BATCH_SIZE", "MAX_STEPS"):
        assert knobs[name].isdigit() and int(knobs[name]) > 0
    assert int(knobs["TASK_GROUPS"]) * int(knobs["GROUP_SIZE"]) % int(knobs["GLOBAL_BATCH_SIZE"]) == 0
    assert knobs["DEPENDENCY_LOCK"] == str(study[1].resolve())
    train = config["train"]
    assert (
        knobs["METHOD"],
        float(knobs["OMEGA"]),
        float(knobs["GAMMA"]),
        float(knobs["BETA"]),
        float(knobs["BETA_EPISODE"]),
    ) == (train["estimator"], train["omega"], train["gamma"], train["step_weight"], train["episode_weight"])
    assert knobs["EPISODE_WEIGHTING"] == "trajectory_once" and (method != "graph_only" or knobs["BETA_EPISODE"] == "0")
    exported = {e["name"]: e["value_as_written"] for e in RECIPE["exported_env"] if e["value_as_written"]}
    for name, written in exported.items():  # "${OMEGA:-0.1}" -> the knob OMEGA
        assert head.env[name] == knobs[written[2:-1].split(":-")[0]], name
    assert set(exported) == set(relax_recipe.EXPORTS)
    words = relax_recipe.submitted_argv(recipe_line(knobs, expand.cwd), source=Path("expanded"))
    relax_flags = {flag: entry for entry in ARGS["flags"] for flag in entry["flags"]}
    outside = {e["flag"] for e in RECIPE["flags"] if not e["defined_in"].startswith("relax/")}
    n = len(submit_hook.LAUNCHER) + len(submit_hook.ENTRY)
    pairs = flag_pairs(words[n:])
    for flag, values in pairs:
        assert flag in relax_flags or flag in outside, flag
        entry = relax_flags.get(flag)
        if entry is None:
            continue
        if entry.get("action") in ("store_true", "store_false"):
            assert values == [], flag
            continue
        assert len(values) == 1 or entry.get("nargs") in ("+", "*"), flag
        for value in values:
            PARSERS[str(entry.get("type"))](value)
            assert "choices" not in entry or value in map(str, entry["choices"]), flag
    given = dict(pairs)
    assert given["--advantage-estimator"] == ["grpo"] and given["--custom-eval-rollout-log-function-path"] == [
        relax_recipe.HOOK
    ]
    assert given["--seed"] == [str(config["seed"])] and given["--save"] == [
        str(relax_recipe.checkpoint_dir(Path(knobs["SAVE_DIR"]), config))
    ]
    original = shlex.split(recipe_line(knobs, expand.cwd))
    assert [i for i, (a, b) in enumerate(zip(original, words)) if a != b] == [words.index(relax_recipe.HOOK)]


def test_export_hf_saves_at_the_evaluated_steps_with_flags_the_parser_has(study, tmp_path):
    """backend.export_hf (default true): --save-interval 5 and --save-hf <save>/hf/{rollout_id} (Relax flags, int and str), so
    under Relax's save rule ((r + 1) % interval == 0 or the last rollout) the copies are the evaluated steps."""
    config = copy.deepcopy(resolved(study, "graphgpo"))
    config["backend"]["export_hf"] = True
    _, expand, submit = relax.programs(config, tmp_path / "run")
    replace = submitted(submit)
    words = relax_recipe.submitted_argv(recipe_line(expand.env, expand.cwd), source=Path("expanded"), replace=replace)
    given = dict(flag_pairs(words[len(submit_hook.LAUNCHER) + len(submit_hook.ENTRY) :]))
    flags = {flag: entry for entry in ARGS["flags"] for flag in entry["flags"]}
    assert flags["--save-interval"]["type"] == "int" and flags["--save-hf"]["type"] == "str"
    assert given["--save-interval"] == ["5"] and given["--save-hf"] == [
        str(relax.save_dir(tmp_path / "run") / "hf" / "{rollout_id}")
    ]
    assert words.count("--save-interval") == 1
    steps, interval = config["train"]["steps"], int(given["--save-interval"][0])
    saved = [r for r in range(steps) if (r + 1) % interval == 0 or r + 1 == steps]
    planned = relax.RelaxBackend().checkpoint_steps(config)
    assert [relax_recipe.step_of_rollout(r) for r in saved] == planned[1:]
    assert relax_recipe.hf_checkpoint(relax.save_dir(tmp_path), config, 0) == Path(config["backend"]["model_path"])
    assert relax_recipe.hf_checkpoint(relax.save_dir(tmp_path), config, 5).name == "4"
    assert relax.programs(resolved(study, "graphgpo"), tmp_path / "run")[2].argv == submit.argv  # the default
    config["backend"]["export_hf"] = False
    plain = relax.programs(config, tmp_path / "run")[2]
    assert submitted(plain) == [
        relax_recipe.KEEP_FLAG,
        "1",
        relax_recipe.SEED_FLAG,
        "0",
        relax_recipe.ADVANTAGE_FLAG,
        relax_recipe.ADVANTAGE_HOOK,
    ]  # no export flags
    with pytest.raises(submit_hook.Refused, match="expected --seed at most once"):
        relax_recipe.submitted_argv(
            recipe_line(expand.env, expand.cwd) + " --seed 3", source=Path("e"), replace=["--seed", "1"]
        )


@pytest.mark.parametrize("keep, kept", [("hf", "1"), ("none", "1"), ("all", "2")])
def test_keep_checkpoints_sets_how_many_megatron_checkpoints_relax_keeps(study, tmp_path, keep, kept):
    """eval.keep_checkpoints hf/none: the submitted command carries --max-actor-ckpt-to-keep 1 (an int flag of Relax) in
    place of the recipe's 2, once, recorded as a deviation; Relax rotates only iter_* under --save, before each save,
    and the --save-hf copies live outside it (relax.pin.json `retention`). `all`: the recipe's value, no deviation."""
    config = copy.deepcopy(resolved(study, "graphgpo"))
    config["eval"]["keep_checkpoints"] = keep
    _, expand, submit = relax.programs(config, tmp_path / "run")
    words = relax_recipe.submitted_argv(
        recipe_line(expand.env, expand.cwd), source=Path("expanded"), replace=submitted(submit)
    )
    given = dict(flag_pairs(words[len(submit_hook.LAUNCHER) + len(submit_hook.ENTRY) :]))
    recipe = {f["flag"]: f["value"] for f in RECIPE["flags"]}
    flags = {flag: entry for entry in ARGS["flags"] for flag in entry["flags"]}
    assert (
        recipe[relax_recipe.KEEP_FLAG] == str(relax_recipe.RECIPE_KEEP)
        and flags[relax_recipe.KEEP_FLAG]["type"] == "int"
    )
    assert given[relax_recipe.KEEP_FLAG] == [kept] and words.count(relax_recipe.KEEP_FLAG) == 1
    retention = PIN["retention"]
    assert OUTPUTS["checkpoint"]["retention"]["flag"] == retention["flag"]
    assert retention["flag"] == relax_recipe.KEEP_FLAG and "--save-hf copies are never touched" in retention["scope"]
    assert not Path(given["--save-hf"][0]).is_relative_to(
        Path(given["--save"][0])
    )  # rotation globs iter_* under --save only
    records = [
        r for r in relax.RelaxBackend().deviations(config, tmp_path / "run") if r["key"] == relax_recipe.KEEP_FLAG
    ]
    assert records == (
        [{"key": relax_recipe.KEEP_FLAG, "value": 1, "official": "2", "why": records[0]["why"]}] if kept == "1" else []
    )


def test_ray_serve_stays_on_the_port_relax_reads_and_is_reserved(study, tmp_path, monkeypatch):
    """Relax builds every Serve URL with port 8000 (get_serve_url, relax.outputs.json `services_and_ports`), so no launch
    moves the port (no RELAX_SERVE_PORT/HOST, which only train.py would read); the job's head is started by the head script with
    its dashboard and port 8000 reserved on the node (a second Relax job there waits: exit 75), and the submit goes to
    that head's dashboard (RAY_ADDRESS from the head script), never the recipe's 8265."""
    serve = OUTPUTS["services_and_ports"]["ray_serve"]
    assert serve["env"]["RELAX_SERVE_PORT"] == str(relax_recipe.SERVE_PORT)
    assert "relax/utils/utils.py@fork:558" in serve["fork_hardcoded_src"]
    config = resolved(study, "graphgpo")
    monkeypatch.setenv("SLURM_JOB_ID", "1001")
    launches = relax.programs(config, tmp_path / "run")
    assert not any(name.startswith("RELAX_SERVE") for launch in launches for name in launch.env)
    head = launches[2].argv[: launches[2].argv.index("--")]
    assert head[:2] == ("python3", str(ray_head.SCRIPT)) and "--dashboard" in head
    assert head[head.index("--fixed-port") + 1] == "8000" and head[head.index("--key") + 1] == "slurm-1001"
    assert head[head.index("--num-cpus") + 1] == str(config["resources"]["cpus"])  # the job's CPUs, not the node's
    assert "RAY_ADDRESS" not in launches[2].env and not any("8265" in w for w in launches[2].argv)
    assert launches[2].env["RELAX_ENTRYPOINT_MODE"] and launches[2].env["GRAPHGPO_METHOD"] == "graphgpo"


def test_a_relax_job_without_its_cpus_is_refused_naming_resources_cpus(study):
    """Without --num-cpus the job's Ray head offers Relax every CPU of the node though SLURM gave the job one."""
    config = copy.deepcopy(resolved(study, "gigpo"))
    del config["resources"]["cpus"]
    with pytest.raises(BadInput, match=r"^resources\.cpus: missing: the job's CPUs"):
        relax.RelaxBackend().validate_config(config)
    config["backend"]["ray"] = {"num_cpus": 12}
    relax.RelaxBackend().validate_config(config)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("train.estimator", "ppo", "train.estimator: the Relax GraphGPO recipe runs grpo, gigpo, graphgpo"),
        ("train.lr", 2e-6, "train.lr: the Relax GraphGPO recipe fixes this at 1e-06"),
        ("eval.every", 10, "eval.every: the Relax GraphGPO recipe fixes this at 5"),
        ("eval.temperature", 1.0, "eval.temperature: "),
        ("train.group_size", 6, "train.group_size: groups x group_size = 96"),
        ("backend.model_lock", None, "backend.model_lock: expected a path"),
        ("resources.gpus", 0, "resources.gpus: expected a positive integer"),
        ("backend.colour", "blue", "backend.colour: unknown key"),
        (
            "backend.alfworld_python",
            "venv/bin/python",
            "backend.alfworld_python: expected a command name or an absolute",
        ),
    ],
)
def test_what_the_recipe_cannot_run_is_refused(study, key, value, message):
    """A value the recipe fixes, a method it lacks, a missing path: BadInput naming the key."""
    config = copy.deepcopy(resolved(study, "gigpo"))
    block, name = key.split(".")
    config[block][name] = value
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(".", r"\.")):
        relax.RelaxBackend().validate_config(config)


def sample(
    trajectory: str, task: str, turn: int, *, success: bool, episode_return: float, tokens: int, truncated=False
):
    """A Relax Sample of one exported turn, with the metadata rollout_agent.py writes."""
    metadata = {
        "task_id": task,
        "trajectory_id": trajectory,
        "rollout_group_id": f"g-{task}",
        "turn_index": turn,
        "turn_id": f"turn_{turn:03d}",
        "state_key": "s",
        "action": "look",
        "next_state_key": "t",
        "is_action_valid": True,
        "success": success,
        "terminal": False,
        "truncated": truncated,
        "episode_return": episode_return,
    }
    assert set(metadata) >= set(OUTPUTS["agent_export_record"]["fields"]["metadata"]) - {"row_id"}
    return types.SimpleNamespace(metadata=metadata, response_length=tokens, reward=episode_return)


def eval_samples(tasks: list[str]) -> list:
    """Trajectories of the panel's tasks with 1..3 turns, interleaved as Relax's batch may order them; each sample names
    its game as Relax does (relax_task)."""
    rows = []
    for i, task in enumerate(tasks):
        turns, success = 1 + i % 3, i % 2 == 0
        rows += [
            sample(
                f"traj-{i}",
                relax_task(task),
                t,
                success=success,
                episode_return=10.0 if success else -0.1 * i,
                tokens=5 + t,
            )
            for t in range(turns)
        ]
    return rows[1::2] + rows[0::2]


@pytest.fixture
def recipe_logger(monkeypatch):
    """A stand-in for examples.graphgpo.eval_logger that records its calls."""
    calls = []
    module = types.ModuleType("examples.graphgpo.eval_logger")
    module.log_eval_rollout_data = lambda *args: calls.append(args) or True
    for name, mod in (
        ("examples", types.ModuleType("examples")),
        ("examples.graphgpo", types.ModuleType("examples.graphgpo")),
        ("examples.graphgpo.eval_logger", module),
    ):
        monkeypatch.setitem(sys.modules, name, mod)
    return calls


def test_eval_hook_writes_one_outcome_per_trajectory(study, tmp_path, recipe_logger):
    """Turn rows -> one line per trajectory (turns, tokens summed), handed over to the recipe's logger unchanged;
    read back as outcome rows that pass the outcomes schema and the frozen panel."""
    config = resolved(study, "graphgpo")
    run_dir = tmp_path / "run"
    save = relax_recipe.checkpoint_dir(relax.save_dir(run_dir), config)
    tasks = [t["task_id"] for t in config["eval"]["task_panel"]]
    samples = eval_samples(tasks)
    args = types.SimpleNamespace(save=str(save))
    data = {"alfworld": {"samples": samples, "rewards": [s.reward for s in samples]}}
    assert hook.log_eval_rollout_data(4, args, data, {"x": 1}) is True
    assert recipe_logger == [(4, args, data, {"x": 1})]
    lines = [json.loads(x) for x in (save / "agentrepro_eval" / "4.jsonl").read_text().splitlines()]
    assert len(lines) == 128 and len(samples) == sum(1 + i % 3 for i in range(128))
    first = next(x for x in lines if x["trajectory_id"] == "traj-2")
    assert (first["turns"], first["tokens"], first["success"], first["category"]) == (3, 5 + 6 + 7, True, TYPES[2])
    rows = relax.convert_eval(run_dir, 5, config)
    check_rows(rows, config=config, step=5, source="hook")
    assert sorted(r["task_id"] for r in rows) == sorted(tasks) and sum(r["success"] for r in rows) == 64
    with pytest.raises(ValueError, match="'alfworld' has no samples"):
        hook.write_outcomes(9, args, {"alfworld": {"rewards": [1.0]}})
    bad = eval_samples(tasks[:1])
    bad[0].metadata["success"] = "yes"
    with pytest.raises(ValueError, match=r"traj-0.*success must be a boolean"):
        hook.trajectories("alfworld", bad)


def test_training_metrics_and_evaluation_files_share_one_step_numbering(study, tmp_path, recipe_logger):
    """rollout_id r trains step r + 1; evaluations are rollout 0 (before training) and r with (r + 1) % 5 == 0:
    the study's steps 0, 5, 10 read files 0, 4, 9, and metrics step s comes from train/<s - 1>.jsonl."""
    config = copy.deepcopy(resolved(study, "grpo"))
    config["train"]["steps"] = 10
    run_dir = tmp_path / "run"
    save = relax_recipe.checkpoint_dir(relax.save_dir(run_dir), config)
    tasks = [t["task_id"] for t in config["eval"]["task_panel"]]
    evaluated = []
    for rollout in range(10):  # Relax's loop: eval before training, train, eval when due
        if rollout == 0:
            evaluated.append(rollout)
            hook.write_outcomes(
                rollout, types.SimpleNamespace(save=str(save)), {"alfworld": {"samples": eval_samples(tasks)}}
            )
        path = save / "rollout_result" / "train" / f"{rollout}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"rollout_id": rollout, "reward": float(rollout), "response_length": 3}) + "\n")
        if (rollout + 1) % relax_recipe.EVAL_INTERVAL == 0:
            evaluated.append(rollout)
            hook.write_outcomes(
                rollout, types.SimpleNamespace(save=str(save)), {"alfworld": {"samples": eval_samples(tasks)}}
            )
    steps = relax.RelaxBackend().checkpoint_steps(config)
    assert steps == [0, 5, 10] and [relax_recipe.rollout_of_step(s) for s in steps] == evaluated == [0, 4, 9]
    relax.convert_training(run_dir, config)
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 11)) and all(
        m["reward_mean"] == m["step"] - 1 for m in metrics
    )
    for step in steps:
        rows = relax.convert_eval(run_dir, step, config)
        assert {r["step"] for r in rows} == {step}
        file = relax.outcome_file(run_dir, config, step)
        assert {json.loads(x)["rollout_id"] for x in file.read_text().splitlines()} == {
            relax_recipe.rollout_of_step(step)
        }
    with pytest.raises(BadInput, match=r"3.jsonl: file not found"):
        relax.convert_eval(run_dir, 4, config)


def test_a_study_whose_steps_relax_would_not_evaluate_is_refused():
    """150 steps evaluate every 5th update; 12 steps would need step 12, which Relax (every 5 rollouts) skips."""
    from agentrepro.planning import StudyPlan

    manifest = yaml.safe_load(MANIFEST.read_text())
    assert StudyPlan(manifest, "manifest").steps == tuple(range(0, 151, 5))
    manifest["train"]["steps"] = 12
    with pytest.raises(
        BadInput,
        match=r"eval: the relax backend would save steps \[0, 5, 10\] of grpo, but the study evaluates \[0, 5, 10, 12\]",
    ):
        StudyPlan(manifest, "manifest").steps  # noqa: B018 (planning it raises)


def test_no_resume_removes_only_this_runs_relax_save(study, tmp_path):
    """Without resume the run's --save (where Relax would auto-resume) goes; the prepared data and others stay."""
    config = resolved(study, "grpo")
    save = relax_recipe.checkpoint_dir(relax.save_dir(tmp_path), config)
    for path in (
        save / "latest_checkpointed_iteration.txt",
        relax.save_dir(tmp_path) / "data" / "prepare.lock.json",
        relax_recipe.checkpoint_dir(relax.save_dir(tmp_path), {**config, "seed": 1}) / "keep",
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    relax.start_afresh(tmp_path, config)
    assert not save.exists() and (relax.save_dir(tmp_path) / "data" / "prepare.lock.json").exists()
    assert (relax_recipe.checkpoint_dir(relax.save_dir(tmp_path), {**config, "seed": 1}) / "keep").exists()


def audit_runs_seal_problems(run_dir):
    """The audit's seal check of a run directory, with the files pruned after evaluation excused as the audit does."""
    from agentrepro.audit.tree import check_seal, walk

    pruned, problems = checkpoints.pruned_files(run_dir)
    return problems + check_seal(run_dir, walk(run_dir), nested=lambda rel: rel.parts[0] == "eval", not_bundled=pruned)


def test_shipped_manifest_placeholders_are_refused(tmp_path):
    """manifests/graphgpo-alfworld-relax.yaml stops `agentrepro freeze` at each placeholder, named (subprocess)."""
    result = run_cli("freeze", f"manifests/{MANIFEST.name}", "--allow-dirty", "-o", tmp_path / "x.lock.json", cwd=REPO)
    assert result.returncode == 2
    for field in ("image.ref", "image.digest", "data.eval.path"):
        assert f"{field}: " in result.stderr
    assert "model.revision" not in result.stderr  # pinned: the revision the recipe's data preparation pins
    assert not (tmp_path / "x.lock.json").exists()


@pytest.mark.parametrize("where", ["host", "podman"])
def test_train_and_eval_drive_the_recipe_end_to_end(study, tmp_path, write_config, where, request):
    """`agentrepro train` then `eval` (subprocesses) against a stand-in Relax and `ray`: the recipe's dry run is
    submitted to this job's head (not 8265), the driver inherits the head's GRAPHGPO_* (Serve's port is Relax's own),
    the hook's trajectories become the outcomes of steps 0, 5, 10, the recipe's logger still runs, the head is gone;
    on the host, and in a real podman image (the test image with the stand-in `ray` on its PATH) whose digest each
    program's record proves."""
    import importlib.util

    import psutil

    spec = importlib.util.spec_from_file_location("relax_standin", Path(__file__).with_name("relax_standin.py"))
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    make_checkout, make_ray = standin.make_checkout, standin.make_ray

    config = copy.deepcopy(resolved(study, "gigpo", seed=1))
    checkout = make_checkout(tmp_path / "relax")
    data = tmp_path / "alfworld"
    for task in config["eval"]["task_panel"]:
        (data / relax_task(task["task_id"])).parent.mkdir(parents=True, exist_ok=True)
        (data / relax_task(task["task_id"])).write_text("game\n")
    config["backend"].update(workdir=str(checkout), alfworld_data=str(data))
    config["train"]["steps"] = 10
    config["train"]["step_rows"] = [1, 5]  # within the shortened run
    config["lock"]["path"] = str(study[1])
    # the job's GPU as SLURM names it: the node's index, where CUDA_VISIBLE_DEVICES inside a device cgroup says 0
    env = {"SLURM_JOB_ID": f"relax-e2e-{os.getpid()}-{where}", "SLURM_JOB_GPUS": "2", "CUDA_VISIBLE_DEVICES": "0"}
    prefix, image = (), None
    if (
        where == "podman"
    ):  # the image's `ray` (on its PATH) runs the head and `ray job submit`, with the image's python3
        images = request.getfixturevalue("podman_images")
        image = derive(
            images["a"],
            tmp_path,
            "a-ray",
            {"/usr/local/bin/ray": make_ray(tmp_path / "bin", str(PYTHON_IN_IMAGE))},
            env={"PYTHONPATH": "/opt/image-lib"},  # as Relax's image puts Megatron-LM on it
        )
        config["image"] = image.block()
        prefix = stand_in_gpus(
            tmp_path / "gpus"
        )  # podman resolves the job's GPUs (resources.gpus) to stand-in CDI devices
    else:
        config.pop("image")
        env["PATH"] = f"{make_ray(tmp_path / 'bin', sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        env["PYTHONPATH"] = "/host/lib"
    run_dir = tmp_path / "run"
    result = run_cli(
        "train", "--config", write_config(config), "--out", run_dir, env=env, timeout=300, cwd=study[2], prefix=prefix
    )
    assert result.returncode == 0, result.stderr + "".join(
        p.read_text() for p in (run_dir / "logs").glob("*.stderr.log")
    )
    save = relax_recipe.checkpoint_dir(relax.save_dir(run_dir), config)
    driver = json.loads((save / "driver.json").read_text())
    assert "RELAX_SERVE_PORT" not in driver["env"] and driver["env"]["GRAPHGPO_METHOD"] == "gigpo"
    assert driver["env"]["GRAPHGPO_GAMMA"] == "0.95" and driver["cwd"] == str(checkout)
    # the job's entries (the start-up hook's folder, then the checkout), then the image's own PYTHONPATH (or on the
    # host the inherited one)
    path = driver["env"]["PYTHONPATH"].split(os.pathsep)
    assert path[:2] == [str(STARTUP_DIR), str(checkout)]
    assert path[-1] == ("/opt/image-lib" if image else "/host/lib")
    assert (
        driver["env"].get("container"),
        stand_in_gpus_given(driver["env"]),
        driver["env"].get("CUDA_VISIBLE_DEVICES"),
    ) == (("podman", "2", "0") if image else (None, "", "0"))
    assert (driver["env"]["AGENTREPRO_STEP_ROWS"], driver["env"]["AGENTREPRO_POLICY_VERSION_OFFSET"]) == (
        "1,5",
        "0",
    )  # the advantage wrapper's
    submitted = json.loads((relax.save_dir(run_dir) / "submitted_command.json").read_text())
    assert submitted[:4] == list(submit_hook.LAUNCHER[:4]) and relax_recipe.HOOK in submitted
    assert submitted[submitted.index(relax_recipe.KEEP_FLAG) + 1] == "1"  # eval.keep_checkpoints hf (the default)
    assert submitted[submitted.index(relax_recipe.SEED_FLAG) + 1] == "1"  # the run's seed orders the training prompts
    assert sorted(p.name for p in save.glob("iter_*")) == ["iter_0000004", "iter_0000009"]  # rotated before each save
    # the recipe's run_lock.env, which its dry run never writes: its settings and the SHA-256 of what it pins
    run_lock = dict(line.split("=", 1) for line in (relax.save_dir(run_dir) / "run_lock.env").read_text().splitlines())
    data = relax.save_dir(run_dir) / "data"
    assert (run_lock["method"], run_lock["seed"], run_lock["episode_weighting"]) == ("gigpo", "1", "trajectory_once")
    assert run_lock["dependency_lock_sha256"] == sha256_file(study[1]) and run_lock["model_revision"] == (
        "775b11afaf83e0dc75bd5abaf90133e47b3ec082"
    )
    assert run_lock["model_lock_sha256"] == sha256_file(config["backend"]["model_lock"])
    assert run_lock["prepare_lock_sha256"] == sha256_file(data / "prepare.lock.json")
    assert run_lock["alfworld_config_sha256"] == sha256_file(checkout / relax_recipe.ALFWORLD_CONFIG)
    assert list(run_lock)[-6:] == [
        "alfworld_config_sha256", "train_manifest_sha256", "eval_manifest_sha256", "prepare_lock_sha256",
        "dependency_lock_sha256", "model_lock_sha256",
    ]  # fmt: skip
    calls = [json.loads(x) for x in (save / "recipe_logger_calls.jsonl").read_text().splitlines()]
    assert [c["rollout_id"] for c in calls] == [0, 4, 9] and all(c["rows"] > 128 for c in calls)
    assert not (run_dir / "ray_head.pid").exists()
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if head_script.temp_dir(f"slurm-{env['SLURM_JOB_ID']}") in " ".join(p.info["cmdline"] or [])
    ]
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 11))
    for step in (0, 5, 10):  # Relax evaluates inside training: an evaluation runs no program
        result = run_cli("eval", "--run", run_dir, "--step", step)
        assert result.returncode == 0, result.stderr
        rows = [json.loads(x) for x in (run_dir / f"eval/step{step}/outcomes.jsonl").read_text().splitlines()]
        rollout = relax_recipe.rollout_of_step(step)
        assert len(rows) == 128 and sum(r["success"] for r in rows) == sum((i + rollout) % 3 == 0 for i in range(128))
        assert {r["turns"] for r in rows} == {1, 2, 3, 4} and all(r["tokens"] == 7 * r["turns"] for r in rows)
        if step:  # the evaluated step's Megatron checkpoint is pruned, its Hugging Face export stays for serving
            ckpt = step_checkpoint(config, run_dir, step)
            assert not ckpt.state[0].exists() and (ckpt.hf / "config.json").is_file()
    assert sorted(p.name for p in (relax.save_dir(run_dir) / "hf").iterdir()) == ["4", "9"]
    assert audit_runs_seal_problems(run_dir) == []
    if image:
        check_proof(run_dir / "provenance.json", ["prepare", "expand", "train"], image, images["b"], must_run=True)
        assert leftover_containers() == []


STAND_IN_TORCH_CUDA = """\
def is_available():
    return False
def device_count():
    return 0
def set_device(device):
    raise RuntimeError("Torch not compiled with CUDA enabled")
"""


def test_a_relax_job_is_rehearsed_up_to_its_gpus(tmp_path, podman_images):
    """`agentrepro rehearse` of the shipped Relax manifest (placeholders filled) against the stand-in Relax and `ray`
    in the podman test image, offline: data preparation and the recipe's dry run end, the job's head comes up, and the
    submitted trainer's first GPU call (a stand-in `torch.cuda.set_device`, as Megatron's initialisation makes one) is
    recorded at its line by the shared start-up hook, which the Relax job's Python path begins with as verl-agent's
    does. Relax's own code is not here: its trainer is the stand-in's (relax_standin.py), so this shows the harness's
    side (the hook reaches Relax's Ray job driver through the head), not where Relax's code first uses a GPU."""
    standin = load_file_module("relax_standin", Path(__file__).with_name("relax_standin.py"))
    checkout = standin.make_checkout(tmp_path / "relax")
    (checkout / "torch").mkdir()
    (checkout / "torch" / "__init__.py").write_text("from torch import cuda\n")
    (checkout / "torch" / "cuda.py").write_text(STAND_IN_TORCH_CUDA)
    trainer = checkout / "relax" / "entrypoints" / "train.py"
    trainer.write_text("import torch\ntorch.cuda.set_device(0)  # BOUNDARY\n" + trainer.read_text())
    image = derive(
        podman_images["a"], tmp_path, "a-ray-rehearsal",
        {"/usr/local/bin/ray": standin.make_ray(tmp_path / "bin", str(PYTHON_IN_IMAGE))},
    )  # fmt: skip
    root = tmp_path / "study"
    data = root / "data" / "alfworld"
    write_alfworld_games(data, [f"{TYPES[i % 5]}-Obj{i}-None-Place-{300 + i}" for i in range(128)])
    (root / "model").mkdir(parents=True)
    (root / "model.lock.json").write_text("{}\n")
    manifest = yaml.safe_load(MANIFEST.read_text())
    manifest["backend"].update(
        workdir=str(checkout), alfworld_data=str(data), alfworld_python="python3",
        model_path=str(root / "model"), model_lock=str(root / "model.lock.json"),
    )  # fmt: skip
    manifest["image"] = image.block()
    (root / "manifests" / "references").mkdir(parents=True)
    shutil.copy(MANIFEST.parent / "references" / "graphgpo.yaml", root / "manifests" / "references")
    path = root / "manifests" / MANIFEST.name
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    out = tmp_path / "rehearsal"
    result = run_cli("rehearse", path, "--method", "gigpo", "--seed", "0", "--out", out, "--after-s", "30", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"reached the GPUs | torch.cuda.set_device at {trainer}:2 (<module>)" in result.stdout
    record = json.loads((out / "rehearsal.json").read_text())
    assert [(p["label"], p["outcome"]) for p in record["programs"]] == [
        ("prepare", "ended"),
        ("expand", "ended"),
        ("train", "reached the GPUs"),
    ]
    (boundary,) = record["boundary"]
    assert boundary["argv"][0].endswith("relax/entrypoints/train.py") and boundary["program"] == "train"
    assert leftover_containers() == []


@pytest.mark.slow
def test_real_ray_job_goes_to_this_jobs_head_with_its_environment(tmp_path):
    """With real Ray, as the job runs it (the head script with --dashboard around the submit): `ray job submit --address=...:8265` (the
    recipe's launcher) under the RAY_ADDRESS the head script sets reaches this job's dashboard; the driver inherits the head's
    GRAPHGPO_* and directory; a failing job fails the submit; nothing of the head, nor its reservation, is left."""
    import shutil
    import subprocess

    import psutil
    from helpers import require

    ray = os.environ.get("AGENTREPRO_RAY") or shutil.which("ray")
    require("ray", bool(ray), "no `ray` executable (set AGENTREPRO_RAY to one, e.g. a venv's bin/ray)")
    key = f"relax-real-{tmp_path.name}"
    env = {
        **os.environ,
        "GRAPHGPO_METHOD": "gigpo",
        "PATH": f"{Path(ray).parent}{os.pathsep}{os.environ['PATH']}",
        head_script.PORTS_ENV: str(tmp_path / "ports"),
    }
    probe = "import os, sys; print('JOB', os.environ['GRAPHGPO_METHOD'], os.getcwd()); sys.exit(int(sys.argv[1]))"
    results = [
        subprocess.run(
            [
                sys.executable,
                "-m",
                "agentrepro.hooks.agentrepro_ray_head",
                "--key",
                key,
                "--dashboard",
                "--ray",
                ray,
                "--num-cpus",
                "1",
                "--num-gpus",
                "0",
                "--no-client",
                "--",
                ray,
                "job",
                "submit",
                *submit_hook.LAUNCHER[3:],
                "python3",
                "-c",
                probe,
                code,
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        for code in ("0", "3")
    ]
    assert results[0].returncode == 0 and f"JOB gigpo {tmp_path}" in results[0].stdout, results[0].stderr[-2000:]
    assert results[1].returncode != 0
    assert not [
        p for p in psutil.process_iter(["cmdline"]) if head_script.temp_dir(key) in " ".join(p.info["cmdline"] or [])
    ]
    assert not list((tmp_path / "ports").glob("agentrepro-ray-*.ports"))


def test_eval_task_ids_match_a_panel_frozen_from_a_data_directory(study, tmp_path, recipe_logger):
    """The panel freeze builds from an ALFWorld data directory (ids: the game directories) and the prompt rows the
    recipe's prepare_alfworld.py writes for the same directory (metadata.task_id: the game file, relative_path) meet:
    every trajectory of the eval hook lands on its panel task, none is refused."""
    from agentrepro.environments.alfworld import panel_entry
    from agentrepro.environments.alfworld_data import eligible_games, read_game

    data = tmp_path / "alfworld"
    write_alfworld_games(data, [f"{t}-Obj-None-Place-{i}" for i, t in enumerate(TYPES * 2)])
    ids = eligible_games(data, "eval_in_distribution")
    panel = [panel_entry(read_game(data, task_id), {}) for task_id in ids]
    config = copy.deepcopy(resolved(study, "graphgpo"))
    config["eval"].update(task_panel=panel, tasks=len(panel))
    prompts = [
        {"metadata": {"task_id": Path(os.path.relpath(game, data)).as_posix(), "manifest_index": i}}
        for i, game in enumerate(sorted(data.rglob("game.tw-pddl")))
    ]  # prepare_alfworld.prompt_rows_bytes' ids
    assert [p["metadata"]["task_id"] for p in prompts] == [f"{task_id}/game.tw-pddl" for task_id in ids]
    samples = [
        sample(f"t{i}", p["metadata"]["task_id"], 0, success=i % 2 == 0, episode_return=10.0 * (i % 2 == 0), tokens=3)
        for i, p in enumerate(prompts)
    ]
    save = relax_recipe.checkpoint_dir(relax.save_dir(tmp_path / "run"), config)
    hook.write_outcomes(4, types.SimpleNamespace(save=str(save)), {"alfworld": {"samples": samples}})
    rows = relax.convert_eval(tmp_path / "run", 5, config)
    check_rows(rows, config=config, step=5, source="hook")
    assert [r["task_id"] for r in rows] == ids and [r["category"] for r in rows] == [t["category"] for t in panel]


def test_freeze_refuses_what_relax_refuses_to_start_with(study, tmp_path):
    """freeze (subprocess) refuses a model.revision other than the one the recipe's data preparation pins (its preflight
    would stop the job), and resources.gpus 4 (tensor parallel 4 over the model's 2 query groups: Megatron stops at start),
    each naming the field and the constraint."""
    lock, _, root = study
    manifest = copy.deepcopy(lock["manifest"])
    cases = [
        (
            {"model": {**manifest["model"], "revision": "a" * 40}},
            f"model.revision = {'a' * 40}: MODEL_REVISION pinned into prepare.lock.json = {relax_recipe.PINNED_MODEL_REVISION} "
            "is the only value it takes (model revision; examples/graphgpo/prepare_alfworld.py:34",
        ),
        (
            {"resources": {**manifest["resources"], "gpus": 4}},
            "resources.gpus -> NUM_GPUS -> --tensor-model-parallel-size = 4: --num-query-groups = 2 is not a multiple of it",
        ),
    ]
    (tmp_path / "manifests").mkdir()
    target = tmp_path / "manifests" / MANIFEST.name
    for change, message in cases:
        target.write_text(yaml.safe_dump({**manifest, **change}, sort_keys=False))
        result = run_cli("freeze", target, "--allow-dirty", "--root", root, "-o", tmp_path / "x.lock.json", cwd=root)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.lock.json").exists()


def test_episode_weighting_is_the_recipes_unless_stated_and_recorded_when_it_differs(study, tmp_path):
    """Without train.episode_stats a Relax run takes the recipe's EPISODE_WEIGHTING (trajectory_once, line 26) and records
    no deviation; `rows` (reference_cross_steps) is a deviation from it with its reason; both shipped studies state it
    for every Relax method."""
    knob = next(k for k in RECIPE["input_env_knobs"] if k["name"] == "EPISODE_WEIGHTING")
    assert knob["default"] == relax_recipe.RECIPE_WEIGHTING
    config = copy.deepcopy(resolved(study, "graphgpo"))
    config["train"].pop("episode_stats")
    config = runconfig.resolve_config(config, relax.RelaxBackend().default_config())
    assert relax_recipe.recipe_env(config, tmp_path, tmp_path, tmp_path)["EPISODE_WEIGHTING"] == "trajectory_once"
    assert not [d for d in relax.RelaxBackend().deviations(config, tmp_path) if d["key"] == "EPISODE_WEIGHTING"]
    config["train"]["episode_stats"] = "rows"
    (record,) = [d for d in relax.RelaxBackend().deviations(config, tmp_path) if d["key"] == "EPISODE_WEIGHTING"]
    assert (record["value"], record["official"]) == (
        "reference_cross_steps",
        "trajectory_once",
    ) and "train.episode_stats" in record["why"]
    for name in ("graphgpo-alfworld", "graphgpo-alfworld-relax"):
        shipped = yaml.safe_load((REPO / "manifests" / f"{name}.yaml").read_text())
        for method, block in shipped["methods"].items():
            if name.endswith("relax") or method.endswith("@relax"):
                assert "episode_stats" in block or "episode_stats" in shipped["train"], (name, method)


def test_the_seed_orders_the_training_prompts(study, tmp_path):
    """--rollout-seed (Relax's default 42, arguments.py:667, for every SEED) is set from the run's seed, so seeds 0, 1, 2
    submit different prompt orders; it is recorded among the deviations."""
    flags = {flag: entry for entry in ARGS["flags"] for flag in entry["flags"]}
    assert (
        flags[relax_recipe.SEED_FLAG]["default"] == relax_recipe.RECIPE_ROLLOUT_SEED
        and flags[relax_recipe.SEED_FLAG]["type"] == "int"
    )
    assert relax_recipe.SEED_FLAG not in {f["flag"] for f in RECIPE["flags"]}
    seeds = []
    for seed in (0, 1, 2):
        config = resolved(study, "gigpo", seed=seed)
        words = submitted(relax.programs(config, tmp_path / f"run{seed}")[2])
        seeds.append(words[words.index(relax_recipe.SEED_FLAG) + 1])
        assert {"key": relax_recipe.SEED_FLAG, "value": seed} in [
            {k: d[k] for k in ("key", "value")} for d in relax.RelaxBackend().deviations(config, tmp_path)
        ]
    assert seeds == ["0", "1", "2"]


def test_each_program_runs_in_the_placements_apptainer_image(study, tmp_path, monkeypatch):
    """With apptainer, each of the three programs is `apptainer exec --cleanenv --contain --nv ... SIF env -- NAME=VALUE
    ... PROGRAM` of exactly what the image runs (no host PYTHONPATH), the block's data and model paths and the hooks
    bound read-only, and only the head-plus-submit program gets the Ray port reservations bound read-write."""
    monkeypatch.setenv("AGENTREPRO_RAY_PORTS_DIR", str(tmp_path / "ports"))
    monkeypatch.setenv("AGENTREPRO_IMAGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", "/host/only")
    config = resolved(study, "gigpo")
    assert config["image"]["runtime"] == "apptainer"
    sif = str(tmp_path / "cache" / "apptainer" / (config["image"]["digest"].removeprefix("sha256:") + ".sif"))
    programs, launches = relax.programs(config, tmp_path / "run"), relax.job_launches(config, tmp_path / "run")
    assert [launch.contained.label for launch in launches] == ["prepare", "expand", "train"]
    for program, launch in zip(programs, launches):
        words = list(launch.argv)
        scratch = str(containers.job_scratch(tmp_path / "run"))  # /tmp, /var/tmp and $HOME: not the session tmpfs
        assert words[:4] == ["apptainer", "exec", "--cleanenv", "--contain"]
        assert words[4:9] == ["--workdir", scratch, "--home", f"{scratch}/home", "--nv"]
        after = words[words.index(sif) + 1 :]
        owner = {ray_head.OWNER_ENV: str(ray_head.owner_lock(tmp_path / "run", launch.contained.label))}
        env = [f"{k}={v}" for k, v in sorted({**OFFLINE, **program.env, **owner}.items())]  # every program offline
        assert after == ["env", "--", *env, *program.argv]
        binds = [words[i + 1] for i, w in enumerate(words) if w == "--bind"]
        assert (
            f"{relax.HOOKS}:{relax.HOOKS}:ro" in binds
            and words[words.index("--pwd") + 1] == config["backend"]["workdir"]
        )
        assert (f"{tmp_path / 'ports'}:{tmp_path / 'ports'}" in binds) == (program is programs[2])
    assert "PYTHONPATH" not in programs[2].env and "/host/only" not in programs[2].env[ray_head.PYTHONPATH_ENV]


def test_ray_job_submission_hands_every_word_on_unchanged(tmp_path):
    """Ray's job CLI joins the entrypoint's words with subprocess.list2cmdline and its supervisor runs the text with
    /bin/sh (ray dashboard/modules/job/cli.py and job_supervisor.py, read): spelled by the submit hook, words with $,
    backticks, quotes, globs, backslashes, `;` or the recipe's JSON reach the program as they were when the same two
    steps run here; a word with whitespace, which no spelling survives, is refused naming the file."""
    import subprocess

    hostile = ["$(id)", "`id`", 'a"b', '{"actor":[1,2],"rollout":[1,2]}', "back\\slash", "it's", "*", "a;b|c&d"]
    hostile += ['\\"', "'", '"', "$HOME", "~root", "é", "#x", "!x"]
    printed = shlex.join([*submit_hook.LAUNCHER, *submit_hook.ENTRY, submit_hook.HOOK_FLAG, submit_hook.RECIPE_HOOK])
    words = submit_hook.submitted_argv(printed + " --note " + shlex.join(hostile), source=Path("expanded"))
    entry = submit_hook.ray_argv(words, Path("expanded"))[len(submit_hook.LAUNCHER) :]
    (tmp_path / "relax" / "entrypoints").mkdir(parents=True)
    (tmp_path / "relax" / "entrypoints" / "train.py").write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    entry[0] = sys.executable  # python3 of the image
    ran = subprocess.run(
        ["/bin/sh", "-c", subprocess.list2cmdline(entry)], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert json.loads(ran.stdout) == words[len(submit_hook.LAUNCHER) + len(submit_hook.ENTRY) :]
    with pytest.raises(submit_hook.Refused, match="expanded: 'a b' is empty or holds whitespace"):
        submit_hook.ray_argv([*words, "a b"], Path("expanded"))


def test_the_run_lock_names_a_file_it_pins_that_is_not_there(tmp_path):
    """The recipe hashes each pinned file with sha256sum, which leaves the value empty when the file is missing; the
    harness stops instead, naming the file, before the job is submitted."""
    knobs = {
        "METHOD": "gigpo", "ENABLE_EVAL": "1", "EPISODE_WEIGHTING": "trajectory_once", "SEED": "0",
        "DATA_ARTIFACT_DIR": str(tmp_path / "data"), "DEPENDENCY_LOCK": str(tmp_path / "lock.json"),
        "MODEL_LOCK": str(tmp_path / "model.lock.json"),
    }  # fmt: skip
    data = ["data/train.manifest.json", "data/eval_in_distribution.manifest.json"]
    for name in (relax_recipe.ALFWORLD_CONFIG, *data, "lock.json", "model.lock.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    with pytest.raises(Failure, match=r"pins .*prepare\.lock\.json \(prepare_lock_sha256\), which is not there"):
        relax_recipe.run_lock(knobs, tmp_path)
    (tmp_path / "data" / "prepare.lock.json").write_text("{}\n")
    assert relax_recipe.run_lock(knobs, tmp_path).count("_sha256=") == 6
