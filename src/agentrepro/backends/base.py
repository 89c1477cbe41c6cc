"""The Backend interface and the registry that maps a backend name to its implementation.

A backend turns a resolved run config (docs/design.md §3.3, written by `agentrepro resolve` and completed with
the backend's defaults by `agentrepro train`) into the files of a run directory, and a checkpoint of that
run into outcome rows (docs/design.md §3.4). The verbs `train` and `eval` do all the bookkeeping around it
(resolved config, command, provenance attempts, validation, seals); a backend only trains and evaluates.

Registry: duplicate names are errors; an unknown name is a BadInput that lists the known ones. Entries
may be lazy ("module:attribute"), so that `agentrepro eval` of a command-backend run never imports torch.
Tests build their own `BackendRegistry` instead of changing the global one.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrepro import runconfig
from agentrepro.backends.launch import Launch
from agentrepro.errors import BadInput, Failure
from agentrepro.runconfig import checkpoint_steps

REQUIRED_METHODS = ("default_config", "train", "evaluate", "checkpoint_steps")


class Backend(abc.ABC):
    """One way of training and evaluating a method x seed.

    * `default_config()` -> a partial run config (same shape as the run config, e.g. {"train": {...}}),
      deep-merged *under* the run config: values given in the config win.
    * `validate_config(config)` raises BadInput naming the key path of anything the backend cannot use.
    * `train(config, run_dir, resume=True)` writes metrics.jsonl (one object per step, with `step`),
      timings.jsonl, checkpoints/ ... into run_dir; with resume it continues from the last checkpoint.
    * `evaluate(run_dir, step)` -> outcome rows (docs/design.md §3.4) of checkpoint `step`; it reads the run's
      resolved_config.yaml itself. It writes nothing: the `eval` verb validates and writes the rows.
    * `checkpoint_steps(config)` -> the steps whose checkpoints the backend saves and evaluates (0 = before
      training): `runconfig.checkpoint_steps(config)`, the steps the workflow plans. A backend whose framework
      cannot save exactly those refuses the config in `validate_config`.
    * `launches(config, run_dir, eval_step=None)` -> the external programs the job runs (backends/launch.py),
      for `agentrepro command` and `snakemake -n -p` to show before anything runs.
    * `deviations(config, run_dir)` -> what the job changes in the framework's official recipe, one record
      {key, value, official, why} per setting; freeze puts them in the lock for every method x seed.
    * `prompt_record(config, run_dir)` -> how the backend's policy is prompted (e.g. the chat template's
      sha256), written into the train and eval attempts' provenance; None when the backend does not say.
    """

    name: str = ""

    def default_config(self) -> dict[str, Any]:
        return {}

    def validate_config(self, config: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Raise BadInput (with the key path) for a config this backend cannot run."""

    @abc.abstractmethod
    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None: ...

    @abc.abstractmethod
    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]: ...

    def checkpoint_steps(self, config: dict[str, Any]) -> list[int]:
        return checkpoint_steps(config)

    def launches(self, config: dict[str, Any], run_dir: Path, *, eval_step: int | None = None) -> list[Launch]:
        """The external programs the train job (or, with `eval_step`, the evaluation of that step) runs, in
        order (backends/launch.py). Empty for a backend that trains inside agentrepro's own process."""
        return []

    def deviations(self, config: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
        """Settings the job changes in the framework's official recipe ({key, value, official, why}); [] if none."""
        return []

    def prompt_record(self, config: dict[str, Any], run_dir: Path) -> dict[str, Any] | None:
        """How the trained run's policy is prompted, for the attempts' provenance; None if the backend does not say."""
        return None


Factory = Callable[[], Any]


class BackendRegistry:
    """Names -> backend factories (a class, a callable, or a lazy "module:attribute" string)."""

    def __init__(self) -> None:
        self._entries: dict[str, Factory | str] = {}

    def register(self, name: str, factory: Factory | str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"backend name must be a non-empty string, got {name!r}")
        if name in self._entries:
            raise ValueError(f"backend {name!r} is already registered")
        self._entries[name] = factory

    def names(self) -> list[str]:
        return sorted(self._entries)

    def get(self, name: str) -> Any:
        """A new backend instance; BadInput (key `backend.name`) for an unknown name."""
        if name not in self._entries:
            raise BadInput(f"unknown backend {name!r} (known: {', '.join(self.names())})", where="backend.name")
        factory = self._entries[name]
        if isinstance(factory, str):
            factory = _load(name, factory)
        backend = factory() if callable(factory) else factory
        missing = [m for m in REQUIRED_METHODS if not callable(getattr(backend, m, None))]
        if missing:
            raise Failure(f"backend {name!r} ({type(backend).__name__}) lacks {', '.join(missing)}")
        return backend


def _load(name: str, spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise Failure(f"backend {name!r} cannot be loaded from {module_name}: {exc}") from exc
    if not hasattr(module, attribute):
        raise Failure(f"backend {name!r}: {module_name} defines no {attribute}")
    return getattr(module, attribute)


REGISTRY = BackendRegistry()
REGISTRY.register("builtin", "agentrepro.backends.builtin:BuiltinBackend")
REGISTRY.register("command", "agentrepro.backends.command:CommandBackend")
REGISTRY.register("verl-agent", "agentrepro.backends.verl_agent:VerlAgentBackend")
REGISTRY.register("relax", "agentrepro.backends.relax:RelaxBackend")


def get_backend(name: str, registry: BackendRegistry | None = None) -> Any:
    """The backend registered under `name` (internals.md: `get_backend(name) -> Backend`)."""
    return (registry or REGISTRY).get(name)
