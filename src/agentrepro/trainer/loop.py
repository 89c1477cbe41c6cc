"""The training loop, top to bottom: setup -> (rollout -> advantages -> update -> log -> checkpoint) x steps.

Writes into the run directory (docs/design.md §3.3): metrics.jsonl, timings.jsonl, graph_diagnostics.jsonl
(GiGPO/GraphGPO), batches/step<N>.jsonl (optional), warmstart.json, checkpoints/; what a step's metrics row and
batch dump hold is trainer/step_record.py's. Checkpoints are saved at exactly the evaluated steps
(`runconfig.checkpoint_steps`: step 0, after the warm start, always), so the workflow evaluates every checkpoint and
nothing else. With `resume`, the newest checkpoint is loaded with its optimizer, scheduler and random states, the
logs are cut back to its step, and the run continues; on the CPU it ends bit for bit where an uninterrupted run ends,
the saved random states included (torch's global generators are seeded from the run seed: checkpoint.seed_global_rng).
With several data-parallel ranks (`ranks`, trainer/parallel.py) rank 0 sets the run up (warm start or resume)
while the others wait, then every rank starts from its checkpoint; only rank 0 writes.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from agentrepro.fileio import atomic_write_json, atomic_write_jsonl, make_dir
from agentrepro.layout import RunFiles, batch_dump
from agentrepro.process import PREEMPTED, Preempted
from agentrepro.reading import iter_jsonl
from agentrepro.runconfig import evaluated_steps
from agentrepro.tracking import wandb_run
from agentrepro.trainer import checkpoint as ckpt
from agentrepro.trainer import kernels, precision
from agentrepro.trainer.context import RunSpec
from agentrepro.trainer.credit import TIMED, training_targets
from agentrepro.trainer.decode import engine_for
from agentrepro.trainer.memory import auto_pass_tokens
from agentrepro.trainer.packing import pack_turn_rows
from agentrepro.trainer.parallel import SINGLE, Ranks, Shard, sampling_seed
from agentrepro.trainer.policy import build_policy, run_device
from agentrepro.trainer.rollout import Sampler, rollout
from agentrepro.trainer.step_record import COUNTERS, count, device_memory, dump_rows, memory_use, metrics_row
from agentrepro.trainer.update import TrainBatch, batched_token_stats, update
from agentrepro.trainer.warmstart import warm_start

LOGS = RunFiles.STEP_LOGS


def _read_log(path: Path, upto: int) -> list[dict]:
    return [row for _, row in iter_jsonl(path) if row["step"] <= upto] if path.is_file() else []


def _scheduler(optimizer, cfg):
    if cfg.lr_schedule == "linear":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1.0 - s / max(cfg.steps, 1)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)


def checkpoint_schedule(spec: RunSpec) -> list[int]:
    """The steps this run saves: exactly the evaluated ones (`runconfig.evaluated_steps` of its config)."""
    return evaluated_steps(spec.train.steps, spec.eval, checkpoint_every=spec.train.checkpoint_every, path="run config")


class Trainer:
    """State of one run; `run(stop_at=None)` trains to `train.steps` (or stops after step `stop_at`)."""

    def __init__(self, config: dict[str, Any], run_dir: str | Path, *, resume: bool = True, ranks: Ranks = SINGLE):
        self.ranks = ranks
        self.spec = RunSpec.from_config(config)
        self.cfg = cfg = self.spec.train
        self.run_dir = Path(run_dir)
        make_dir(self.run_dir)
        self.save_steps = set(checkpoint_schedule(self.spec))
        self.device = run_device(cfg, ranks.device(cfg.device))
        ckpt.seed_global_rng(self.spec.seed)  # a resume then restores the saved state over it
        self.sample_gen = torch.Generator().manual_seed(sampling_seed(self.spec.seed, ranks.rank))
        self.update_gen = torch.Generator().manual_seed(self.spec.seed * 1_000_003 + 2)
        self.task_rng = np.random.default_rng([self.spec.seed, 0x7A5C])
        self.writer = ckpt.Writer()
        done = ckpt.saved_steps(self.run_dir) if resume else []
        if not ranks.leader:  # wait for rank 0 to set the run up; start from the step it is at
            done = [ranks.broadcast(None)]
        if done:
            self.tokenizer = ckpt.load_tokenizer(self.run_dir)
        else:
            self.tokenizer = self.spec.build_tokenizer()
        self.codec = self.spec.make_codec(self.tokenizer)
        self.policy = build_policy(self.spec.model, self.tokenizer, self.spec.seed).to(self.device)
        self.policy.eval()
        if done:
            self._resume(done[-1])
        else:
            self._fresh()
        if ranks.leader:
            ranks.broadcast(self.step)
        self.envs = [self.spec.make_env(training=True) for _ in range(len(ranks.share(cfg.groups)) * cfg.group_size)]
        self.engine = engine_for(cfg.rollout_engine, self.policy, self.device, cfg.bf16, training=True)
        # the module the update computes with: the policy, or its bf16 copy (trainer/precision.py); made after the
        # engine copied the policy (the engine has its own forward), before checkpointing and kernels go on it
        self.update_model = precision.update_model(cfg.update_precision, self.policy, self.optimizer)
        if cfg.grad_checkpointing:  # transformers >= 5.2x names it activation checkpointing
            lm = self.update_model.lm
            (getattr(lm, "activation_checkpointing_enable", None) or lm.gradient_checkpointing_enable)()
        kernels.apply(cfg.update_kernels, self.update_model.lm)

    # --- setup -----------------------------------------------------------------------------------
    def _new_optimizer(self):
        # fused: one kernel for the whole step on CUDA (the CPU keeps the default, for bit-exact resume there)
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(),
            lr=self.cfg.lr,
            weight_decay=self.cfg.weight_decay,
            fused=self.device.type == "cuda" or None,
        )
        self.scheduler = _scheduler(self.optimizer, self.cfg)

    def _fresh(self) -> None:
        for name in LOGS:
            (self.run_dir / name).unlink(missing_ok=True)
        for name in (RunFiles.METRICS, RunFiles.TIMINGS):  # present even for train.steps = 0
            atomic_write_jsonl(self.run_dir / name, [])
        ckpt.save_tokenizer(self.run_dir, self.tokenizer)
        record = warm_start(self.policy, self.spec, self.codec, self.device)
        atomic_write_json(self.run_dir / RunFiles.WARMSTART, record)
        self._new_optimizer()
        self.step = 0
        self.counters = {**dict.fromkeys(COUNTERS, 0), "wall_s": record.get("wall_s", 0.0)}
        self.logs: dict[str, list[dict[str, Any]]] = {name: [] for name in LOGS}
        self._save(every_rank=False)  # the other ranks wait for it
        self.reference = self._reference()

    def _resume(self, step: int) -> None:
        state = ckpt.load_checkpoint(self.run_dir, step)
        self.policy.load_state_dict(state["model"])
        self._new_optimizer()
        if state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        ckpt.restore_rng(state["rng"], self._generators(), self.task_rng)
        self.ranks.restore_sampling(
            self.sample_gen, state["rng"], self.spec.seed, where=ckpt.checkpoint_path(self.run_dir, step)
        )
        self.step = step
        self.counters = dict(state["counters"])
        self.logs = {name: _read_log(self.run_dir / name, step) for name in LOGS} if self.ranks.leader else {}
        for name, rows in self.logs.items():
            if (self.run_dir / name).exists():
                atomic_write_jsonl(self.run_dir / name, rows)
        self.reference = self._reference()

    def _reference(self):
        """The initial (post-warm-start) policy, for the KL term; None when the KL is off."""
        if self.cfg.kl_coef <= 0:
            return None
        ref = build_policy(self.spec.model, self.tokenizer, self.spec.seed).to(self.device)
        ref.load_state_dict(ckpt.load_checkpoint(self.run_dir, 0)["model"])
        kernels.apply(self.cfg.update_kernels, ref.lm)
        return precision.frozen_model(self.cfg.update_precision, ref).eval().requires_grad_(False)

    def _generators(self) -> dict[str, torch.Generator]:
        return {"sample": self.sample_gen, "update": self.update_gen}

    def _save(self, *, every_rank: bool = True, background: bool = False) -> None:
        """Rank 0 writes the checkpoint; with several ranks (`every_rank`: all of them are here) it keeps each
        rank's sampling state. `background`: the write runs in `self.writer`'s thread once the tensors are copied
        to host memory (checkpoint.Writer); otherwise it has ended when this returns."""
        rng = ckpt.rng_state(self._generators(), self.task_rng)
        if every_rank:
            rng.update(self.ranks.sampling_states(self.sample_gen))
        if not self.ranks.leader:
            return
        payload = ckpt.checkpoint_payload(
            self.step,
            policy=self.policy,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            rng=rng,
            counters=self.counters,
        )
        if background:
            self.writer.save(self.run_dir, self.step, payload)
        else:
            self.writer.wait()
            ckpt.write_payload(self.run_dir, self.step, payload)

    # --- one step --------------------------------------------------------------------------------
    def train_step(self) -> None:
        cfg, t_start = self.cfg, time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        timings: dict[str, float] = {}
        # rollout: groups x group_size trajectories, group g plays task seed seeds[g]; this rank plays its share of the groups
        task_seeds = self.task_rng.integers(
            cfg.train_first_seed, cfg.train_first_seed + cfg.train_num_seeds, size=cfg.groups
        )
        groups = [g for g in self.ranks.share(cfg.groups) for _ in range(cfg.group_size)]
        seeds = [int(task_seeds[g]) for g in groups]
        t0 = time.perf_counter()
        ro = rollout(
            self.policy,
            self.envs,
            seeds,
            groups,
            self.codec,
            Sampler(cfg.temperature, self.sample_gen),
            mode=cfg.mode,
            max_turns=cfg.max_turns,
            max_new_tokens=cfg.max_new_tokens,
            device=self.device,
            bf16=cfg.bf16,
            engine=self.engine,
        )
        timings["rollout"] = time.perf_counter() - t0
        ro = pack_turn_rows(ro, self.codec.pad)  # a trajectory's chained turn rows trained as one (trainer/packing.py)
        if cfg.micro_batch_tokens == 0:  # auto (trainer/memory.py), sized once the engine holds its cache
            available, total = device_memory(self.device)
            where = "GPU" if self.device.type == "cuda" else "host"
            tokens = auto_pass_tokens(self.policy, cfg, available=available, total=total, where=where)
            self.cfg = cfg = dataclasses.replace(cfg, micro_batch_tokens=tokens)
        # old log-probs (and values) under the policy that sampled, reference log-probs for the KL. One on-policy
        # pass (one epoch of one minibatch) needs no old log-probs: the update uses its own, detached, as the weights
        # have not moved; a value baseline still needs its values before the advantages, so that pass skips the head.
        old_logp = values = None
        off_policy = cfg.epochs * cfg.minibatches > 1
        t0 = time.perf_counter()
        with torch.no_grad():
            if cfg.uses_value or off_policy:
                old_logp, values = batched_token_stats(
                    self.update_model,
                    ro.input_ids,
                    ro.attention_mask,
                    cfg.micro_batch_tokens,
                    with_values=cfg.uses_value,
                    device=self.device,
                    bf16=cfg.bf16,
                    where=ro.loss_mask,
                    with_logprobs=off_policy,
                )
            ref_logp = None
            if self.reference is not None:
                ref_logp = batched_token_stats(
                    self.reference,
                    ro.input_ids,
                    ro.attention_mask,
                    cfg.micro_batch_tokens,
                    with_values=False,
                    device=self.device,
                    bf16=cfg.bf16,
                    where=ro.loss_mask,
                )[0]
        # a pass ran (each ends with its tensors on the host, so the clock holds its device time)
        if any(x is not None for x in (old_logp, values, ref_logp)):
            timings["token_stats"] = time.perf_counter() - t0
        shard = None
        if self.ranks.parallel:  # the whole batch on every rank: advantages over whole groups (and GraphGPO's graph)
            t0 = time.perf_counter()
            ro, tokens, owned = self.ranks.gather_batch(
                ro, {"old": old_logp, "values": values, "ref": ref_logp}, self.codec.pad
            )
            old_logp, values, ref_logp = tokens["old"], tokens["values"], tokens["ref"]
            shard = Shard(owned, self.ranks)
            timings["gather"] = time.perf_counter() - t0
        # advantages: the configured estimator's per-token targets (its step-row advantages broadcast to each
        # turn's tokens, or token-level GAE over the value head's predictions when it needs a critic)
        mask = ro.loss_mask.float()
        rows = ro.step_rows()
        t0 = time.perf_counter()
        targets = training_targets(ro, values.cpu() if cfg.uses_value and values is not None else None, cfg)
        advantages, returns, turn_adv = targets.advantages, targets.returns, targets.turn_advantages
        if targets.result is not None:
            timings.update({k: v for k, v in targets.result.timings.items() if k in TIMED})
        timings.setdefault("advantage", time.perf_counter() - t0)
        diagnostics = targets.result.diagnostics if targets.result is not None else None
        # update
        t0 = time.perf_counter()
        stats = update(
            self.update_model,
            self.optimizer,
            self.scheduler,
            TrainBatch(ro.input_ids, ro.attention_mask, mask, advantages, old_logp, ref_logp, returns, shard),
            cfg,
            self.update_gen,
            self.device,
        )
        if self.ranks.parallel:
            stats = self.ranks.sum_stats(stats)
        timings["update"] = time.perf_counter() - t0
        self.step += 1
        # log
        c = self.counters
        count(c, ro, mask)
        metrics = metrics_row(
            self.step, c, ro, stats, self.scheduler.get_last_lr()[0], self.ranks.largest(memory_use(self.device))
        )
        if self.step in self.save_steps:
            t0 = time.perf_counter()
            c["wall_s"] += time.perf_counter() - t_start
            self._save(background=True)  # the step waits for the copy to host memory, not the disk
            timings["checkpoint"] = time.perf_counter() - t0
            c["wall_s"] += timings["checkpoint"]
        else:
            c["wall_s"] += time.perf_counter() - t_start
        timings["step_total"] = time.perf_counter() - t_start
        metrics.update(
            micro_batch_tokens=cfg.micro_batch_tokens,
            wall_s=c["wall_s"],
            gpu_hours=c["wall_s"] * self.ranks.world / 3600 if self.device.type == "cuda" else 0.0,
        )
        self.last_metrics = metrics
        if not self.ranks.leader:
            return
        self._append(RunFiles.METRICS, metrics)
        self._append(RunFiles.TIMINGS, {"step": self.step, **timings})
        if diagnostics is not None:
            self._append(RunFiles.GRAPH_DIAGNOSTICS, {"step": self.step, **diagnostics})
        if (cfg.dump_batches_every and self.step % cfg.dump_batches_every == 0) or self.step in cfg.step_rows:
            atomic_write_jsonl(batch_dump(self.run_dir, self.step), dump_rows(ro, rows, advantages, turn_adv))

    def _append(self, name: str, row: dict) -> None:
        self.logs[name].append(row)
        atomic_write_jsonl(self.run_dir / name, self.logs[name])

    def run(self, *, stop_at: int | None = None, progress: bool | None = None) -> None:
        """Train until `train.steps` (or until step `stop_at`, to simulate a kill in tests)."""
        show = (self.cfg.progress if progress is None else progress) and self.ranks.leader
        bar = None
        if show and self.step < self.cfg.steps:
            bar = tqdm(
                total=self.cfg.steps, initial=self.step, desc=f"{self.spec.method} seed{self.spec.seed}", unit="step"
            )
        wandb_run = self._wandb() if self.cfg.wandb and self.ranks.leader else None
        try:
            while self.step < self.cfg.steps and (stop_at is None or self.step < stop_at):
                self.train_step()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(success=f"{self.last_metrics['train_success_rate']:.2f}")
                if wandb_run is not None:
                    log = {f"train/{k}": v for k, v in self.last_metrics.items() if v is not None}
                    wandb_run.log(log, step=self.step)
                # every rank stops after the same step; a run that has trained its last step just ends
                if self.step < self.cfg.steps and self.ranks.broadcast(PREEMPTED.is_set()):
                    self._save_preempted()
            self._drop_unplanned()
        finally:
            self.writer.wait()  # the last checkpoint is on disk (or its error raised) before the run returns
        if bar is not None:
            bar.close()
        if wandb_run is not None:
            wandb_run.finish()

    def _save_preempted(self) -> None:
        """The time limit is near (PREEMPT_SIGNAL): this step's checkpoint on disk, then stop for the retry to resume
        from it. A step the study does not evaluate is saved too, and dropped once the run ends (_drop_unplanned)."""
        if self.step not in self.save_steps:
            self._save()
        self.writer.wait()
        raise Preempted(self.step)

    def _drop_unplanned(self) -> None:
        """Remove the checkpoints of steps the study does not evaluate (saved on a preemption), once the run ends."""
        self.writer.wait()
        if self.ranks.leader:
            for step in ckpt.saved_steps(self.run_dir):
                if step not in self.save_steps and step != 0:  # step 0: the KL's reference, always kept
                    ckpt.checkpoint_path(self.run_dir, step).unlink()

    def _wandb(self):
        import wandb  # optional: the wandb extra

        os.environ.setdefault("WANDB_MODE", "offline")
        run = wandb_run(self.run_dir, study=self.spec.study, method=self.spec.method, seed=self.spec.seed)
        return wandb.init(  # every attempt of the run continues its one W&B run (agentrepro.tracking)
            project=run["project"],
            name=run["name"],
            id=run["id"],
            resume="allow",
            dir=str(make_dir(self.run_dir / RunFiles.LOGS)),
            config={"train": self.cfg.to_dict()},
        )


def train(
    config: dict[str, Any],
    run_dir: str | Path,
    *,
    resume: bool = True,
    stop_at: int | None = None,
    ranks: Ranks = SINGLE,
) -> Trainer:
    """Train one method x seed into `run_dir` (see Trainer) as rank `ranks`; returns the trainer for inspection."""
    trainer = Trainer(config, run_dir, resume=resume, ranks=ranks)
    trainer.run(stop_at=stop_at)
    return trainer
