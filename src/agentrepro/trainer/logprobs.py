"""Log-probabilities of the taken tokens and entropies from the LM head, a chunk of tokens at a time.

The full-vocabulary way (logits (tokens, vocab) in float32, log-softmax, gather, the entropy sum) keeps
several (tokens, vocab) float32 tensors alive for the backward: at Qwen2.5's 151,936 words and 16,384 tokens
a pass, 10 GB each, read and written a dozen times (benchmarks/RESULTS.md). Here the head runs
over the selected tokens only (the update's generated tokens: the loss is over nothing else), in chunks of
at most CHUNK_ELEMENTS logits, and nothing of size vocab is kept: the backward recomputes each chunk's logits
from the saved hidden states and writes the gradient of the logits itself:

    d logp[t] / d z = onehot(t) - p            d H / d z = -p * (log p + H)

with p = softmax(z), H = -sum p log p. The per-chunk arithmetic is the full-vocabulary one (the head in the
autocast dtype, the log-softmax in float32), so the values equal it row by row; tests/trainer/test_logprobs.py
compares values and gradients with the full-vocabulary computation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK_ELEMENTS = 2**28  # logits per chunk (1 GiB in float32): 1,766 tokens at a 151,936-word vocabulary


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype the head's matmul runs in: autocast's when it is on for x's device, else x's own."""
    kind = x.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype


def _chunk_log_softmax(h, weight, bias):
    """The float32 log-softmax over the vocabulary of one chunk of hidden states (the head in their dtype)."""
    return torch.log_softmax(F.linear(h, weight, bias).float(), dim=-1)


class _HeadLogprobs(torch.autograd.Function):
    """(hidden, weight, bias, targets, with_entropy, dtype) -> log-probs of targets (and entropies), chunked."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, with_entropy: bool, dtype: torch.dtype):
        h, w = hidden.to(dtype), weight.to(dtype)
        b = None if bias is None else bias.to(dtype)
        n = h.shape[0]
        step = max(1, CHUNK_ELEMENTS // w.shape[0])
        logp = torch.empty(n, device=h.device, dtype=torch.float32)
        entropy = torch.empty(n, device=h.device, dtype=torch.float32) if with_entropy else None
        for s in range(0, n, step):
            logp_all = _chunk_log_softmax(h[s : s + step], w, b)
            logp[s : s + step] = logp_all.gather(-1, targets[s : s + step, None]).squeeze(-1)
            if entropy is not None:
                entropy[s : s + step] = -(logp_all.exp() * logp_all).sum(-1)
        ctx.save_for_backward(hidden, weight, bias, targets, entropy)
        ctx.dtype, ctx.step = dtype, step
        ctx.set_materialize_grads(False)
        return (logp, entropy) if with_entropy else logp

    @staticmethod
    def backward(ctx, g_logp, g_entropy=None):
        hidden, weight, bias, targets, entropy = ctx.saved_tensors
        h, w = hidden.to(ctx.dtype), weight.to(ctx.dtype)
        b = None if bias is None else bias.to(ctx.dtype)
        want_h, want_w, want_b = ctx.needs_input_grad[:3]
        grad_h = torch.empty_like(hidden) if want_h else None
        grad_w = torch.zeros_like(weight, dtype=torch.float32) if want_w else None
        grad_b = torch.zeros_like(bias, dtype=torch.float32) if want_b and bias is not None else None
        step = ctx.step
        for s in range(0, h.shape[0], step):
            hs = h[s : s + step]
            logp_all = _chunk_log_softmax(hs, w, b)
            p = logp_all.exp()
            if g_logp is not None:
                g = g_logp[s : s + step, None].float()
                gz = -p * g
                gz.scatter_add_(-1, targets[s : s + step, None], g)
            else:
                gz = torch.zeros_like(p)
            if g_entropy is not None and entropy is not None:
                gz -= g_entropy[s : s + step, None].float() * p * (logp_all + entropy[s : s + step, None])
            gz = gz.to(ctx.dtype)
            if grad_h is not None:
                grad_h[s : s + step] = (gz @ w).to(hidden.dtype)
            if grad_w is not None:
                grad_w += (gz.T @ hs).float()
            if grad_b is not None:
                grad_b += gz.float().sum(0)
        grad_w = None if grad_w is None else grad_w.to(weight.dtype)
        grad_b = None if grad_b is None else grad_b.to(bias.dtype)
        return grad_h, grad_w, grad_b, None, None, None


def head_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    with_entropy: bool,
):
    """(log-probs of `targets`, entropies or None), each (n,) float32, of softmax(hidden @ weight.T + bias) over
    the vocabulary at hidden states (n, d); the matmul in the autocast dtype when autocast is on."""
    out = _HeadLogprobs.apply(hidden, weight, bias, targets, with_entropy, _compute_dtype(hidden))
    return out if with_entropy else (out, None)
