"""Every hyperparameter of the builtin trainer in one frozen dataclass (the manifest's `train` block).

Each field is typed, defaulted and documented in one line; `TrainConfig.from_dict` rejects unknown keys
and wrong types with a BadInput naming `train.<key>`. The estimator's options are not written here: one
field per option of agentrepro.algorithms.spec (name, type, default, allowed values) is added right after
`estimator`, and validated from the same declarations. Integer fields are bounded (`INTEGER_BOUNDS`).
workflow/schemas/train_config.schema.json mirrors these fields (its estimator part and the integer bounds are written
by `python -m agentrepro.trainer.schema`; tests keep it in step).
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_type_hints

from agentrepro import runconfig
from agentrepro.algorithms import spec
from agentrepro.algorithms.spec import SPECS, EstimatorSpec, Option, all_options, trainer_specs
from agentrepro.bounds import MAX_SEED, MAX_TRAIN_STEPS
from agentrepro.errors import BadInput

SPECS_BY_NAME: dict[str, EstimatorSpec] = {s.name: s for s in trainer_specs()}
"""The estimators a config may name (variants such as graph_only are named by their parent and pinned options)."""
ESTIMATORS = tuple(SPECS_BY_NAME)
ESTIMATOR_OPTIONS: tuple[Option, ...] = all_options(tuple(SPECS_BY_NAME.values()))
"""One TrainConfig field each, right after `estimator`."""


MAX_BATCH_TRAJECTORIES = 1_000_000  # groups x group_size: trajectories sampled per step

# Every integer field with its smallest and largest value: the largest bound what a manifest can ask of any backend
# (a batch, a sequence, a count of processes or threads). train_config.schema.json states the same (trainer/schema.py
# writes them).
INTEGER_BOUNDS: dict[str, tuple[int, int]] = {
    "steps": (0, MAX_TRAIN_STEPS),
    "groups": (1, MAX_BATCH_TRAJECTORIES),
    "group_size": (1, MAX_BATCH_TRAJECTORIES),
    "epochs": (1, 1_000),
    "minibatches": (1, MAX_BATCH_TRAJECTORIES),
    "max_turns": (1, 1_000_000),
    "max_new_tokens": (1, 1_000_000),
    "train_first_seed": (0, MAX_SEED),
    "train_num_seeds": (1, 1_000_000),
    "warmstart_max_steps": (0, MAX_TRAIN_STEPS),
    "warmstart_batch": (1, 1_000_000),
    "warmstart_eval_every": (1, MAX_TRAIN_STEPS),
    "warmstart_val_first_seed": (0, MAX_SEED),
    "warmstart_val_seeds": (1, 1_000_000),
    "warmstart_actions_per_turn": (1, 1_000),
    "micro_batch_tokens": (0, 1_000_000_000),
    "threads": (1, 1_024),
    "data_parallel": (0, 1_024),
    "checkpoint_every": (1, MAX_TRAIN_STEPS),
    "dump_batches_every": (0, MAX_TRAIN_STEPS),
}


def _with_estimator_options(cls):
    """Declare one field per estimator option (type and default from its spec) right after `estimator`."""
    annotations = {}
    for name, hint in inspect.get_annotations(cls).items():
        annotations[name] = hint
        if name == "estimator":
            for option in ESTIMATOR_OPTIONS:
                annotations[option.name] = option.type
                setattr(cls, option.name, option.default)
    cls.__annotations__ = annotations
    return cls


@dataclass(frozen=True)
@_with_estimator_options
class TrainConfig:
    # --- algorithm -------------------------------------------------------------------------------
    estimator: str = "grpo"  # advantage estimator (agentrepro.algorithms.spec): grpo | gigpo | graphgpo | ppo
    # ... + one field per estimator option (norm, gamma, omega, lam, value_coef, ...: see ESTIMATOR_OPTIONS)
    if TYPE_CHECKING:  # those fields as the type checker sees them (tests/trainer/test_config.py holds them equal)
        norm: str = spec.NORM.default
        invalid_penalty: float = spec.INVALID_PENALTY.default
        episode_stats: str = spec.EPISODE_STATS.default
        epsilon: float = spec.EPSILON.default
        episode_weight: float = spec.EPISODE_WEIGHT.default
        gamma: float = spec.GAMMA.default
        step_weight: float = spec.STEP_WEIGHT.default
        omega: float = spec.OMEGA.default
        reward_form: str = spec.REWARD_FORM.default
        lam: float = spec.LAM.default
        value_coef: float = spec.VALUE_COEF.default
    steps: int = 150  # RL training steps (policy updates) after the warm start
    groups: int = 16  # tasks (environment seeds) per step
    group_size: int = 8  # trajectories sampled per task
    lr: float = 2.0e-4  # Adam learning rate of the RL stage
    lr_schedule: str = "constant"  # constant | linear (decays to 0 at `steps`)
    weight_decay: float = 0.0  # AdamW weight decay of the RL stage
    clip_ratio: float = 0.2  # PPO-clip epsilon
    kl_coef: float = 0.0  # coefficient of the k3 KL to the initial (post-warm-start) policy; 0 = not computed
    entropy_coef: float = 0.0  # entropy bonus coefficient
    grad_clip: float = 1.0  # max global gradient norm
    epochs: int = 1  # passes over each rollout batch
    minibatches: int = 1  # optimizer steps per epoch
    # --- rollouts --------------------------------------------------------------------------------
    mode: str = "concat"  # concat (one growing sequence per trajectory) | non_concat (one row per turn)
    max_turns: int = 5  # agent turns per episode
    max_new_tokens: int = 6  # generated tokens per turn (including the end-of-turn token); the builtin backend's default is PRETRAINED_TURN_TOKENS for a model.path model
    temperature: float = 1.0  # sampling temperature of training rollouts
    format_reward: float | None = (
        0.0  # environment format reward during RL rollouts (None keeps the env's); eval always uses the env's
    )
    train_first_seed: int = 0  # training tasks are drawn uniformly from [train_first_seed, +train_num_seeds)
    train_num_seeds: int = 10000  # size of the training seed range (disjoint from eval and warm-start validation)
    # --- supervised warm start on BFS demonstrations -----------------------------------------------
    warmstart: bool = True  # run the warm start (identical for every method of a seed); the builtin backend's default is off for a model.path model
    warmstart_target: float = 0.45  # stop once greedy success on the validation seeds reaches this
    warmstart_max_steps: int = 400  # hard cap on warm-start optimizer steps
    warmstart_lr: float = 2.0e-3  # Adam learning rate of the warm start
    warmstart_batch: int = 64  # demonstrations per warm-start step
    warmstart_eval_every: int = 5  # validate every this many warm-start steps
    warmstart_val_first_seed: int = 20001  # first validation seed (disjoint from eval 10001+ and train seeds)
    warmstart_val_seeds: int = 128  # number of validation seeds
    warmstart_actions_per_turn: int = 5  # actions per demonstrated turn (whole shortest path when >= its length)
    # --- execution -------------------------------------------------------------------------------
    device: str = "cpu"  # cpu | cuda | cuda:N
    bf16: bool = True  # bf16 autocast on CUDA (ignored on the CPU)
    rollout_engine: str = "auto"  # eager (transformers forward per token) | static (trainer/decode.py: static KV cache, CUDA graph) | auto (static on CUDA for Qwen2-family models, else eager)
    update_kernels: str = "auto"  # eager | compiled (trainer/kernels.py: Qwen2 RMSNorm and silu(gate) * up through torch.compile) | auto (FAST_UPDATE)
    update_precision: str = "auto"  # fp32 (the update on the float32 policy) | bf16-master (on a bf16 copy; float32 master weights, gradients and AdamW step: trainer/precision.py) | auto (FAST_UPDATE)
    micro_batch_tokens: int = 0  # padded tokens per forward/backward pass of the update and the warm start (gradients accumulated); 0 = auto: a whole minibatch at once on the CPU, on CUDA what the device's memory holds (trainer/memory.py)
    grad_checkpointing: bool = False  # activation checkpointing in the update's forward (memory for compute)
    threads: int = 1  # torch intra-op threads on the CPU
    data_parallel: int = 0  # data-parallel ranks (trainer/parallel.py): 0 = one per GPU the job is given (resources.gpus) on CUDA, one on the CPU; N = N ranks (gloo processes on the CPU)
    checkpoint_every: int = (
        50  # eval.checkpoint: all evaluates (and so checkpoints) every this many steps (runconfig.evaluated_steps)
    )
    dump_batches_every: int = 0  # write batches/step<N>.jsonl (step rows with advantages) every N steps; 0 = never
    step_rows: tuple[
        int, ...
    ] = ()  # steps whose step rows and trainer advantages go to batches/step<N>.jsonl for the parity certificate (every backend)
    progress: bool = True  # tqdm progress bars
    wandb: bool = False  # also log to Weights & Biases (offline unless WANDB_MODE says otherwise)

    # --- derived values --------------------------------------------------------------------------
    @property
    def batch_trajectories(self) -> int:
        """Trajectories per step: groups x group_size."""
        return self.groups * self.group_size

    @property
    def estimator_spec(self) -> EstimatorSpec:
        return SPECS_BY_NAME[self.estimator]

    @property
    def estimator_options(self) -> dict[str, Any]:
        """The options the configured estimator takes, with this config's values."""
        return {o.name: getattr(self, o.name) for o in self.estimator_spec.options}

    @property
    def uses_value(self) -> bool:
        """Whether the policy's value head is trained and used (an estimator that needs a critic)."""
        return self.estimator_spec.needs_critic

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, path: object = None, where: str = "train") -> TrainConfig:
        """Build from a mapping; unknown keys, wrong types and out-of-range values raise BadInput."""
        data = dict(data or {})
        hints = get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in names:
                raise BadInput(
                    f"unknown key (expected one of: {', '.join(sorted(names))})", path=path, where=f"{where}.{key}"
                )
        values = {}
        for key, value in data.items():
            values[key] = _coerce(value, hints[key], path, f"{where}.{key}")
        config = cls(**values)
        config.validate(path=path, where=where)
        return config

    def to_dict(self) -> dict[str, Any]:
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }  # YAML/JSON lists

    def validate(self, *, path: object = None, where: str = "train") -> None:
        def bad(key: str, expected: str) -> None:
            raise BadInput(f"expected {expected}, got {getattr(self, key)!r}", path=path, where=f"{where}.{key}")

        if self.estimator not in SPECS_BY_NAME:
            variants = [
                f"{s.name} is {s.variant_of} with {', '.join(f'{k} {v:g}' for k, v in s.fixed.items())}"
                for s in SPECS
                if s.variant_of
            ]
            bad("estimator", "one of " + ", ".join(ESTIMATORS) + "".join(f" ({v})" for v in variants))
        for option in ESTIMATOR_OPTIONS:
            expected = option.expected(getattr(self, option.name))
            if expected:
                bad(option.name, expected)
        choices = {
            "lr_schedule": ("constant", "linear"),
            "mode": ("concat", "non_concat"),
            "rollout_engine": ("auto", "eager", "static"),
            "update_kernels": ("auto", "eager", "compiled"),
            "update_precision": ("auto", "fp32", "bf16-master"),
        }
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                bad(key, "one of " + ", ".join(allowed))
        for key, (low, high) in INTEGER_BOUNDS.items():
            if not low <= getattr(self, key) <= high:
                bad(key, f"an integer in [{low:,}, {high:,}]")
        for key in ("lr", "warmstart_lr", "clip_ratio", "grad_clip", "temperature"):
            if not getattr(self, key) > 0:
                bad(key, "a number > 0")
        for key in ("warmstart_target",):
            if not 0 <= getattr(self, key) <= 1:
                bad(key, "a number in [0, 1]")
        for key in ("kl_coef", "entropy_coef", "weight_decay"):
            if getattr(self, key) < 0:
                bad(key, "a number >= 0")
        message = runconfig.step_rows_problem(self.step_rows, self.steps)
        if message:
            raise BadInput(message, path=path, where=f"{where}.step_rows")
        if self.batch_trajectories > MAX_BATCH_TRAJECTORIES:
            bad("group_size", f"groups x group_size at most {MAX_BATCH_TRAJECTORIES:,} (groups is {self.groups:,})")
        if self.minibatches > self.batch_trajectories:
            bad("minibatches", f"at most groups x group_size = {self.batch_trajectories}")


AUTO = "auto"
FAST_UPDATE = {"update_precision": "bf16-master", "update_kernels": "compiled"}
"""What `auto` means on CUDA: the update's measured fast path (benchmarks/RESULTS.md, "bf16 weights with float32
master weights": 33-37% of the bf16 peak at 0.5B against 27-28%, and the only way a 1.5B update fits an H200 without
checkpointing). Compiled kernels only for a Qwen2 model with silu (trainer/kernels.py); the CPU keeps fp32 eager
(bit-exact resume, the path every CPU test checks)."""
PLAIN_UPDATE = {"update_precision": "fp32", "update_kernels": "eager"}


def resolve_auto(train: dict[str, Any], *, qwen2_silu: bool) -> dict[str, Any]:
    """`train` (a mapping of TrainConfig fields) with each `auto` of FAST_UPDATE's keys replaced by its value for the
    device (`train.device`, default cpu) and the model (`qwen2_silu`: a Qwen2 model with silu, which compiled kernels
    need); stated values are kept."""
    cuda = str(train.get("device", DEFAULTS.device)).startswith("cuda")
    out = dict(train)
    for key, fast in FAST_UPDATE.items():
        if out.get(key, AUTO) == AUTO:
            usable = cuda and (qwen2_silu or key != "update_kernels")
            out[key] = fast if usable else PLAIN_UPDATE[key]
    return out


def _coerce(value: Any, hint: Any, path: object, where: str) -> Any:
    """Check a YAML value against a field's type (ints are accepted for floats, never bools for numbers)."""
    text = str(hint)
    optional = "None" in text
    if value is None:
        if optional:
            return None
        raise BadInput(f"expected {text}, got null", path=path, where=where)
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int or text.startswith("int"):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float or text.startswith("float"):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif text.startswith("tuple[int"):
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
        raise BadInput(f"expected a list of integers, got {value!r}", path=path, where=where)
    else:  # pragma: no cover - every field has one of the types above
        return value
    raise BadInput(
        f"expected {getattr(hint, '__name__', text)}, got {type(value).__name__} {value!r}", path=path, where=where
    )


DEFAULTS = TrainConfig()
