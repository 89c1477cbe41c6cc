"""train.update_kernels (trainer/kernels.py): compiled Qwen2 RMSNorm and gated MLP compute what eager does."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

from agentrepro.errors import BadInput
from agentrepro.trainer import kernels


def tiny_qwen2() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return Qwen2ForCausalLM(config)


def loss_and_grads(lm: Qwen2ForCausalLM, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    lm.zero_grad()
    logits = lm(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    loss.backward()
    grads = []
    for name, p in lm.named_parameters():
        assert p.grad is not None, f"{name} got no gradient"
        grads.append(p.grad.clone())
    return loss.detach(), grads


def test_compiled_kernels_give_eager_loss_and_gradients():
    """With compiled kernels the loss and every parameter's gradient equal eager's (float32, CPU inductor)."""
    eager = tiny_qwen2()
    compiled = copy.deepcopy(eager)
    assert kernels.apply("compiled", compiled)
    ids = torch.randint(0, 64, (3, 11), generator=torch.Generator().manual_seed(1))
    loss_e, grads_e = loss_and_grads(eager, ids)
    loss_c, grads_c = loss_and_grads(compiled, ids)
    torch.testing.assert_close(loss_c, loss_e, rtol=1e-5, atol=1e-6)
    for ge, gc in zip(grads_e, grads_c):
        torch.testing.assert_close(gc, ge, rtol=1e-4, atol=1e-6)
    assert compiled.state_dict().keys() == eager.state_dict().keys()
    patched = [m for m in compiled.modules() if "forward" in vars(m)]
    assert len(patched) == 2 * 2 + 1 + 2  # two norms and one MLP per layer, and the final norm


def test_eager_compiles_nothing():
    """eager (the default) leaves every module's class forward in place."""
    lm = tiny_qwen2()
    assert not kernels.apply("eager", lm)
    assert not any("forward" in vars(m) for m in lm.modules())


def test_compiled_kernels_refuse_other_models():
    """Asking for compiled kernels on a GPT-2 model is one BadInput naming train.update_kernels."""
    lm = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_embd=16, n_layer=1, n_head=2, n_positions=16))
    with pytest.raises(BadInput, match=r"train.update_kernels"):
        kernels.apply("compiled", lm)
