"""`train.update_kernels`: the update's memory-bound elementwise layers as compiled kernels.

On an H200 at Qwen2.5-0.5B's shape, 62% of the update's kernel time was elementwise work of transformers'
eager Qwen2 under bf16 autocast (float32 RMSNorm, casts, silu(gate) * up), not matrix products
(benchmarks/RESULTS.md, "Compiled RMSNorm and gated MLP"). `compiled` replaces, per module instance, the
forward of every Qwen2 RMSNorm and MLP with the same arithmetic through `torch.compile`; the weights, the
state dict and the rollout engine (trainer/decode.py has its own forward) are untouched. For the models the
static rollout engine supports; `auto` (the default) chooses it on CUDA (trainer/config.py FAST_UPDATE). Alone,
the H200 measurements did not show a steady speed gain (one call 1.48x, a later one 0.98x), only less memory;
with `update_precision: bf16-master` the update was 1.2-1.3x faster in three calls.
"""

from __future__ import annotations

import functools
import types

import torch
import torch.nn.functional as F

from agentrepro.errors import BadInput
from agentrepro.trainer.decode import supports_model

CHOICES = ("eager", "compiled")


@functools.cache
def _kernels():
    """The two compiled functions, made once per process (torch.compile caches per shape inside them)."""

    @torch.compile(dynamic=True)
    def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)

    @torch.compile(dynamic=True)
    def gated(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.silu(gate) * up

    return rms_norm, gated


def _norm_forward(self, x):
    return _kernels()[0](x, self.weight, self.variance_epsilon)


def _mlp_forward(self, x):
    return self.down_proj(_kernels()[1](self.gate_proj(x), self.up_proj(x)))


def apply(choice: str, lm: torch.nn.Module) -> bool:
    """Compile `lm`'s elementwise layers when `choice` is compiled; True when it did."""
    if choice == "eager":
        return False
    if not (supports_model(lm) and getattr(lm.config, "hidden_act", None) == "silu"):
        raise BadInput(
            f"compiled update kernels support Qwen2 models with silu, not {type(lm).__name__}",
            where="train.update_kernels",
        )
    from transformers.models.qwen2 import modeling_qwen2  # heavy: transformers, only for compiled update kernels

    # each instance's forward is replaced (the modules keep their parameters, hooks and state_dict keys)
    for module in lm.modules():
        if isinstance(module, modeling_qwen2.Qwen2RMSNorm):
            module.forward = types.MethodType(_norm_forward, module)  # type: ignore[method-assign]
        elif isinstance(module, modeling_qwen2.Qwen2MLP):
            module.forward = types.MethodType(_mlp_forward, module)  # type: ignore[method-assign]
    return True
