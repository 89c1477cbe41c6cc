"""Checkpoints written in the background (trainer/checkpoint.py `Writer`, `host_copy`): the file holds what a
direct save writes, nothing the training changes after the save reaches it, tied weights stay one storage, and a
failed write is raised in the training thread."""

from __future__ import annotations

import pytest
import torch
from trainer_helpers import tiny_config

from agentrepro.errors import BadInput
from agentrepro.trainer import checkpoint as ckpt
from agentrepro.trainer.loop import Trainer


def _trainer(tmp_path, name="run"):
    trainer = Trainer(tiny_config(steps=1, warmstart=False), tmp_path / name, resume=False)
    trainer.run()
    return trainer


def test_a_background_save_writes_the_bytes_of_a_direct_save_and_not_later_changes(tmp_path):
    trainer = _trainer(tmp_path)
    payload = ckpt.checkpoint_payload(
        trainer.step, policy=trainer.policy, optimizer=trainer.optimizer, scheduler=trainer.scheduler, rng=None
    )
    direct = torch.load(ckpt.write_payload(tmp_path / "direct", trainer.step, payload), weights_only=False)
    writer = ckpt.Writer()
    writer.save(tmp_path / "background", trainer.step, payload)
    with torch.no_grad():  # the next step's update, while the thread may still be writing
        for parameter in trainer.policy.parameters():
            parameter.add_(1.0)
    writer.wait()
    written = ckpt.load_checkpoint(tmp_path / "background", trainer.step)
    assert _same(written, direct) and not _same(written["model"], trainer.policy.state_dict())


def _same(a, b) -> bool:
    """Equal structure and values, tensors compared element by element (the zip's member names differ per file)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def test_the_host_copy_keeps_shared_storage_shared_and_owns_its_memory():
    weight = torch.randn(8, 4)
    payload = {"embed": weight, "head": weight, "view": weight[2:], "steps": [torch.tensor(3.0)], "lr": 0.1}
    copy = ckpt.host_copy(payload)
    assert copy["embed"] is copy["head"] and torch.equal(copy["embed"], weight)
    assert copy["embed"].untyped_storage().data_ptr() != weight.untyped_storage().data_ptr()
    assert torch.equal(copy["view"], weight[2:]) and copy["lr"] == 0.1 and copy["steps"][0].item() == 3.0


def test_a_failed_background_write_is_raised_by_the_next_wait_naming_the_file(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").write_text("a file where the folder belongs\n")
    writer = ckpt.Writer()
    writer.save(run, 3, {"step": 3, "model": {"w": torch.zeros(2)}})
    with pytest.raises(BadInput, match="checkpoints"):
        writer.wait()
    writer.wait()  # raised once, then clear


def test_a_run_returns_with_its_last_checkpoint_on_disk(tmp_path):
    trainer = _trainer(tmp_path)
    assert ckpt.saved_steps(trainer.run_dir) == [0, 1]
    assert ckpt.load_checkpoint(trainer.run_dir, 1)["step"] == 1
