"""A random-weight Qwen2 model directory built offline: for tests and benchmarks of the serving path.

No hub access is needed: the tokenizer is a byte-level BPE trained with `tokenizers` on the harness's own
prompt texts, with Qwen2's chat special tokens and a ChatML chat template; the weights are random
(seeded). The generation config turns sampling on (`do_sample`), since `transformers serve` does not turn
it on from a request's temperature. `SHAPES` holds a tiny shape for CPU tests and Qwen2.5-0.5B's shape for
GPU throughput measurements.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrepro.environments import make_env

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
    },
    # Qwen2.5-0.5B(-Instruct)'s config.json shape (its own vocabulary size; our tokenizer uses the first ids)
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
    },
}


def corpus() -> list[str]:
    """Texts the tokenizer is trained on: every system prompt and an observation of the grid games (which need no data)."""
    texts = []
    for name in ("sokoban", "frozenlake"):
        for fmt in make_env(name).prompts.formats:
            env = make_env(name, {"prompt_format": fmt})
            observation, _ = env.reset(10001)
            texts += [env.system_prompt(), observation, env.format_actions(["up", "left"])]
    return texts


def build(out: str | Path, *, shape: str = "tiny", seed: int = 0, max_tokens: int = 4096) -> Path:
    """Write a loadable model directory (config, random weights, tokenizer, chat template) to `out`."""
    import torch  # heavy: torch builds the model
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # heavy: as above
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # heavy: as above

    out = Path(out)
    dims = SHAPES[shape]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=min(dims["vocab_size"], 512),
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        model_max_length=max_tokens,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    vocab = tokenizer.get_vocab()
    eos, pad = vocab["<|im_end|>"], vocab["<|endoftext|>"]
    config = Qwen2Config(
        **dims,
        max_position_embeddings=max_tokens,
        tie_word_embeddings=True,
        eos_token_id=eos,
        pad_token_id=pad,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        do_sample=True, temperature=1.0, top_p=1.0, eos_token_id=eos, pad_token_id=pad, max_new_tokens=64
    )
    model.save_pretrained(out)
    (out / "agentrepro_tiny.json").write_text(json.dumps({"shape": shape, "seed": seed}) + "\n", encoding="utf-8")
    return out
