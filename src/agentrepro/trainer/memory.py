"""How many padded tokens an update pass takes when the manifest sets none, and what a job's GPU must hold.

`train.micro_batch_tokens: 0` (the default) means auto: once the first rollout has run (so the rollout engine's KV
cache is counted), the trainer measures the memory it can still use (on CUDA torch's free and cached memory; on the
CPU the host's available memory under any cgroup limit, `step_record.device_memory`), takes away what the optimizer
step will add, the LM head's chunk and a reserve, and divides the rest by the activations one token of a pass holds
(`pass_tokens`). A budget that holds the whole minibatch makes one pass of it, as a budget of 0 does
(`update.micro_batches`), so small CPU studies train as before. One pass over a whole minibatch of a pretrained
model's chat rows does not fit even a 139.8 GiB H200; on the CPU, that of a tiny chat model's 128-token turns took
more than the 24 GiB of the development machine. The warm start sizes its passes the same way on CUDA before its
first step; on the CPU it takes whole batches (its demonstrations are short, and its models tiny).

Activations per token are estimated from the model's shape: per layer, `ACTIVATION_BYTES` bytes per unit of
(hidden + intermediate size), constants fitted to the peaks measured on an H200 without checkpointing and rounded up
(benchmarks/RESULTS.md, "The builtin trainer on one H200" and its subsections: at 0.5B, fp32 eager 40.8 and 64.4 GiB
at 16,384- and 32,768-token passes give 11.2 bytes, and over the same static part fp32 compiled 8.3, bf16-master
eager 9.4, bf16-master compiled 6.6; 1.5B bf16-master compiled about 7.5). With activation checkpointing a layer
keeps its float32 input and one layer at a time its whole activations. The estimate is checked against the peak
the trainer records (`gpu_peak_mem_gb` beside `micro_batch_tokens` in metrics.jsonl) in benchmarks/RESULTS.md.

`gpu_bytes(shape, train)` is the least a job's GPU must hold to train a local model at all (weights, gradients,
optimizer state, the update's bf16 copy, the rollout engine's bf16 copy, the head's chunk, one pass of
`MIN_PASS_TOKENS`): the builtin backend's preflight demand against `resources.gpu_mem_gb`. No torch here.
"""

from __future__ import annotations

from typing import Any

from agentrepro.errors import BadInput
from agentrepro.trainer.model_size import PretrainedShape

GIB = 1 << 30
ACTIVATION_BYTES = {
    ("fp32", "eager"): 12,
    ("fp32", "compiled"): 10,
    ("bf16-master", "eager"): 10,
    ("bf16-master", "compiled"): 8,
}
"""Bytes per token, per layer, per unit of (hidden + intermediate size) a pass keeps for its backward."""
CHECKPOINTED_INPUT_BYTES = 4  # a checkpointed layer's input (per hidden unit), kept for the recomputation
HEAD_CHUNK_LOGITS = 1 << 28  # the most logits the LM head computes at once (trainer/logprobs.py CHUNK_ELEMENTS)
LOGIT_BYTES = 3 * 4  # a float32 logit, its softmax and its gradient
# a full chunk: any pass of 1,766 tokens or more at Qwen's vocabulary
HEAD_CHUNK_BYTES = HEAD_CHUNK_LOGITS * LOGIT_BYTES
STEP_BYTES = 4 + 8  # per parameter, allocated by the first optimizer step: gradients, AdamW's two moments
BF16_GRAD_BYTES = 2  # per parameter under bf16-master: the copy's gradients before they reach the masters
RESERVE_FRACTION = 0.05  # of the device: fragmentation, the rollout's transient tensors, CUDA graphs
RESERVE_BYTES = 2 * GIB  # or a quarter of the device where that is less (a CPU job's cgroup of a few GiB)
MIN_PASS_TOKENS = 1024
MAX_PASS_TOKENS = 65_536  # larger passes gained nothing measurable (RESULTS.md: 16,384 to 32,768 was within noise)
QUANTUM = 1024


def token_bytes(
    *, layers: int, hidden: int, intermediate: int, precision: str, kernels: str, checkpointing: bool
) -> int:
    """Activation bytes one padded token of an update pass holds until its backward."""
    per_layer = ACTIVATION_BYTES[(precision, kernels)] * (hidden + intermediate)
    if checkpointing:
        return layers * CHECKPOINTED_INPUT_BYTES * hidden + per_layer
    return layers * per_layer


def head_chunk_bytes(vocab: int | None, tokens: int) -> int:
    """What the LM head's chunk holds in a pass of `tokens` over `vocab` words (None: a full chunk): it takes at most
    HEAD_CHUNK_LOGITS logits, so at a small vocabulary it is a pass's tokens times the vocabulary, far less."""
    if vocab is None:
        return HEAD_CHUNK_BYTES
    return LOGIT_BYTES * vocab * min(tokens, max(1, HEAD_CHUNK_LOGITS // vocab))


def pass_tokens(
    *,
    available: int,
    total: int,
    parameters: int,
    per_token: int,
    precision: str,
    where: str = "GPU",
    vocab: int | None = None,
) -> int:
    """Padded tokens per pass: what torch can still use on the device (`available`: free plus its cached blocks),
    less the optimizer step's state, the head's chunk (over `vocab` words; None: a full chunk) and a reserve, over
    `per_token`; a multiple of QUANTUM in [MIN_PASS_TOKENS, MAX_PASS_TOKENS]. BadInput naming train.micro_batch_tokens
    when not even the smallest fits; `where`: what holds the memory, for that line ("GPU", or "host" on the CPU)."""
    state = parameters * (STEP_BYTES + (BF16_GRAD_BYTES if precision == "bf16-master" else 0))
    room = available - state - int(RESERVE_FRACTION * total) - min(RESERVE_BYTES, total // 4)
    full = HEAD_CHUNK_BYTES if vocab is None else head_chunk_bytes(vocab, MAX_PASS_TOKENS)
    fitted = (room - full) // max(1, per_token)  # a pass whose head chunk is as large as it gets
    if vocab is not None and fitted * vocab < HEAD_CHUNK_LOGITS:  # a smaller pass: its chunk grows with its tokens
        fitted = room // (max(1, per_token) + LOGIT_BYTES * vocab)
    tokens = min(MAX_PASS_TOKENS, fitted // QUANTUM * QUANTUM)
    if tokens < MIN_PASS_TOKENS:
        later = state + head_chunk_bytes(vocab, MIN_PASS_TOKENS)
        raise BadInput(
            f"the {where} has {available / GIB:.1f} GiB for the update, which cannot hold the optimizer state of "
            f"{parameters:,} parameters ({later / GIB:.1f} GiB with the head's chunk) and a pass of {MIN_PASS_TOKENS} "
            f"tokens ({MIN_PASS_TOKENS * per_token / GIB:.1f} GiB): set train.grad_checkpointing, a smaller model or "
            "a larger GPU",
            where="train.micro_batch_tokens",
        )
    return tokens


def auto_pass_tokens(
    policy: Any, train: Any, *, available: int, total: int, warmstart: bool = False, where: str = "GPU"
) -> int:
    """`pass_tokens` for `policy` (a trainer Policy: its LM's config gives the shape) under `train` (a TrainConfig,
    `auto` resolved); `warmstart`: the warm start's passes, which train the float32 policy itself, eager."""
    config = policy.lm.config  # Qwen2 and GPT-2 configs both answer these names (GPT-2's MLP is 4 x hidden)
    hidden = config.hidden_size
    precision, kernels = ("fp32", "eager") if warmstart else (train.update_precision, train.update_kernels)
    per_token = token_bytes(
        layers=config.num_hidden_layers,
        hidden=hidden,
        intermediate=getattr(config, "intermediate_size", None) or 4 * hidden,
        precision=precision,
        kernels=kernels,
        checkpointing=train.grad_checkpointing and not warmstart,
    )
    parameters = sum(p.numel() for p in policy.parameters())
    return pass_tokens(
        available=available,
        total=total,
        parameters=parameters,
        per_token=per_token,
        precision=precision,
        where=where,
        vocab=config.vocab_size,
    )


def gpu_bytes(shape: PretrainedShape, train: dict[str, Any]) -> int:
    """The least memory one GPU needs to train `shape` under the resolved `train` block (see the module's text)."""
    precision = train.get("update_precision", "fp32")  # resolved: never auto here
    per_parameter = 4 + STEP_BYTES + 2  # float32 weights, the step's state, the rollout engine's bf16 copy
    per_parameter += (2 + BF16_GRAD_BYTES) if precision == "bf16-master" else 0
    per_parameter += 4 if (train.get("kl_coef") or 0) > 0 else 0  # the KL reference
    per_token = token_bytes(
        layers=shape.layers,
        hidden=shape.hidden,
        intermediate=shape.intermediate,
        precision=precision,
        kernels=train.get("update_kernels", "eager"),
        checkpointing=bool(train.get("grad_checkpointing")),
    )
    tokens = train.get("micro_batch_tokens") or MIN_PASS_TOKENS
    return shape.parameters * per_parameter + HEAD_CHUNK_BYTES + tokens * per_token
