"""The Relax backend (redai-infra/Relax): its GraphGPO recipe driven as its authors wrote it, outputs read back.

Programs (`launches`, in order; backends/launch.py), all run in the Relax checkout `backend.workdir`:
1. the recipe's data preparation (`python3 -m examples.graphgpo.prepare_alfworld`; content-addressed and
   idempotent) into RUN_DIR/relax/data;
2. the recipe itself with DRY_RUN=1 and its knobs (recipe.py): it checks its inputs, runs its
   preflight, and prints the expanded `ray job submit ... -- python3 relax/entrypoints/train.py <flags>`,
   kept as RUN_DIR/relax/expanded_command.txt; beside it the harness writes the recipe's run_lock.env (its settings
   and the SHA-256 of the files it pins: recipe.run_lock), which the recipe writes only past its dry run;
3. `python3 <hooks>/agentrepro_ray_head.py --dashboard --fixed-port 8000 ... -- python3 <hooks>/agentrepro_relax_submit.py
   ...`: this job's own Ray head (backends/ray_head.py: ports reserved on the node, the dashboard's job API among them),
   with the recipe's exports, which Ray's workers inherit from the head, and the shared start-up hook
   (agentrepro/hooks/startup: a rehearsal's GPU boundary, `agentrepro rehearse`), the checkout, this backend's hooks/,
   the shared agentrepro/hooks/ and backend.pythonpath put before the PYTHONPATH the head runs with (the image's in a
   container, the inherited one on the host: AGENTREPRO_PYTHONPATH, hooks/agentrepro_ray_head.py); then the
   printed command with the values recipe.replaced_args sets (the eval-log hook, backends/relax/hooks/
   agentrepro_relax_eval.py, the save cadence, the rollout seed), submitted with RAY_ADDRESS naming this job's
   dashboard, which `ray job submit` prefers to the recipe's fixed --address=http://127.0.0.1:8265.
   Ray Serve stays on the port Relax hard-codes, 8000 (recipe.SERVE_PORT): every reader of it agrees on 8000, so
   the job reserves that port on the node instead of moving it, and a second Relax job on the node waits for it
   (up to AGENTREPRO_PORT_WAIT_S, then exit 75 for the scheduler's retry).
Each of the three runs inside the container of the placement (launch.contain: the run directory, the study root, the
checkout, the data, the block's paths, the hooks folders and the node's Ray port reservations mounted) and records
its proof; the head and the submission run in one container, with the image's Ray. In a container the host's
PYTHONPATH is not inherited, the image's is kept, and backend.pythonpath names paths of the image (not mounted).
RELAX_ENTRYPOINT_MODE is set so the recipe never sources scripts/entrypoint/local.sh (which kills every
python and ray process of the node and starts a head on the shared port 8265).

Block keys: workdir (the Relax checkout), alfworld_data, model_path (local snapshot, HF_CHECKPOINT),
model_lock (the recipe's model lock JSON), alfworld_python (default python3), pythonpath (list of extra
entries for Ray's workers, e.g. Megatron-LM), ray {executable, num_cpus, num_gpus}, repo, commit, and
export_hf (default true): save Megatron checkpoints at the evaluated steps instead of the recipe's every
10 rollouts and have Relax write a Hugging Face copy of each (recipe.hf_export_args), which
`agentrepro eval` can serve (`checkpoint` maps a step to it); false keeps the recipe's cadence and
writes no copy. With eval.keep_checkpoints hf or none (the default hf), --max-actor-ckpt-to-keep 1 replaces the
recipe's 2, so Relax's own rotation leaves at most the newest two Megatron checkpoints during training (`all` keeps
the recipe's 2); what is left of an evaluated step's is pruned by `agentrepro eval` (backends/checkpoints.py).

Outputs read:
* outcomes of step N: the hook's RUN_DIR/relax/checkpoints/<method>/seed-<seed>/agentrepro_eval/<r>.jsonl
  (r = recipe.rollout_of_step(N)), one line per trajectory, mapped onto the frozen task panel by
  task_id (the game path relative to ALFWORLD_DATA).
* metrics: rollout_result/train/<r>.jsonl -> the metrics row of step r + 1 (step_of_rollout). Those
  records are one per exported row, i.e. per turn: `reward_mean` and `train_success_rate` are therefore
  row-weighted means (longer episodes weigh more); Relax's per-trajectory training numbers go to its
  TensorBoard log under --save, which is not read here. Cumulative `env_steps` counts the rows (turns).
Checked with real Ray 2.60 (tests/backends/test_relax.py, with AGENTREPRO_RAY): the recipe's launcher under
RAY_ADDRESS reaches this job's head, whose environment and directory the job's driver inherits, and a
failing job fails the submit. Not run against a real Relax cluster: the recipe and Relax are stand-ins there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from agentrepro import containers, runconfig, schema
from agentrepro.backends import checkpoints, convert, ray_head, step_rows
from agentrepro.backends.base import (
    COMMON,
    DIVIDES,
    EQUALS,
    FIXED,
    Backend,
    Block,
    Demand,
    SeedStream,
    StepCheckpoint,
    text,
)
from agentrepro.backends.launch import Launch, contain, proven, run_launch
from agentrepro.backends.relax import recipe, results
from agentrepro.backends.relax.hooks.agentrepro_relax_eval import FOLDER as HOOK_FOLDER
from agentrepro.environments.alfworld_data import task_id_of_game_file
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_text
from agentrepro.hooks import HOOKS_DIR as SHARED_HOOKS
from agentrepro.hooks import STARTUP_DIR
from agentrepro.layout import RunFiles
from agentrepro.runconfig import EvalConfig

HOOKS = Path(__file__).resolve().parent / "hooks"
SUBMIT = HOOKS / "agentrepro_relax_submit.py"  # run with the image's python3, under the job's Ray head
SAVE, EXPANDED = "relax", "expanded_command.txt"
TRAIN_KEYS = ("omega", "gamma", "step_weight", "episode_weight", "episode_stats")
BLOCK = COMMON | Block(
    {
        "alfworld_data": text("ALFWORLD_DATA, the downloaded ALFWorld data root"),
        "alfworld_python": text(
            "ALFWORLD_PYTHON, the image's interpreter with alfworld 0.4.2 (default python3): a command name or an "
            "absolute path inside the image, never mounted from the host (a host virtual environment does not run "
            "on the image's libraries)"
        ),
        "model_path": text(
            "where the pinned model revision was downloaded (launch detail; the revision is what is frozen)"
        ),
        "model_lock": text("MODEL_LOCK, the recipe's model lock JSON (task37-huggingface-model-lock-v1)"),
        "pythonpath": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "description": "extra PYTHONPATH entries for Ray's workers (e.g. Megatron-LM)",
        },
        "ray": {"type": "object", "description": "this job's own Ray head: executable, num_cpus, num_gpus"},
        "success_threshold": {"type": "number", "description": "output conversion: success when the reward is >= this"},
        "export_hf": {
            "type": "boolean",
            "description": "default true: save at the evaluated steps and export each save to "
            "Hugging Face format (--save-interval 5, --save-hf); false: the recipe's --save-interval 10 and no copy",
        },
    }
)


def save_dir(run_dir: Path) -> Path:
    return Path(run_dir).resolve() / SAVE


def job_launches(config: dict[str, Any], run_dir: Path) -> list[Launch]:
    """The train job's three programs (`programs`), each as it runs: in the placement's container, its proof kept in
    the run directory."""
    labelled = zip(("prepare", "expand", "train"), programs(config, run_dir))
    return [
        contain(
            launch,
            config,
            run_dir=Path(run_dir),
            job_dir=Path(run_dir),
            label=label,
            extra=mounts(config),
            shared=ray_head.shared() if label == "train" else (),
        )
        for label, launch in labelled
    ]


def recipe_knobs(config: dict[str, Any], run_dir: Path) -> dict[str, str]:
    """The recipe's knobs for this run (recipe.recipe_env); its DEPENDENCY_LOCK is the study's lock, or for a run
    config without one (outside a study, or rehearsed before freeze) the run's resolved config."""
    lock = config.get("lock")
    dependency_lock = Path(lock["path"]) if lock else Path(run_dir) / RunFiles.RESOLVED_CONFIG
    save = save_dir(run_dir)
    return recipe.recipe_env(config, save, save / "data", dependency_lock)


def programs(config: dict[str, Any], run_dir: Path) -> list[Launch]:
    """The train job's three programs (module docstring), in order, as the image runs them (before `contain`)."""
    block, save = config["backend"], save_dir(run_dir)
    workdir, data = Path(block["workdir"]), save / "data"
    knobs = recipe_knobs(config, run_dir)
    tasks = EvalConfig.of(config).tasks
    prepare = [
        "python3",
        "-m",
        "examples.graphgpo.prepare_alfworld",
        "--data-root",
        block["alfworld_data"],
        "--output-dir",
        str(data),
        "--max-steps",
        knobs["MAX_STEPS"],
    ]
    if tasks:
        prepare += ["--limit", f"eval_in_distribution={tasks}"]
    pythonpath = os.pathsep.join(
        [str(STARTUP_DIR), str(workdir), str(HOOKS), str(SHARED_HOOKS), *map(str, block.get("pythonpath") or [])]
    )
    ray = block.get("ray") or {}
    rows_env = step_rows.hook_env(config, run_dir)  # train.step_rows: the advantage wrapper dumps these steps
    if rows_env:
        rows_env["AGENTREPRO_POLICY_VERSION_OFFSET"] = str(
            recipe.policy_version_offset(recipe.checkpoint_dir(save, config))
        )
    head_env = {
        **recipe.head_env(knobs),
        **rows_env,
        **ray_head.env(),
        ray_head.PYTHONPATH_ENV: pythonpath,  # before the image's own PYTHONPATH (or, on the host, the inherited one)
        "PYTHONUNBUFFERED": "1",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "WANDB_MODE": "offline",
        "RELAX_ENTRYPOINT_MODE": "agentrepro",
    }
    gpus = ray.get("num_gpus", (config.get("resources") or {}).get("gpus"))
    head = ray_head.words(
        run_dir,
        ray=ray.get("executable", "ray"),
        num_cpus=ray.get("num_cpus", (config.get("resources") or {}).get("cpus")),  # the job's, not the node's
        num_gpus=gpus,
        dashboard=True,
        fixed_ports=(recipe.SERVE_PORT,),
        memory_mb=(config.get("resources") or {}).get("mem_mb"),  # the job's, not the node's
    )
    submit = [
        "python3",
        str(SUBMIT),
        str(save / EXPANDED),
        *recipe.replaced_args(config, save),
        *((recipe.ADVANTAGE_FLAG, recipe.ADVANTAGE_HOOK) if rows_env else ()),
    ]
    return [
        Launch("prepare the recipe's ALFWorld prompt rows and manifests", tuple(prepare), {}, workdir),
        Launch(
            f"check the inputs and print the expanded command (the recipe with DRY_RUN=1) into {save / EXPANDED}",
            ("bash", recipe.RECIPE),
            {**knobs, "DRY_RUN": "1", "RELAX_ENTRYPOINT_MODE": "agentrepro"},
            workdir,
        ),
        Launch(
            f"this job's own Ray head (dashboard, Ray Serve's port {recipe.SERVE_PORT} reserved), then the expanded "
            f"command (eval hook {recipe.HOOK}) submitted to it",
            (*head, *submit),
            head_env,
            workdir,
        ),
    ]


def mounted_fields(config: dict[str, Any]) -> dict[str, str]:
    """The block's data and model paths the job's container mounts: ALFWorld's data, the model snapshot, the recipe's
    model lock. backend.pythonpath names the image's own paths: a mount from the host would hide them."""
    block = config["backend"]
    named = {f"backend.{key}": block.get(key) for key in ("alfworld_data", "model_path", "model_lock")}
    return {where: path for where, path in named.items() if isinstance(path, str) and path}


def mounts(config: dict[str, Any]) -> tuple[Path, ...]:
    """What the job's container sees besides the run directory, the study root, the checkout and the data
    (containers.container_for), read-only: the integration's hooks, and the block's paths (`mounted_fields`)."""
    return (HOOKS, SHARED_HOOKS, *containers.checked_mounts(mounted_fields(config)))


def outcome_file(run_dir: Path, config: dict[str, Any], step: int) -> Path:
    folder = recipe.checkpoint_dir(save_dir(run_dir), config) / HOOK_FOLDER
    return folder / f"{recipe.rollout_of_step(step)}.jsonl"


def convert_eval(run_dir: Path, step: int, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The hook's per-trajectory lines of `step` -> outcome rows of docs/design.md §3.4. The hook writes Relax's task
    id, the game file relative to ALFWORLD_DATA (prepare_alfworld.py prompt_rows_bytes: metadata.task_id =
    task.game.relative_path); the panel names a game by its directory (environments/alfworld_data.py)."""
    fields = convert.EpisodeFields(
        task="task_id",
        reward="reward",
        turns="turns",
        tokens="tokens",
        category="category",
        success="success",
        task_id=task_id_of_game_file,
    )
    return convert.episode_rows(config, step, outcome_file(run_dir, config, step), fields)


def convert_training(run_dir: Path, config: dict[str, Any]) -> None:
    """rollout_result/train/<r>.jsonl (one line per turn) -> metrics.jsonl (results.summary_metrics)."""
    folder = recipe.checkpoint_dir(save_dir(run_dir), config) / "rollout_result" / "train"
    results.summary_metrics(run_dir, folder, config, per_line="env_steps", success_key=None, hint="did Relax train?")


class RelaxBackend(Backend):
    name = "relax"
    block = BLOCK
    adapter = results.ADAPTER
    evaluates_in_training = True  # the recipe evaluates each saved step; an eval job converts its hook's lines

    def default_config(self) -> dict[str, Any]:
        """The harness's defaults of the knobs the recipe takes (train_config.schema.json), stated explicitly, but the
        episode weighting, whose default is the recipe's (trajectory_once)."""
        properties = schema.load("train_config.schema.json")["properties"]
        recipe_stats = next(
            stats for stats, weighting in recipe.WEIGHTING.items() if weighting == recipe.RECIPE_WEIGHTING
        )
        return {"train": {**{key: properties[key]["default"] for key in TRAIN_KEYS}, "episode_stats": recipe_stats}}

    def validate_config(self, config: dict[str, Any]) -> None:
        super().validate_config(config)
        recipe.validate(config)
        runconfig.step_rows(config)
        resources, ray = config.get("resources") or {}, config["backend"].get("ray") or {}
        if "cpus" not in resources and "num_cpus" not in ray:
            raise BadInput(
                "missing: the job's CPUs, which its Ray head is given (--num-cpus); without them Ray counts every "
                "CPU of the node, though SLURM gives the job one",
                where="resources.cpus",
            )

    def checkpoint_steps(self, config: dict[str, Any]) -> list[int]:
        return recipe.evaluated_rollouts(int((config.get("train") or {}).get("steps", 0)))

    def checkpoint(self, config: dict[str, Any], run_dir: Path, step: int) -> StepCheckpoint:
        """Step N: relax/hf/<rollout_id>/ (Relax's --save-hf) and the Megatron checkpoint <--save>/iter_<rollout_id:07d>/."""
        if step == 0:
            return checkpoints.base_model(config, step)
        save = save_dir(run_dir)
        hf = recipe.hf_checkpoint(save, config, step)
        megatron = recipe.checkpoint_dir(save, config) / f"iter_{recipe.rollout_of_step(step):07d}"
        return StepCheckpoint(step, hf, weights=(hf,), state=(megatron,))

    def mounted_fields(self, config: dict[str, Any]) -> dict[str, str]:
        return mounted_fields(config)

    def demands(self, config: dict[str, Any], run_dir: Path) -> list[Demand]:
        """The model revision the recipe accepts; GPUs against its parallel sizes (TP = NUM_GPUS, PP = CP = 1, so data
        parallel 1), the model's heads and the batch; Ray Serve's hard-coded port. Relax sizes its Ray actors at run
        time from --resource, so neither its Ray worker processes (the head leaves each worker's port to the kernel)
        nor its CPUs are derived here."""
        revision = Demand(
            "model revision",
            "MODEL_REVISION pinned into prepare.lock.json",
            recipe.PINNED_MODEL_REVISION,
            "model.revision",
            (config.get("model") or {}).get("revision"),
            EQUALS,
            "examples/graphgpo/prepare_alfworld.py:34 PINNED_MODEL_REVISION; preflight.py verify_prepared_artifacts "
            "refuses another",
        )
        tp, data_parallel = recipe.num_gpus(config), 1  # the demands divide by it
        recipe_line = "examples/graphgpo/run_alfworld_qwen2_5_1_5b.sh"
        return [
            revision,
            Demand(
                "query groups over Megatron's tensor parallel",
                "--num-query-groups",
                recipe.QUERY_GROUPS,
                "resources.gpus",
                tp,
                DIVIDES,
                f"{recipe_line}:170, Megatron's Attention divides them over the TP ranks",
                via="NUM_GPUS -> --tensor-model-parallel-size",
            ),
            Demand(
                "attention heads over Megatron's tensor parallel",
                "--num-attention-heads",
                recipe.ATTENTION_HEADS,
                "resources.gpus",
                tp,
                DIVIDES,
                f"{recipe_line}:168, Megatron's Attention divides them over the TP ranks",
                via="NUM_GPUS -> --tensor-model-parallel-size",
            ),
            Demand(
                "global batch over micro-batches x data parallel",
                "--global-batch-size",
                recipe.GLOBAL_BATCH_SIZE,
                "resources.gpus",
                recipe.MICRO_BATCH_SIZE * data_parallel,
                DIVIDES,
                f"{recipe_line}:136, 224",
                via=f"--micro-batch-size {recipe.MICRO_BATCH_SIZE} x data parallel {data_parallel} (NUM_GPUS / TP)",
            ),
            Demand(
                "Ray Serve's HTTP port",
                "serve.start port, get_serve_url",
                recipe.SERVE_PORT,
                "-",
                None,
                FIXED,
                "relax/entrypoints/train.py:96, relax/utils/utils.py:558 @fork; reserved on the node at start",
            ),
        ]

    def seed_streams(self, config: dict[str, Any]) -> list[SeedStream]:
        """SEED reaches Megatron (--seed) and SGLang (random_seed = --seed + engine rank); --rollout-seed (set from the seed,
        recipe.seed_args) orders the training prompts, i.e. the games, each prompt row being one game."""
        return [
            SeedStream(
                "environment games",
                True,
                "--rollout-seed = seed orders the training prompts, one game each "
                "(relax/engine/rollout/data_source.py:96 @fork); the agent seeds each game from its group id",
            ),
            SeedStream("data order", True, "--rollout-seed = seed (--rollout-shuffle)"),
            SeedStream(
                "rollout sampling",
                True,
                "--seed = SEED: SGLang's random_seed = --seed + engine rank "
                "(relax/backends/sglang/sglang_engine.py:907 @fork)",
            ),
            SeedStream(
                "model initialisation",
                False,
                "none: every seed starts from the same pretrained weights (--seed seeds "
                "Megatron's RNG, relax/backends/megatron/initialize.py:110 @fork, with dropout 0)",
            ),
            SeedStream(
                "evaluation sampling",
                True,
                "--seed = SEED (the same SGLang engines, temperature 0.4); the games are the "
                "frozen panel for every seed",
            ),
        ]

    def launches(self, config: dict[str, Any], run_dir: Path, *, eval_step: int | None = None) -> list[Launch]:
        """The train job's programs; an evaluation runs none (Relax evaluates inside training, see above)."""
        return [] if eval_step is not None else job_launches(config, run_dir)

    def deviations(self, config: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
        return recipe.deviations(config, save_dir(run_dir))

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        workdir = Path(config["backend"]["workdir"])
        if not (workdir / recipe.RECIPE).is_file():
            raise BadInput(f"expected a Relax checkout with {recipe.RECIPE}", where="backend.workdir")
        run_dir = Path(run_dir)
        if not resume:
            start_afresh(run_dir, config)
        logs, save = run_dir / RunFiles.LOGS, save_dir(run_dir)
        prepare, expand, submit = job_launches(config, run_dir)
        save.mkdir(parents=True, exist_ok=True)
        ray_head.ready()
        run_launch(prepare, run_dir, "prepare")
        _expand(expand, save / EXPANDED, logs)
        atomic_write_text(save / recipe.RUN_LOCK, recipe.run_lock(recipe_knobs(config, run_dir), workdir))
        run_launch(submit, run_dir, "train")
        convert_training(run_dir, config)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        return convert_eval(Path(run_dir), step, runconfig.read_resolved_config(Path(run_dir)))


def start_afresh(run_dir: Path, config: dict[str, Any]) -> None:
    """Relax resumes by itself whenever its --save holds latest_checkpointed_iteration.txt: without resume, this
    run's --save directory (checkpoints, rollout_result, the hook's outcomes) is removed first. Only that
    directory, inside the run directory; the prepared data is content-addressed and kept."""
    folder = recipe.checkpoint_dir(save_dir(run_dir), config)
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)


def _expand(launch: Launch, out: Path, logs: Path) -> None:
    """Run the recipe's dry run (in its container, proven like every launch); its stdout (the expanded command) goes to
    `out`, its stderr to the logs."""
    logs.mkdir(parents=True, exist_ok=True)
    with (
        open(out, "w", encoding="utf-8") as stdout,
        open(logs / "expand.stderr.log", "a", encoding="utf-8") as stderr,
        proven(launch, logs.parent),
    ):
        status = subprocess.run(
            list(launch.argv),
            cwd=launch.cwd,
            env={**os.environ, **launch.env},
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            check=False,
        ).returncode
    if status != 0:
        raise Failure(f"the recipe's dry run failed with exit status {status}; see {logs / 'expand.stderr.log'}")
