"""The Backend interface: every fact about one way of training and evaluating, and what a job asks of it.

A backend turns a resolved run config (docs/design.md §3.3, written by `agentrepro resolve` and completed with
the backend's defaults by `agentrepro train`) into the files of a run directory, and a checkpoint of that
run into outcome rows (docs/design.md §3.4). The jobs (agentrepro.jobs) do all the bookkeeping around it
(resolved config, command, provenance attempts, validation, seals); a backend only trains and evaluates.

Facts, as class attributes, read by the manifest checks, the schema generator (backends/schema.py) and the plan:
* `block`: its manifest block (`backend:`), each key's JSON Schema with its description: the schema's
  `$defs.backend` is generated from these, so the schema and the code cannot disagree;
* `model_forms`: which model forms it takes (`builtin`: a config-built model or a local directory; `hub`: a hub
  model pinned by revision);
* `container`: whether its jobs run in a container image (agentrepro.containers): `required` (`image: {none: ...}` is
  refused), `optional`, or `never` (a backend that trains in the harness's own process has no program to wrap: only
  `image: {none: ...}`);
* `adapter`: a converter of this framework's outputs that the `command` backend may name (`adapter:`), or None;
* `shares_warmstart`: whether its runs can start from a shared warm start (`start_from`);
* `evaluates_in_training`: whether its framework evaluates the checkpoints during training, so that an eval job
  only converts what it wrote (and asks for no GPU: planning.CONVERT_RESOURCES).
* `saves_on_preempt_signal`: whether its training saves its step and stops on the signal SLURM sends before a job's
  time limit (agentrepro.process.PREEMPT_SIGNAL), so that its train jobs ask for that signal; the programs of the
  others run on with the signal ignored until the limit ends them.
* `spans_nodes`: whether one of its jobs may run over several nodes of a SLURM allocation (`resources.nodes` > 1: its
  Ray head on the first, a worker node on each other, backends/ray_nodes.py); the others' jobs are one node's.

What a job asks (methods):
* `default_config()` -> a partial run config, deep-merged *under* the run config (values given in the config win);
  `resolve(config)` -> the run config a job runs: that merge, then whatever default the backend derives from the
  config itself (the builtin backend's warm start and fast paths); every reader of a resolved config calls it.
* `check_block(block)` raises BadInput naming the key path of anything in its manifest block it cannot take (the base
  class refuses keys it does not declare); `validate_config(config)` the same for a whole run config.
* `train(config, run_dir, resume=True)` writes metrics.jsonl (one object per step, with `step`), timings.jsonl,
  checkpoints/ ... into run_dir; with resume it continues from the last checkpoint.
* `evaluate(run_dir, step)` -> outcome rows of checkpoint `step`; it reads the run's resolved_config.yaml itself
  and writes nothing (the eval job validates and writes the rows).
* `checkpoint_steps(config)` -> the steps whose checkpoints it saves and evaluates (0 = before training):
  `runconfig.checkpoint_steps(config)`, the steps the plan evaluates. A backend whose framework cannot save
  exactly those refuses the config in `validate_config`.
* `checkpoint(config, run_dir, step)` -> `StepCheckpoint`: which files hold checkpoint `step` (the Hugging Face
  directory a served evaluation reads, the weights an evaluation reads, the training state only a resume reads).
* `launches(config, run_dir, eval_step=None)` -> the external programs the job runs (backends/launch.py), for
  `agentrepro command` and `snakemake -n -p` to show before anything runs.
* `deviations(config, run_dir)` -> what the job changes in the framework's official recipe, one record
  {key, value, official, why} per setting; freeze puts them in the lock.
* `prompt_record(config, run_dir)` -> how the policy is prompted (e.g. the chat template's sha256), for the
  attempts' provenance; None when the backend does not say.
* `pruned_in_training(run_dir)` -> `PrunedInTraining`: every file its framework removed during training (the
  training state of older checkpoints) with its record line, None when it removes none.
* `demands(config, run_dir)` -> [`Demand`]: what the job's framework will ask for (Ray worker processes, CPUs it
  reserves in Ray, GPUs against its parallel sizes, KV heads and batch sizes, ports it hard-codes), each beside
  the manifest value it must fit; agentrepro.preflight checks them before anything is queued. [] when the
  backend states none.
* `seed_streams(config)` -> [`SeedStream`]: which random streams the run's seed reaches (`STREAMS`), and how.
* `start_from(run_dir, warmstart_dir, resolved)`: take a shared warm start as step 0 (builtin only).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from agentrepro import runconfig
from agentrepro.backends.launch import Launch
from agentrepro.errors import BadInput
from agentrepro.layout import hf_checkpoint
from agentrepro.placement import BUILTIN_FORM, HUB_FORM


@dataclass(frozen=True)
class Block:
    """A backend's manifest block: each key's JSON Schema (with a `description`), and the keys it requires."""

    keys: Mapping[str, dict[str, Any]]
    required: tuple[str, ...] = ()

    def __or__(self, other: Block) -> Block:
        return Block({**self.keys, **other.keys}, tuple(dict.fromkeys((*self.required, *other.required))))

    def check(self, block: dict[str, Any]) -> None:
        """BadInput naming the first key the block does not declare, or a required key it lacks."""
        unknown = sorted(set(block) - set(self.keys))
        if unknown:
            raise BadInput(f"unknown key (expected {', '.join(sorted(self.keys))})", where=f"backend.{unknown[0]}")
        missing = [key for key in self.required if key not in block]
        if missing:
            raise BadInput("missing required key", where=f"backend.{missing[0]}")


def text(description: str) -> dict[str, Any]:
    """A non-empty string key of a block."""
    return {"type": "string", "minLength": 1, "description": description}


# Every backend's block has these: its name, and the checkout whose algorithm files source parity pins.
COMMON = Block(
    {
        "name": {"description": "the backend"},
        "repo": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", "description": "GitHub owner/name"},
        "commit": {"$ref": "#/$defs/identifier"},
        "workdir": text(
            "checkout of the backend's repository (the framework backends; any backend that names sources)"
        ),
        "sources": {
            "type": "array",
            "minItems": 1,
            "uniqueItems": True,
            "items": {"type": "string", "minLength": 1},
            "description": "files of the backend checkout that implement the algorithm (repo-relative), for this "
            "backend's methods: freeze records their git blob hashes at backend.commit (per backend of the "
            "study), each job the hashes of what it ran, the audit compares them",
        },
    },
    required=("name",),
)


@dataclass(frozen=True)
class StepCheckpoint:
    """Checkpoint `step` of a run. `hf`: the model directory a served evaluation reads (None: none at this step);
    `weights`: paths inside the run directory that an evaluation reads; `state`: paths inside the run directory
    that only a resumed training reads."""

    step: int
    hf: Path | None
    weights: tuple[Path, ...] = ()
    state: tuple[Path, ...] = ()


@dataclass(frozen=True)
class PrunedInTraining:
    """What a framework removed during training: `files` maps each removed file (run-relative) to its record line
    ({step, saved, path, sha256, bytes}); `record` is the file those lines were read from."""

    record: Path
    files: Mapping[str, dict[str, Any]] = field(default_factory=dict)


AT_LEAST, DIVIDES, DIVISOR, EQUALS, FIXED = "at least", "divides", "divisor", "equals", "fixed"


@dataclass(frozen=True)
class Demand:
    """One number a job's framework needs, beside what the job asks for.

    `need` is what the framework's `key` demands (`source`: where the framework sets or uses it, file:line);
    `have` is the job's side: the value of the manifest `field`, or with `via` the number that field leads to (how:
    `via`, e.g. the framework key it sets), None when nothing limits it. `rule` is how they must relate: AT_LEAST (have >= need), DIVIDES (have divides need),
    DIVISOR (need divides have), FIXED (a port the framework hard-codes: `need` is the port, reserved when the job
    starts; nothing to compare). `what` names the row of the demand table."""

    what: str
    key: str
    need: int | float | str
    field: str
    have: int | float | str | None
    rule: str
    source: str
    via: str | None = None

    def holds(self) -> bool:
        if self.have is None or self.rule == FIXED:
            return True
        have, need = self.have, self.need
        if self.rule == EQUALS:
            return have == need
        if isinstance(have, str) or isinstance(need, str):
            raise ValueError(f"rule {self.rule!r} compares numbers, not {have!r} and {need!r}")
        if self.rule == AT_LEAST:
            return have >= need
        if self.rule == DIVIDES:
            return bool(have) and need % have == 0
        if self.rule == DIVISOR:
            return bool(need) and have % need == 0
        raise ValueError(f"unknown rule {self.rule!r}")

    def violation(self) -> str:
        """One line naming the manifest field, the framework's key and both numbers."""
        relation = {
            AT_LEAST: "exceeds it",
            DIVIDES: "is not a multiple of it",
            DIVISOR: "does not divide it",
            EQUALS: "is the only value it takes",
        }[self.rule]
        return f"{self.job_side()}: {self.key} = {_number(self.need)} {relation} ({self.what}; {self.source})"

    def job_side(self) -> str:
        """`field = have`, or `field -> via = have` when the field leads to the number through the framework."""
        return f"{self.field}{' -> ' + self.via if self.via else ''} = {_number(self.have)}"


def _number(value: int | float | str | None) -> str:
    return "not set" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))


STREAMS = ("environment games", "data order", "rollout sampling", "model initialisation", "evaluation sampling")


@dataclass(frozen=True)
class SeedStream:
    """Whether the run's seed reaches one random stream (`STREAMS`): `reached` True (set from the seed), False (the
    same for every seed: shared across seeds), None (the backend cannot tell); `how` names the knob or says why."""

    stream: str
    reached: bool | None
    how: str

    def record(self) -> dict[str, Any]:
        return {"stream": self.stream, "reached": self.reached, "how": self.how}


@dataclass(frozen=True)
class Adapter:
    """A framework's outputs converted into the run contract (docs/design.md §3.3, §3.4), for a run the `command`
    backend launched: `convert_training(run_dir, config)` writes metrics.jsonl and timings.jsonl,
    `convert_eval(run_dir, step, config)` returns the outcome rows of checkpoint `step`."""

    convert_training: Callable[[Path, dict[str, Any]], None]
    convert_eval: Callable[[Path, int, dict[str, Any]], list[dict[str, Any]]]


class Backend(abc.ABC):
    """One way of training and evaluating a method x seed (the module docstring lists what each member means)."""

    name: ClassVar[str] = ""
    block: ClassVar[Block] = COMMON
    model_forms: ClassVar[frozenset[str]] = frozenset({HUB_FORM})
    container: ClassVar[str] = "required"  # or "optional", "never"
    adapter: ClassVar[Adapter | None] = None
    shares_warmstart: ClassVar[bool] = False
    evaluates_in_training: ClassVar[bool] = False
    saves_on_preempt_signal: ClassVar[bool] = False
    spans_nodes: ClassVar[bool] = False

    @classmethod
    def create(cls, registry: Any) -> Backend:
        """A new instance; `registry` is the one it was found in (the command backend asks it for adapters)."""
        return cls()

    def default_config(self) -> dict[str, Any]:
        return {}

    def resolve(self, config: dict[str, Any]) -> dict[str, Any]:
        """`config` completed with this backend's defaults (a new dict; resolving a resolved config changes nothing)."""
        return runconfig.resolve_config(config, self.default_config())

    def check_block(self, block: dict[str, Any]) -> None:
        """Raise BadInput (with the key path) for a manifest block this backend cannot take, read alone (at load)."""
        self.block.check(block)

    def validate_config(self, config: dict[str, Any]) -> None:
        """Raise BadInput (with the key path) for a run config this backend cannot run."""
        self.check_block(config.get("backend") or {"name": self.name})

    @abc.abstractmethod
    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None: ...

    @abc.abstractmethod
    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]: ...

    def run_worker_node(self, config: dict[str, Any], run_dir: Path, key: str) -> None:
        """A worker node of the training in `run_dir` (a resolved `config`) on this node of its SLURM allocation, joined
        to the head `key` names, until that head stops (`spans_nodes` backends; the training's job starts it with
        `agentrepro node`). BadInput for a backend whose jobs are one node's."""
        raise BadInput(f"a job of {self.name} runs on one node: it has no worker nodes", where="resources.nodes")

    def replay(
        self, config: dict[str, Any], run_dir: Path, step: int, positions: list[int] | None = None
    ) -> list[dict[str, Any]]:
        """Checkpoint `step` of `run_dir` played again here by the backend's own evaluation on the frozen panel's
        tasks at `positions` (None: all), writing nothing: the rows `audit --re-eval` compares with the recorded
        outcomes (served outcomes go through the served evaluator instead: audit/reeval.py). BadInput saying why
        where it cannot be; by default, a framework's evaluation runs in its image on the hardware it needs."""
        raise BadInput(f"the {self.name} backend's evaluation runs in its framework's image, not here")

    def checkpoint_steps(self, config: dict[str, Any]) -> list[int]:
        return runconfig.checkpoint_steps(config)

    def checkpoint(self, config: dict[str, Any], run_dir: Path, step: int) -> StepCheckpoint:
        """checkpoints/hf/step<N>/ (layout.hf_checkpoint) unless the backend lays its checkpoints out otherwise."""
        hf = hf_checkpoint(run_dir, step)
        return StepCheckpoint(step, hf, weights=(hf,))

    def launches(self, config: dict[str, Any], run_dir: Path, *, eval_step: int | None = None) -> list[Launch]:
        """The external programs the train job (or, with `eval_step`, the evaluation of that step) runs, in
        order. Empty for a backend that trains inside agentrepro's own process."""
        return []

    def deviations(self, config: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
        """Settings the job changes in the framework's official recipe ({key, value, official, why}, and `source`
        where the official value is not the launch script's); [] if none."""
        return []

    def prompt_record(self, config: dict[str, Any], run_dir: Path) -> dict[str, Any] | None:
        """How the trained run's policy is prompted, for the attempts' provenance; None if the backend does not say."""
        return None

    def pruned_in_training(self, run_dir: Path) -> PrunedInTraining | None:
        """The files the framework removed during training, with their record; None when it removes none."""
        return None

    def last_saved_step(self, run_dir: Path) -> int | None:
        """The last training step whose state the run has on disk (what a retry resumes from), as the framework's own
        checkpoints say; None when there is none or the backend cannot tell. A stopped attempt records it."""
        return None

    def run_file(self, rel: PurePosixPath) -> bool | None:
        """Whether a sealed file at `rel` in a run directory (relative to it, eval/step<N>/ included; not one of the
        harness's own files, which every run holds) is one this backend's jobs write. None, the default, where the
        framework writes files of its own choosing: the audit then cannot tell a file added after the run from one of
        the framework's."""
        return None

    def demands(self, config: dict[str, Any], run_dir: Path) -> list[Demand]:
        """What the job's framework will ask for, each beside the manifest value it must fit; [] if none is stated."""
        return []

    def mounted_fields(self, config: dict[str, Any]) -> dict[str, str]:
        """The fields of the backend block whose paths the job's container mounts (field -> path), besides the
        checkout, data and model every container mounts (containers.mounted_fields); freeze applies the mount rule
        to each."""
        return {}

    def seed_streams(self, config: dict[str, Any]) -> list[SeedStream]:
        """Which random streams the seed reaches; by default the backend cannot tell for any of them."""
        return [SeedStream(stream, None, f"not stated by the {self.name} backend") for stream in STREAMS]

    def start_from(self, run_dir: Path, warmstart_dir: Path, resolved: dict[str, Any]) -> None:
        """Take the shared warm start in `warmstart_dir` as this run's step 0 (only when `shares_warmstart`)."""
        raise BadInput(f"the {self.name} backend does not start from a shared warm start", where="backend.name")


__all__ = [
    "AT_LEAST",
    "BUILTIN_FORM",
    "COMMON",
    "DIVIDES",
    "DIVISOR",
    "EQUALS",
    "FIXED",
    "HUB_FORM",
    "STREAMS",
    "Adapter",
    "Backend",
    "Block",
    "Demand",
    "PrunedInTraining",
    "SeedStream",
    "StepCheckpoint",
    "text",
]
