"""A word-level tokenizer over an environment's vocabulary, as a transformers `PreTrainedTokenizerFast`.

Words are separated by whitespace; a newline is its own token `<nl>` (grids keep their rows). The
vocabulary is: the special tokens, the environment's action words, `<nl>`, then every word seen in the
observations of a few probe episodes (reset plus the BFS solution) and the environment's grid symbols, sorted — so it is deterministic for an
environment and its parameters. Unknown words map to `<unk>`. It saves and loads with
`save_pretrained` / `PreTrainedTokenizerFast.from_pretrained` like any transformers tokenizer. It holds at
most `model_size.MAX_VOCAB` words (the bound the builtin model's memory estimate counts with).
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

from agentrepro.errors import Failure
from agentrepro.trainer.model_size import MAX_VOCAB

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
OBS, ACT, NL = "<obs>", "<act>", "<nl>"
SPECIALS = [PAD, BOS, EOS, UNK, OBS, ACT]


def build_word_tokenizer(action_words: Iterable[str], texts: Iterable[str]) -> PreTrainedTokenizerFast:
    """Tokenizer whose vocabulary is the specials, the action words, `<nl>` and the words of `texts`."""
    actions = list(dict.fromkeys(action_words))
    words: set[str] = set()
    for text in texts:
        words.update(text.replace("\n", f" {NL} ").split())
    ordered = SPECIALS + actions + [w for w in [NL, *sorted(words)] if w not in SPECIALS and w not in actions]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(ordered))}
    if len(vocab) > MAX_VOCAB:
        raise Failure(
            f"the environment's probe episodes hold {len(vocab):,} distinct words, more than the builtin "
            f"tokenizer's bound of {MAX_VOCAB:,}: give model.path (a model with its own tokenizer)"
        )
    core = Tokenizer(WordLevel(vocab=vocab, unk_token=UNK))
    core.normalizer = normalizers.Replace("\n", f" {NL} ")
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with single spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        additional_special_tokens=[OBS, ACT],
    )


def encode_words(tokenizer: PreTrainedTokenizerFast, text: str) -> list[int]:
    """Token ids of `text` without added special tokens."""
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def probe_texts(env, seeds: Iterable[int], view) -> list[str]:
    """Observation texts of reset + BFS-solution play on `seeds` (what the vocabulary is built from).

    `view(observation, info) -> str` picks what the policy reads (the grid or the full observation).
    """
    texts = [" ".join(getattr(env, "grid_symbols", ()))]
    for seed in seeds:
        obs, info = env.reset(int(seed))
        texts.append(view(obs, info))
        for action in env.solve():
            obs, _, done, info = env.step(env.format_actions([action]))
            texts.append(view(obs, info))
            if done:
                break
    return texts
