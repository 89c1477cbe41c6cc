"""train.update_precision: bf16-master (trainer/precision.py) computes the update on a bf16 copy and steps
float32 master weights; its loss and gradients are the fp32 update's to bf16 precision."""

import pytest
import torch
from torch import nn
from trainer_helpers import tiny_config, tiny_policy, tiny_spec_and_codec, tiny_train_batch

from agentrepro.reading import read_jsonl
from agentrepro.trainer import precision
from agentrepro.trainer.checkpoint import load_checkpoint
from agentrepro.trainer.config import TrainConfig
from agentrepro.trainer.loop import train
from agentrepro.trainer.update import update

CPU = torch.device("cpu")


def _one_update(choice, batch, cfg, make_opt):
    """(stats, the policy (float32 master) after the step, the model the update ran on, its optimizer)."""
    spec, tok, _ = tiny_spec_and_codec()
    policy = tiny_policy(spec, tok)
    opt = make_opt(policy.parameters())
    model = precision.update_model(choice, policy, opt)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    stats = update(model, opt, sched, batch, cfg, torch.Generator().manual_seed(0), CPU)
    return stats, policy, model, opt


@pytest.mark.parametrize("estimator, budget", [("grpo", 0), ("ppo", 8)])
def test_bf16_master_loss_and_gradients_are_the_fp32_ones_to_bf16_precision(estimator, budget):
    """One update (PPO-clip, entropy, KL, PPO's value loss; micro-batches of 8 tokens for PPO) with SGD at lr 1,
    so each master weight moves by its gradient: the bf16 copy's statistics and gradients are fp32's within
    bf16 rounding, but not equal to them (the copy does compute in bf16)."""
    _, _, codec = tiny_spec_and_codec()
    cfg = TrainConfig(estimator=estimator, grad_clip=1e6, entropy_coef=0.05, kl_coef=0.1, micro_batch_tokens=budget)
    sgd = lambda params: torch.optim.SGD(params, lr=1.0)  # noqa: E731
    spec, tok, _ = tiny_spec_and_codec()
    start = tiny_policy(spec, tok).state_dict()
    ref_stats, ref_policy, _, _ = _one_update("fp32", tiny_train_batch(codec, 0.0), cfg, sgd)
    new_stats, new_policy, work, _ = _one_update("bf16-master", tiny_train_batch(codec, 0.0), cfg, sgd)
    assert {p.dtype for p in work.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in new_policy.parameters()} == {torch.float32}
    differ = 0
    for name, before in start.items():
        if not before.is_floating_point():
            continue
        ref_step = ref_policy.state_dict()[name] - before
        new_step = new_policy.state_dict()[name] - before
        scale = float(ref_step.norm())
        if scale == 0:
            assert float(new_step.norm()) == 0, name
            continue
        assert float((new_step - ref_step).norm()) <= 0.03 * scale, name
        differ += not torch.equal(new_step, ref_step)
    assert differ > 0
    assert ref_stats.keys() == new_stats.keys()
    for key, value in ref_stats.items():
        assert new_stats[key] == pytest.approx(value, rel=0.03, abs=2e-3), key


def test_the_step_is_float32_adamw_on_the_masters_and_the_copy_is_their_bf16_rounding():
    """After an AdamW update the masters equal a float32 AdamW step from the same start with the same (float32)
    gradients, bit for bit, they keep precision below bf16's, and the copy holds them rounded to bf16."""
    _, _, codec = tiny_spec_and_codec()
    spec, tok, _ = tiny_spec_and_codec()
    start = tiny_policy(spec, tok)
    adamw = lambda params: torch.optim.AdamW(params, lr=1e-4)  # noqa: E731
    _, policy, work, _ = _one_update(
        "bf16-master", tiny_train_batch(codec, 0.0), TrainConfig(grad_clip=0.5, entropy_coef=0.01), adamw
    )
    ref_opt = adamw(start.parameters())
    for p, m in zip(start.parameters(), policy.parameters()):
        p.grad = None if m.grad is None else m.grad.clone()
    assert any(p.grad is not None and p.grad.dtype == torch.float32 for p in start.parameters())
    ref_opt.step()
    moved = 0
    for (name, ref), mine, copy in zip(start.named_parameters(), policy.parameters(), work.parameters()):
        assert torch.equal(mine, ref), name
        assert torch.equal(copy, mine.detach().to(torch.bfloat16)), name
        moved += not torch.equal(mine.detach().to(torch.bfloat16).float(), mine.detach())
    assert moved > 0  # the masters hold what bf16 cannot


def test_gradients_accumulate_in_float32_on_the_master():
    """Two backwards on the bf16 copy add up in float32 on the master (1 + 2^-10, which bf16 rounds to 1)."""
    master = nn.Linear(1, 1, bias=False)
    opt = torch.optim.SGD(master.parameters(), lr=1.0)
    work = precision.update_model("bf16-master", master, opt)
    for c in (1.0, 2.0**-10):
        (work.weight.sum() * c).backward()
        assert work.weight.grad is None
    assert master.weight.grad.dtype == torch.float32 and float(master.weight.grad) == 1 + 2.0**-10
    assert precision.update_model("fp32", master, opt) is master


def test_observation_and_padding_tokens_never_reach_the_gradient_in_bf16_master():
    """Advantages on observation and padding tokens change nothing: the same master weights and statistics."""
    _, _, codec = tiny_spec_and_codec()
    adamw = lambda params: torch.optim.AdamW(params, lr=1e-2)  # noqa: E731
    out = [
        _one_update("bf16-master", tiny_train_batch(codec, off), TrainConfig(grad_clip=100.0), adamw)
        for off in (0.0, 1e3)
    ]
    (sa, a, _, _), (sb, b, _, _) = out
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert sa == sb and sa["grad_norm"] > 0


def test_a_bf16_master_run_checkpoints_float32_weights_and_trains(tmp_path):
    """The GPU code paths on the CPU with bf16-master (static engine, micro-batches, checkpointing, a KL
    reference; the entropy bonus gives a gradient when every reward is 0): checkpoints hold the float32
    masters; the update's copy and the reference are bf16, so the KL is 0 at the first step."""
    run = tmp_path / "run"
    trainer = train(
        tiny_config(
            steps=2,
            rollout_engine="static",
            micro_batch_tokens=40,
            grad_checkpointing=True,
            kl_coef=0.05,
            entropy_coef=0.01,
            estimator="ppo",
            update_precision="bf16-master",
        ),
        run,
        resume=False,
    )
    assert trainer.update_model is not trainer.policy
    assert {p.dtype for p in trainer.update_model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in trainer.reference.parameters()} == {torch.bfloat16}
    lm = trainer.update_model.lm
    assert getattr(lm, "is_activation_checkpointing", None) or lm.is_gradient_checkpointing
    saved = load_checkpoint(run, 2)["model"]
    assert all(v.dtype == torch.float32 for v in saved.values() if v.is_floating_point())
    assert all(torch.equal(saved[k], v) for k, v in trainer.policy.state_dict().items())
    metrics = read_jsonl(run / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2] and all(m["grad_norm"] > 0 for m in metrics)
    assert metrics[0]["kl"] == 0 and metrics[1]["kl"] > 0
