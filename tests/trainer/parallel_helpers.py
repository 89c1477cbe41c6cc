"""One update over a batch made of two ranks' rollouts, run by one process or by each of two gloo ranks
(tests/trainer/test_parallel.py; a module of its own so that spawned ranks can import it)."""

from __future__ import annotations

import os

import torch
from trainer_helpers import tiny_policy, tiny_spec_and_codec

from agentrepro.trainer.credit import training_targets
from agentrepro.trainer.gather import merge_rollouts, merge_tokens
from agentrepro.trainer.parallel import SINGLE, Ranks, Shard
from agentrepro.trainer.update import TrainBatch, update

UPDATE = {
    "epochs": 2,
    "minibatches": 2,
    "kl_coef": 0.05,
    "entropy_coef": 0.01,
    "grad_clip": 0.05,
    "weight_decay": 0.01,
    "lr": 0.5,
    "groups": 2,
    "group_size": 2,
}
"""Every path of the update: two epochs of two minibatches (old log-probs, rows of one rank only in a minibatch
may happen), KL and entropy terms, active clipping (the sum over ranks must come first), weight decay (a
parameter without gradient, the value head under GRPO, must stay untouched)."""


def one_update(saved: dict, ranks: Ranks = SINGLE) -> dict:
    """Parameters and statistics after `update` over the whole batch of `saved` (rank r holds part r)."""
    spec, tok, codec = tiny_spec_and_codec(**UPDATE)
    cfg = spec.train
    policy = tiny_policy(spec, tok)
    policy.load_state_dict(saved["model"])
    parts = saved["parts"]
    if ranks.parallel:
        rollout, stats = parts[ranks.rank]
        ro, tokens, owned = ranks.gather_batch(rollout, stats, codec.pad)
        shard = Shard(owned, ranks)
    else:
        ro = merge_rollouts([p[0] for p in parts], codec.pad)
        tokens = {k: merge_tokens([p[1][k] for p in parts], ro.input_ids.shape[1]) for k in parts[0][1]}
        shard = None
    targets = training_targets(ro, None, cfg)
    # SGD: the parameters then differ by lr x the gradients' difference (Adam would magnify float noise in tiny gradients)
    optimizer = torch.optim.SGD(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    batch = TrainBatch(
        ro.input_ids,
        ro.attention_mask,
        ro.loss_mask.float(),
        targets.advantages,
        tokens["old"],
        tokens["ref"],
        None,
        shard,
    )
    stats = update(policy, optimizer, scheduler, batch, cfg, torch.Generator().manual_seed(5), torch.device("cpu"))
    if ranks.parallel:
        stats = ranks.sum_stats(stats)
    return {"model": policy.state_dict(), "stats": stats}


def rank_main(rank: int, world: int, port: int, saved_path: str, out_dir: str) -> None:
    """A gloo rank: join the group as the trainer's ranks do, update, save what it ends with."""
    import torch.distributed as dist

    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    torch.set_num_threads(1)
    ranks = Ranks.join("cpu")
    try:
        torch.save(
            one_update(torch.load(saved_path, weights_only=False), ranks), os.path.join(out_dir, f"rank{rank}.pt")
        )
    finally:
        dist.destroy_process_group()
