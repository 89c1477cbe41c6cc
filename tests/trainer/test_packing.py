"""Turn rows packed for training (trainer/packing.py): a concat chat trajectory whose turn rows extend one another is
trained in one row, with the same log-probabilities, values, targets and loss as its rows one by one."""

import dataclasses

import pytest
import torch
from test_chat_rollout import SEEDS, TURNS, ForcedSampler, _play
from trainer_helpers import chat_spec_and_codec, tiny_policy

from agentrepro.trainer.credit import training_targets
from agentrepro.trainer.packing import pack_turn_rows
from agentrepro.trainer.update import TrainBatch, token_stats, update


class CanonicalAnswers:
    """Every turn answers with the tokenizer's own tokens of a short text, so the history re-renders as generated."""

    def __init__(self, codec, text="go left then up"):
        self.ids = torch.tensor(codec.tokenizer(text, add_special_tokens=False)["input_ids"] + [codec.eos])

    def __call__(self, logits, trajs, turn, position):
        return self.ids[min(position, len(self.ids) - 1)].expand(logits.shape[0])


def _codec(model_dir):
    return chat_spec_and_codec(model_dir, mode="concat")[2]


def _generated(ro):
    return {(t.traj, t.turn): ro.input_ids[t.row, t.start : t.end].tolist() for t in ro.turns}


def test_chained_turns_pack_into_one_row_per_trajectory(tiny_chat_model):
    """Canonical answers chain every turn: one row per trajectory, each turn's answer at its place in it, the turns'
    own order kept, every generated token trained once and nothing else, each token in its turn."""
    codec = _codec(tiny_chat_model)
    ro, *_ = _play(tiny_chat_model, "concat", CanonicalAnswers(codec))
    assert ro.extra["history"] == {"extended": len(SEEDS) * (TURNS - 1), "rerendered": 0, "restarts": 0}
    packed = pack_turn_rows(ro, codec.pad)
    assert packed.input_ids.shape[0] == len(SEEDS) and packed.row_traj.tolist() == list(range(len(SEEDS)))
    assert _generated(packed) == _generated(ro)
    assert [(t.traj, t.turn) for t in packed.turns] == [(t.traj, t.turn) for t in ro.turns]
    assert packed.generated_tokens() == ro.generated_tokens() and packed.per_turn_rows
    expected = torch.zeros_like(packed.loss_mask)
    for t in packed.turns:
        expected[t.row, t.start : t.end] = 1
        assert set(packed.turn_index[t.row, t.start : t.end].tolist()) == {t.turn}
    assert torch.equal(packed.loss_mask, expected)
    for traj in range(len(SEEDS)):  # the packed row is the last turn's row, attended tokens only
        last = max(ro.traj_turns(traj), key=lambda t: t.turn)
        row = ro.input_ids[last.row][ro.attention_mask[last.row].bool()]
        assert packed.input_ids[traj, : len(row)].tolist() == row.tolist()
        assert int(packed.attention_mask[traj].sum()) == len(row)


def test_a_rerendered_turn_starts_a_row_of_its_own(tiny_chat_model):
    """Random tokens that re-tokenize otherwise re-render the history: that turn begins a new row, the others chain."""
    codec = _codec(tiny_chat_model)
    ro, *_ = _play(tiny_chat_model, "concat", ForcedSampler(codec))
    history = ro.extra["history"]
    assert history["rerendered"] > 0 and history["extended"] > 0
    packed = pack_turn_rows(ro, codec.pad)
    assert packed.input_ids.shape[0] == len(SEEDS) + history["rerendered"]
    assert _generated(packed) == _generated(ro)


def test_non_concat_rows_stay_as_they_are(tiny_chat_model):
    ro, *_ = _play(tiny_chat_model, "non_concat", CanonicalAnswers(_codec(tiny_chat_model)))
    assert pack_turn_rows(ro, _codec(tiny_chat_model).pad) is ro


@pytest.mark.parametrize("answers", ["canonical", "random"])
def test_packed_rows_train_as_the_turn_rows_do(tiny_chat_model, answers):
    """The same log-probs, entropies and values on every generated token, the same PPO turn-level targets, and one
    update (one minibatch) gives the same loss statistics and gradient, packed or not."""
    spec, tok, codec = chat_spec_and_codec(tiny_chat_model, mode="concat", estimator="ppo")
    sampler = CanonicalAnswers(codec) if answers == "canonical" else ForcedSampler(codec)
    ro, *_ = _play(tiny_chat_model, "concat", sampler)
    for t in ro.turns:
        t.reward = float(t.turn == TURNS - 1 and t.traj % 2 == 0)
    packed = pack_turn_rows(ro, codec.pad)
    assert packed.input_ids.shape[0] < ro.input_ids.shape[0]
    policy = tiny_policy(spec, tok)
    stats = {}
    for name, r in (("rows", ro), ("packed", packed)):
        logp, ent, values = token_stats(
            policy,
            r.input_ids,
            r.attention_mask,
            with_values=True,
            with_entropy=True,
            device=torch.device("cpu"),
            bf16=False,
            where=r.loss_mask,
        )
        stats[name] = (r, logp.detach(), ent.detach(), values.detach())
    for a, b in zip(stats["rows"][0].turns, stats["packed"][0].turns):
        for k in (1, 2, 3):
            x = stats["rows"][k][a.row, a.start : a.end]
            y = stats["packed"][k][b.row, b.start : b.end]
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)
    cfg = spec.train
    targets = {name: training_targets(r, values, cfg) for name, (r, _, _, values) in stats.items()}
    for a, b in zip(ro.turns, packed.turns):
        torch.testing.assert_close(
            targets["rows"].advantages[a.row, a.start : a.end], targets["packed"].advantages[b.row, b.start : b.end]
        )
    cfg = dataclasses.replace(cfg, epochs=1, minibatches=1, micro_batch_tokens=0, lr=1e-2, grad_clip=1e9)
    after = {}
    for name, (r, logp, _, _) in stats.items():
        model = tiny_policy(spec, tok)
        # SGD: the weights move by the gradient (Adam's first step by its sign, noise included)
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        t = targets[name]
        batch = TrainBatch(r.input_ids, r.attention_mask, r.loss_mask.float(), t.advantages, logp, None, t.returns)
        out = update(model, opt, sched, batch, cfg, torch.Generator().manual_seed(0), torch.device("cpu"))
        after[name] = (out, torch.cat([p.detach().flatten() for p in model.parameters()]))
    for key in ("loss_policy", "loss_value", "entropy", "grad_norm"):
        assert after["packed"][0][key] == pytest.approx(after["rows"][0][key], rel=1e-4, abs=1e-6)
    torch.testing.assert_close(after["packed"][1], after["rows"][1], rtol=1e-4, atol=1e-5)
