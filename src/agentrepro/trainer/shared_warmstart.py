"""A warm start shared by every method of a seed: what it depends on, and how each run adopts it and its step 0.

The builtin trainer's supervised warm start (trainer/warmstart.py) and its step-0 evaluation read the run seed,
the model, the environment, the warm-start settings, the few other `train` fields the warm start uses
(`WARMSTART_TRAIN_KEYS`) and the evaluation settings (`WARMSTART_EVAL_KEYS`), and nothing of the RL method.
`identity(config)` hashes exactly those (after the backend's defaults and type coercion, so that a method
spelling a default out shares the warm start of one that leaves it implicit); methods of a seed with the same
identity share one warm start (agentrepro.planning plans one per distinct seed and identity), a method that
changes any of them gets its own. The frozen task panel is not hashed (it is the lock's record of
`eval.tasks`/`eval.first_seed` over the environment, both hashed), so the identity is known from the manifest
alone, before the study is frozen.

* `warmstart_config(resolved)`: the warm-start job's own config, from any method's resolved run config;
  `identity(config)`: SHA-256 (canonical JSON) of its identifying part. The warm start itself is made by
  `trainer.warmstart.make_warmstart`: checkpoints/tokenizer/, checkpoints/step0.pt (the weights, the global torch
  random state after the warm start, no optimizer), warmstart.json, and the step-0 outcomes eval/step0/outcomes.jsonl.
* `adopt(run_dir, warmstart_dir, resolved)`: a fresh run takes the warm start's tokenizer and step-0 checkpoint as
  its own, byte for byte (so a run's sealed checkpoints/step0.pt hashes as its warm start's does: the audit's
  check), and records where it came from in its warmstart.json (`shared`). The trainer then resumes from that
  step 0 exactly as an uninterrupted run continues after its own warm start. A run that already has
  checkpoints must have come from this warm start.
* `step0_rows(run_dir, config)`: a run's step-0 outcomes are its warm start's, relabelled with the run's study and
  method (the same weights on the same panel with the same sampling seeds: evaluated once, not once per method).

A warm start is used only when its seal still verifies, its last attempt ended ok, and its identity equals the
identity of the run's own settings; otherwise BadInput names the folder and what differs. Importing this module does
not import torch (the plan computes identities when Snakemake builds the DAG).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from agentrepro.attempts import read_provenance
from agentrepro.environments import validate_params
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_json, atomic_write_jsonl, sha256_file, sha256_json
from agentrepro.layout import RunFiles, checkpoint_dir, checkpoint_file, outcomes_path, tokenizer_dir
from agentrepro.reading import load_json, read_jsonl
from agentrepro.seal import OUTPUTS, verify_outputs
from agentrepro.trainer.config import TrainConfig

BUILTIN = "builtin"
WARMSTART_METHOD = "warmstart"
"""The `method` of a warm start's own config and step-0 outcome rows (a run relabels them with its method)."""
WARMSTART_TRAIN_KEYS = (
    "warmstart",
    "warmstart_target",
    "warmstart_max_steps",
    "warmstart_lr",
    "warmstart_batch",
    "warmstart_eval_every",
    "warmstart_val_first_seed",
    "warmstart_val_seeds",
    "warmstart_actions_per_turn",
    # read by the demonstrations, the validation rollouts and the optimizer step of the warm start:
    "train_first_seed",
    "train_num_seeds",
    "mode",
    "max_turns",
    "max_new_tokens",
    "grad_clip",
    # the numbers themselves: device, precision and CPU threads change the bytes
    "device",
    "bf16",
    "threads",
)
WARMSTART_EVAL_KEYS = ("tasks", "first_seed", "episodes_per_task", "temperature", "top_p", "max_turns", "sample_seed")
"""The evaluation settings of step 0 (not `every`/`checkpoint`, which only say which later steps are evaluated)."""
UNHASHED_EVAL_KEYS = ("task_panel",)


def uses_warmstart(resolved: dict[str, Any]) -> bool:
    """Whether a resolved run config trains with the builtin backend and warm-starts (its warm start can be shared)."""
    return (resolved.get("backend") or {}).get("name") == BUILTIN and bool(
        (resolved.get("train") or {}).get("warmstart")
    )


def warmstart_config(resolved: dict[str, Any], *, path: object = None) -> dict[str, Any]:
    """The warm-start job's config from a method's run config resolved over the builtin defaults: study, lock,
    backend, seed, model, env, and the warm-start part of `train` and `eval` (coerced by TrainConfig), with
    `method` = "warmstart". Every field the warm start and its evaluation read is here; nothing else is."""
    if not uses_warmstart(resolved):
        raise BadInput(
            "has no warm start to share (it needs backend builtin and train.warmstart: true)",
            path=path,
            where="train.warmstart",
        )
    train = TrainConfig.from_dict(resolved.get("train") or {}, path=path).to_dict()
    env = resolved.get("env") or {}
    if "name" not in env:
        raise BadInput("missing key", path=path, where="env.name")
    evaluation = resolved.get("eval") or {}
    config: dict[str, Any] = {"study": resolved["study"], "method": WARMSTART_METHOD, "seed": resolved["seed"]}
    if "lock" in resolved:
        config["lock"] = resolved["lock"]
    config.update(
        backend={"name": BUILTIN},
        model=resolved.get("model") or {},
        env={"name": env["name"], "params": validate_params(env["name"], env.get("params") or {}, path=path)},
        train={k: train[k] for k in WARMSTART_TRAIN_KEYS} | {"progress": train["progress"]},
        eval={k: evaluation[k] for k in (*WARMSTART_EVAL_KEYS, *UNHASHED_EVAL_KEYS) if k in evaluation},
    )
    return config


def identity(config: dict[str, Any]) -> str:
    """SHA-256 of what a warm start depends on: seed, model, env, the warm-start train keys, the step-0 eval keys.
    `config` is a warm-start config (`warmstart_config`)."""
    return sha256_json(
        {
            "seed": config["seed"],
            "model": config["model"],
            "env": config["env"],
            "train": {k: config["train"][k] for k in WARMSTART_TRAIN_KEYS},
            "eval": {k: v for k, v in config["eval"].items() if k in WARMSTART_EVAL_KEYS},
        }
    )


RECORD = RunFiles.WARMSTART


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target, start)).as_posix()


def check_warmstart(warmstart_dir: Path, resolved: dict[str, Any]) -> str:
    """The warm start's identity, after checking that it is sealed, unchanged, finished and made with `resolved`'s settings."""
    seal = warmstart_dir / OUTPUTS
    if not seal.is_file():
        raise BadInput(
            f"no {OUTPUTS}: not a finished warm start (run `agentrepro warmstart` first)", path=warmstart_dir
        )
    problems = verify_outputs(seal)
    if problems:
        raise BadInput(f"changed after it was sealed: {problems[0]}", path=warmstart_dir)
    if read_provenance(warmstart_dir).get("status") != "ok":
        raise BadInput("its last attempt did not end ok", path=warmstart_dir / RunFiles.PROVENANCE)
    theirs = read_provenance(warmstart_dir).get("warmstart_identity")
    mine = identity(warmstart_config(resolved))
    if theirs != mine:
        raise BadInput(
            f"made with other settings (identity {str(theirs)[:12]}, this run's seed, model, env and warm-start "
            f"settings give {mine[:12]}): use the warm start of this run's settings",
            path=warmstart_dir,
        )
    return mine


def adopt(run_dir: Path, warmstart_dir: Path, resolved: dict[str, Any]) -> dict[str, Any]:
    """Make the warm start the starting point of `run_dir` (fresh), or check that it already is (resuming)."""
    run_dir, warmstart_dir = Path(run_dir), Path(warmstart_dir)
    ident = check_warmstart(warmstart_dir, resolved)
    source = checkpoint_file(warmstart_dir, 0)
    shared = {
        "dir": _relative(warmstart_dir, run_dir),
        "identity": ident,
        "checkpoint_sha256": sha256_file(source),
        "outputs_sha256": sha256_file(warmstart_dir / OUTPUTS),
    }
    if checkpoint_dir(run_dir).is_dir() and any(checkpoint_dir(run_dir).iterdir()):
        recorded = load_json(run_dir / RECORD).get("shared") if (run_dir / RECORD).is_file() else None
        if not isinstance(recorded, dict) or recorded.get("checkpoint_sha256") != shared["checkpoint_sha256"]:
            raise BadInput(
                "this run's checkpoints did not start from this warm start (pass --no-resume to start again from it)",
                path=run_dir / RECORD,
            )
        return recorded
    target = checkpoint_dir(run_dir)
    target.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer_dir(run_dir)
    tmp = tokenizer.with_name(f".{tokenizer.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(tokenizer_dir(warmstart_dir), tmp)
    tmp.rename(tokenizer)
    for name in RunFiles.STEP_LOGS:
        (run_dir / name).unlink(missing_ok=True)
    for name in (RunFiles.METRICS, RunFiles.TIMINGS):
        atomic_write_jsonl(run_dir / name, [])
    atomic_write_json(run_dir / RECORD, {**load_json(warmstart_dir / RECORD), "shared": shared})
    step0 = checkpoint_file(run_dir, 0)
    copied = step0.with_name(f".{step0.name}.tmp")
    shutil.copyfile(source, copied)
    copied.rename(step0)  # last: a run with a step-0 checkpoint has everything it resumes from
    return shared


def shared_record(run_dir: Path) -> dict[str, Any] | None:
    """The `shared` block of a run's warmstart.json: where its warm start is (relative to the run), or None."""
    path = Path(run_dir) / RECORD
    return load_json(path).get("shared") if path.is_file() else None


def step0_rows(run_dir: Path, config: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The run's step-0 outcomes: its warm start's rows with the run's study and method; None for a run that
    warm-started itself (it evaluates its own step 0)."""
    shared = shared_record(run_dir)
    if shared is None:
        return None
    warmstart_dir = Path(run_dir) / shared["dir"]
    check_warmstart(warmstart_dir, config)
    mine = sha256_file(checkpoint_file(run_dir, 0))
    if mine != shared["checkpoint_sha256"] or sha256_file(checkpoint_file(warmstart_dir, 0)) != mine:
        raise BadInput("this run's step-0 checkpoint is not its warm start's", path=checkpoint_file(run_dir, 0))
    return [
        {**row, "study": config["study"], "method": config["method"]}
        for row in read_jsonl(outcomes_path(warmstart_dir, 0))
    ]
