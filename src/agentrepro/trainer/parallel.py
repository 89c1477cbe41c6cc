"""Data parallel for the builtin trainer: how many ranks a job runs, each rank's share, what ranks exchange.

How many (`world_size`, the one rule): `train.data_parallel` N >= 1 runs N ranks; 0 (the default) runs one
rank per GPU the job is given (`resources.gpus`) when `train.device` is CUDA, and one on the CPU. On CUDA,
rank r uses `cuda:<local rank>` of the devices the job sees (workflow/scripts/gpu_slots.py or SLURM set
CUDA_VISIBLE_DEVICES) and the process group is NCCL; on the CPU the ranks are gloo processes (tests).
`trainer/spawn.py` starts them.

One RL step on N ranks (loop.Trainer):
* every rank draws the same task seeds; rank r rolls out the whole groups `shares(groups, N)[r]` (contiguous);
* each rank's rollout, with its old/reference log-probs and values, is gathered (`Ranks.gather_batch`), so
  every rank holds the whole batch in the order one process would have it and computes the advantages over
  it: an estimator needs whole groups, GraphGPO its graph over the whole batch, PPO whitens over all tokens;
* the update walks the minibatches one process walks (the same generator on every rank); each rank runs
  forward/backward on its own rows of a minibatch (`Shard`), every loss term divided by the whole minibatch's
  token count, and the gradients are summed over ranks before clipping (`Ranks.reduce_grads`): N ranks take
  the optimizer step one process takes over the whole batch (tests/trainer/test_parallel.py);
* only rank 0 writes metrics, timings, diagnostics and checkpoints; counts are the whole batch's, memory the
  largest of any rank.

Seeds: task draws, minibatch order and the warm start come from the run seed alone, as in one process. Rank 0
samples tokens with the single-process generator (`sampling_seed(seed, 0)`), rank r with
`sampling_seed(seed, r)`, so a run is reproducible for a given seed and N; a checkpoint keeps every rank's
sampling state (`rng["sample_ranks"]`) and a resumed run continues each rank's stream.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from agentrepro.errors import BadInput
from agentrepro.trainer.config import TrainConfig
from agentrepro.trainer.gather import merge_rollouts, merge_tokens
from agentrepro.trainer.policy import device_of

TIMEOUT = timedelta(hours=4)  # a collective waits this long (rank 0 may run the warm start while the others wait)
BUCKET = 1 << 25  # gradient elements summed per all-reduce


def world_size(config: dict[str, Any], *, path: object = None) -> int:
    """Ranks of a resolved run config (see the module docstring); BadInput for a number it cannot run."""
    train = TrainConfig.from_dict(config.get("train") or {}, path=path)
    gpus = (config.get("resources") or {}).get("gpus")
    gpus = gpus if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0 else None
    cuda = train.device.startswith("cuda")
    ranks = train.data_parallel or (gpus if cuda and gpus else 1)
    if ranks > 1 and cuda and train.device != "cuda":
        raise BadInput(
            f"with {ranks} data-parallel ranks each rank takes cuda:<its local rank>: write device: cuda, "
            f"not {train.device!r}",
            path=path,
            where="train.device",
        )
    if ranks > 1 and cuda and gpus is not None and ranks > gpus:
        raise BadInput(
            f"{ranks} ranks on CUDA need as many GPUs, the job is given resources.gpus = {gpus}",
            path=path,
            where="train.data_parallel",
        )
    if ranks > train.groups:
        raise BadInput(
            f"each rank rolls out whole groups: at most train.groups = {train.groups} ranks, got {ranks}",
            path=path,
            where="train.data_parallel" if train.data_parallel else "resources.gpus",
        )
    return ranks


def shares(groups: int, world: int) -> list[range]:
    """Group indices of each rank: contiguous, sizes differing by at most one (rank order = batch order)."""
    bounds = np.linspace(0, groups, world + 1).round().astype(int) if world > 1 else [0, groups]
    return [range(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


def sampling_seed(seed: int, rank: int) -> int:
    """Seed of rank `rank`'s token-sampling generator; rank 0's is the single-process one (1_000_003 is prime and
    7919 r is never a multiple of it for r < 1_000_003, so ranks of one seed and rank 0 of other seeds never share it)."""
    return seed * 1_000_003 + 1 + 7919 * rank


@dataclass(frozen=True)
class Ranks:
    """This process's place among the job's ranks (one process: rank 0 of 1, no process group)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def leader(self) -> bool:
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        return self.world > 1

    @classmethod
    def join(cls, device: str) -> Ranks:
        """Join the process group described by torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
        MASTER_PORT; the store is the launcher's, trainer/spawn.py): NCCL on CUDA, gloo on the CPU."""
        env = os.environ
        ranks = cls(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", env["RANK"])))
        if device.startswith("cuda"):
            device_of(device)  # BadInput naming train.device on a machine without CUDA
            torch.cuda.set_device(ranks.local_rank)
        store = dist.TCPStore(
            env["MASTER_ADDR"], int(env["MASTER_PORT"]), ranks.world, is_master=False, timeout=TIMEOUT
        )
        dist.init_process_group(
            "nccl" if device.startswith("cuda") else "gloo",
            store=store,
            rank=ranks.rank,
            world_size=ranks.world,
            timeout=TIMEOUT,
        )
        return ranks

    def device(self, name: str) -> str:
        """The device this rank trains on: `cuda` becomes `cuda:<local rank>` when there are several ranks."""
        return f"cuda:{self.local_rank}" if self.parallel and name == "cuda" else name

    def share(self, groups: int) -> range:
        return shares(groups, self.world)[self.rank]

    def sampling_states(self, generator: torch.Generator) -> dict[str, list[torch.Tensor]]:
        """What a checkpoint keeps of the ranks' sampling generators: {"sample_ranks": [state of rank r]} ({} for one process)."""
        return {"sample_ranks": self.gather(generator.get_state())} if self.parallel else {}

    def restore_sampling(
        self, generator: torch.Generator, rng: dict[str, Any] | None, seed: int, *, where: object
    ) -> None:
        """Put this rank's saved sampling state back (after checkpoint.restore_rng gave it rank 0's); a checkpoint
        without one (step 0, written before the other ranks took part) leaves every rank at its seeded state."""
        if not self.parallel:
            return
        saved = (rng or {}).get("sample_ranks")
        if saved is None:
            generator.manual_seed(sampling_seed(seed, self.rank))
        elif len(saved) != self.world:
            raise BadInput(f"saved by {len(saved)} data-parallel ranks, this run has {self.world}", path=where)
        else:
            generator.set_state(saved[self.rank])

    # --- what ranks exchange (every rank calls each of these at the same point) -----------------
    def broadcast(self, value: Any) -> Any:
        """Rank 0's value, on every rank."""
        if not self.parallel:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value: Any) -> list[Any]:
        """Every rank's value, in rank order, on every rank."""
        if not self.parallel:
            return [value]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, value)
        return out

    def sum_stats(self, stats: dict[str, float], keep: tuple[str, ...] = ("grad_norm",)) -> dict[str, float]:
        """Per-rank update statistics (each a rank's share of a mean over the whole minibatch) summed over ranks;
        the keys in `keep` are the same on every rank (computed after the gradient sum) and kept."""
        parts = self.gather(stats)
        return {
            k: stats[k] if k in keep else sum(p.get(k, 0.0) for p in parts)
            for k in sorted({k for p in parts for k in p})
        }

    def largest(self, values: dict[str, float | None]) -> dict[str, float | None]:
        """Each value's maximum over ranks (None where no rank has one)."""
        parts = self.gather(values)
        return {k: max((p[k] for p in parts if p[k] is not None), default=None) for k in values}

    def reduce_grads(self, parameters) -> None:
        """Sum gradients over ranks, in place. A parameter no rank has a gradient for keeps none (the optimizer
        then skips it, as one process does); one that some rank lacks counts as zero there."""
        params = [p for p in parameters if p.requires_grad]
        has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=params[0].device)
        dist.all_reduce(has)
        live = [p for p, h in zip(params, has.tolist()) if h > 0]
        grads = []
        for p in live:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        for bucket in _buckets(grads):
            flat = torch.cat([g.reshape(-1) for g in bucket])
            dist.all_reduce(flat)
            for g, reduced in zip(bucket, flat.split([g.numel() for g in bucket])):
                g.copy_(reduced.view_as(g))

    def gather_batch(self, rollout, stats: dict[str, torch.Tensor | None], pad: int):
        """(whole-batch rollout, whole-batch per-token `stats`, this rank's rows (bool, rows)) from every rank's."""
        parts = self.gather((rollout, stats))
        merged = merge_rollouts([p[0] for p in parts], pad)
        width = merged.input_ids.shape[1]
        tokens = {k: merge_tokens([p[1][k] for p in parts], width) for k in stats}
        owned = torch.cat([torch.full((p[0].input_ids.shape[0],), r == self.rank) for r, p in enumerate(parts)])
        return merged, tokens, owned


def _buckets(params: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """Tensors (gradients) in runs of one dtype and device of at most BUCKET elements (one larger tensor: a run of its own)."""
    out: list[list[torch.Tensor]] = []
    size = 0
    for p in params:
        if out and size + p.numel() <= BUCKET and (out[-1][0].dtype, out[-1][0].device) == (p.dtype, p.device):
            out[-1].append(p)
            size += p.numel()
        else:
            out.append([p])
            size = p.numel()
    return out


@dataclass(frozen=True)
class Shard:
    """This rank's part of a gathered batch for `update.update` (TrainBatch.shard): the rows it computes, and
    the gradient sum over ranks before clipping."""

    owned: torch.Tensor  # bool (rows,)
    ranks: Ranks

    def rows_of(self, idx: torch.Tensor) -> torch.Tensor:
        return idx[self.owned[idx]]

    def reduce_grads(self, parameters) -> None:
        self.ranks.reduce_grads(parameters)


SINGLE = Ranks()
"""One process: no process group, nothing exchanged."""
