"""The verl-agent backend (langfengQ/verl-agent @ 20bd331): the authors' own launch scripts, run unchanged.

Launch (recipes.py). Each job runs, from the checkout in `backend.workdir`:
1. data preparation: the script's own examples/data_preprocess/prepare.py with the study's sizes and `--local_dir`
   inside the run directory, run offline (hooks/agentrepro_verl_prepare.py answers its download of Geometry3K,
   which it uses only to count rows, with local rows). The script runs it again into ~/data/verl-agent; offline that
   call fails, into the log, and the script goes on (`set -x`, no `-e`): its copy would not be read anyway, because
   the data paths are appended. Every program runs with Hugging Face's libraries offline (launch.OFFLINE);
2. the official script of the method's estimator, `bash <script> vllm KEY=VALUE ...`, with the harness's
   overrides appended (`recipes.appended`: the deviations from the recipe, recorded in the run dir);
3. for an evaluation, the same script in verl's validate-only mode (`trainer.val_only=true`) from the
   checkpoint `global_step_<N>` (step 0: the base model).
`Backend.launches()` lists these programs as data (backends/launch.py); nothing is joined into a shell
string. Each runs inside the container of the placement (launch.contain: the run directory, the study root, the
checkout, the data, the hooks folders and the node's Ray port reservations mounted) and records its proof; the
script runs under the job's own Ray head, started inside the same container (backends/ray_head.py). The integration (hooks/: startup/sitecustomize.py imports hooks/agentrepro_verl_hook.py) reaches every
process through PYTHONPATH and is switched on by AGENTREPRO_VERL_OUT (integration.py); for training,
AGENTREPRO_VERL_PRUNE says whether older checkpoints lose their training state after each save
(checkpoints.prunes_during_training decides; hooks/agentrepro_verl_prune.py acts and records each file in
checkpoints/pruned_in_training.jsonl, which `pruned_in_training` reads).

Outputs converted (outputs.py, also the command backend's `verl-agent` adapter):
* metrics: the integration appends every `Tracking.log(data, step)` call to verl_metrics.jsonl as
  `{"step": N, "data": {...}}` (verl-agent has no file logger at 20bd331); verl-agent's validation logs
  `val/success_rate` and `val/<task type>_success_rate`; training logs `episode/...`, `actor/...`, `timing_s/...`.
* outcomes: the integration writes verl_validation/<step>.jsonl, one line per validation episode with
  `task_id` (the game file), `task_hash`, `category` (task type), `won`, `turns` and `tokens`. A line
  without them is BadInput naming file, line and field.
* evaluated steps: verl validates before training, every `trainer.test_freq` (= eval.every) steps and at the
  last step (`validated_steps`); a study whose `runconfig.checkpoint_steps` differ is refused by
  `validate_config`, so the plan never asks for a step verl skips.
* checkpoints: step N is <trainer.default_local_dir = checkpoints/>/global_step_N/, its Hugging Face copy
  actor/huggingface/ (written because actor.checkpoint.contents has hf_model, fsdp_checkpoint_manager.py:208 at
  20bd331); step 0 is the base model (backend.model_path, else model.path), outside the run, never pruned.

Not run against a real verl-agent cluster here: the launches are checked against the facts of 20bd331
(tests/fixtures/frameworks/), the converters on files shaped like the integration's.

It needs a container and a hub model.
"""

from __future__ import annotations

import glob
import json
import sys
import threading
from pathlib import Path
from typing import Any

from agentrepro import containers, runconfig, tracking
from agentrepro.backends import checkpoints, ray_head, ray_nodes, step_rows
from agentrepro.backends.base import COMMON, Backend, Block, Demand, PrunedInTraining, SeedStream, StepCheckpoint, text
from agentrepro.backends.launch import Launch, contain, run_launch
from agentrepro.backends.verl_agent import demands, integration, outputs, recipes, scripts
from agentrepro.backends.verl_agent.hooks import agentrepro_verl_prune as prune_hook
from agentrepro.bounds import MAX_SEED
from agentrepro.containers.runtimes import allocated_gpus
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text
from agentrepro.hooks import HOOKS_DIR as SHARED_HOOKS
from agentrepro.layout import RunFiles, checkpoint_dir, eval_dir
from agentrepro.reading import iter_jsonl
from agentrepro.runconfig import EvalConfig

DEVIATIONS = "verl_deviations.json"
BLOCK = COMMON | Block(
    {
        "overrides": {"type": "object", "description": "extra Hydra overrides appended to the official script"},
        "model_path": text(
            "where the pinned model revision was downloaded (launch detail; the revision is what is frozen)"
        ),
        "ray": {
            "type": "object",
            "description": "this job's own Ray head: executable, num_cpus, num_gpus, client, worker_ports "
            "(default: the job's Ray worker processes and Ray's idle pool, agentrepro preflight shows them)",
        },
    }
)
RAY_KEYS: dict[str, type] = {"executable": str, "num_cpus": int, "num_gpus": int, "client": bool, "worker_ports": int}


def check_ray(block: dict[str, Any]) -> None:
    """BadInput naming the key of backend.ray that is unknown or not of its type (counts: positive integers)."""
    ray = block.get("ray") or {}
    if not isinstance(ray, dict):
        raise BadInput(f"expected a mapping (keys: {', '.join(sorted(RAY_KEYS))})", where="backend.ray")
    for key, value in ray.items():
        kind = RAY_KEYS.get(key)
        if kind is None:
            raise BadInput(f"unknown key (expected {', '.join(sorted(RAY_KEYS))})", where=f"backend.ray.{key}")
        not_positive = kind is int and (not isinstance(value, int) or isinstance(value, bool) or value < 1)
        if not isinstance(value, kind) or not_positive:
            raise BadInput(
                f"expected {'a positive integer' if kind is int else kind.__name__}, got {value!r}",
                where=f"backend.ray.{key}",
            )


def workdir(config: dict[str, Any]) -> Path:
    """The verl-agent checkout (backend.workdir; a relative path is taken from where agentrepro runs)."""
    value = (config.get("backend") or {}).get("workdir")
    if not isinstance(value, str) or not value:
        raise BadInput("expected the path of the verl-agent checkout at backend.commit", where="backend.workdir")
    return Path(value).absolute()


def step_dir(run_dir: str | Path, step: int) -> Path:
    """verl's checkpoint of `step`: <trainer.default_local_dir>/global_step_<N>/ (ray_trainer.py:913)."""
    return checkpoint_dir(run_dir) / prune_hook.STEP_DIR.format(step)


def validated_steps(config: dict[str, Any]) -> list[int]:
    """The steps verl validates: 0 (val_before_train), every trainer.test_freq steps, and the last step."""
    steps, every = (config.get("train") or {}).get("steps", 0), EvalConfig.of(config).every
    return sorted({0} | (set(range(every, steps + 1, every)) | {steps} if every else set()))


def node_options(config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> dict[str, Any]:
    """What each node of the job's Ray cluster offers (backends/ray_head.py): as many worker ports as the job's Ray
    worker processes and Ray's idle pool need (demands.worker_ports; each node reserves them all, as Ray may place any
    of them there), the CPUs the job asks for (backend.ray.num_cpus, else resources.cpus), the GPUs
    (backend.ray.num_gpus, else resources.gpus), the memory (resources.mem_mb, the job's, not the node's), the
    executable from backend.ray."""
    ray = (config.get("backend") or {}).get("ray") or {}
    _, ports = demands.worker_ports(config, recipes.composed(config, run_dir, resume=resume))
    return {
        "ray": ray.get("executable"),
        "num_cpus": demands.head_cpus(config)[1],
        "num_gpus": ray.get("num_gpus", (config.get("resources") or {}).get("gpus")),
        "worker_ports": ports,
        "memory_mb": (config.get("resources") or {}).get("mem_mb"),
    }


def head_words(
    config: dict[str, Any], run_dir: Path, *, resume: bool = True, node_ip: str | None = None
) -> tuple[str, ...]:
    """The words that run a program against this job's own Ray head (`node_options`); `node_ip`: the address the head
    of a job over several nodes binds (ray_nodes.head_address)."""
    ray = (config.get("backend") or {}).get("ray") or {}
    options = node_options(config, run_dir, resume=resume)
    return ray_head.words(run_dir, client=ray.get("client") is not False, node_ip=node_ip, **options)


def mounted_fields(config: dict[str, Any]) -> dict[str, str]:
    """The block's paths the job's container mounts: the local model snapshot (backend.model_path)."""
    model = (config.get("backend") or {}).get("model_path")
    return {"backend.model_path": model} if isinstance(model, str) and model else {}


def mounts(config: dict[str, Any]) -> tuple[Path, ...]:
    """What the job's container sees besides the run directory, the study root, the checkout and the data
    (containers.container_for): the integration's hooks (read-only), and the block's paths (`mounted_fields`)."""
    return (integration.HOOKS, SHARED_HOOKS, *containers.checked_mounts(mounted_fields(config)))


def job_launches(
    config: dict[str, Any],
    run_dir: Path,
    *,
    resume: bool = True,
    eval_step: int | None = None,
    tracked: dict[str, str] | None = None,
    node_ip: str | None = None,
) -> list[Launch]:
    """The job's programs (`programs`) as they run: in the placement's container, the Ray head's reservations folder
    mounted for the launch that starts it, the proof kept in the run directory (training) or the evaluation's."""
    run_dir = Path(run_dir).resolve()
    job_dir = run_dir if eval_step is None else eval_dir(run_dir, eval_step).resolve()
    prepare, launch = programs(config, run_dir, resume=resume, eval_step=eval_step, tracked=tracked, node_ip=node_ip)
    return [
        contain(
            prepare, config, run_dir=run_dir, job_dir=job_dir, label=label(prepare, eval_step), extra=mounts(config)
        ),
        contain(
            launch,
            config,
            run_dir=run_dir,
            job_dir=job_dir,
            label=label(launch, eval_step),
            extra=mounts(config),
            shared=ray_head.shared(),
        ),
    ]


def programs(
    config: dict[str, Any],
    run_dir: Path,
    *,
    resume: bool = True,
    eval_step: int | None = None,
    tracked: dict[str, str] | None = None,
    node_ip: str | None = None,
) -> list[Launch]:
    """Data preparation, then the official script with the appended overrides (recipes.appended); with
    `eval_step`, the script in validate-only mode from that step's checkpoint instead of training; as the image runs
    them (before `contain`). `tracked`: the training's W&B variables (agentrepro.tracking), where it logs to W&B;
    `node_ip`: the head's address in a training over several nodes (`head_words`)."""
    script, cwd, run_dir = recipes.script_for(config), workdir(config), Path(run_dir).resolve()
    prepare = Launch(  # examples/data_preprocess/prepare.py itself, offline (hooks/agentrepro_verl_prepare.py)
        "prepare data",
        ("python3", str(integration.PREPARE), *recipes.prepare_args(config, run_dir)),
        {},
        cwd,
    )
    words = [o.word() for o in recipes.appended(config, run_dir, resume=resume)]
    for word in words:  # the script's unquoted $@ expands a word holding [...] against the checkout's files
        if "[" in word and glob.glob(word, root_dir=cwd):
            raise BadInput(
                f"the official script passes {word!r} unquoted ($@), and bash would replace it by the files it "
                f"matches in {cwd}: {', '.join(sorted(glob.glob(word, root_dir=cwd))[:3])}",
                where="backend.workdir",
            )
    env = launch_env(config, run_dir, training=eval_step is None, tracked=tracked)
    head = head_words(config, run_dir, resume=resume, node_ip=node_ip)
    if eval_step is None:
        return [prepare, Launch("train", (*head, "bash", script.path, scripts.ENGINE, *words), env, cwd)]
    source = (
        ["trainer.resume_mode=disable"]
        if eval_step == 0
        else ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={step_dir(run_dir, eval_step)}"]
    )
    validate = ["trainer.val_only=true", "trainer.val_before_train=true", *source]
    return [
        prepare,
        Launch(f"evaluate step {eval_step}", (*head, "bash", script.path, scripts.ENGINE, *words, *validate), env, cwd),
    ]


def launch_env(
    config: dict[str, Any], run_dir: Path, *, training: bool, tracked: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of the launch that runs the script under the job's head, and of the training's worker nodes.
    The script's own exports reach only its driver; the Ray workers (GPU workers, env workers, the TaskRunner) inherit
    their node's Ray environment, which is this one on every node: so they are set here too. A training's also names
    the parity certificate's step rows (hooks/agentrepro_verl_rows.py, when train.step_rows names steps), whether
    checkpoints are pruned during training, and its W&B variables (`tracked`)."""
    script = recipes.script_for(config)
    env = {
        **{name: value for name, (value, _) in script.exports.items()},
        **integration.env(run_dir, panel_file=run_dir / integration.PANEL),
    }
    data_path = ((config.get("data") or {}).get("eval") or {}).get("path")
    if (config.get("env") or {}).get("name") == "alfworld" and data_path:
        env["ALFWORLD_DATA"] = str(Path(data_path).absolute())  # the frozen panel's data directory, for verl's envs too
    env.update(ray_head.env())
    if training:
        env.update(step_rows.hook_env(config, run_dir))
        env[prune_hook.PRUNE_ENV] = "1" if checkpoints.prunes_during_training(config) else "0"
        env.update(tracked or {})
    return env


def node_launch(config: dict[str, Any], run_dir: Path, key: str, *, tracked: dict[str, str] | None = None) -> Launch:
    """A worker node of the training's Ray cluster (its head's `key`), run on this node of the job's allocation in the
    placement's container with this node's GPUs: the same options and environment as the head's node, its own ports
    reservations folder mounted; its proof and logs under the node's name."""
    run_dir = Path(run_dir).resolve()
    words = ray_head.join_words(run_dir, key, **node_options(config, run_dir))
    env = launch_env(config, run_dir, training=True, tracked=tracked)
    launch = Launch("worker node", words, env, workdir(config))
    return contain(
        launch,
        config,
        run_dir=run_dir,
        job_dir=run_dir,
        label=f"train_node_{ray_nodes.this_node()}",
        extra=mounts(config),
        shared=ray_head.shared(),
    )


TRACKER = (
    "latest_checkpointed_iteration.txt"  # verl's record of its newest checkpoint (ray_trainer.py:939), resumed from
)


def resumed_from(run_dir: Path) -> dict[str, Any] | None:
    """What a training launch that finds a checkpoint resumes from, and what that does to its games: verl's
    resume_mode auto continues at the step its tracker names, but the GraphGPO recipe seeds each env worker once, when
    it is made (recipe/GraphGPO/alfworld_envs.py:62-64, 249-252 at 20bd331), so the resumed run plays the training
    games of step 1 onwards again instead of those an uninterrupted run would have played next. None: a fresh start."""
    try:
        step = int((checkpoint_dir(run_dir) / TRACKER).read_text(encoding="ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return {
        "step": step,
        "training_games": f"replayed: steps after {step} play the games of steps 1 to {step} again (the env workers "
        "are seeded once, when made), where an uninterrupted run plays new ones",
    }


def _tracked(config: dict[str, Any], run_dir: Path) -> dict[str, str] | None:
    """The W&B variables verl's own wandb.init reads (agentrepro.tracking), when the training logs to W&B."""
    if not (config.get("train") or {}).get("wandb"):
        return None
    spec = {k: config[k] for k in ("study", "method", "seed")}
    return tracking.environment(tracking.wandb_run(run_dir, **spec), Path(run_dir) / RunFiles.LOGS)


def label(launch: Launch, eval_step: int | None) -> str:
    """The name of a launch's logs (and its container's record): prepare_data and train; eval_step<N>_prepare and
    eval_step<N>_evaluate."""
    return (
        launch.purpose.replace(" ", "_") if eval_step is None else f"eval_step{eval_step}_{launch.purpose.split()[0]}"
    )


def run(launch: Launch, run_dir: Path, label: str, *, abandon: threading.Event | None = None) -> None:
    """Run one launch (the integration's Python path goes before the one the head runs with: the image's own in a
    container, the inherited one on the host); stopped once `abandon` is set (launch.run_launch)."""
    ray_head.ready()
    run_launch(launch, run_dir, label, abandon=abandon)


class VerlAgentBackend(Backend):
    name = "verl-agent"
    block = BLOCK
    adapter = outputs.ADAPTER
    evaluates_in_training = True  # training validates every evaluated step; an eval job converts its dump
    spans_nodes = True  # trainer.nnodes = resources.nodes: verl places its GPU workers over the job's Ray cluster

    def checkpoint_steps(self, config: dict[str, Any]) -> list[int]:
        return validated_steps(config)

    def validate_config(self, config: dict[str, Any]) -> None:
        super().validate_config(config)
        block = config["backend"]
        if "overrides" in block and not isinstance(block["overrides"], dict):
            raise BadInput("expected a mapping of Hydra keys to values", where="backend.overrides")
        if not isinstance(block.get("model_path"), str) or not block["model_path"]:
            raise BadInput(
                "missing: the local snapshot of model.revision, which verl loads (actor_rollout_ref.model.path); the "
                "hub id model.name would be downloaded at `main`, not the pinned revision, and not at all on a node "
                "without a network",
                where="backend.model_path",
            )
        check_ray(block)
        evaluation = EvalConfig.of(config)
        if evaluation.episodes_per_task != 1:
            raise BadInput(
                "verl-agent validates each panel game once (one validation env per game, group size 1)",
                where="eval.episodes_per_task",
            )
        panel = evaluation.task_panel or []
        if panel and evaluation.tasks not in (None, len(panel)):
            raise BadInput(f"one validation env per panel game: the panel has {len(panel)} games", where="eval.tasks")
        values = recipes.composed(
            config, Path(".")
        )  # unknown train keys, keys and values Hydra would not take as meant
        highest = (config["seed"] + 1) * recipes.seed_stride(values) - 1
        if highest > MAX_SEED:
            raise BadInput(
                f"seed {config['seed']} gives env seeds up to {highest} (seed x {recipes.seed_stride(values)} + "
                f"game streams), above {MAX_SEED}",
                where="seeds",
            )
        runconfig.step_rows(config)
        wanted, validated = runconfig.checkpoint_steps(config), validated_steps(config)
        if wanted != validated:
            raise BadInput(
                f"verl-agent validates at step 0, every eval.every steps and the last step ({validated}), "
                f"but the study evaluates {wanted}",
                where="eval",
            )
        saved = recipes.saved_steps(recipes.save_freq(config), (config.get("train") or {}).get("steps", 0))
        if saved != [s for s in wanted if s > 0]:  # step 0 is the base model
            raise BadInput(
                f"trainer.save_freq would save steps {saved}, but the study evaluates {wanted}", where="eval"
            )

    def launches(self, config: dict[str, Any], run_dir: Path, *, eval_step: int | None = None) -> list[Launch]:
        return job_launches(config, run_dir, eval_step=eval_step)

    def deviations(self, config: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
        return [o.record() for o in recipes.appended(config, run_dir, resume=True)]

    def mounted_fields(self, config: dict[str, Any]) -> dict[str, str]:
        return mounted_fields(config)

    def demands(self, config: dict[str, Any], run_dir: Path) -> list[Demand]:
        check_ray(config["backend"])  # the demands compute with its numbers
        return demands.demands(config, run_dir)

    def seed_streams(self, config: dict[str, Any]) -> list[SeedStream]:
        """The seed's knobs (recipes.seed_settings); the model starts from the pretrained weights, and the validation
        games are the frozen panel's (the integration gives validation env i panel game i) for every seed."""
        stride = recipes.seed_stride(recipes.composed(config, Path(".")))
        return [
            SeedStream("environment games", True, f"env.seed = seed x {stride}: disjoint game streams per seed"),
            SeedStream(
                "data order",
                True,
                "+data.seed = seed (the train parquet's rows are placeholders; the games come from the env workers)",
            ),
            SeedStream("rollout sampling", True, "+actor_rollout_ref.rollout.seed = seed (vLLM's sampling seed)"),
            SeedStream("model initialisation", False, "none: every seed starts from the same pretrained weights"),
            SeedStream(
                "evaluation sampling",
                True,
                "+actor_rollout_ref.rollout.seed = seed (validation samples at "
                "temperature eval.temperature on the same engine); its games are the frozen panel for every seed",
            ),
        ]

    def checkpoint(self, config: dict[str, Any], run_dir: Path, step: int) -> StepCheckpoint:
        if step == 0:
            return checkpoints.base_model(config, step)
        root = step_dir(run_dir, step)
        hf = root.joinpath(*prune_hook.HF_COPY)
        return StepCheckpoint(step, hf, weights=(hf,), state=(root,))

    def last_saved_step(self, run_dir: Path) -> int | None:
        """The step verl's checkpoint tracker names (its resume_mode auto continues there)."""
        resumed = resumed_from(Path(run_dir))
        return None if resumed is None else resumed["step"]

    def pruned_in_training(self, run_dir: Path) -> PrunedInTraining | None:
        """Every file the hook removed during training, from checkpoints/pruned_in_training.jsonl (one line per file:
        {step, saved, path, sha256, bytes}); None when nothing was; BadInput naming a malformed line."""
        path, found = checkpoint_dir(run_dir) / prune_hook.RECORD, {}
        if not path.is_file():
            return None
        for number, line in iter_jsonl(path):
            if not (
                isinstance(line, dict)
                and isinstance(line.get("path"), str)
                and isinstance(line.get("sha256"), str)
                and all(
                    isinstance(line.get(k), int) and not isinstance(line.get(k), bool)
                    for k in ("step", "saved", "bytes")
                )
            ):
                raise BadInput(
                    "expected {step, saved, path, sha256, bytes} (hooks/agentrepro_verl_prune.py)",
                    path=path,
                    where=f"line {number}",
                )
            found[line["path"]] = line
        return PrunedInTraining(path, found)

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        if not workdir(config).is_dir():
            raise BadInput(f"no verl-agent checkout at {workdir(config)}", where="backend.workdir")
        run_dir = Path(run_dir).resolve()
        script = recipes.script_for(config)
        record: dict[str, Any] = {
            "commit": scripts.COMMIT,
            "script": script.path,
            "entry": script.entry,
            "appended": [o.record() for o in recipes.appended(config, run_dir, resume=resume)],
        }
        resumed = resumed_from(run_dir) if resume else None
        if resumed is not None:  # recorded with the run, and said where the job's log shows it
            record["resumed"] = resumed
            print(
                f"agentrepro: verl-agent resumes from step {resumed['step']}; training games {resumed['training_games']}",
                file=sys.stderr,
            )
        atomic_write_text(run_dir / DEVIATIONS, json.dumps(record, indent=1) + "\n")
        integration.write_panel(config, run_dir)
        tracked = _tracked(config, run_dir)
        nodes = ray_nodes.for_job(int((config.get("resources") or {}).get("nodes", 1)))
        node_ip = ray_nodes.head_address(nodes) if nodes is not None else None
        for launch in job_launches(config, run_dir, resume=resume, tracked=tracked, node_ip=node_ip):
            if nodes is None or launch.purpose != "train":
                run(launch, run_dir, label(launch, None))
                continue
            # each other node runs `agentrepro node`, which builds its worker node's launch there, for its own GPUs
            key = launch.argv[launch.argv.index("--key") + 1]
            argv = [sys.executable, "-m", "agentrepro", "node", str(run_dir), "--key", key]
            resources = config.get("resources") or {}
            with ray_nodes.worker_nodes(
                nodes,
                argv,
                address=ray_head.address_file(run_dir),
                cpus=int(resources.get("cpus", 1)),
                gpus=int(resources.get("gpus", 0)),
                log_dir=run_dir / RunFiles.LOGS,
                label="train_nodes",
            ) as workers:
                run(launch, run_dir, label(launch, None), abandon=workers.failed)
        outputs.convert_training(run_dir, config)

    def run_worker_node(self, config: dict[str, Any], run_dir: Path, key: str) -> None:
        ray_head.ready()
        launch = node_launch(config, run_dir, key, tracked=_tracked(config, run_dir))
        run_launch(launch, Path(run_dir), f"train_node_{ray_nodes.this_node()}")

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        """The outcomes of the validation at `step` (training validates every evaluated step); if that file is
        missing (a checkpoint re-evaluated), verl's validate-only run of the checkpoint writes it first."""
        run_dir = Path(run_dir)
        config = runconfig.read_resolved_config(run_dir)
        if not outputs.validation_file(run_dir, step).is_file():
            actor = step_dir(run_dir, step) / "actor"
            if step and not any(actor.glob("model_world_size_*_rank_0.pt")):
                raise BadInput(
                    f"no FSDP checkpoint of step {step} to validate (pruned during training or after its evaluation, "
                    "or never saved); its Hugging Face copy can be served (eval.engine: served)",
                    path=actor,
                )
            if int(config["resources"].get("nodes") or 1) > 1:
                raise BadInput(
                    f"the validation of step {step} is missing, and verl's validate-only run of a training over "
                    f"{config['resources']['nodes']} nodes is not built (an eval job is one node's): serve the "
                    "checkpoint's Hugging Face copy (eval.engine: served)",
                    path=outputs.validation_file(run_dir, step),
                )
            if int(config["resources"].get("gpus") or 0) and not allocated_gpus():
                raise BadInput(
                    f"the validation of step {step} is missing, and validating the checkpoint again runs verl on "
                    f"{config['resources']['gpus']} GPU(s), which an eval job (it converts the training's validation) "
                    "does not ask for: run this eval job with the training's resources (snakemake "
                    "--set-resources eval:gpu=N eval:cpus_per_task=C eval:mem_mb=M)",
                    path=outputs.validation_file(run_dir, step),
                )
            integration.write_panel(config, run_dir)
            for launch in job_launches(config, run_dir, eval_step=step):
                run(launch, run_dir, label(launch, step))
        return outputs.convert_eval(run_dir, step, config)
