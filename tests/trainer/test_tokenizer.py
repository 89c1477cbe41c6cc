"""The word-level tokenizer: deterministic vocabulary, grids round-trip, saves and loads like transformers'."""

from transformers import PreTrainedTokenizerFast

from agentrepro.environments import make_env
from agentrepro.trainer.tokenizer import NL, SPECIALS, build_word_tokenizer, encode_words, probe_texts


def _grid_tokenizer():
    env = make_env("frozenlake", {})
    return env, build_word_tokenizer(env.action_names, probe_texts(env, range(3), lambda o, i: i["grid"]))


def test_vocabulary_is_deterministic_and_covers_grids():
    """Same environment -> same vocabulary; every grid symbol and action word has its own id, no <unk>."""
    env, a = _grid_tokenizer()
    _, b = _grid_tokenizer()
    assert a.get_vocab() == b.get_vocab()
    vocab = a.get_vocab()
    for word in [*SPECIALS, *env.action_names, *env.grid_symbols, NL]:
        assert word in vocab, word
    _, info = env.reset(10001)
    ids = encode_words(a, info["grid"])
    assert a.unk_token_id not in ids
    assert len(ids) == 16 + 3  # 16 cells and 3 row breaks of a 4x4 grid


def test_grid_round_trip_keeps_rows():
    """Decoding a grid's ids gives its cells in order, with row breaks where the newlines were."""
    env, tok = _grid_tokenizer()
    _, info = env.reset(7)
    words = tok.convert_ids_to_tokens(encode_words(tok, info["grid"]))
    rows = " ".join(words).split(NL)
    assert [r.split() for r in rows] == [line.split() for line in info["grid"].split("\n")]


def test_save_and_load_pretrained(tmp_path):
    """save_pretrained / from_pretrained give the same vocabulary and special ids."""
    _, tok = _grid_tokenizer()
    tok.save_pretrained(tmp_path)
    again = PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    assert again.get_vocab() == tok.get_vocab()
    assert (again.pad_token_id, again.bos_token_id, again.eos_token_id) == (
        tok.pad_token_id,
        tok.bos_token_id,
        tok.eos_token_id,
    )
