"""Checkpoints: model, optimizer, scheduler, every random state and the loop's counters; exact resume.

Layout under `<run>/checkpoints/`: `step<N>.pt` (one per saved step; step 0 is the policy after the warm
start, also the reference of the KL term; a run started from a shared warm start has that warm start's
step0.pt byte for byte, trainer/shared_warmstart.py) and `tokenizer/` (the run's tokenizer, saved once). Each file
is written atomically, so the newest complete `step<N>.pt` is always a valid resume point.

`Writer` writes a training step's checkpoint in the background: the step waits only while its tensors are copied to
host memory (`host_copy`: GPU to host on CUDA, a copy on the CPU, whose parameters the next step changes in place),
and the next steps run while a thread writes the file. Its next save, and the end of the run, wait for the write and
raise its error. A run killed during a write leaves the previous checkpoint as its resume point, and its logs are cut
back to that step on resume.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
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


def checkpoint_payload(
    step: int, *, policy, optimizer=None, scheduler=None, rng: dict | None = None, counters: dict | None = None
) -> dict[str, Any]:
    """What `step<N>.pt` holds; its tensors are the live ones (the model's and optimizer's own)."""
    return {
        "step": step,
        "model": policy.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "rng": rng,
        "counters": counters or {},
    }


def write_payload(run_dir, step: int, payload: dict[str, Any]) -> Path:
    path = checkpoint_path(run_dir, step)
    with atomic_binary(path) as fh:  # straight to the file: no second copy of gigabytes in memory
        torch.save(payload, fh)
    return path


def save_checkpoint(run_dir, step: int, **parts: Any) -> Path:
    """Write step `step`'s checkpoint now (`checkpoint_payload`'s parts)."""
    return write_payload(run_dir, step, checkpoint_payload(step, **parts))


def host_copy(payload: Any, pinned: dict[tuple, torch.Tensor] | None = None) -> Any:
    """`payload` with every tensor copied to host memory, tensors that share storage (tied embeddings) still sharing
    it, so the file is the same as the live payload's and nothing the training changes afterwards reaches it.
    `pinned`: page-locked host buffers for GPU tensors, kept between calls (by the tensor's place in the payload,
    dtype and shape): a copy into pinned memory runs at the bus's speed, one into fresh pageable memory at a fraction
    of it, and allocating pinned memory is slow, so the buffers are made once and reused."""
    copies: dict[tuple, torch.Tensor] = {}
    gpu = False

    def copy(value: Any, place: tuple) -> Any:
        nonlocal gpu
        if isinstance(value, torch.Tensor):
            key = (
                value.device,
                value.untyped_storage().data_ptr(),
                value.storage_offset(),
                value.shape,
                value.stride(),
            )
            if key not in copies:
                if pinned is not None and value.is_cuda:
                    slot = (place, value.dtype, tuple(value.shape))
                    if slot not in pinned:
                        pinned[slot] = torch.empty(value.shape, dtype=value.dtype, pin_memory=True)
                    copies[key] = pinned[slot].copy_(value.detach(), non_blocking=True)
                    gpu = True
                else:
                    copies[key] = value.detach().to("cpu", copy=True)
            return copies[key]
        if isinstance(value, dict):
            return {k: copy(v, (*place, k)) for k, v in value.items()}
        if type(value) in (list, tuple):  # exactly: a named tuple or torch.Size is kept as it is
            return type(value)(copy(v, (*place, i)) for i, v in enumerate(value))
        return value

    snapshot = copy(payload, ())
    if gpu:
        torch.cuda.synchronize()  # the non-blocking copies have landed before the training goes on
    return snapshot


class Writer:
    """Checkpoints written by one background thread, one at a time (see the module's text)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._pinned: dict[tuple, torch.Tensor] = {}  # host_copy's buffers, free again once the write has ended

    def save(self, run_dir, step: int, payload: dict[str, Any]) -> None:
        """Copy `payload` to host memory, then write it in the background once the previous write has ended."""
        self.wait()
        snapshot = host_copy(payload, self._pinned)
        self._thread = threading.Thread(
            target=self._write, args=(run_dir, step, snapshot), name=f"checkpoint-step{step}"
        )
        self._thread.start()

    def _write(self, run_dir, step: int, payload: dict[str, Any]) -> None:
        try:
            write_payload(run_dir, step, payload)
        except BaseException as exc:  # raised in the training thread by wait()
            self._error = exc

    def wait(self) -> None:
        """Block until the write under way has ended; raise its error, if it had one."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error


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
