"""Training rows of a rollout played one row per turn, packed so that a trajectory's history is trained once.

A concat chat rollout (rollout.py) plays each turn from the template's rendering of the whole conversation, and
records one row per turn: turn k's row holds the history, turn k's prompt and its generated tokens, so the five
turns of an episode pass the first turn's tokens through the model five times in every forward and backward.
Where turn k's row (its attended tokens) is a prefix of turn k + 1's, the later row holds every token the earlier
one does at the same positions, and a causal model gives those tokens the same log-probabilities and values in
either row. (The prompt of turn k + 1 must begin with all of turn k's row, its answer included, so each turn's
answer keeps a place of its own.) `pack_turn_rows` therefore trains each maximal chain of such turns in its last row, with every turn's
generated tokens in its loss mask and each `Turn` pointing into that row. The loss is the same sum over the same
generated tokens (a token mean over the minibatch); only the rows change, and with them how a batch splits into
minibatches, which draw whole rows at random either way.

A turn whose prompt re-rendered the history (an earlier answer re-tokenized otherwise) starts a new chain, and
non-concat rows (the current observation only) never chain, so they stay as they were.
"""

from __future__ import annotations

import dataclasses

import torch

from agentrepro.trainer.rollout import Rollout, Turn


def pack_turn_rows(ro: Rollout, pad: int) -> Rollout:
    """`ro` with each chain of turn rows (each row a prefix of the next one's prompt, within one trajectory) as one row, the
    turns' generated tokens at the same positions; a rollout of one row per trajectory, or without chains, as is."""
    if not ro.per_turn_rows:
        return ro
    attended = [ro.input_ids[r][ro.attention_mask[r].bool()] for r in range(ro.input_ids.shape[0])]
    chains: list[list[Turn]] = []
    for turn in sorted(ro.turns, key=lambda t: (t.traj, t.turn)):
        last = chains[-1][-1] if chains else None
        prompt = attended[turn.row][: int(ro.attention_mask[turn.row, : turn.start].sum())]
        if last is not None and last.traj == turn.traj and _prefix(attended[last.row], prompt):
            chains[-1].append(turn)
        else:
            chains.append([turn])
    if len(chains) == len(ro.turns):
        return ro
    width = max(len(attended[chain[-1].row]) for chain in chains)
    ids = torch.full((len(chains), width), pad, dtype=torch.long)
    attn, loss = torch.zeros_like(ids), torch.zeros_like(ids)
    turn_index = torch.full_like(ids, -1)
    turns: list[Turn] = []
    for r, chain in enumerate(chains):
        row = attended[chain[-1].row]
        ids[r, : len(row)], attn[r, : len(row)] = row, 1
        begin = 1  # the first column (<bos>) belongs to no turn
        for turn in chain:
            start = int(ro.attention_mask[turn.row, : turn.start].sum())  # attended tokens before its answer
            end = start + turn.end - turn.start
            loss[r, start:end] = ro.loss_mask[turn.row, turn.start : turn.end]
            turn_index[r, begin:end] = turn.turn
            turns.append(dataclasses.replace(turn, row=r, start=start, end=end))
            begin = end
    order = {(t.traj, t.turn): k for k, t in enumerate(ro.turns)}  # the turns in the rollout's own order
    turns.sort(key=lambda t: order[t.traj, t.turn])
    return dataclasses.replace(
        ro,
        input_ids=ids,
        attention_mask=attn,
        loss_mask=loss,
        turn_index=turn_index,
        row_traj=torch.tensor([chain[0].traj for chain in chains]),
        turns=turns,
    )


def _prefix(shorter: torch.Tensor, longer: torch.Tensor) -> bool:
    return len(shorter) <= len(longer) and torch.equal(longer[: len(shorter)], shorter)
