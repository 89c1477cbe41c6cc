"""The policy: a transformers causal LM plus a scalar value head (used by PPO), on CPU or CUDA.

Two sources (the manifest's `model` block):
* `{name: tiny-qwen2 | tiny-gpt2, config: {d_model, n_layers, n_heads}}`: a tiny model built locally from a
  transformers config (no hub), seeded, over the word-level tokenizer of the environment. It emits action
  words; the harness writes them into the environment's answer format (`Env.format_actions`).
* `{name: ..., path: /local/model/dir}`: any local model directory (e.g. Qwen2.5) and its tokenizer; its
  generated text is the response as is. With a chat template its prompts are the served evaluator's
  messages rendered by that template (trainer/dialogue.py).

Shapes: input_ids, attention_mask, position_ids (batch, tokens); logits (batch, tokens, vocab);
values (batch, tokens). Attention masks may have zeros inside a row (padding between turns of batched
multi-turn decoding); positions are then the count of attended tokens before each one.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from agentrepro.errors import BadInput
from agentrepro.trainer.model_size import check_config


@dataclass(frozen=True)
class ModelSpec:
    """The manifest's `model` block, checked."""

    name: str
    config: dict[str, Any]
    path: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, path: object = None) -> ModelSpec:
        data = dict(data or {})
        allowed = {"name", "config", "path", "sha256", "revision", "tokenizer_revision"}
        for key in data:
            if key not in allowed:
                raise BadInput(
                    f"unknown key (expected one of: {', '.join(sorted(allowed))})", path=path, where=f"model.{key}"
                )
        name = data.get("name", "tiny-qwen2")
        cfg = dict(data.get("config") or {})
        if data.get("path") is None:
            cfg = check_config(name, cfg, path=path)
        elif not Path(data["path"]).is_dir():
            raise BadInput(f"local model directory not found: {data['path']}", path=path, where="model.path")
        return cls(name=name, config=cfg, path=data.get("path"))

    @property
    def emits_action_words(self) -> bool:
        return self.path is None


GPU_SHARE = "AGENTREPRO_GPU_SHARE"  # K: the jobs that share this process's GPU (gpu_slots.py --per-gpu K)
# where a user configures torch's caching allocator (read when torch is imported; the second is torch's newer name)
ALLOC_CONF = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
# Segments that grow in place: the rollout's cache and the update's passes change size every step, and with fixed
# segments the freed blocks fragment until a pass's gigabyte finds no room in memory torch holds but cannot use
# (benchmarks/RESULTS.md, "The shipped study through the Snakefile").
EXPANDABLE = "expandable_segments:True"


def device_of(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BadInput(f"device {name!r} asked for but CUDA is not available", where="train.device")
    return device


def gpu_share() -> int:
    """K where K jobs share this process's GPU (GPU_SHARE, set by workflow/scripts/gpu_slots.py), else 1."""
    share = os.environ.get(GPU_SHARE, "")
    return int(share) if share.isdigit() and int(share) > 1 else 1


def allocator_settings(settings: str) -> None:
    """Set torch's caching allocator `settings` now (the environment's are read when torch is imported, before this
    process could set them): torch's own setter, under its newer name where torch has it."""
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None) or torch.cuda.memory._set_allocator_settings
    setter(settings)


def run_device(train, name: str | None = None) -> torch.device:
    """The device a run computes on: `name` (default `train.device`; a rank's own GPU under data parallel),
    with `train.threads` torch threads when `train.device` is the CPU. On a GPU shared by K jobs, torch's caching
    allocator is held to 1/K of it: passes sized from the share do not bound what the cache keeps, and a job whose
    cache outgrows its share leaves the others too little (benchmarks/RESULTS.md, "The same on one H200"). On CUDA
    the allocator's segments are EXPANDABLE unless the environment configures the allocator itself."""
    if train.device == "cpu":
        torch.set_num_threads(train.threads)
    device = device_of(name or train.device)
    if device.type == "cuda" and not any(os.environ.get(key) for key in ALLOC_CONF):
        allocator_settings(EXPANDABLE)
    if device.type == "cuda" and gpu_share() > 1:
        torch.cuda.set_per_process_memory_fraction(1 / gpu_share(), device if device.index is not None else None)
    return device


def _lm_config(spec: ModelSpec, vocab_size: int, tokenizer):
    c = spec.config
    common = {
        "vocab_size": vocab_size,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "tie_word_embeddings": True,
    }
    if spec.name == "tiny-gpt2":
        from transformers import GPT2Config  # heavy: transformers

        return GPT2Config(
            n_embd=c["d_model"],
            n_layer=c["n_layers"],
            n_head=c["n_heads"],
            n_positions=c["max_positions"],
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        )
    from transformers import Qwen2Config  # heavy: transformers

    return Qwen2Config(
        hidden_size=c["d_model"],
        num_hidden_layers=c["n_layers"],
        num_attention_heads=c["n_heads"],
        num_key_value_heads=c["n_heads"],
        intermediate_size=4 * c["d_model"],
        max_position_embeddings=c["max_positions"],
        **common,
    )


_CACHE_KWARG: dict[type, str] = {}


class Policy(nn.Module):
    """A causal LM (`self.lm`) with a linear value head on its last hidden state."""

    def __init__(self, lm: nn.Module, hidden_size: int):
        super().__init__()
        self.lm: Any = lm  # a transformers causal LM: its config, base_model and heads are read below
        self.value_head = nn.Linear(hidden_size, 1)

    def forward(
        self, input_ids, attention_mask, position_ids, past_key_values=None, use_cache=False, with_values=False
    ):
        """Return (logits (B, T, V) float32, values (B, T) or None, cache)."""
        # transformers >= 5.x names the KV cache `cache`; earlier versions `past_key_values`
        key = (
            "cache"
            if _CACHE_KWARG.get(type(self.lm)) is None and "cache" in inspect.signature(self.lm.forward).parameters
            else None
        )
        key = _CACHE_KWARG.setdefault(type(self.lm), key or "past_key_values")
        out = self.lm(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=use_cache,
            output_hidden_states=with_values,
            **{key: past_key_values},
        )
        values = (
            self.value_head(out.hidden_states[-1].to(self.value_head.weight.dtype)).squeeze(-1).float()
            if with_values
            else None
        )
        cache = getattr(out, key, None) if use_cache else None
        return out.logits.float(), values, cache

    def last_hidden(self, input_ids, attention_mask, position_ids, with_values=False):
        """(last hidden states (B, T, d), values (B, T) or None) without the LM head: the update applies the head
        to the tokens it trains only (trainer/logprobs.py). The logits are `self.head` of these states
        (`check_plain_head`)."""
        hidden = self.lm.base_model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        values = self.value_head(hidden.to(self.value_head.weight.dtype)).squeeze(-1).float() if with_values else None
        return hidden, values

    @property
    def head(self) -> nn.Linear:
        return self.lm.get_output_embeddings()


@torch.no_grad()
def check_plain_head(policy: Policy, *, path: object, where: str) -> None:
    """Refuse a model whose logits are not its output head applied to its last hidden state (logit soft-capping
    or scaling, as some architectures have), which `Policy.last_hidden` + `head` would silently get wrong."""
    lm, head = policy.lm, policy.head
    ids = torch.arange(4).remainder(head.weight.shape[0])[None]
    training = lm.training
    lm.eval()  # no dropout between the two forwards
    logits = lm(input_ids=ids, use_cache=False).logits
    hidden = lm.base_model(input_ids=ids, use_cache=False).last_hidden_state
    lm.train(training)
    if not isinstance(head, nn.Linear) or not torch.allclose(head(hidden), logits, rtol=1e-4, atol=1e-5):
        raise BadInput(
            "the builtin trainer needs logits = output head(last hidden state) (no soft-capping or logit scaling); "
            f"{type(lm).__name__} differs",
            path=path,
            where=where,
        )


def build_policy(spec: ModelSpec, tokenizer, seed: int) -> Policy:
    """The policy with seeded initial weights (global torch RNG used inside a fork, restored after)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if spec.path is None:
            from transformers import AutoModelForCausalLM  # heavy: transformers

            lm = AutoModelForCausalLM.from_config(
                _lm_config(spec, len(tokenizer), tokenizer), attn_implementation="sdpa"
            )
            hidden = spec.config["d_model"]
        else:
            from transformers import AutoModelForCausalLM  # heavy: transformers

            lm = AutoModelForCausalLM.from_pretrained(spec.path, local_files_only=True)
            hidden = lm.config.hidden_size
        policy = Policy(lm, hidden)
        nn.init.zeros_(policy.value_head.weight)
        nn.init.zeros_(policy.value_head.bias)
    check_plain_head(policy, path=spec.path, where="model.path" if spec.path else "model.name")
    return policy


def load_local_tokenizer(spec: ModelSpec):
    from transformers import AutoTokenizer  # heavy: transformers

    tok = AutoTokenizer.from_pretrained(spec.path, local_files_only=True)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position of each token = number of attended tokens before it (B, T) -> (B, T) long."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def autocast(device: torch.device, bf16: bool):
    """bf16 autocast on CUDA when asked; nothing on the CPU (bit-exact resume is a CPU guarantee)."""
    if device.type == "cuda" and bf16:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
