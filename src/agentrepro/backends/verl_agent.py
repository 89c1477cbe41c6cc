"""The verl-agent backend (langfengQ/verl-agent @ 20bd331): the authors' own launch scripts, run unchanged.

Launch (verl_recipes.py). Each job runs, from the checkout in `backend.workdir`:
1. data preparation: the script's own `python3 -m examples.data_preprocess.prepare ...` with the study's sizes
   and `--local_dir` inside the run directory (the script runs it again into ~/data/verl-agent; that copy is
   not read, because the data paths are appended);
2. the official script of the method's estimator, `bash <script> vllm KEY=VALUE ...`, with the harness's
   overrides appended (`verl_recipes.appended`: the deviations from the recipe, recorded in the run dir);
3. for an evaluation, the same script in verl's validate-only mode (`trainer.val_only=true`) from the
   checkpoint `global_step_<N>` (step 0: the base model).
`Backend.launches()` lists these programs as data (backends/launch.py); nothing is joined into a shell
string. The outcome integration (hooks/verl_site) reaches every process through PYTHONPATH and
is switched on by AGENTREPRO_VERL_OUT; for training, AGENTREPRO_VERL_KEEP (eval.keep_checkpoints) tells it
whether older checkpoints lose their training state after each save (hooks/agentrepro_verl_prune.py).

Outputs converted (see tests/backends/test_verl_agent.py):
* metrics: the integration appends every `Tracking.log(data, step)` call to verl_metrics.jsonl as
  `{"step": N, "data": {...}}` (verl-agent has no file logger at 20bd331); verl-agent's validation logs
  `val/success_rate` and `val/<task type>_success_rate`; training logs `episode/...`, `actor/...`, `timing_s/...`.
* outcomes: the integration writes verl_validation/<step>.jsonl, one line per validation episode with
  `task_id` (the game file), `task_hash`, `category` (task type), `won`, `turns` and `tokens`. A line
  without them is BadInput naming file, line and field.
* evaluated steps: verl validates before training, every `trainer.test_freq` (= eval.every) steps and at the
  last step (`validated_steps`); a study whose `runconfig.checkpoint_steps` differ is refused by
  `validate_config`, so the plan never asks for a step verl skips.

Not run against a real verl-agent cluster here: the launches are checked against the facts of 20bd331
(tests/fixtures/frameworks/), the converters on files shaped like the integration's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from agentrepro import runconfig
from agentrepro.backends import checkpoints, convert, ray_launch, step_rows, verl_recipes, verl_scripts
from agentrepro.backends.base import Backend
from agentrepro.backends.launch import Launch
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text
from agentrepro.hooks import HOOKS_DIR
from agentrepro.hooks import agentrepro_verl_prune as verl_prune
from agentrepro.layout import RunFiles
from agentrepro.process import run_logged
from agentrepro.runconfig import checkpoint_steps

BLOCK_KEYS = {"name", "repo", "commit", "workdir", "overrides", "model_path", "sources", "ray"}
METRICS_FILE, VAL_DIR, DEVIATIONS, PANEL = "verl_metrics.jsonl", "verl_validation", "verl_deviations.json", "verl_panel.json"
INTEGRATION_DIR = HOOKS_DIR / "verl_site"   # its sitecustomize.py imports hooks/agentrepro_verl_hook.py
RENAME = {
    "train_success_rate": ("episode/success_rate",),
    "reward_mean": ("episode/reward/mean", "critic/rewards/mean"),
    "valid_action_ratio": ("episode/valid_action_ratio",),
    "loss_policy": ("actor/pg_loss",), "loss_value": ("critic/vf_loss",),
    "kl": ("actor/kl_loss",), "entropy": ("actor/entropy_loss",),
    "grad_norm": ("actor/grad_norm",), "lr": ("actor/lr",), "val_success_rate": ("val/success_rate",),
}
TIMINGS = {"rollout": "timing_s/gen", "advantage": "timing_s/adv", "update": "timing_s/update_actor",
           "checkpoint": "timing_s/save_checkpoint", "step_total": "timing_s/step"}


def workdir(config: dict[str, Any]) -> Path:
    """The verl-agent checkout (backend.workdir; a relative path is taken from where agentrepro runs)."""
    value = (config.get("backend") or {}).get("workdir")
    if not isinstance(value, str) or not value:
        raise BadInput("expected the path of the verl-agent checkout at backend.commit", where="backend.workdir")
    return Path(value).absolute()


def integration_env(run_dir: Path, *, panel_file: Path | None = None) -> dict[str, str]:
    """Switches the outcome integration on in every Python process of the job (driver and Ray workers)."""
    env = {"PYTHONPATH": f"{INTEGRATION_DIR}{os.pathsep}{HOOKS_DIR}", "AGENTREPRO_VERL_OUT": str(Path(run_dir).resolve())}
    if panel_file is not None:
        env["AGENTREPRO_VERL_PANEL"] = str(panel_file)
    return env


def launches(config: dict[str, Any], run_dir: Path, *, resume: bool = True, eval_step: int | None = None) -> list[Launch]:
    """Data preparation, then the official script with the appended overrides (verl_recipes.appended); with
    `eval_step`, the script in validate-only mode from that step's checkpoint instead of training."""
    script, cwd, run_dir = verl_recipes.script_for(config), workdir(config), Path(run_dir).resolve()
    prepare = Launch("prepare data", ("python3", "-m", "examples.data_preprocess.prepare",
                                      *verl_recipes.prepare_args(config, run_dir)), {}, cwd)
    words = [o.word() for o in verl_recipes.appended(config, run_dir, resume=resume)]
    env = integration_env(run_dir, panel_file=run_dir / PANEL)
    data_path = ((config.get("data") or {}).get("eval") or {}).get("path")
    if (config.get("env") or {}).get("name") == "alfworld" and data_path:
        env["ALFWORLD_DATA"] = str(Path(data_path).absolute())   # the frozen panel's data directory, for verl's envs too
    head = ray_head(config, run_dir)
    if eval_step is None:   # the parity certificate's step rows (hooks/agentrepro_verl_rows.py), when train.step_rows names steps
        env.update(step_rows.hook_env(config, run_dir))
        env[verl_prune.KEEP_ENV] = checkpoints.keep_setting(config)   # older steps' training state (hooks/agentrepro_verl_prune.py)
        return [prepare, Launch("train", (*head, "bash", script.path, verl_scripts.ENGINE, *words), env, cwd)]
    source = ["trainer.resume_mode=disable"] if eval_step == 0 else [
        "trainer.resume_mode=resume_path", f"trainer.resume_from_path={checkpoints.verl_step_dir(run_dir, eval_step)}"]
    validate = ["trainer.val_only=true", "trainer.val_before_train=true", *source]
    return [prepare, Launch(f"evaluate step {eval_step}", (*head, "bash", script.path, verl_scripts.ENGINE, *words, *validate), env, cwd)]


def ray_head(config: dict[str, Any], run_dir: Path) -> tuple[str, ...]:
    """The words that run a program against this job's own Ray head (ray_job.py), options from backend.ray."""
    ray = (config.get("backend") or {}).get("ray") or {}
    gpus = ray.get("num_gpus", (config.get("resources") or {}).get("gpus"))
    words = [sys.executable, "-m", "agentrepro.backends.ray_job", "--key", ray_launch.job_key(run_dir),
             "--pid-file", str(Path(run_dir) / "ray_head.pid")]
    words += ["--ray", ray["executable"]] if "executable" in ray else []
    words += ["--num-cpus", str(ray["num_cpus"])] if ray.get("num_cpus") is not None else []
    words += ["--num-gpus", str(gpus)] if gpus is not None else []
    return (*words, *(["--no-client"] if ray.get("client") is False else []), "--")


def run(launch: Launch, run_dir: Path, label: str) -> None:
    """Run one launch with its logs in RUN_DIR/logs/. A PYTHONPATH the job already has stays, after the integration's."""
    env = dict(launch.env)
    if "PYTHONPATH" in env and os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] += os.pathsep + os.environ["PYTHONPATH"]
    run_logged(list(launch.argv), log_dir=Path(run_dir) / RunFiles.LOGS, label=label, cwd=launch.cwd, env=env)


def write_panel(config: dict[str, Any], run_dir: Path) -> Path:
    """The integration's panel: validation env i plays game i. Join point with the ALFWorld task panel
    (environments/alfworld_data.py, frozen in the lock): an entry's `game_file` (or `gamefile`) if it has one;
    else, when data.eval.path is an ALFWorld data directory, `<that directory>/<task_id>/game.tw-pddl`; else the
    task_id itself, which the integration takes under $ALFWORLD_DATA when relative."""
    panel = (config.get("eval") or {}).get("task_panel") or []
    data_dir = Path(((config.get("data") or {}).get("eval") or {}).get("path") or "")
    def game(entry: dict[str, Any]) -> str:
        named = entry.get("game_file") or entry.get("gamefile")
        if named:
            return str(named)
        if str(data_dir) != "." and data_dir.is_dir():
            return str((data_dir / entry["task_id"] / "game.tw-pddl").resolve())
        return str(entry["task_id"])
    games = [{"task_id": t["task_id"], "task_hash": t.get("task_hash"), "category": t.get("category"), "game_file": game(t)}
             for t in panel]
    path = Path(run_dir) / PANEL
    atomic_write_text(path, json.dumps(games, indent=1) + "\n")
    return path


def deviations(config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> dict[str, Any]:
    """What this job changes in the official recipe: the script and every appended override."""
    script = verl_recipes.script_for(config)
    return {"commit": verl_scripts.COMMIT, "script": script.path, "entry": script.entry,
            "appended": [o.record() for o in verl_recipes.appended(config, run_dir, resume=resume)]}


def convert_training(run_dir: Path, config: dict[str, Any]) -> None:
    """verl_metrics.jsonl (FileLogger lines) -> metrics.jsonl and timings.jsonl of docs/design.md §3.3."""
    path = Path(run_dir) / METRICS_FILE
    records = []
    for line, record in convert.read_records(path):
        step, data = record.get("step"), record.get("data")
        if not isinstance(step, int) or isinstance(step, bool) or not isinstance(data, dict):
            raise BadInput('expected {"step": <int>, "data": {...}} (verl FileLogger)', path=path, where=f"line {line}")
        records.append((step, data))
    metrics = convert.merge_metric_records(records, rename=RENAME, cumulative={"wall_s": "timing_s/step"})
    timings = [{"step": m["step"], **{name: m[src] for name, src in TIMINGS.items() if src in m}} for m in metrics]
    convert.write_metrics(run_dir, metrics, [t for t in timings if len(t) > 1])


def convert_eval(run_dir: Path, step: int, config: dict[str, Any]) -> list[dict[str, Any]]:
    """verl_validation/<step>.jsonl (the integration's lines, one per episode) -> outcome rows of docs/design.md §3.4."""
    fields = convert.EpisodeFields(task="task_id", reward="reward", turns="turns", tokens="tokens",
                                   category="category", success="won")
    return convert.episode_rows(config, step, Path(run_dir) / VAL_DIR / f"{step}.jsonl", fields)


def validated_steps(config: dict[str, Any]) -> list[int]:
    """The steps verl validates: 0 (val_before_train), every trainer.test_freq steps, and the last step."""
    steps, every = (config.get("train") or {}).get("steps", 0), (config.get("eval") or {}).get("every")
    return sorted({0} | (set(range(every, steps + 1, every)) | {steps} if every else set()))


class VerlAgentBackend(Backend):
    name = "verl-agent"

    def checkpoint_steps(self, config: dict[str, Any]) -> list[int]:
        return validated_steps(config)

    def validate_config(self, config: dict[str, Any]) -> None:
        block = config["backend"]
        unknown = sorted(set(block) - BLOCK_KEYS)
        if unknown:
            raise BadInput(f"unknown key (expected {', '.join(sorted(BLOCK_KEYS))})", where=f"backend.{unknown[0]}")
        if "overrides" in block and not isinstance(block["overrides"], dict):
            raise BadInput("expected a mapping of Hydra keys to values", where="backend.overrides")
        evaluation = config.get("eval") or {}
        if evaluation.get("episodes_per_task", 1) != 1:
            raise BadInput("verl-agent validates each panel game once (one validation env per game, group size 1)",
                           where="eval.episodes_per_task")
        panel = evaluation.get("task_panel") or []
        if panel and evaluation.get("tasks") not in (None, len(panel)):
            raise BadInput(f"one validation env per panel game: the panel has {len(panel)} games", where="eval.tasks")
        verl_recipes.appended(config, Path("."), resume=True)   # unknown train keys, values the script would split
        runconfig.step_rows(config)
        wanted, validated = checkpoint_steps(config), validated_steps(config)
        if wanted != validated:
            raise BadInput(f"verl-agent validates at step 0, every eval.every steps and the last step ({validated}), "
                           f"but the study evaluates {wanted}", where="eval")
        saved = verl_recipes.saved_steps(verl_recipes.save_freq(config), (config.get("train") or {}).get("steps", 0))
        if saved != [s for s in wanted if s > 0]:   # step 0 is the base model
            raise BadInput(f"trainer.save_freq would save steps {saved}, but the study evaluates {wanted}", where="eval")

    def launches(self, config: dict[str, Any], run_dir: Path, *, eval_step: int | None = None) -> list:
        return launches(config, run_dir, eval_step=eval_step)

    def deviations(self, config: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
        return [o.record() for o in verl_recipes.appended(config, run_dir, resume=True)]

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        if not workdir(config).is_dir():
            raise BadInput(f"no verl-agent checkout at {workdir(config)}", where="backend.workdir")
        run_dir = Path(run_dir).resolve()
        atomic_write_text(run_dir / DEVIATIONS, json.dumps(deviations(config, run_dir, resume=resume), indent=1) + "\n")
        write_panel(config, run_dir)
        for launch in launches(config, run_dir, resume=resume):
            run(launch, run_dir, launch.purpose.replace(" ", "_"))
        convert_training(run_dir, config)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        """The outcomes of the validation at `step` (training validates every evaluated step); if that file is
        missing (a checkpoint re-evaluated), verl's validate-only run of the checkpoint writes it first."""
        run_dir = Path(run_dir)
        config = runconfig.read_resolved_config(run_dir)
        if not (run_dir / VAL_DIR / f"{step}.jsonl").is_file():
            actor = checkpoints.verl_step_dir(run_dir, step) / "actor"
            if step and not any(actor.glob("model_world_size_*_rank_0.pt")):
                raise BadInput(f"no FSDP checkpoint of step {step} to validate (pruned during training or after its evaluation, "
                               "or never saved); "
                               "its Hugging Face copy can be served (eval.engine: served)", path=actor)
            write_panel(config, run_dir)
            for launch in launches(config, run_dir, eval_step=step):
                run(launch, run_dir, f"eval_step{step}_{launch.purpose.split()[0]}")
        return convert_eval(run_dir, step, config)
