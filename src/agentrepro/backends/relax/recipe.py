"""Relax's GraphGPO recipe (examples/graphgpo/run_alfworld_qwen2_5_1_5b.sh) as the harness drives it.

The recipe is the source of every Relax flag: the harness sets its environment knobs, from the run config, and
replaces or adds only the flags `replaced_args` lists, each a deviation (`deviations`): the eval hook, the save
cadence and Hugging Face copy, the Megatron checkpoints kept, and --rollout-seed from the run's seed. Facts (script
lines) are in tests/fixtures/frameworks/relax.args.json.

* Knobs (`recipe_env`): METHOD (grpo|gigpo|graphgpo, from train.estimator; `--advantage-estimator` stays
  `grpo` as the recipe passes it, the method is chosen by the custom advantage function), OMEGA, GAMMA,
  BETA (step/graph weight), BETA_EPISODE (episode weight), EPISODE_WEIGHTING (train.episode_stats:
  rows -> reference_cross_steps, trajectories -> trajectory_once), SEED, NUM_GPUS, OUTER_EPOCHS (train.steps),
  TASK_GROUPS, GROUP_SIZE, MAX_STEPS (env.params.max_turns), MODEL_REVISION, and the paths: ALFWORLD_DATA,
  HF_CHECKPOINT, SAVE_DIR, DATA_ARTIFACT_DIR, MODEL_LOCK. DEPENDENCY_LOCK is the study's lock (the file
  that pins this run's dependencies; the recipe records its SHA-256 in run_lock.env), or for a run config without
  one (outside a study, or rehearsed before freeze) the run's resolved config, which pins what this run runs.
  PREPARE_LOCK is the lock the recipe's own data preparation writes.
* What the recipe fixes (`FIXED`: lr 1e-6, eval every 5 rollouts at temperature 0.4 with one sample per
  task, ...) cannot be changed through it: a run config asking otherwise is refused, naming the key.
* Exports (`head_env`): the recipe exports GRAPHGPO_* and RELAX_AGENTIC_MAX_EXPORTED_ROWS_PER_SAMPLE before it
  starts its Ray head, so Ray's workers inherit them; the job's own head gets the same values.
* The expanded command (`submitted_argv`, owned by hooks/agentrepro_relax_submit.py, which submits it inside the
  image): the recipe's DRY_RUN=1 line, with its eval hook replaced:
  `--custom-eval-rollout-log-function-path` names agentrepro's hook (backends/relax/hooks/agentrepro_relax_eval.py), which writes one
  outcome per trajectory and then calls the recipe's own logger, so Relax's metrics are unchanged; and the
  `replaced_args` pairs set.
* What the recipe will demand of its node (RelaxBackend.demands): its tensor-parallel size is NUM_GPUS, which must
  divide the model's query groups and heads (QUERY_GROUPS, ATTENTION_HEADS), and Ray Serve's port SERVE_PORT, which
  Relax hard-codes, and the model revision its data preparation pins (PINNED_MODEL_REVISION).
* Step numbering (`step_of_rollout`, `rollout_of_step`): the only place that knows Relax's 0-based
  rollout_id. Relax (relax/components/rollout.py `Rollout._async_run`, `_should_eval`; relax/utils/misc.py
  `should_run_periodic_action`) evaluates before training with rollout_id 0 when its step is 0 (not on a
  resume: harness step 0), then after training rollout r when (r + 1) % eval_interval == 0 (harness step
  r + 1); it passes num_rollout=None there, so the last rollout is evaluated only when on that grid. It also
  evaluates at an epoch boundary of the training prompts (about 3,550 ALFWorld training games at 16 per
  rollout: some 220 rollouts, beyond the recipe's 150); such extra files are not read. Training rollout r is
  the harness's step r + 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrepro.backends.checkpoints import prunes_during_training
from agentrepro.backends.relax.hooks.agentrepro_relax_submit import HOOK, HOOK_FLAG, RECIPE_HOOK, submitted_argv  # noqa: F401
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import sha256_file

RECIPE = "examples/graphgpo/run_alfworld_qwen2_5_1_5b.sh"
ADVANTAGE_FLAG = (
    "--agentic-custom-advantage-path"  # the recipe's examples.graphgpo.custom_advantage.compute_custom_advantage
)
ADVANTAGE_HOOK = (
    "agentrepro_relax_advantage.compute_custom_advantage"  # calls it, and dumps the step rows of train.step_rows
)
METHODS = ("grpo", "gigpo", "graphgpo")
WEIGHTING = {"rows": "reference_cross_steps", "trajectories": "trajectory_once"}
RECIPE_WEIGHTING = "trajectory_once"  # EPISODE_WEIGHTING="${EPISODE_WEIGHTING:-trajectory_once}", line 26
EVAL_INTERVAL = 5
GLOBAL_BATCH_SIZE = 128
MICRO_BATCH_SIZE = 32  # --micro-batch-size 32, line 224
# The model the recipe builds (MODEL_ARGS): --num-attention-heads 12, line 168; --num-query-groups 2, line 170. Megatron
# splits both over the tensor-parallel ranks (megatron/core/transformer/attention.py, Attention: divide(num_query_groups,
# tp world size)), and the recipe sets --tensor-model-parallel-size to NUM_GPUS (line 257), PP and CP to 1 (258-259).
ATTENTION_HEADS, QUERY_GROUPS = 12, 2
# The model revision the recipe's data preparation pins into prepare.lock.json (examples/graphgpo/prepare_alfworld.py:34
# PINNED_MODEL_REVISION); its preflight refuses a MODEL_REVISION that differs (preflight.py verify_prepared_artifacts:
# "model_revision does not match prepare.lock"), so the study's model.revision must be this one (RelaxBackend.demands).
PINNED_MODEL_REVISION = "775b11afaf83e0dc75bd5abaf90133e47b3ec082"
# Ray Serve's HTTP port, which Relax hard-codes: serve.start(http_options={... "port": "8000"}) in
# relax/entrypoints/train.py:96 and relax/core/controller.py:871, and every URL built by relax/utils/utils.py:558
# get_serve_url (the agents', the controller's, the actor's /evaluate) (yeqinghe609/Relax@13cc7cac); redai-infra's
# train.py:67-68 reads RELAX_SERVE_PORT (default 8000), which get_serve_url does not. Left at 8000 and reserved.
SERVE_PORT = 8000
SEED_FLAG, RECIPE_ROLLOUT_SEED = "--rollout-seed", 42  # relax/utils/arguments.py:667; the recipe does not pass it
# (block, key) -> the value the recipe fixes, and its script line
FIXED = {
    ("train", "lr"): (1e-6, "--lr 1e-6, line 241"),
    ("train", "norm"): ("std", "custom_advantage standardises with the sample std"),
    ("train", "epsilon"): (1e-6, "custom_advantage eps 1e-6"),
    ("train", "invalid_penalty"): (0.1, "custom_advantage invalid_penalty 0.1"),
    ("train", "reward_form"): ("code", "the graph reward 10*omega**d"),
    ("eval", "every"): (EVAL_INTERVAL, "--eval-interval 5, line 282"),
    ("eval", "temperature"): (0.4, "--eval-temperature 0.4, line 287"),
    ("eval", "episodes_per_task"): (1, "--n-samples-per-eval-prompt 1, line 285"),
}
# The recipe's exports before its Ray head starts (lines 146-156): name -> the knob it copies.
EXPORTS = {
    "GRAPHGPO_METHOD": "METHOD",
    "GRAPHGPO_EXPECTED_GROUP_SIZE": "GROUP_SIZE",
    "GRAPHGPO_OMEGA": "OMEGA",
    "GRAPHGPO_GAMMA": "GAMMA",
    "GRAPHGPO_BETA": "BETA",
    "GRAPHGPO_BETA_EPISODE": "BETA_EPISODE",
    "GRAPHGPO_EPISODE_WEIGHTING": "EPISODE_WEIGHTING",
    "RELAX_AGENTIC_MAX_EXPORTED_ROWS_PER_SAMPLE": "MAX_STEPS",
}
# train keys the recipe takes as knobs -> knob
METHOD_KNOBS = {"omega": "OMEGA", "gamma": "GAMMA", "step_weight": "BETA", "episode_weight": "BETA_EPISODE"}
# The recipe's run_lock.env (lines 349-368): written just before its `ray job submit`, after the DRY_RUN exit the harness
# runs it with, so the harness writes it from the same knobs and files (`run_lock`). The recipe's defaults of what the
# harness does not set:
RUN_LOCK = "run_lock.env"
SGLANG_MEM_FRACTION_STATIC = "0.50"  # line 43
EXPECTED_IMAGE_DIGEST = (  # line 45; the recipe records it and leaves checking the image to its executor (the harness)
    "ghcr.io/redai-infra/relaxrl@sha256:3fa8ce578acda6c829b83016bde42c38fa892681e4f36ca330f545616fe578e2"
)
ALFWORLD_CONFIG = "examples/graphgpo/configs/alfworld_qwen2_5_1_5b.yaml"  # line 64, ${SCRIPT_DIR}/configs/...


def num_gpus(config: dict[str, Any]) -> int:
    """resources.gpus, the recipe's NUM_GPUS (its tensor-parallel size too); BadInput unless a positive integer."""
    gpus = (config.get("resources") or {}).get("gpus")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise BadInput(f"expected a positive integer (the recipe's NUM_GPUS), got {gpus!r}", where="resources.gpus")
    return gpus


def validate(config: dict[str, Any]) -> None:
    """BadInput naming the key of anything the recipe cannot run."""
    train = config.get("train") or {}
    if train.get("estimator") not in METHODS:
        raise BadInput(
            f"the Relax GraphGPO recipe runs {', '.join(METHODS)}, not {train.get('estimator')!r}",
            where="train.estimator",
        )
    for (block, key), (value, source) in FIXED.items():
        given = (config.get(block) or {}).get(key)
        if given is not None and given != value:
            raise BadInput(
                f"the Relax GraphGPO recipe fixes this at {value!r} ({source}); got {given!r}", where=f"{block}.{key}"
            )
    if train.get("episode_stats", "rows") not in WEIGHTING:
        raise BadInput(f"expected one of {', '.join(WEIGHTING)}", where="train.episode_stats")
    groups, size = train.get("groups"), train.get("group_size")
    if isinstance(groups, int) and isinstance(size, int) and (groups * size) % GLOBAL_BATCH_SIZE:
        raise BadInput(
            f"groups x group_size = {groups * size} must be a multiple of the recipe's global batch {GLOBAL_BATCH_SIZE}",
            where="train.group_size",
        )
    num_gpus(config)
    if not isinstance(((config.get("env") or {}).get("params") or {}).get("max_turns"), int):
        raise BadInput("expected an integer (the recipe's MAX_STEPS)", where="env.params.max_turns")
    if not isinstance(config["backend"].get("export_hf", False), bool):
        raise BadInput("expected true or false", where="backend.export_hf")
    for key in ("workdir", "alfworld_data", "model_path", "model_lock"):
        if not isinstance(config["backend"].get(key), str):
            raise BadInput("expected a path (see backends/relax/backend.py)", where=f"backend.{key}")
    interpreter = config["backend"].get("alfworld_python", "python3")
    if not isinstance(interpreter, str) or not interpreter or (not interpreter.startswith("/") and "/" in interpreter):
        raise BadInput(
            f"expected a command name or an absolute path of the image (run_agent_app.sh runs it inside the job's "
            f"container, where a relative path would depend on its working directory), got {interpreter!r}",
            where="backend.alfworld_python",
        )


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def recipe_env(config: dict[str, Any], save_dir: Path, data_dir: Path, dependency_lock: Path) -> dict[str, str]:
    """The recipe's knobs for this run config (every value a string, never joined into shell syntax)."""
    train, block = config["train"], config["backend"]
    env = {
        "METHOD": train["estimator"],
        "SEED": str(config["seed"]),
        "ENABLE_EVAL": "1",
        "NUM_GPUS": str(config["resources"]["gpus"]),
        "OUTER_EPOCHS": str(train["steps"]),
        "TASK_GROUPS": str(train["groups"]),
        "GROUP_SIZE": str(train["group_size"]),
        "GLOBAL_BATCH_SIZE": str(GLOBAL_BATCH_SIZE),
        "MAX_STEPS": str(config["env"]["params"]["max_turns"]),
        "EPISODE_WEIGHTING": WEIGHTING[train["episode_stats"]],
        "ALFWORLD_DATA": block["alfworld_data"],
        "ALFWORLD_PYTHON": block.get("alfworld_python", "python3"),
        "HF_CHECKPOINT": block["model_path"],
        "MODEL_LOCK": block["model_lock"],
        "SAVE_DIR": str(save_dir),
        "DATA_ARTIFACT_DIR": str(data_dir),
        "DEPENDENCY_LOCK": str(dependency_lock.resolve()),
    }
    env.update({knob: _text(train[key]) for key, knob in METHOD_KNOBS.items()})
    revision = (config.get("model") or {}).get("revision")
    if revision:
        env["MODEL_REVISION"] = revision
    return env


def run_lock(knobs: dict[str, str], workdir: Path) -> str:
    """The text of the recipe's run_lock.env for these knobs: its settings, then the SHA-256 of each file it pins (the
    data preparation's manifests and lock, the study's and the model's locks); Failure when one is not there."""
    data = Path(knobs["DATA_ARTIFACT_DIR"])
    pinned = {
        "alfworld_config_sha256": workdir / ALFWORLD_CONFIG,
        "train_manifest_sha256": data / "train.manifest.json",
        **(
            {"eval_manifest_sha256": data / "eval_in_distribution.manifest.json"} if knobs["ENABLE_EVAL"] == "1" else {}
        ),
        "prepare_lock_sha256": data / "prepare.lock.json",
        "dependency_lock_sha256": Path(knobs["DEPENDENCY_LOCK"]),
        "model_lock_sha256": Path(knobs["MODEL_LOCK"]),
    }
    lines = [
        f"method={knobs['METHOD']}",
        f"enable_eval={knobs['ENABLE_EVAL']}",
        f"episode_weighting={knobs['EPISODE_WEIGHTING']}",
        f"sglang_mem_fraction_static={SGLANG_MEM_FRACTION_STATIC}",
        "graph_diagnostics_jsonl=disabled",  # GRAPHGPO_DIAGNOSTICS_JSONL, which the harness never sets
        f"seed={knobs['SEED']}",
        f"model_revision={knobs.get('MODEL_REVISION', PINNED_MODEL_REVISION)}",  # line 44's default is the pinned one
        f"expected_external_image_digest={EXPECTED_IMAGE_DIGEST}",
        "image_verification_scope=external_executor_required",
    ]
    for key, path in pinned.items():
        if not path.is_file():
            raise Failure(f"the recipe's {RUN_LOCK} pins {path} ({key}), which is not there")
        lines.append(f"{key}={sha256_file(path)}")
    return "".join(line + "\n" for line in lines)


def head_env(knobs: dict[str, str]) -> dict[str, str]:
    """What the recipe exports before its Ray head starts, from the same knobs."""
    return {name: knobs[knob] for name, knob in EXPORTS.items()}


def checkpoint_dir(save_dir: Path, config: dict[str, Any]) -> Path:
    """The recipe's --save: ${SAVE_DIR}/checkpoints/${METHOD}/seed-${SEED} (line 161)."""
    return Path(save_dir) / "checkpoints" / config["train"]["estimator"] / f"seed-{config['seed']}"


def hf_export_args(save_dir: Path) -> list[str]:
    """With backend.export_hf: Megatron saves every EVAL_INTERVAL rollouts (rollout r saves when (r + 1) %
    interval == 0, so at exactly the evaluated steps after 0) and Relax writes a Hugging Face copy of each save
    to `--save-hf` formatted with its rollout_id (relax/utils/arguments.py:1389; backends/megatron@fork:1482)."""
    return ["--save-interval", str(EVAL_INTERVAL), "--save-hf", str(Path(save_dir) / "hf" / "{rollout_id}")]


RECIPE_SAVE_INTERVAL = 10  # --save-interval 10, line 194
KEEP_FLAG, RECIPE_KEEP = "--max-actor-ckpt-to-keep", 2  # line 195


def retention_args(config: dict[str, Any]) -> list[str]:
    """eval.keep_checkpoints `hf` or `none`: --max-actor-ckpt-to-keep 1 instead of the recipe's 2. Relax's rank 0
    rotates before each save (MegatronTrainRayActor.save_model calls rotate_ckpt, then save, then save_hf_model),
    removing the iter_* directories under --save beyond the newest N and nothing else (relax/utils/rotate_ckpt.py
    `_max_keep_cleanup`), so the --save-hf copies stay, and after a save the newest and the one before it are left
    (1: resume needs only the newest; the older goes at the next save). `all` keeps the recipe's value."""
    return [KEEP_FLAG, "1"] if prunes_during_training(config) else []


def seed_args(config: dict[str, Any]) -> list[str]:
    """--rollout-seed from the run's seed: the recipe leaves it at Relax's 42, which orders the training prompts
    (relax/engine/rollout/data_source.py:96, 122 with --rollout-shuffle) for every SEED alike (@fork)."""
    return [SEED_FLAG, str(config["seed"])]


def replaced_args(config: dict[str, Any], save_dir: Path) -> list[str]:
    """The `--flag value` pairs a job sets in the recipe's command besides the eval hook (submit.py's arguments)."""
    return [
        *(hf_export_args(save_dir) if config["backend"].get("export_hf", True) else []),
        *retention_args(config),
        *seed_args(config),
    ]


def deviations(config: dict[str, Any], save_dir: Path) -> list[dict[str, Any]]:
    """What a job changes in the recipe's command ({key, value, official, why}): the eval-log hook, with
    backend.export_hf (the default) the save cadence and the Hugging Face copy (`hf_export_args`), and with
    eval.keep_checkpoints hf or none the Megatron checkpoints kept (`retention_args`)."""
    out = [
        {
            "key": HOOK_FLAG,
            "value": HOOK,
            "official": RECIPE_HOOK,
            "why": "outcomes per trajectory on the frozen panel (agentrepro's hook), then the recipe's own logger",
        },
        {
            "key": SEED_FLAG,
            "value": config["seed"],
            "official": None,
            "why": f"the seed orders the training prompts (Relax's default {RECIPE_ROLLOUT_SEED} would give every seed one order)",
        },
    ]
    weighting = WEIGHTING[config["train"].get("episode_stats", "rows")]
    if weighting != RECIPE_WEIGHTING:
        out.append(
            {
                "key": "EPISODE_WEIGHTING",
                "value": weighting,
                "official": RECIPE_WEIGHTING,
                "why": "manifest train.episode_stats: rows, the reference's episode statistics over every step row "
                "(verl-agent's), so the port is compared with its reference under the same weighting",
            }
        )
    if config["backend"].get("export_hf", True):
        args = hf_export_args(save_dir)
        out += [
            {
                "key": "--save-interval",
                "value": int(args[1]),
                "official": str(RECIPE_SAVE_INTERVAL),
                "why": "checkpoint cadence: the evaluated steps",
            },
            {
                "key": "--save-hf",
                "value": args[3],
                "official": None,
                "why": "a Hugging Face copy of each checkpoint, for evaluation outside Relax",
            },
        ]
    if retention_args(config):
        out.append(
            {
                "key": KEEP_FLAG,
                "value": 1,
                "official": str(RECIPE_KEEP),
                "why": "eval.keep_checkpoints: older Megatron checkpoints go during training (resume needs the newest); "
                "the Hugging Face copies stay",
            }
        )
    return out


def hf_checkpoint(save_dir: Path, config: dict[str, Any], step: int) -> Path:
    """The Hugging Face weights of harness step `step`: the model snapshot itself before training."""
    if step == 0:
        return Path(config["backend"]["model_path"])
    return Path(save_dir) / "hf" / str(rollout_of_step(step))


def evaluated_rollouts(steps: int, interval: int = EVAL_INTERVAL) -> list[int]:
    """The harness steps Relax evaluates: 0 (before training) and every `interval`-th update."""
    return [0] + [step for step in range(1, steps + 1) if step % interval == 0]


def rollout_of_step(step: int) -> int:
    """The rollout_id Relax names harness step `step` by: 0 before training, N - 1 after the N-th update.

    Relax's rollout_id is 0-based (the loop generates rollout_id = local_step; yeqinghe609/Relax@13cc7cac
    relax/components/rollout.py:423). After training on rollout r (the (r+1)-th update) the actor saves
    iteration r (iter_{r:07d}, --save-hf formatted with rollout_id=r) when (r+1) % save_interval == 0 or it is
    the last rollout, updates the rollout weights, flushes the training metrics at step r and asks for the
    evaluation of train_step r (relax/backends/megatron/actor.py:840-857, 1457-1485, 539), which runs as
    eval(rollout_id=r), written to rollout_result/eval/{r}.jsonl, when (r+1) % eval_interval == 0
    (relax/components/rollout.py:349-356, 519-525); the evaluation before training is eval(rollout_id=0)
    (rollout.py:388-389). So metrics, evaluation and checkpoint of one update share one rollout_id; facts with
    their lines: tests/fixtures/frameworks/relax.pin.json `numbering`."""
    return 0 if step == 0 else step - 1


def step_of_rollout(rollout_id: int) -> int:
    """The harness step reached after training rollout `rollout_id` (the inverse of rollout_of_step after 0)."""
    return rollout_id + 1


def weight_version_of_rollout(rollout_id: int) -> int:
    """The weight_version of the SGLang weights that generate rollout `rollout_id` of a fresh run: rollout_id + 1.

    The colocated weight updater starts at 0 and adds 1 per update_weights, sending str(weight_version) with the
    weights (redai-infra/Relax@10077e0 relax/backends/megatron/weight_update/update_weight_from_tensor.py,
    UpdateWeightFromTensor.__init__ / update_weights / _send_to_colocated_engine); the actor updates once when the
    rollout manager is attached, before rollout 0 in synchronous colocated training (relax/components/actor.py
    Actor.set_rollout_manager), and once after each training step (yeqinghe609/Relax@13cc7cac
    relax/backends/megatron/actor.py:852). The counter lives in the training process: after a resume it starts
    again at 1, so this holds for a run that trains without resuming."""
    return rollout_id + 1


POLICY_VERSION_OFFSET = step_of_rollout(0) - weight_version_of_rollout(0)
"""Harness step of a training group = int(its sample.metadata `policy_version`) + this (0), in a run that
starts at rollout 0 (policy_version_offset gives the offset of a resumed one).

Relax stamps each row's policy_version before the custom advantage runs: str of the Sample's one
weight_version (the versions SGLang reported in the meta_info of the responses the agent got), else str of
metadata.start_rollout_id (redai-infra/Relax@eaf262f relax/agentic/pipeline/reward.py,
RewardWaitingGroup._resolved_policy_version and metadata_by_slot; the same rule at transfer,
@95456306 relax/agentic/pipeline/transfer.py::_captured_policy_version). The agentic session service records
meta_info's weight_version per response (yeqinghe609/Relax@13cc7cac relax/agentic/session/service.py:1276-1278),
so rows carry weight_version_of_rollout(r) = the step their update reaches. Were weight_versions empty, the
fallback start_rollout_id = r would put every row one step early; the certificate's rows carry the
policy_version they were named by, so a real run shows which held. Facts: relax.pin.json
`numbering.policy_version`."""

TRACKER = "latest_checkpointed_iteration.txt"


def policy_version_offset(save: Path) -> int:
    """The offset for a Relax run about to start with `save` (its --save, checkpoint_dir): Relax
    resumes whenever save holds TRACKER, at rollout_id = the saved iteration + 1 (yeqinghe609/Relax@13cc7cac
    relax/backends/megatron/actor.py:191), and its new process counts weight versions from 0 again, so the first
    rollout after the resume carries weight_version 1 and reaches step_of_rollout(start)."""
    tracker = Path(save) / TRACKER
    if not tracker.is_file():
        return POLICY_VERSION_OFFSET
    text = tracker.read_text().strip()
    if not (text.isascii() and text.isdigit()):
        raise BadInput(f"expected the Megatron iteration Relax resumes from, got {text[:40]!r}", path=tracker)
    start = int(text) + 1
    return step_of_rollout(start) - weight_version_of_rollout(0)
