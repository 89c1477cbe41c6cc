"""Tiny configurations shared by the trainer tests (fast: a 1-layer, 16-wide model, 2 x 2 trajectories)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from helpers import run_cli

TINY_MODEL = {"name": "tiny-qwen2", "config": {"d_model": 16, "n_layers": 1, "n_heads": 2}}


def tiny_config(**train) -> dict:
    """A run config (as `agentrepro resolve` writes it) for a few fast steps on FrozenLake."""
    base = {
        "steps": 3,
        "groups": 2,
        "group_size": 2,
        "lr": 1e-3,
        "warmstart_max_steps": 2,
        "warmstart_eval_every": 1,
        "warmstart_val_seeds": 4,
        "progress": False,
        "checkpoint_every": 1,
    }
    # eval.checkpoint: all with checkpoint_every 1: every step is evaluated, so every step is checkpointed
    return copy.deepcopy(
        {
            "study": "tiny",
            "method": train.get("estimator", "grpo"),
            "seed": 0,
            "backend": {"name": "builtin"},
            "model": TINY_MODEL,
            "env": {"name": "frozenlake", "split": "eval", "params": {}},
            "train": {**base, **train},
            "eval": {"tasks": 4, "first_seed": 10001, "episodes_per_task": 1, "temperature": 0, "checkpoint": "all"},
        }
    )


def tiny_spec_and_codec(**train):
    from agentrepro.trainer.context import RunSpec

    spec = RunSpec.from_config(tiny_config(**train))
    tokenizer = spec.build_tokenizer()
    return spec, tokenizer, spec.make_codec(tokenizer)


def tiny_policy(spec, tokenizer, seed: int = 0):
    from agentrepro.trainer.policy import build_policy

    return build_policy(spec.model, tokenizer, seed).eval()


def tiny_train_batch(codec, adv_off_mask: float | None = None, seed: int = 3):
    """A 3-row TrainBatch over `codec`'s special tokens (padding, a row ending mid-turn); advantages off the loss mask
    are `adv_off_mask` when given (else random like the rest)."""
    import torch

    from agentrepro.trainer.update import TrainBatch

    ids = torch.tensor(
        [
            [codec.bos, codec.obs, 10, 11, codec.act, 6, 7, codec.eos, codec.pad],
            [codec.bos, codec.obs, 12, 13, codec.act, 8, codec.eos, codec.pad, codec.pad],
            [codec.bos, codec.obs, 9, codec.act, 5, 6, codec.eos, codec.obs, codec.act],
        ]
    )
    attn = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1, 1]])
    mask = torch.tensor(
        [[0, 0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1, 0, 0]], dtype=torch.float32
    )
    g = torch.Generator().manual_seed(seed)
    adv = torch.randn(3, 9, generator=g)
    if adv_off_mask is not None:
        adv = torch.where(mask.bool(), adv, torch.tensor(adv_off_mask))
    old, ref = torch.randn(3, 9, generator=g) * 0.1 - 3.0, torch.randn(3, 9, generator=g) * 0.1 - 3.0
    return TrainBatch(ids, attn, mask, adv, old, ref, torch.randn(3, 9, generator=g))


def chat_config(model_dir, **train) -> dict:
    """`tiny_config` on a local chat model (model.path), short responses, no warm start."""
    config = tiny_config(**{"warmstart": False, "max_new_tokens": 6, "max_turns": 3, **train})
    config["model"] = {"name": "tiny-chat", "path": str(model_dir)}
    return config


def chat_spec_and_codec(model_dir, **train):
    from agentrepro.trainer.context import RunSpec

    spec = RunSpec.from_config(chat_config(model_dir, **train))
    tokenizer = spec.build_tokenizer()
    return spec, tokenizer, spec.make_codec(tokenizer)


def train_verb(config: dict, tmp_path: Path) -> Path:
    """`agentrepro train` on `config` as a subprocess; asserts it succeeded and returns the run directory."""
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config))
    run = tmp_path / "runs" / "tiny" / "grpo" / "seed0"
    done = run_cli("train", "--config", cfg_path, "--out", run)
    assert done.returncode == 0, done.stderr
    return run
