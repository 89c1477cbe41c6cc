"""`train.update_precision`: the weights the update's forward and backward run on.

`auto` (the default): `bf16-master` on CUDA, `fp32` on the CPU (trainer/config.py FAST_UPDATE).
`fp32`: the policy itself, float32 weights (on CUDA under bf16 autocast, `train.bf16`).
`bf16-master`: a bfloat16 copy of the policy. The policy stays the float32 master: its parameters are the
optimizer's, its state dict is what checkpoints save and resume loads, and the rollout engine copies it.
The copy computes the update's log-probs (and the old log-probs of a multi-pass update); each of its
gradients, once accumulated for a backward, is added in float32 to its master's `.grad` and dropped, so
micro-batches accumulate in float32, gradient clipping and data-parallel sums see float32 gradients, and the
optimizer step (AdamW) updates float32 weights; after every optimizer step the copy is set to the new
weights rounded to bf16.

Why: under bf16 autocast transformers' Qwen2 keeps float32 weights and a float32 residual stream, so every
RMSNorm runs in float32 and every linear layer casts its input and weight to bf16; on an H200 at
Qwen2.5-0.5B's shape those elementwise kernels took 62% of the update's GPU time (benchmarks/RESULTS.md,
"Update MFU: the LM head over generated tokens only"). With bf16 weights the layers run in bf16 without
casts. The arithmetic is bf16's (the residual stream is rounded to bf16 between layers), so the loss and
gradients differ from `fp32`'s by bf16 rounding; tests/trainer/test_precision.py bounds that on the CPU.
"""

from __future__ import annotations

import copy
from typing import TypeVar

import torch
from torch import nn


def _add_to_master(master: nn.Parameter):
    """A post-accumulate-grad hook for a bf16 parameter: add its gradient to `master`'s in float32, drop it."""

    def hook(work: torch.Tensor) -> None:
        grad = work.grad
        assert grad is not None  # the hook runs once a gradient was accumulated
        if master.grad is None:
            master.grad = grad.to(torch.float32)
        else:
            master.grad.add_(grad)
        work.grad = None

    return hook


Model = TypeVar("Model", bound=nn.Module)


def _bf16_weights(model: Model) -> Model:
    """`model` with its parameters in bf16, in place; buffers (RoPE's inverse frequencies) keep their dtype."""
    for param in model.parameters():
        param.data = param.data.to(torch.bfloat16)
    return model


def update_model(choice: str, policy: Model, optimizer: torch.optim.Optimizer) -> Model:
    """The module the update runs forward and backward on: `policy` for fp32; for bf16-master a bf16 copy
    whose gradients go to `policy`'s parameters (float32) and which `optimizer`'s every step re-syncs.
    Call before activation checkpointing or compiled kernels are applied (they go on the returned module)."""
    if choice == "fp32":
        return policy
    work = _bf16_weights(copy.deepcopy(policy))
    masters, copies = dict(policy.named_parameters()), dict(work.named_parameters())
    assert masters.keys() == copies.keys()
    for name, master in masters.items():
        copies[name].register_post_accumulate_grad_hook(_add_to_master(master))
    pairs = [(copies[n], masters[n]) for n in masters]

    @torch.no_grad()
    def sync(*_):
        for work_param, master in pairs:
            work_param.copy_(master)

    optimizer.register_step_post_hook(sync)
    return work


def frozen_model(choice: str, model: Model) -> Model:
    """A forward-only model (the KL reference) in the update's weight dtype: bf16 for bf16-master."""
    return _bf16_weights(model) if choice == "bf16-master" else model
