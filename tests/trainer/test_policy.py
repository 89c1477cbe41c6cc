"""The policy: model spec checks, seeded construction, and KV-cached decoding through padded rows."""

import pytest
import torch
from trainer_helpers import tiny_policy, tiny_spec_and_codec

from agentrepro.errors import BadInput
from agentrepro.trainer.policy import ModelSpec, positions


def test_model_spec_rejects_unknown_keys_and_names():
    """Unknown model keys, unknown tiny architectures and missing local directories are BadInput with key paths."""
    with pytest.raises(BadInput, match=r"model.config.width"):
        ModelSpec.from_dict({"name": "tiny-qwen2", "config": {"width": 3}})
    with pytest.raises(BadInput, match=r"model.name"):
        ModelSpec.from_dict({"name": "gpt-5"})
    with pytest.raises(BadInput, match=r"model.path"):
        ModelSpec.from_dict({"name": "x", "path": "/nonexistent/model"})
    with pytest.raises(BadInput, match="n_heads"):
        ModelSpec.from_dict({"name": "tiny-gpt2", "config": {"d_model": 10, "n_heads": 3}})


def test_same_seed_same_weights_and_global_rng_untouched():
    """Building with a seed is reproducible and leaves the global torch RNG where it was."""
    spec, tok, _ = tiny_spec_and_codec()
    before = torch.get_rng_state()
    a, b, c = tiny_policy(spec, tok, 3), tiny_policy(spec, tok, 3), tiny_policy(spec, tok, 4)
    assert torch.equal(torch.get_rng_state(), before)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa)


def test_positions_skip_padding():
    """Positions count attended tokens only."""
    attn = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 0, 1, 0, 1, 0]])
    assert positions(attn).tolist() == [[0, 1, 1, 1, 2, 3], [0, 0, 1, 1, 2, 2]]


@pytest.mark.parametrize("arch", ["tiny-qwen2", "tiny-gpt2"])
def test_cached_decoding_with_inner_padding_matches_full_forward(arch):
    """Feeding a padded row in pieces through the KV cache gives the logits of one full forward."""
    from agentrepro.trainer.policy import build_policy

    spec, tok, _ = tiny_spec_and_codec()
    spec = ModelSpec.from_dict({"name": arch, "config": {"d_model": 16, "n_layers": 2, "n_heads": 2}})
    policy = build_policy(spec, tok, 0).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, len(tok), (3, 12), generator=g)
    attn = torch.ones_like(ids)
    attn[0, 3:5] = 0
    attn[1, 7] = 0
    attn[2, 1:4] = 0
    pos = positions(attn)
    with torch.no_grad():
        full, _, _ = policy(ids, attn, pos)
        cache, pieces = None, []
        for lo, hi in [(0, 5), (5, 6), (6, 9), (9, 12)]:
            out, _, cache = policy(ids[:, lo:hi], attn[:, :hi], pos[:, lo:hi], past_key_values=cache, use_cache=True)
            pieces.append(out)
    inc = torch.cat(pieces, 1)
    keep = attn.bool()
    assert torch.allclose(full[keep], inc[keep], atol=1e-5)


@pytest.mark.parametrize(
    "env_name,prompt_format", [("frozenlake", "free_think"), ("sokoban", "wm"), ("sokoban", "free_wm")]
)
def test_tiny_policy_words_are_rendered_in_the_env_prompt_format(env_name, prompt_format):
    """A tiny policy's action words become a well-formed response in every prompt format (Sokoban's default is
    wm), so its turns are valid and its demonstrations parse."""
    from trainer_helpers import tiny_config

    from agentrepro.trainer.context import RunSpec

    config = tiny_config()
    config["env"] = {"name": env_name, "split": "eval", "params": {"prompt_format": prompt_format}}
    spec = RunSpec.from_config(config)
    tokenizer = spec.build_tokenizer()
    codec = spec.make_codec(tokenizer)
    words = spec.make_env(training=False).action_names[:2]
    response = codec.render([tokenizer.convert_tokens_to_ids(w) for w in words])
    env = spec.make_env(training=False)
    env.reset(10001)
    parsed = env.parse(response)
    assert parsed["format_correct"], response
    assert [a.lower() for a in parsed["actions"]] == [w.lower() for w in words]


def test_a_local_model_directory_trains_and_evaluates(tmp_path):
    """model.path: a transformers model directory (here a saved tiny model) is loaded locally, trained one
    step on full-text observations, and evaluated; its responses are its decoded text."""
    from trainer_helpers import tiny_config

    from agentrepro.trainer.evaluate import evaluate_run
    from agentrepro.trainer.loop import train

    spec, tok, _ = tiny_spec_and_codec()
    policy = tiny_policy(spec, tok)
    model_dir = tmp_path / "model"
    policy.lm.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    config = tiny_config(steps=1, warmstart=False)
    config["model"] = {"name": "saved-tiny", "path": str(model_dir)}
    trainer = train(config, tmp_path / "run", resume=False)
    assert not trainer.spec.model.emits_action_words
    assert trainer.last_metrics["tokens_generated"] > 0
    rows = evaluate_run(config, tmp_path / "run", 1)
    assert len(rows) == 4
