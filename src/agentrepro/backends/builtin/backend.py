"""The builtin backend: the harness's own trainer (agentrepro.trainer) behind the Backend interface.

`resolve(config)` completes a run config with the trainer's defaults; the supervised warm start is on by default
only for a model built from a config (random weights), and a warm start a manifest asks of a pretrained model
(`model.path`) is a deviation recorded in the lock. `train(config, run_dir, resume=True)` runs the warm start (fresh
runs that warm-start) and the RL steps, writing the files of
docs/design.md §3.3 that a backend owns; `evaluate(run_dir, step)` plays checkpoint `step` on the frozen task panel
and returns outcome rows (docs/design.md §3.4). A run started from a shared warm start (`start_from`, `agentrepro
train --from-warmstart`) takes its step-0 checkpoint byte for byte, and its step 0 is that warm start's evaluation,
relabelled (trainer/shared_warmstart.py). A job given several devices trains data parallel: `parallel.world_size`
says how many ranks, `spawn.train_ranks` starts them (one rank: this process trains itself).

It needs no container (it runs in the harness's own Python environment, which the lock records) and takes a
config-built model or a local directory, never a hub revision. Its checkpoint of step N is checkpoints/step<N>.pt
(the only copy of its weights, which its evaluator reads) and, when exported, checkpoints/hf/step<N>/.

torch and transformers are imported only when a builtin run is checked, trained or evaluated (the trainer's
modules below are imported inside the methods): planning, freezing and auditing a study never load them.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from agentrepro import runconfig
from agentrepro.backends.base import AT_LEAST, BUILTIN_FORM, COMMON, Backend, Demand, SeedStream, StepCheckpoint
from agentrepro.errors import BadInput
from agentrepro.layout import RunFiles, checkpoint_file, hf_checkpoint
from agentrepro.runconfig import EvalConfig
from agentrepro.trainer.config import TrainConfig, resolve_auto
from agentrepro.trainer.memory import GIB, MIN_PASS_TOKENS, gpu_bytes
from agentrepro.trainer.model_size import PretrainedShape, qwen2_silu
from agentrepro.trainer.shared_warmstart import adopt, step0_rows

# The files a builtin run holds besides the harness's own: its step logs and warm-start record, the batch dumps, and
# its checkpoints (weights and state, the tokenizer, the Hugging Face copies served evaluation reads). Its
# evaluations hold only the harness's files.
RUN_FILES = re.compile(
    "|".join(map(re.escape, (*RunFiles.STEP_LOGS, RunFiles.WARMSTART)))
    + rf"|{RunFiles.BATCHES}/step\d+\.jsonl"
    + rf"|{RunFiles.CHECKPOINTS}/(?:step\d+\.pt|tokenizer/[^/]+|hf/step\d+/.+)"
)
DEFAULT_MODEL = {"name": "tiny-qwen2", "config": {"d_model": 64, "n_layers": 2, "n_heads": 4}}
# Generated tokens per turn for a pretrained model when the manifest sets none: the reference recipes' budget (512 is
# VAGEN's response_length_per_turn in its Sokoban and FrozenLake specs and verl-agent's data.max_response_length in
# its ALFWorld scripts). The trainer's own default (a few tokens) is for a policy trained from scratch, whose answers
# are single action words; a chat model asked to think before it answers would be cut off in its first sentence.
PRETRAINED_TURN_TOKENS = 512
# written into each resolved config (so hashed): the evaluation defaults, stated for the reader of the file
DEFAULT_EVAL = {key: getattr(EvalConfig(), key) for key in ("episodes_per_task", "temperature")}


def pretrained(config: dict[str, Any]) -> bool:
    """Whether the run's model is a local pretrained model (`model.path`) rather than one built from a config."""
    return (config.get("model") or {}).get("path") is not None


class BuiltinBackend(Backend):
    name = "builtin"
    block = COMMON
    model_forms = frozenset({BUILTIN_FORM})
    container = "never"
    shares_warmstart = True
    saves_on_preempt_signal = True  # trainer.loop polls process.PREEMPTED between steps

    def default_config(self) -> dict[str, Any]:
        return {"model": dict(DEFAULT_MODEL), "train": TrainConfig().to_dict(), "eval": dict(DEFAULT_EVAL)}

    def resolve(self, config: dict[str, Any]) -> dict[str, Any]:
        """The defaults, then the warm start's: on for a model built from a config (it starts from random weights),
        off for a pretrained one (`model.path`: RL starts from its own weights, as the papers' runs do) unless the
        config states `train.warmstart`; a pretrained model's turns get PRETRAINED_TURN_TOKENS unless the config
        states `train.max_new_tokens`; then `auto` update precision and kernels for the device and model
        (trainer/config.py `resolve_auto`), so the resolved config records what ran."""
        resolved = super().resolve(config)
        stated = config.get("train") or {}
        if "warmstart" not in stated:
            resolved["train"]["warmstart"] = not pretrained(resolved)
        if "max_new_tokens" not in stated and pretrained(resolved):
            resolved["train"]["max_new_tokens"] = PRETRAINED_TURN_TOKENS
        resolved["train"] = resolve_auto(resolved["train"], qwen2_silu=qwen2_silu(resolved.get("model") or {}))
        return resolved

    def validate_config(self, config: dict[str, Any]) -> None:
        super().validate_config(config)
        from agentrepro.trainer.context import RunSpec  # heavy: the model spec imports torch
        from agentrepro.trainer.parallel import world_size  # heavy: torch.distributed

        RunSpec.from_config(config)
        world_size(config)

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        from agentrepro.trainer.loop import train  # heavy: torch and transformers
        from agentrepro.trainer.parallel import world_size  # heavy: torch.distributed
        from agentrepro.trainer.spawn import train_ranks  # heavy: torch.multiprocessing

        ranks = world_size(config)  # saves the checkpoints of runconfig.checkpoint_steps(config)
        if ranks > 1:
            train_ranks(ranks, config, run_dir, resume=resume)
        else:
            train(config, run_dir, resume=resume)

    def last_saved_step(self, run_dir: Path) -> int | None:
        from agentrepro.trainer.checkpoint import saved_steps  # heavy: torch

        return max(saved_steps(run_dir), default=None)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        from agentrepro.trainer.evaluate import evaluate_run  # heavy: torch and transformers

        config = runconfig.read_resolved_config(Path(run_dir))
        shared = step0_rows(Path(run_dir), config) if step == 0 else None  # evaluated once, by the shared warm start
        return shared if shared is not None else evaluate_run(config, run_dir, step)

    def replay(
        self, config: dict[str, Any], run_dir: Path, step: int, positions: list[int] | None = None
    ) -> list[dict[str, Any]]:
        """The evaluation `evaluate` runs (greedy on the frozen panel, from checkpoints/step<N>.pt), quiet, on the
        panel's tasks at `positions`; step 0 too is played again, not taken from the shared warm start's record."""
        from agentrepro.trainer.evaluate import evaluate_run  # heavy: torch and transformers

        evaluation = EvalConfig.of(config)
        if positions is not None and float(evaluation.temperature) > 0:  # the draws of a batch depend on its size
            raise BadInput("a sampled evaluation (eval.temperature above 0) is played again only on the whole panel")
        weights = checkpoint_file(run_dir, step)
        if not weights.is_file():
            raise BadInput(f"{weights} is not here (left out of the bundle, or pruned)")
        replayed = {**config, "train": {**(config.get("train") or {}), "progress": False}}
        if positions is not None:
            whole = (config.get("eval") or {}).get("task_panel") or []
            panel = [whole[i] for i in positions]
            replayed["eval"] = {**(config.get("eval") or {}), "task_panel": panel, "tasks": len(panel)}
        return evaluate_run(replayed, run_dir, step)

    def run_file(self, rel: PurePosixPath) -> bool:
        return RUN_FILES.fullmatch(rel.as_posix()) is not None

    def checkpoint(self, config: dict[str, Any], run_dir: Path, step: int) -> StepCheckpoint:
        hf = hf_checkpoint(run_dir, step)
        return StepCheckpoint(step, hf, weights=(hf, checkpoint_file(run_dir, step)))

    def deviations(self, config: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
        """A pretrained model warm-started on demonstrations (the manifest asked for it): the policy RL starts from
        is no longer the model the paper's runs start from."""
        if pretrained(config) and (config.get("train") or {}).get("warmstart"):
            return [
                {
                    "key": "train.warmstart",
                    "value": True,
                    "official": False,
                    "source": "the reference recipe",
                    "why": "a supervised warm start on BFS demonstrations before RL, asked for by the manifest: RL "
                    "starts from the warm-started weights, not from the pretrained model",
                }
            ]
        return []

    def demands(self, config: dict[str, Any], run_dir: Path) -> list[Demand]:
        """On CUDA with a local model whose config.json can be read: the GPU memory training it needs at the least
        (trainer/memory.py `gpu_bytes`), beside `resources.gpu_mem_gb` (unchecked when the manifest does not say)."""
        train, model = config.get("train") or {}, config.get("model") or {}
        shape = PretrainedShape.read(model["path"]) if model.get("path") is not None else None
        if shape is None or not str(train.get("device", "cpu")).startswith("cuda"):
            return []
        tokens = train.get("micro_batch_tokens") or MIN_PASS_TOKENS
        return [
            Demand(
                "GPU memory (GiB)",
                f"weights, optimizer state and bf16 copies of {shape.parameters:,} parameters and an update pass of "
                f"{tokens:,} tokens",
                round(gpu_bytes(shape, train) / GIB, 1),
                "resources.gpu_mem_gb",
                (config.get("resources") or {}).get("gpu_mem_gb"),
                AT_LEAST,
                "model.path config.json; trainer/memory.py gpu_bytes",
            )
        ]

    def prompt_record(self, config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        """The prompt kind (chat template, word level, observation text), the chat template's sha256 and the rows."""
        from agentrepro.trainer import checkpoint as ckpt  # heavy: torch
        from agentrepro.trainer.context import RunSpec  # heavy: the model spec imports torch
        from agentrepro.trainer.dialogue import prompt_record  # heavy: jinja2 chat templates and transformers

        spec = RunSpec.from_config(config)
        return prompt_record(spec.make_codec(ckpt.load_tokenizer(run_dir)), spec.train.mode)

    def seed_streams(self, config: dict[str, Any]) -> list[SeedStream]:
        """Every stream: the trainer's generators all start from the run's seed (trainer/loop.py, policy.py, evaluate.py)."""
        local = "path" in (config.get("model") or {})
        return [
            SeedStream(
                "environment games",
                True,
                "the task seeds of each step, drawn from a generator seeded by [seed, 0x7A5C] (trainer/loop.py)",
            ),
            SeedStream(
                "data order", True, "the same draw: the order of the tasks is the games' (there is no other data)"
            ),
            SeedStream(
                "rollout sampling", True, "a torch generator seeded by sampling_seed(seed, rank) (trainer/loop.py)"
            ),
            SeedStream(
                "model initialisation",
                not local,
                "the local model's weights, the same for every seed"
                if local
                else "weights drawn under torch.manual_seed(seed) (trainer/policy.py build_policy)",
            ),
            SeedStream(
                "evaluation sampling",
                True,
                "generators seeded by (eval.sample_seed, seed, step, episode) "
                "(trainer/evaluate.py); greedy at temperature 0",
            ),
        ]

    def start_from(self, run_dir: Path, warmstart_dir: Path, resolved: dict[str, Any]) -> None:
        adopt(run_dir, warmstart_dir, resolved)
