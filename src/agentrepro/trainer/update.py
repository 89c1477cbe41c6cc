"""The RL update: PPO-clip with token-mean aggregation, optional k3 KL to the initial policy, entropy bonus,
value loss (PPO), gradient clipping.

Every per-token tensor is (rows, tokens) and aligned with `input_ids`: the entry at column p concerns the
token at p, predicted from position p - 1 (column 0, always <bos>, is never trained). `mask` is the loss
mask (1 on generated tokens only); every mean below is a masked mean over the minibatch's generated
tokens (token-mean), so observation and padding tokens never reach the loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from agentrepro.trainer.config import TrainConfig
from agentrepro.trainer.logprobs import head_logprobs
from agentrepro.trainer.policy import autocast, positions


def masked_mean(x: torch.Tensor, mask: torch.Tensor, denom: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of x over mask = 1 (0 when the mask is empty); with `denom`, the masked sum over that many tokens
    (a micro-batch's share of its minibatch's mean)."""
    return (x * mask).sum() / (mask.sum().clamp(min=1) if denom is None else denom)


def token_stats(
    policy,
    input_ids,
    attention_mask,
    *,
    with_values: bool,
    with_entropy: bool,
    device,
    bf16: bool,
    where: torch.Tensor | None = None,
    with_logprobs: bool = True,
):
    """(log-probs, entropies or None, values or None), each (rows, tokens) float32, aligned with input_ids.
    With `where` (rows, tokens; the loss mask), log-probs and entropies only at its non-zero columns (0 elsewhere):
    the LM head runs over those tokens only, in chunks (trainer/logprobs.py). Values: every column. Without
    `with_logprobs` the LM head does not run: (None, None, values)."""
    attn = attention_mask.to(device)
    with autocast(device, bf16):
        hidden, values = policy.last_hidden(input_ids.to(device), attn, positions(attn), with_values=with_values)
    rows, width = input_ids.shape
    vals = None
    if with_values:
        vals = torch.zeros(rows, width, device=device)
        vals[:, 1:] = values[:, :-1]
    if not with_logprobs:
        return None, None, vals
    take = torch.ones(rows, width, dtype=torch.bool) if where is None else where.to("cpu", torch.bool, copy=True)
    take[:, 0] = False  # column 0 is predicted from nothing
    at = torch.nonzero(take.flatten()).squeeze(-1)  # on the CPU: no host sync on the device
    targets = input_ids.flatten()[at].to(device)
    at = at.to(device)
    with autocast(device, bf16):
        lp, ent = head_logprobs(
            hidden.flatten(0, 1)[at - 1], policy.head.weight, targets, bias=policy.head.bias, with_entropy=with_entropy
        )
    scatter = lambda x: torch.zeros(rows * width, device=device).index_copy(0, at, x).view(rows, width)  # noqa: E731
    logp = scatter(lp)
    entropy = scatter(ent) if with_entropy else None
    return logp, entropy, vals


@torch.no_grad()
def batched_token_stats(
    policy,
    input_ids,
    attention_mask,
    budget: int,
    *,
    with_values: bool,
    device,
    bf16: bool,
    where: torch.Tensor | None = None,
    with_logprobs: bool = True,
):
    """token_stats (no entropy) over all rows in passes of at most `budget` padded tokens; (log-probs or None,
    values or None) on the CPU. `budget` 0: one pass. `where`, `with_logprobs`: as in token_stats."""
    rows, width = input_ids.shape
    logp = torch.zeros(rows, width) if with_logprobs else None
    values = torch.zeros(rows, width) if with_values else None
    for idx, cols in micro_batches(attention_mask, torch.arange(rows), budget):
        lp, _, v = token_stats(
            policy,
            input_ids[idx, :cols],
            attention_mask[idx, :cols],
            with_values=with_values,
            with_entropy=False,
            device=device,
            bf16=bf16,
            where=None if where is None else where[idx, :cols],
            with_logprobs=with_logprobs,
        )
        if logp is not None:
            logp[idx, :cols] = lp.cpu()
        if values is not None:
            values[idx, :cols] = v.cpu()
    return logp, values


@dataclass
class TrainBatch:
    """Everything one update needs; tensors (rows, tokens) on the CPU."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    mask: torch.Tensor  # loss mask, float
    advantages: torch.Tensor
    old_logp: torch.Tensor | None  # None: one epoch of one minibatch, so the sampling policy is the current one
    ref_logp: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    shard: Any = (
        None  # data parallel (trainer/parallel.Shard): the rows this rank computes, the gradient sum over ranks
    )


def ppo_clip_loss(logp, old_logp, advantages, mask, clip: float, denom=None):
    """Token-mean PPO-clip policy loss and the clipped fraction (means over `denom` tokens when given)."""
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip, 1 + clip)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask, denom)
    clipfrac = masked_mean((clipped > unclipped).float(), mask, denom)
    return loss, clipfrac


def k3_kl(logp, ref_logp):
    """k3 estimator of KL(policy || reference) per token: exp(r) - r - 1 with r = ref - logp."""
    r = ref_logp - logp
    return torch.exp(r) - r - 1


def update(
    policy, optimizer, scheduler, batch: TrainBatch, cfg: TrainConfig, generator: torch.Generator, device
) -> dict[str, float]:
    """`cfg.epochs` passes of `cfg.minibatches` optimizer steps over the batch; returns mean statistics.
    `policy` computes the loss; the gradients are those of `optimizer`'s parameters (the policy's own, or with
    `train.update_precision: bf16-master` the float32 masters its bf16 copy's gradients go to: trainer/precision.py)."""
    rows = batch.input_ids.shape[0]
    sums: dict[str, float] = {}
    count = 0
    policy.train()
    for _ in range(cfg.epochs):
        order = torch.randperm(rows, generator=generator)
        for chunk in order.chunk(cfg.minibatches):
            stats = _minibatch_step(policy, optimizer, batch, chunk, cfg, device)
            for k, v in stats.items():
                sums[k] = sums.get(k, 0.0) + v
            count += 1
    scheduler.step()
    policy.eval()
    return {k: v / count for k, v in sums.items()}


def micro_batches(attention_mask: torch.Tensor, idx: torch.Tensor, budget: int) -> list[tuple[torch.Tensor, int]]:
    """Split rows `idx` into micro-batches of at most `budget` padded tokens (rows x the longest row's length),
    rows sorted by length so that similar lengths share a pass; each as (rows, columns to keep).
    A row longer than the budget gets a pass of its own; `budget` 0, or one that holds every row at the full width,
    keeps all rows and columns in one pass (so an auto budget that fits the whole minibatch changes nothing)."""
    if budget <= 0 or len(idx) * attention_mask.shape[1] <= budget:
        return [(idx, attention_mask.shape[1])]
    attended = attention_mask[idx].bool()
    cols = torch.arange(attended.shape[1])
    lengths = torch.where(attended, cols + 1, 0).amax(-1)  # one past the last attended column
    out: list[tuple[torch.Tensor, int]] = []
    rows: list[int] = []
    width = 0
    for k in torch.argsort(lengths, descending=True, stable=True).tolist():
        length = int(lengths[k])
        if rows and (len(rows) + 1) * max(width, length) > budget:
            out.append((idx[rows], width))
            rows, width = [], 0
        rows.append(k)
        width = max(width, length)
    out.append((idx[rows], width))
    return out


def _minibatch_step(policy, optimizer, batch: TrainBatch, idx, cfg: TrainConfig, device) -> dict[str, float]:
    """One optimizer step over rows `idx`: gradients accumulated over `cfg.micro_batch_tokens`-sized passes,
    each loss term divided by the whole minibatch's generated-token count (so the sum is its token mean).
    Statistics stay on the device until the step ends (one host sync a step, not one a pass)."""
    denom = batch.mask[idx].sum().clamp(min=1).to(device)
    sums: dict[str, torch.Tensor] = {}
    optimizer.zero_grad(set_to_none=True)
    mine = idx if batch.shard is None else batch.shard.rows_of(idx)  # denom stays the whole minibatch's
    for rows, width in micro_batches(batch.attention_mask, mine, cfg.micro_batch_tokens) if len(mine) else ():
        for k, v in _backward(policy, batch, rows, width, denom, cfg, device).items():
            sums[k] = sums[k] + v if k in sums else v
    params = [p for group in optimizer.param_groups for p in group["params"]]  # where the gradients are
    if batch.shard is not None:
        batch.shard.reduce_grads(params)
    sums["grad_norm"] = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
    optimizer.step()
    return {k: float(v) for k, v in sums.items()}


def _backward(policy, batch: TrainBatch, idx, width: int, denom, cfg: TrainConfig, device) -> dict[str, torch.Tensor]:
    """Loss of rows `idx` (first `width` columns) with every masked mean taken over `denom` tokens; backward.
    Returns the pass's statistics as detached device scalars."""
    take = lambda t: None if t is None else t[idx, :width].to(device)  # noqa: E731
    mean = lambda x, m: masked_mean(x, m, denom)  # noqa: E731
    mask, adv, old = take(batch.mask), take(batch.advantages), take(batch.old_logp)
    logp, entropy, values = token_stats(
        policy,
        batch.input_ids[idx, :width],
        batch.attention_mask[idx, :width],
        with_values=cfg.uses_value,
        with_entropy=True,
        device=device,
        bf16=cfg.bf16,
        where=batch.mask[idx, :width],
    )
    if old is None:  # single on-policy pass: old log-probs are the current ones (ratio 1, same gradient)
        old = logp.detach()
    loss_policy, clipfrac = ppo_clip_loss(logp, old, adv, mask, cfg.clip_ratio, denom)
    ent = mean(entropy, mask)
    loss = loss_policy - cfg.entropy_coef * ent if cfg.entropy_coef else loss_policy  # no entropy backward at 0
    stats = {"loss_policy": loss_policy, "entropy": ent, "clipfrac": clipfrac}
    if batch.ref_logp is not None:
        kl = mean(k3_kl(logp, take(batch.ref_logp)), mask)
        loss = loss + cfg.kl_coef * kl
        stats["kl"] = kl
    if cfg.uses_value:
        loss_value = 0.5 * mean((values - take(batch.returns)) ** 2, mask)
        loss = loss + cfg.value_coef * loss_value
        stats["loss_value"] = loss_value
    loss.backward()
    stats["approx_kl_old"] = mean(old - logp.detach(), mask)
    return {k: v.detach() for k, v in stats.items()}
