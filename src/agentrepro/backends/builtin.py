"""The builtin backend: the harness's own trainer (agentrepro.trainer) behind the Backend interface.

`train(config, run_dir, resume=True)` runs the warm start (fresh runs) and the RL steps, writing the
files of docs/design.md §3.3 that a backend owns; `evaluate(run_dir, step)` plays checkpoint `step` on the frozen
task panel and returns outcome rows (docs/design.md §3.4); step 0 of a run started from a shared warm start
(`agentrepro train --from-warmstart`) is that warm start's evaluation, relabelled (trainer/shared_warmstart.py). Bookkeeping (resolved config, command, provenance,
seals) is the `train`/`eval` verbs' job. A job given several devices trains data parallel: `parallel.world_size`
says how many ranks, `spawn.train_ranks` starts them (one rank: this process trains itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrepro import runconfig
from agentrepro.backends.base import Backend

DEFAULT_MODEL = {"name": "tiny-qwen2", "config": {"d_model": 64, "n_layers": 2, "n_heads": 4}}
DEFAULT_EVAL = {"episodes_per_task": 1, "temperature": 0}


class BuiltinBackend(Backend):
    name = "builtin"

    def default_config(self) -> dict[str, Any]:
        from agentrepro.trainer.config import TrainConfig

        return {"model": dict(DEFAULT_MODEL), "train": TrainConfig().to_dict(), "eval": dict(DEFAULT_EVAL)}

    def validate_config(self, config: dict[str, Any]) -> None:
        from agentrepro.trainer.context import RunSpec
        from agentrepro.trainer.parallel import world_size

        RunSpec.from_config(config)
        world_size(config)

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        from agentrepro.trainer.loop import train
        from agentrepro.trainer.parallel import world_size
        from agentrepro.trainer.spawn import train_ranks

        ranks = world_size(config)  # saves the checkpoints of runconfig.checkpoint_steps(config)
        if ranks > 1:
            train_ranks(ranks, config, run_dir, resume=resume)
        else:
            train(config, run_dir, resume=resume)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        from agentrepro.trainer.evaluate import evaluate_run
        from agentrepro.trainer.shared_warmstart import step0_rows

        config = runconfig.read_resolved_config(Path(run_dir))
        shared = step0_rows(Path(run_dir), config) if step == 0 else None  # evaluated once, by the shared warm start
        return shared if shared is not None else evaluate_run(config, run_dir, step)

    def prompt_record(self, config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        """The prompt kind (chat template, word level, observation text), the chat template's sha256 and the rows."""
        from agentrepro.trainer import checkpoint as ckpt
        from agentrepro.trainer.context import RunSpec
        from agentrepro.trainer.dialogue import prompt_record

        spec = RunSpec.from_config(config)
        return prompt_record(spec.make_codec(ckpt.load_tokenizer(run_dir)), spec.train.mode)
