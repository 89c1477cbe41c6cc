"""The run config (docs/internals.md "Manifest -> lock -> run config"): its shape, its hash, and the rules read
from it that every backend and the builtin trainer share.

* `load_run_config(path)`: the config written by `agentrepro resolve`, checked key by key.
* `resolve_config(config, defaults)`: the config deep-merged over the backend's defaults.
* `write_resolved_config(run_dir, resolved)` / `read_resolved_config(run_dir)`: resolved_config.yaml, with its hash
  in a header comment (`config_sha256`, over the canonical JSON of the document, so `config_file_sha256` recomputes it).
* `EvalConfig.of(config)`: the `eval` block, typed, with each evaluation default stated once; the dict stays what
  is written and hashed, this is how every reader reads it.
* `evaluated_steps(...)` / `checkpoint_steps(config)`: the one rule for which steps are evaluated, and therefore
  checkpointed; the builtin trainer saves exactly these, the plan (agentrepro.planning) evaluates exactly these,
  and a framework backend that cannot save them refuses the config.
* `step_rows(config)` / `step_rows_problem(...)`: `train.step_rows`, the training steps whose step rows and trainer
  advantages a job dumps for the parity certificate (analysis/parity.py), the same field for every backend.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentrepro.bounds import MAX_SEED
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text, sha256_json
from agentrepro.layout import METHOD_RE, SLUG_RE, RunFiles
from agentrepro.reading import load_yaml

RESOLVED = RunFiles.RESOLVED_CONFIG
SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
# Top-level keys of a run config (internals.md "Manifest -> lock -> run config").
RUN_CONFIG_KEYS = {
    "study",
    "title",
    "method",
    "seed",
    "lock",
    "backend",
    "image",
    "model",
    "env",
    "data",
    "train",
    "eval",
    "resources",
    "reference",
    "analysis",
}
MAPPING_KEYS = ("backend", "image", "model", "env", "data", "train", "eval", "resources", "analysis")


@dataclass(frozen=True)
class EvalConfig:
    """A run config's (or a manifest's) `eval` block, typed. Each default lives here and only here; the manifest
    schema's eval block names the same keys (tests/test_runconfig.py checks both ways). Built from the dict that is
    written and hashed, never written back: a default is what a reader assumes, not a value added to the config."""

    tasks: int | None = None
    first_seed: int | None = None
    episodes_per_task: int = 1
    temperature: float = 0
    top_p: float = 1.0
    max_turns: int | None = None  # None: the evaluator's own (the trainer's train.max_turns, the served DEFAULT)
    every: int | None = None
    checkpoint: str | int | list[int] = "last"
    sample_seed: int = 0
    engine: str = "backend"  # backend: the backend evaluates its checkpoints; served: agentrepro.serving does
    server: dict[str, Any] = field(default_factory=dict)
    keep_checkpoints: str = "hf"
    panel: str | None = None  # a panel of game files: which eligible games it takes (the manifest must say)
    task_panel: list[dict[str, Any]] | None = None  # the frozen panel, added by resolve from the lock

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, block: dict[str, Any] | None, *, path: object = None) -> EvalConfig:
        """The block's values over the defaults; an unknown key is BadInput naming `eval.<key>` (the values
        themselves were checked by the manifest schema when the study was frozen)."""
        block = block or {}
        for key in block:
            if key not in cls.keys():
                expected = ", ".join(sorted(cls.keys()))
                raise BadInput(f"unknown key (expected one of: {expected})", path=path, where=f"eval.{key}")
        return cls(**block)

    @classmethod
    def of(cls, config: dict[str, Any], *, path: object = None) -> EvalConfig:
        """The typed `eval` block of a run config or manifest (an absent block: every default)."""
        return cls.from_dict(config.get("eval"), path=path)

    @property
    def served(self) -> bool:
        return self.engine == "served"


def load_run_config(path: str | Path) -> dict[str, Any]:
    """Read and check a run config; BadInput names the file and the key path."""
    path = Path(path)
    config = load_yaml(path)
    validate_run_config(config, path)
    return config


def validate_run_config(config: Any, path: str | Path) -> None:
    if not isinstance(config, dict):
        raise BadInput(f"expected a mapping at the top level, got {type(config).__name__}", path=path)
    unknown = sorted(set(config) - RUN_CONFIG_KEYS)
    if unknown:
        raise BadInput(
            f"unknown key (expected one of {', '.join(sorted(RUN_CONFIG_KEYS))})", path=path, where=unknown[0]
        )
    for key, pattern, what in (("study", SLUG_RE, ""), ("method", METHOD_RE, ", optionally @ its backend")):
        value = config.get(key)
        if not isinstance(value, str) or not pattern.match(value):
            raise BadInput(
                f"expected a slug (letters, digits, '.', '_', '-'){what}, got {value!r}", path=path, where=key
            )
    seed = config.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise BadInput(f"expected an integer in [0, {MAX_SEED}], got {seed!r}", path=path, where="seed")
    for key in MAPPING_KEYS:
        if key in config and not isinstance(config[key], dict):
            raise BadInput(f"expected a mapping, got {type(config[key]).__name__}", path=path, where=key)
    backend = config.get("backend")
    if not isinstance(backend, dict) or not isinstance(backend.get("name"), str):
        raise BadInput(
            "expected a mapping with a string `name`",
            path=path,
            where="backend" if not isinstance(backend, dict) else "backend.name",
        )
    if "lock" in config:
        lock = config["lock"]
        if not isinstance(lock, dict) or set(lock) - {"path", "sha256"}:
            raise BadInput("expected {path, sha256}", path=path, where="lock")
        if not isinstance(lock.get("sha256"), str) or not SHA256_RE.match(lock["sha256"]):
            raise BadInput(
                f"expected 64 lowercase hex digits, got {lock.get('sha256')!r}", path=path, where="lock.sha256"
            )
        if not isinstance(lock.get("path"), str):
            raise BadInput("expected a path string", path=path, where="lock.path")
    if "train" in config and "steps" in config["train"]:
        steps = config["train"]["steps"]
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise BadInput(f"expected a non-negative integer, got {steps!r}", path=path, where="train.steps")


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A new dict: `base` updated recursively by `override` (mappings merge, everything else replaces)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve_config(config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    return deep_merge(defaults or {}, config)


def write_resolved_config(run_dir: Path, resolved: dict[str, Any]) -> str:
    """Write resolved_config.yaml atomically; returns its config_sha256."""
    digest = config_sha256(resolved)
    header = (
        f"# config_sha256: {digest}\n# (SHA-256 of the canonical JSON of this document: sorted keys, no whitespace)\n"
    )
    atomic_write_text(run_dir / RESOLVED, header + yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True))
    return digest


def read_resolved_config(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / RESOLVED
    if not path.is_file():
        raise BadInput(f"no {RESOLVED}: not a run directory written by `agentrepro train`", path=run_dir)
    resolved = load_yaml(path)
    validate_run_config(resolved, path)
    return resolved


def previous_config_sha(run_dir: Path) -> str | None:
    path = run_dir / RESOLVED
    if not path.is_file():
        return None
    try:
        return config_file_sha256(path)
    except BadInput:
        return None


# --- which steps are evaluated (and checkpointed) ---------------------------------------------------


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def evaluated_steps(
    train_steps: int,
    eval_block: EvalConfig | dict[str, Any],
    *,
    checkpoint_every: int | None = None,
    path: object = "manifest",
) -> list[int]:
    """The evaluated steps, which are also the saved checkpoints: 0 (the policy before RL), every `eval.every`
    steps, and `eval.checkpoint`: `last` (the default: train_steps), `all` (every `checkpoint_every` steps, else
    every step, and the last), one step, or a list of steps. Sorted, unique, none beyond `train_steps`.
    """
    if not isinstance(eval_block, EvalConfig):
        eval_block = EvalConfig.from_dict(eval_block, path=path)
    steps = {0}
    every = eval_block.every
    if every is not None:
        if not _positive_int(every):
            raise BadInput(f"expected a positive integer, got {every!r}", path=path, where="eval.every")
        steps.update(range(every, train_steps + 1, every))
    if checkpoint_every is not None and not _positive_int(checkpoint_every):
        raise BadInput(
            f"expected a positive integer, got {checkpoint_every!r}", path=path, where="train.checkpoint_every"
        )
    checkpoint = eval_block.checkpoint
    for value in checkpoint if isinstance(checkpoint, list) else [checkpoint]:
        if value == "last":
            steps.add(train_steps)
        elif value == "all":
            steps.update(range(0, train_steps + 1, checkpoint_every or 1))
            steps.add(train_steps)
        elif isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= train_steps:
            steps.add(value)
        else:
            raise BadInput(
                f"expected `last`, `all` or a step in [0, {train_steps}], got {value!r}",
                path=path,
                where="eval.checkpoint",
            )
    return sorted(steps)


def checkpoint_steps(config: dict[str, Any], *, path: object = None) -> list[int]:
    """`evaluated_steps` of a run config (train.steps, train.checkpoint_every, the eval block)."""
    train = config.get("train") or {}
    steps = train.get("steps", 0)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise BadInput(f"expected a non-negative integer, got {steps!r}", path=path, where="train.steps")
    return evaluated_steps(steps, config.get("eval") or {}, checkpoint_every=train.get("checkpoint_every"), path=path)


# --- the resolved-config hash ------------------------------------------------------------------------


def config_sha256(config: dict[str, Any]) -> str:
    """The resolved-config hash: SHA-256 of the canonical JSON of the config (sorted keys, no whitespace)."""
    return sha256_json(config)


def config_file_sha256(path: str | os.PathLike) -> str:
    """`config_sha256` of a YAML config file (e.g. resolved_config.yaml).

    Parsed with libyaml when PyYAML has it (the configs carry the whole task panel, and the pure-Python parser
    is ~200x slower than hashing), with the reading layer's checks (agentrepro.reading); errors name the line.
    """
    return config_sha256(load_yaml(path, fast=True))


# --- train.step_rows ----------------------------------------------------------------------------------


def step_rows_problem(step_rows, steps) -> str | None:
    if not isinstance(step_rows, (list, tuple)) or any(
        isinstance(s, bool) or not isinstance(s, int) for s in step_rows
    ):
        return f"expected a list of training steps, got {step_rows!r}"
    if (isinstance(steps, int) and any(not 1 <= s <= steps for s in step_rows)) or len(set(step_rows)) != len(
        step_rows
    ):
        return f"expected distinct training steps in [1, steps = {steps}], got {list(step_rows)}"
    return None


def step_rows(config: dict[str, Any]) -> list[int]:
    """The run config's train.step_rows, checked (BadInput naming the field), sorted."""
    train = config.get("train") or {}
    value = train.get("step_rows") or []
    message = step_rows_problem(value, train.get("steps"))
    if message:
        raise BadInput(message, where="train.step_rows")
    return sorted(value)
