"""Checkpoints: model, optimizer, scheduler, every random state and the loop's counters; exact resume.

Layout under `<run>/checkpoints/`: `step<N>.pt` (one per saved step; step 0 is the policy after the warm
start, also the reference of the KL term; a run started from a shared warm start has that warm start's
step0.pt byte for byte, trainer/shared_warmstart.py) and `tokenizer/` (the run's tokenizer, saved once). Each file
is written atomically, so the newest complete `step<N>.pt` is always a valid resume point.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_binary
from agentrepro.layout import checkpoint_dir, checkpoint_file, tokenizer_dir

_STEP_RE = re.compile(r"^step(\d+)\.pt\Z")  # the names layout.checkpoint_file gives


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    return checkpoint_file(run_dir, step)


def saved_steps(run_dir: str | Path) -> list[int]:
    d = checkpoint_dir(run_dir)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for p in d.iterdir() if (m := _STEP_RE.match(p.name)))


GLOBAL_STREAM = 0x6C0B  # the global generators' stream of a run seed (numpy SeedSequence entropy [seed, GLOBAL_STREAM])


def seed_global_rng(seed: int) -> None:
    """Seed torch's global generators from the run seed, before a run (or a shared warm start) draws anything.

    The trainer draws every random number from its own generators (sampling, update order, tasks), so the global
    ones decide nothing for the builtin tiny models; a local model with dropout draws from them in the update.
    Checkpoints save the global CPU state, and torch seeds it at random in every process: unseeded, a run killed
    and resumed in a new process saved a different state at every step than an uninterrupted run (and two fresh
    runs of one seed differed too). Seeded here, the saved state is a function of the run's seed and of what was
    drawn, so resumed and uninterrupted runs save the same state, and dropout, where a model has it, reproduces."""
    torch.manual_seed(int(np.random.SeedSequence([seed, GLOBAL_STREAM]).generate_state(1)[0]))


def rng_state(generators: dict[str, torch.Generator], numpy_rng: np.random.Generator) -> dict[str, Any]:
    return {
        "torch_cpu": torch.get_rng_state(),
        "numpy": numpy_rng.bit_generator.state,
        "generators": {k: g.get_state() for k, g in generators.items()},
    }


def restore_rng(state: dict[str, Any], generators: dict[str, torch.Generator], numpy_rng: np.random.Generator) -> None:
    """Restore every random state of a run's checkpoint. A shared warm start's step-0 checkpoint
    (trainer/shared_warmstart.py) carries only the global torch state: the run's own generators and task stream
    then keep the states they were seeded with, which is where a run that warm-starts itself has them at step 0."""
    torch.set_rng_state(state["torch_cpu"])
    if set(state) == {"torch_cpu"}:
        return
    numpy_rng.bit_generator.state = state["numpy"]
    for k, g in generators.items():
        g.set_state(state["generators"][k])


def save_checkpoint(
    run_dir, step: int, *, policy, optimizer=None, scheduler=None, rng: dict | None = None, counters: dict | None = None
) -> Path:
    payload = {
        "step": step,
        "model": policy.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "rng": rng,
        "counters": counters or {},
    }
    path = checkpoint_path(run_dir, step)
    with atomic_binary(path) as fh:  # straight to the file: no second copy of gigabytes in memory
        torch.save(payload, fh)
    return path


def load_checkpoint(run_dir, step: int) -> dict[str, Any]:
    path = checkpoint_path(run_dir, step)
    if not path.is_file():
        raise BadInput(f"no checkpoint for step {step} (saved: {saved_steps(run_dir) or 'none'})", path=path)
    return torch.load(path, map_location="cpu", weights_only=False)


def save_tokenizer(run_dir, tokenizer) -> Path:
    """Save the tokenizer into checkpoints/tokenizer/ through a temporary directory and a rename."""
    target = tokenizer_dir(run_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tokenizer.", dir=target.parent))
    tokenizer.save_pretrained(tmp)
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def load_tokenizer(run_dir):
    from transformers import PreTrainedTokenizerFast  # heavy: transformers

    path = tokenizer_dir(run_dir)
    if not path.is_dir():
        raise BadInput("the run has no saved tokenizer (was it trained?)", path=path)
    return PreTrainedTokenizerFast.from_pretrained(str(path))
