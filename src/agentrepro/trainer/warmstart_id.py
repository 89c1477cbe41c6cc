"""The identity of a shared warm start: what it depends on, hashed; and which warm starts a study plans.

The builtin trainer's supervised warm start (trainer/warmstart.py) and its step-0 evaluation read the run seed,
the model, the environment, the warm-start settings, the few other `train` fields the warm start uses
(`WARMSTART_TRAIN_KEYS`) and the evaluation settings (`WARMSTART_EVAL_KEYS`), and nothing of the RL method.
`identity(config)` hashes exactly those (after the backend's defaults and type coercion, so that a method
spelling a default out shares the warm start of one that leaves it implicit); methods of a seed with the same
identity share one warm start, a method that changes any of them gets its own. The frozen task panel is not
hashed (it is the lock's record of `eval.tasks`/`eval.first_seed` over the environment, both hashed), so the
identity is known from the manifest alone, before the study is frozen.

* `warmstart_config(resolved)`: the warm-start job's own config, from any method's resolved run config.
* `identity(config)`: SHA-256 (canonical JSON) of its identifying part.
* `planned_warmstarts(manifest)`: {(method, seed): identity} of every method that warm-starts with the
  builtin backend (`train.warmstart` true); the workflow plans one warm-start job per distinct (seed, identity).

Importing this module does not import torch (Snakemake imports it to plan the DAG).
"""

from __future__ import annotations

from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_json

BUILTIN = "builtin"
WARMSTART_METHOD = "warmstart"
"""The `method` of a warm start's own config and step-0 outcome rows (a run relabels them with its method)."""
WARMSTART_TRAIN_KEYS = (
    "warmstart", "warmstart_target", "warmstart_max_steps", "warmstart_lr", "warmstart_batch", "warmstart_eval_every",
    "warmstart_val_first_seed", "warmstart_val_seeds", "warmstart_actions_per_turn",
    # read by the demonstrations, the validation rollouts and the optimizer step of the warm start:
    "train_first_seed", "train_num_seeds", "mode", "max_turns", "max_new_tokens", "grad_clip",
    # the numbers themselves: device, precision and CPU threads change the bytes
    "device", "bf16", "threads",
)
WARMSTART_EVAL_KEYS = ("tasks", "first_seed", "episodes_per_task", "temperature", "top_p", "max_turns", "sample_seed")
"""The evaluation settings of step 0 (not `every`/`checkpoint`, which only say which later steps are evaluated)."""
UNHASHED_EVAL_KEYS = ("task_panel",)


def uses_warmstart(resolved: dict[str, Any]) -> bool:
    """Whether a resolved run config trains with the builtin backend and warm-starts (its warm start can be shared)."""
    return (resolved.get("backend") or {}).get("name") == BUILTIN and bool((resolved.get("train") or {}).get("warmstart"))


def warmstart_config(resolved: dict[str, Any], *, path: object = None) -> dict[str, Any]:
    """The warm-start job's config from a method's run config resolved over the builtin defaults: study, lock,
    backend, seed, model, env, and the warm-start part of `train` and `eval` (coerced by TrainConfig), with
    `method` = "warmstart". Every field the warm start and its evaluation read is here; nothing else is."""
    from agentrepro.environments import validate_params
    from agentrepro.trainer.config import TrainConfig

    if not uses_warmstart(resolved):
        raise BadInput("has no warm start to share (it needs backend builtin and train.warmstart: true)", path=path, where="train.warmstart")
    train = TrainConfig.from_dict(resolved.get("train") or {}, path=path).to_dict()
    env = resolved.get("env") or {}
    if "name" not in env:
        raise BadInput("missing key", path=path, where="env.name")
    evaluation = resolved.get("eval") or {}
    config: dict[str, Any] = {"study": resolved["study"], "method": WARMSTART_METHOD, "seed": resolved["seed"]}
    if "lock" in resolved:
        config["lock"] = resolved["lock"]
    config.update(backend={"name": BUILTIN}, model=resolved.get("model") or {},
                  env={"name": env["name"], "params": validate_params(env["name"], env.get("params") or {}, path=path)},
                  train={k: train[k] for k in WARMSTART_TRAIN_KEYS} | {"progress": train["progress"]},
                  eval={k: evaluation[k] for k in (*WARMSTART_EVAL_KEYS, *UNHASHED_EVAL_KEYS) if k in evaluation})
    return config


def identity(config: dict[str, Any]) -> str:
    """SHA-256 of what a warm start depends on: seed, model, env, the warm-start train keys, the step-0 eval keys.
    `config` is a warm-start config (`warmstart_config`)."""
    return sha256_json({"seed": config["seed"], "model": config["model"], "env": config["env"],
                        "train": {k: config["train"][k] for k in WARMSTART_TRAIN_KEYS},
                        "eval": {k: v for k, v in config["eval"].items() if k in WARMSTART_EVAL_KEYS}})


def planned_warmstarts(manifest: dict[str, Any], *, path: object = "manifest") -> dict[tuple[str, int], str]:
    """{(method, seed): warm-start identity} for every method x seed of the manifest that warm-starts with the
    builtin backend, each method's config resolved over the backend's defaults as `agentrepro train` resolves it."""
    from agentrepro.backends.base import get_backend
    from agentrepro.backends.runconfig import resolve_config
    from agentrepro.manifest.backends import placements

    planned: dict[tuple[str, int], str] = {}
    defaults = get_backend(BUILTIN).default_config()
    for method, placement in placements(manifest, path=path).items():
        if placement.backend["name"] != BUILTIN:  # each method on its own backend (manifest/backends.py)
            continue
        overrides = manifest["methods"][method]
        for seed in manifest["seeds"]:
            config = resolve_config({"study": manifest["study"], "seed": seed, "backend": placement.backend,
                                     "model": manifest.get("model") or {}, "env": manifest["env"],
                                     "train": {**manifest["train"], **(overrides or {})}, "eval": manifest.get("eval") or {}}, defaults)
            if uses_warmstart(config):
                planned[(method, seed)] = identity(warmstart_config(config, path=path))
    return planned
