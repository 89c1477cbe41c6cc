"""The builtin model's config bounds and its memory estimate: counted without torch, equal to what torch builds."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentrepro.errors import BadInput
from agentrepro.serving import tiny
from agentrepro.trainer import model_size
from agentrepro.trainer.model_size import (
    CONFIG,
    MAX_TRAINING_BYTES,
    check_config,
    check_model,
    parameters,
    training_memory,
)


@pytest.mark.parametrize("name", model_size.TINY_ARCHS)
@pytest.mark.parametrize(
    "config",
    [{"d_model": 16, "n_layers": 1, "n_heads": 2}, {"d_model": 48, "n_layers": 3, "n_heads": 4, "max_positions": 100}],
)
def test_parameter_count_equals_the_built_policy(name, config):
    """The estimate's parameter count is exactly the number of parameters of the policy trainer/policy.py builds."""
    from trainer_helpers import tiny_spec_and_codec

    from agentrepro.trainer.policy import ModelSpec, build_policy

    _, tokenizer, _ = tiny_spec_and_codec()
    policy = build_policy(ModelSpec.from_dict({"name": name, "config": config}), tokenizer, 0)
    built = sum(p.numel() for p in policy.parameters())
    assert parameters(name, check_config(name, config), vocab=len(tokenizer)) == built


def test_the_estimate_imports_no_torch():
    """A preflight can compute the estimate without torch: importing model_size and calling it loads no torch."""
    code = (
        "import sys; from agentrepro.trainer.model_size import training_memory; "
        "m = training_memory('tiny-gpt2', {'d_model': 64}); assert 'torch' not in sys.modules, 'torch'; print(m.bytes)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and int(done.stdout) > 0, done.stderr


@pytest.mark.parametrize("key", sorted(CONFIG))
def test_each_key_is_refused_past_its_bound_with_the_bound_in_the_message(key):
    """A config value one past its bound, or 1e12, is refused naming model.config.<key> and the bound."""
    size = CONFIG[key]
    for value in (size.high + 1, 10**12, size.low - 1, True, 2.0):
        with pytest.raises(
            BadInput, match=rf"model.config.{key}: expected an integer in \[{size.low:,}, {size.high:,}\]"
        ):
            check_config("tiny-qwen2", {key: value})


def test_memory_estimate_counts_the_optimizer_and_the_settings_that_add_copies():
    """16 bytes a parameter (weights, gradients, AdamW's two moments), +4 with a KL reference, +4 under bf16-master."""
    config = {"d_model": 64}
    base = training_memory("tiny-gpt2", config)
    assert base.bytes == 16 * base.parameters
    assert training_memory("tiny-gpt2", config, {"kl_coef": 0.1}).bytes == 20 * base.parameters
    assert training_memory("tiny-gpt2", config, {"update_precision": "bf16-master"}).bytes == 20 * base.parameters


def test_a_model_beyond_the_memory_bound_is_refused_naming_the_method():
    """A config inside every key's bound whose training needs more than MAX_TRAINING_BYTES is refused with the estimate."""
    model = {"name": "tiny-qwen2", "config": {"d_model": 4096, "n_layers": 64, "n_heads": 32}}
    assert training_memory(model["name"], model["config"]).bytes > MAX_TRAINING_BYTES
    with pytest.raises(
        BadInput,
        match=r"m.yaml: model.config: training this model would hold about [\d,]+ parameters x 16 bytes"
        r" = [\d.]+ GiB .*method ppo\), more than the builtin model's bound of 16 GiB",
    ):
        check_model(model, {"method ppo": {}}, path="m.yaml")
    check_model({"name": "tiny-gpt2", "config": {"d_model": 64}}, {"method ppo": {"kl_coef": 0.1}}, path="m.yaml")


# Qwen2.5-0.5B(-Instruct)'s config.json shape, as agentrepro.serving.tiny builds it, and 1.5B's below
QWEN_05B = {"model_type": "qwen2", "hidden_act": "silu", **tiny.SHAPES["qwen2.5-0.5b"], "tie_word_embeddings": True}


@pytest.mark.parametrize(
    "config",
    [
        QWEN_05B,
        {
            **QWEN_05B,
            "hidden_size": 1536,
            "intermediate_size": 8960,
            "num_hidden_layers": 28,
            "num_attention_heads": 12,
        },
        {**QWEN_05B, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "tie_word_embeddings": False},
    ],
)
def test_a_local_models_parameters_are_counted_from_its_config_json(tmp_path, config):
    """PretrainedShape.read counts what transformers builds from the same config.json (on the meta device: no
    memory), plus the value head, and sees a Qwen2 model with silu."""
    import json

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    (tmp_path / "config.json").write_text(json.dumps(config))
    shape = model_size.PretrainedShape.read(tmp_path)
    assert shape is not None and shape.qwen2_silu
    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tmp_path))
    assert shape.parameters == sum(p.numel() for p in lm.parameters()) + config["hidden_size"] + 1


@pytest.mark.parametrize("text", ["", "[]", '{"hidden_size": 8}', '{"hidden_size": "x", "num_attention_heads": 2}'])
def test_a_config_json_that_says_no_shape_reads_as_none(tmp_path, text):
    (tmp_path / "config.json").write_text(text)
    assert model_size.PretrainedShape.read(tmp_path) is None
    assert model_size.PretrainedShape.read(tmp_path / "absent") is None
