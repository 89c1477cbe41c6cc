"""verl-agent's official ALFWorld launch scripts at 20bd331, and what the harness appends to them.

The harness runs the authors' own script (GraphGPO and graph-only: the recipe's
recipe/GraphGPO/run_qwen2.5_1.5b_alfworld_train.sh; GiGPO and GRPO: examples/{gigpo,grpo}_trainer/run_alfworld.sh)
and appends Hydra overrides after its own (each script passes "$@" through after its last override, and
Hydra's last value wins). `appended()` is that list, and it is the list of deviations from the official
recipe: every entry records the value the script sets (None: the script does not set the key) and why the
harness sets it. The lock and the report show it (docs/design.md §3.3).

The official scripts' facts (`SCRIPTS`, `COMMIT`, `ENGINE`) are backends/verl_agent/scripts.py's; `manifest_values` and
`appended` name every key the harness may append or compare with them (tests/backends/test_verl_recipes.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrepro.backends.verl_agent.scripts import COMMIT, SCRIPTS, Script
from agentrepro.errors import BadInput
from agentrepro.layout import checkpoint_dir
from agentrepro.runconfig import EvalConfig

# Manifest values -> the recipe's names. "{est}" is the method's estimator (gigpo / graphgpo sections).
TRAIN_KEYS: dict[str, str] = {
    "estimator": "algorithm.adv_estimator",
    "groups": "data.train_batch_size",
    "group_size": "env.rollout.n",
    "lr": "actor_rollout_ref.actor.optim.lr",
    "invalid_penalty": "actor_rollout_ref.actor.invalid_action_penalty_coef",
    "kl_coef": "actor_rollout_ref.actor.kl_loss_coef",
    "steps": "trainer.total_epochs",  # 1 step per epoch: the train parquet has `groups` rows (see prepare_args)
    "gamma": "algorithm.gamma",  # GiGPO's discount
    "omega": "algorithm.gamma",  # GraphGPO's ω: the recipe reads it as algorithm.gamma (its script sets 0.10)
    "episode_weight": "algorithm.{est}.episode_advantage_w",
    "step_weight": "algorithm.{est}.step_advantage_w",
    "mode": "algorithm.{est}.mode",
}


# A Hydra key as the composed config names it: dotted identifiers.
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# Characters a value may hold unquoted (Hydra reads such a word as it is) ...
PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@+-")
# ... and characters no value may hold, quoted or not. The official scripts pass their extra arguments as an unquoted
# $@ (run_qwen2.5_1.5b_alfworld_train.sh:78, run_alfworld.sh:71/67), where bash splits each word at blanks and expands
# *, ? and [...] against the checkout's files; Hydra resolves ${...} interpolations even inside quotes, and a quote
# or a backslash would end or escape Hydra's quoting.
REFUSED = frozenset(" \t\n\r\v\f'\"\\$*?[]")
# Words Hydra types as something other than text: quoted when the manifest means the text.
TYPED_WORDS = frozenset({"null", "true", "false", "inf", "+inf", "-inf", "nan"})


class Unrenderable(ValueError):
    """A value that no Hydra override word can carry as the manifest means it."""


# The framework's keys the harness computes with (the seed streams, the preflight's demands, the Ray head's ports and
# CPUs), each with the kind of number it must be and its least value: verl checks none of them before its workers
# start, and a string, a list, a zero or a negative size would reach the harness's arithmetic. The kinds are those of
# the composed defaults at 20bd331 (integers; the CPU share a float, 0.1); data.val_batch_size defaults to null there
# (one batch of the whole set), but the harness sizes the validation env workers by it. A null micro-batch is verl's
# own choice (it then reads the deprecated ppo_micro_batch_size).
COMPUTED: dict[str, tuple[type, int]] = {
    "data.train_batch_size": (int, 1),
    "data.val_batch_size": (int, 1),
    "env.rollout.n": (int, 1),
    "trainer.n_gpus_per_node": (int, 0),  # 0: no GPU worker; verl refuses it as its workers start, nothing here divides
    "trainer.nnodes": (int, 1),
    "env.resources_per_worker.num_cpus": (float, 0),
    "actor_rollout_ref.rollout.tensor_model_parallel_size": (int, 1),
    "actor_rollout_ref.rollout.n": (int, 1),
    "actor_rollout_ref.actor.ppo_mini_batch_size": (int, 1),
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": (int, 1),
}
NULLABLE = frozenset({"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"})


@dataclass(frozen=True)
class Override:
    """One appended Hydra override: `official` is the script's value as written (None: not set by it); `where` the
    manifest field it comes from (None: the harness's own); `add` for a key the composed config lacks and the
    framework reads with a default, which Hydra takes only as `+key=value`."""

    key: str
    value: Any
    why: str
    official: str | None
    where: str | None = None
    add: bool = False

    def word(self) -> str:
        """What reaches the official script's $@: `key=value` (`+key=value` for an added key), one word."""
        return f"{'+' if self.add else ''}{self.key}={hydra_value(self.value)}"

    def check(self, script: Script) -> None:
        """BadInput naming the manifest field when the key is not a key of the entry's composed config (or, added,
        one it has), or the value cannot reach Hydra through the script's unquoted $@ as the manifest means it."""
        where = self.where or self.key
        if not KEY.fullmatch(self.key):
            raise BadInput(
                f"{self.key!r} is not a Hydra key (dotted identifiers, as the composed config names them)", where=where
            )
        if (self.key in script.composed) == self.add:
            state = "already has" if self.add else "has no"
            raise BadInput(
                f"{script.entry}'s composed config at {COMMIT[:7]} {state} the key {self.key!r}", where=where
            )
        if self.key in COMPUTED and not (self.value is None and self.key in NULLABLE):
            kind, least = COMPUTED[self.key]
            number = isinstance(self.value, (int, float) if kind is float else int) and not isinstance(self.value, bool)
            if not number or not math.isfinite(self.value) or self.value < least:
                what = "a number" if kind is float else "an integer"
                raise BadInput(f"expected {what} of at least {least} ({self.key}), got {self.value!r}", where=where)
        try:
            self.word()
        except Unrenderable as exc:
            raise BadInput(
                f"{exc} (the official script passes its extra arguments unquoted, as $@: bash splits them at "
                "blanks and expands *, ? and [...]; Hydra resolves ${...} even in quotes)",
                where=where,
            ) from None

    def record(self) -> dict[str, Any]:
        return {
            "key": ("+" if self.add else "") + self.key,
            "value": self.value,
            "official": self.official,
            "why": self.why,
        }


def hydra_value(value: Any) -> str:
    """A Hydra override value: true/false, null, numbers, [a,b] lists of those, text as a plain word when Hydra reads
    it as that text, else single-quoted; Unrenderable for a mapping, a nested list or text holding `REFUSED`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (list, tuple, dict)) for v in value):
            raise Unrenderable("a nested list cannot be given as one override")
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        raise Unrenderable("a mapping cannot be given as one override: give one key per leaf")
    text = str(value)
    refused = sorted(set(text) & REFUSED)
    if refused:
        raise Unrenderable(f"{text!r} holds {' '.join(repr(c) for c in refused)}")
    if text and set(text) <= PLAIN and isinstance(typed(text), str) and text.lower() not in TYPED_WORDS:
        return text
    return f"'{text}'"


def typed(text: str) -> Any:
    """A script's value as Hydra types it: True/False, int, float, [a,b], else the text."""
    if text in ("True", "true", "False", "false"):
        return text in ("True", "true")
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if text.startswith("[") and text.endswith("]"):
        return [typed(part.strip().strip("'\"")) for part in text[1:-1].split(",") if part.strip()]
    return text


def script_for(config: dict[str, Any]) -> Script:
    estimator = (config.get("train") or {}).get("estimator")
    if estimator not in SCRIPTS:
        raise BadInput(
            f"verl-agent @ {COMMIT[:7]} has an official ALFWorld script for {', '.join(sorted(SCRIPTS))}, "
            f"not {estimator!r}",
            where="train.estimator",
        )
    return SCRIPTS[estimator]


def data_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "verl_data"


def prepare_args(config: dict[str, Any], run_dir: Path) -> list[str]:
    """The script's data-preparation arguments with the study's sizes and a private output directory."""
    script, train, evaluation = script_for(config), config.get("train") or {}, config.get("eval") or {}
    args = list(script.prepare)
    sizes = {"--train_data_size": train.get("groups"), "--val_data_size": evaluation.get("tasks")}
    for flag, value in sizes.items():
        if value is not None:
            args[args.index(flag) + 1] = str(value)
    return [*args, "--local_dir", str(data_dir(run_dir))]


def manifest_values(config: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(manifest field, recipe key, value) for every value the manifest states."""
    train, evaluation = config.get("train") or {}, config.get("eval") or {}
    estimator = train.get("estimator")
    out = []
    for field, key in TRAIN_KEYS.items():
        if field in train:
            out.append((f"train.{field}", key.format(est=estimator), train[field]))
    # the harness's own: checkpoint_every, step_rows (the integration), wandb (the logger override and agentrepro.tracking)
    unknown = sorted(set(train) - set(TRAIN_KEYS) - {"checkpoint_every", "step_rows", "wandb"})
    if unknown:
        raise BadInput(
            f"the verl-agent backend has no recipe setting for this (known: {', '.join(sorted(TRAIN_KEYS))})",
            where=f"train.{unknown[0]}",
        )
    if "temperature" in evaluation:
        temperature = evaluation["temperature"]
        out.append(("eval.temperature", "actor_rollout_ref.rollout.val_kwargs.temperature", temperature))
        out.append(("eval.temperature", "actor_rollout_ref.rollout.val_kwargs.do_sample", temperature > 0))
    if "tasks" in evaluation:
        out.append(("eval.tasks", "data.val_batch_size", evaluation["tasks"]))  # one validation env per panel task
    if "every" in evaluation:
        out.append(("eval.every", "trainer.test_freq", evaluation["every"]))
    max_turns = ((config.get("env") or {}).get("params") or {}).get("max_turns")
    if max_turns is not None:
        out.append(("env.params.max_turns", "env.max_steps", max_turns))
    gpus = (config.get("resources") or {}).get("gpus")
    if gpus is not None:
        out.append(("resources.gpus", "trainer.n_gpus_per_node", gpus))
    nodes = (config.get("resources") or {}).get("nodes")
    if nodes is not None:
        out.append(("resources.nodes", "trainer.nnodes", nodes))
    block, model = config.get("backend") or {}, config.get("model") or {}
    path = block.get("model_path") or model.get("name")
    if path is not None:
        out.append(
            ("backend.model_path" if block.get("model_path") else "model.name", "actor_rollout_ref.model.path", path)
        )
    return out


def save_freq(config: dict[str, Any]) -> int:
    """trainer.save_freq that saves exactly the evaluated steps after 0: eval.every (-1, no checkpoint, without it).

    verl saves after step s when save_freq > 0 and (s is the last step or s % save_freq == 0)
    (recipe/GraphGPO/graphgpo_ray_trainer.py:1318, verl/trainer/ppo/ray_trainer.py:1278 at 20bd331; `saved_steps`),
    and validates by the same rule with test_freq, plus step 0 before training. A verl-agent study evaluates exactly
    its validated steps (VerlAgentBackend.validate_config), so one cadence, test_freq's, covers them all; step 0 is
    the base model, never saved. `train.checkpoint_every` only widens `eval.checkpoint: all` (runconfig.evaluated_steps)."""
    every = EvalConfig.of(config).every
    return every if every else -1


def saved_steps(freq: int, steps: int) -> list[int]:
    """The steps verl-agent @ 20bd331 checkpoints with trainer.save_freq = `freq` over `steps` training steps."""
    return [s for s in range(1, steps + 1) if freq > 0 and (s == steps or s % freq == 0)]


# The validation envs' seeds start this far above env.seed (graphgpo_env_manager.py:734, env_manager.py:643 at 20bd331).
VAL_SEED_OFFSET = 1000
TRACKER = "latest_checkpointed_iteration.txt"  # written into default_local_dir at each save (ray_trainer.py:939)


def seed_stride(values: dict[str, Any]) -> int:
    """How far apart the env.seed of consecutive study seeds lie, so that their game streams are disjoint.

    Training env i of a job plays the stream of env.seed + i // env.rollout.n (i < data.train_batch_size x
    env.rollout.n: its group shares one stream), validation env i that of env.seed + VAL_SEED_OFFSET + i
    (i < data.val_batch_size) (recipe/GraphGPO/alfworld_envs.py:252 with graphgpo_env_manager.py:733-734;
    agent_system/environments/env_package/alfworld/envs.py:105 with env_manager.py:642-643). A job's streams lie in
    [env.seed, env.seed + stride) when stride >= data.train_batch_size and >= VAL_SEED_OFFSET + data.val_batch_size."""
    return max(int(values["data.train_batch_size"]), VAL_SEED_OFFSET + int(values["data.val_batch_size"]))


def seed_settings(config: dict[str, Any], values: dict[str, Any]) -> list[tuple[str, Any, str, bool]]:
    """(key, value, why, added) of every knob of the framework that the study's seed sets."""
    seed, stride = config["seed"], seed_stride(values)
    return [
        (
            "env.seed",
            seed * stride,
            f"seed x {stride}: the game streams of training env i (env.seed + i // env.rollout.n) and "
            f"validation env i (env.seed + {VAL_SEED_OFFSET} + i) of seed k lie in [k x {stride}, (k + 1) x {stride}), so no two "
            "seeds share one (alfworld_envs.py:252, graphgpo_env_manager.py:733-734)",
            False,
        ),
        (
            "actor_rollout_ref.rollout.seed",
            seed,
            "vLLM's sampling seed, of rollouts and validation alike (vllm_rollout_spmd.py:203 "
            "reads rollout.seed, default 0)",
            True,
        ),
        (
            "data.seed",
            seed,
            "the train dataloader's shuffle (main_graphgpo.py:241, main_ppo.py:242 read data.seed, default 1)",
            True,
        ),
    ]


def resumes(run_dir: Path) -> bool:
    """verl will resume this run: its checkpoint folder holds the tracker (trainer.resume_mode auto reads it)."""
    return (checkpoint_dir(run_dir) / TRACKER).is_file()


def appended(config: dict[str, Any], run_dir: Path, *, resume: bool) -> list[Override]:
    """The overrides the harness appends to the official script: its own settings always, a manifest value
    only where it differs from the script's, the seed's knobs (`seed_settings`); then backend.overrides. One entry
    per key (the last wins), each checked against the entry's composed config (`Override.check`)."""
    script, run_dir = script_for(config), Path(run_dir)  # absolute for a job; relative (runs/...) in the lock
    harness = [
        ("trainer.project_name", config["study"], "run name"),
        ("trainer.experiment_name", f"{config['method']}-seed{config['seed']}", "run name"),
        (
            (
                "trainer.logger",
                ["console", "wandb"],
                "W&B as the manifest asks (train.wandb), one run per run directory",
            )
            if (config.get("train") or {}).get("wandb")
            else (
                "trainer.logger",
                ["console"],
                "no account-bound logger (wandb) in a reproduction; metrics come from the integration",
            )
        ),
        ("trainer.default_local_dir", str(checkpoint_dir(run_dir)), "path: checkpoints inside the run directory"),
        ("data.train_files", str(data_dir(run_dir) / "text" / "train.parquet"), "path: this job's data preparation"),
        ("data.val_files", str(data_dir(run_dir) / "text" / "test.parquet"), "path: this job's data preparation"),
        ("trainer.save_freq", save_freq(config), "checkpoint cadence: the evaluated steps (the script saves none)"),
        (
            "actor_rollout_ref.actor.checkpoint.contents",
            ["model", "optimizer", "extra", "hf_model"],
            "a Hugging Face copy of each checkpoint, for evaluation outside verl",
        ),
        ("trainer.resume_mode", "auto" if resume else "disable", "resume an interrupted job from its checkpoints"),
    ]
    if resume and resumes(run_dir):
        harness.append(
            (
                "trainer.val_before_train",
                False,
                "a resumed job does not validate its resumed step again: verl "
                "validates at the loaded step before its loop (ray_trainer.py:1028-1033, graphgpo_ray_trainer.py:1049-1053), "
                "which would overwrite that step's outcomes",
            )
        )
    out: dict[str, Override] = {}
    for key, value, why in harness:
        out[key] = Override(key, value, why, _official(script, key))
    for field, key, value in manifest_values(config):
        official = _official(script, key)
        if official is not None and _same(typed(official), value):
            out.pop(key, None)  # the script already sets this value (a later field may still differ)
            continue
        out[key] = Override(key, value, f"manifest {field}", official, where=field)
    overrides = {
        key: Override(
            key, value, f"manifest backend.overrides.{key}", _official(script, key), where=f"backend.overrides.{key}"
        )
        for key, value in ((config.get("backend") or {}).get("overrides") or {}).items()
    }
    for override in overrides.values():
        override.check(script)
    for key, value, why, added in seed_settings(config, _values(script, [*out.values(), *overrides.values()])):
        official = _official(script, key)
        if official is not None and _same(typed(official), value):
            out.pop(key, None)
            continue
        out[key] = Override(key, value, why, official, where="seeds", add=added)
    out.update(overrides)
    for override in out.values():
        override.check(script)
    return list(out.values())


def composed(config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> dict[str, Any]:
    """The values the job's entry point runs with: its composed config, the script's overrides, then the appended."""
    return _values(script_for(config), appended(config, run_dir, resume=resume))


def _values(script: Script, overrides: list[Override]) -> dict[str, Any]:
    values = {**script.composed, **{key: typed(value) for key, (value, _) in script.official.items()}}
    values.update({o.key: o.value for o in overrides})
    return values


def _official(script: Script, key: str) -> str | None:
    return script.official[key][0] if key in script.official else None


def _same(official: Any, value: Any) -> bool:
    if isinstance(official, bool) or isinstance(value, bool):
        return official is value
    if isinstance(official, (int, float)) and isinstance(value, (int, float)):
        return float(official) == float(value)
    return official == value
