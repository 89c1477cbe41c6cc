"""Multi-turn, token-level rollouts: batched decoding with a KV cache, in concat and non-concat modes.

Layout of one trajectory (concat: one row; each turn appends to it):

    <bos> | <obs> o o ... o <act> | g g g <eos> | <obs> o ... <act> | g g <eos>
            observation (turn 0)    generated      observation (turn 1) generated (last turn: the row ends here)

Non-concat: one row per turn, `<bos> <obs> o ... o <act> g ... <eos>`, the history not repeated.
A local chat model (trainer/dialogue.py): one row per turn in both modes, the chat template's rendering of
the served evaluator's messages (concat: with the earlier turns as the template renders them) then the
generated tokens: `<|im_start|> system ... <|im_start|>assistant\n | g g g <|im_end|>` for a ChatML template.
Rows are decoded in lockstep; rows that have finished a turn (or an episode) get `<pad>` columns with
attention 0, so attention masks may have zeros inside a row; positions count attended tokens only.
The loss mask is 1 exactly on generated tokens (including `<eos>`; never on a template's tokens); an episode always ends on a generated
token, so its reward lands on the last generated token of its last turn.

Output (`Rollout`): int64 tensors (rows, tokens) `input_ids`, `attention_mask`, `loss_mask`, `turn_index`
(turn of every observation or generated token, -1 on `<bos>` and padding), `row_traj` (rows,) and one
`Turn` per agent turn, which locates its generated tokens [start, end) in row `row`; `per_turn_rows` says
whether each turn was played from a row of its own (non-concat, or any chat rollout; PPO's credit is then
turn-level) or each trajectory from one row. For training, trainer/packing.py may pack a trajectory's turn rows
that extend one another into one row; `per_turn_rows` stays, as it says how the turns were played.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agentrepro.trainer.decode import StaticRows, left_padded
from agentrepro.trainer.dialogue import Codec, prompts
from agentrepro.trainer.policy import autocast, positions


@dataclass
class Turn:
    """One agent turn: what was seen, generated and returned by the environment."""

    traj: int
    group: int
    turn: int
    state: str
    next_state: str
    reward: float
    valid: bool
    done: bool
    success: bool
    response: str
    actions: list[str]
    row: int
    start: int
    end: int


@dataclass
class Rollout:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    turn_index: torch.Tensor
    row_traj: torch.Tensor
    turns: list[Turn]
    seeds: list[int]
    groups: list[int]
    per_turn_rows: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_traj(self) -> int:
        return len(self.seeds)

    def traj_turns(self, traj: int) -> list[Turn]:
        return [t for t in self.turns if t.traj == traj]

    def step_rows(self) -> list[dict[str, Any]]:
        """One docs/design.md §3.5 step row per agent turn, in (traj, turn) order."""
        episode: dict[int, float] = {}
        success: dict[int, bool] = {}
        for t in self.turns:
            episode[t.traj] = episode.get(t.traj, 0.0) + t.reward
            success[t.traj] = success.get(t.traj, False) or t.success
        rows = []
        for t in sorted(self.turns, key=lambda t: (t.traj, t.turn)):
            rows.append(
                {
                    "group": t.group,
                    "traj": t.traj,
                    "turn": t.turn,
                    "state": t.state,
                    "next_state": t.next_state,
                    "reward": t.reward,
                    "episode_reward": episode[t.traj],
                    "valid": t.valid,
                    "success": success[t.traj],
                }
            )
        return rows

    def generated_tokens(self) -> int:
        return int(self.loss_mask.sum())

    def all_tokens(self) -> int:
        return int(self.attention_mask.sum())


class Sampler:
    """Next-token choice from last-position logits (B, V): seeded sampling at a temperature (optionally
    nucleus with `top_p`), or greedy at temperature 0."""

    def __init__(self, temperature: float, generator: torch.Generator | None, top_p: float = 1.0):
        self.temperature = temperature
        self.generator = generator
        self.top_p = top_p
        self._device_gen: torch.Generator | None = None

    def __call__(self, logits: torch.Tensor, trajs: list[int], turn: int, position: int) -> torch.Tensor:
        """logits (B, V) of the rows playing trajectories `trajs` -> token ids (B,)."""
        if self.temperature == 0:
            return logits.argmax(-1)
        probs = torch.softmax(logits.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:  # keep the smallest set of tokens whose probability reaches top_p
            sorted_p, order = probs.sort(-1, descending=True)
            drop = sorted_p.cumsum(-1) - sorted_p >= self.top_p
            probs = probs.scatter(-1, order, sorted_p.masked_fill(drop, 0.0))
        if logits.device.type == "cpu":
            return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
        # on an accelerator: argmax of p / Exp(1) noise (an exact draw from p) with a device generator seeded from
        # this sampler's generator, so nothing waits for the host
        if self._device_gen is None:
            seed = int(torch.randint(2**62, (1,), generator=self.generator))
            self._device_gen = torch.Generator(logits.device).manual_seed(seed)
        noise = torch.empty_like(probs).exponential_(generator=self._device_gen)
        return (probs / noise).argmax(-1)


class _Rows:
    """Token rows being decoded in lockstep, with a KV cache over the columns already seen by the model."""

    def __init__(self, policy, device, bf16, n_rows: int, bos: int, kv_cache: bool = True):
        self.policy, self.device, self.bf16, self.kv_cache = policy, device, bf16, kv_cache
        self.ids = torch.full((n_rows, 1), bos, dtype=torch.long, device=device)
        self.attn = torch.ones_like(self.ids)
        self.loss = torch.zeros_like(self.ids)
        self.turn = torch.full_like(self.ids, -1)
        self.cache = None
        self.cached = 0

    def append(self, ids, attn, loss, turn):
        self.ids = torch.cat([self.ids, ids], 1)
        self.attn = torch.cat([self.attn, attn], 1)
        self.loss = torch.cat([self.loss, loss], 1)
        self.turn = torch.cat([self.turn, turn], 1)

    def append_chunks(self, chunks: list[list[int]], pad: int, turn: int):
        """Append one chunk per row, left-padded (attention 0) to the longest."""
        width = max(len(c) for c in chunks)
        if width == 0:
            return
        ids, attn = left_padded(chunks, pad, width)
        turn_ids = torch.where(attn.bool(), turn, -1)
        self.append(
            ids.to(self.device),
            attn.to(self.device),
            torch.zeros_like(ids, device=self.device),
            turn_ids.to(self.device),
        )

    @torch.no_grad()
    def next_logits(self) -> torch.Tensor:
        """Run the model over the columns not yet cached; logits of the last column (B, V)."""
        pos = positions(self.attn)
        if not self.kv_cache:  # baseline for benchmarks: recompute the whole prefix every token
            self.cache, self.cached = None, 0
        with autocast(self.device, self.bf16):
            logits, _, self.cache = self.policy(
                self.ids[:, self.cached :], self.attn, pos[:, self.cached :], past_key_values=self.cache, use_cache=True
            )
        self.cached = self.ids.shape[1]
        return logits[:, -1]


def _generate(
    rows: _Rows, live: list[bool], trajs: list[int], codec: Codec, sampler, max_new_tokens: int, turn: int
) -> list[tuple[int, list[int]]]:
    """Generate one turn for the live rows: returns per row (start column, generated ids incl. <eos>)."""
    start = rows.ids.shape[1]
    going = torch.tensor(live, device=rows.device)
    out: list[list[int]] = [[] for _ in live]
    for position in range(max_new_tokens):
        if not bool(going.any()):
            break
        tok = sampler(rows.next_logits(), trajs, turn, position)
        tok = torch.where(going, tok, torch.full_like(tok, codec.pad))
        g = going.long().unsqueeze(1)
        rows.append(tok.unsqueeze(1), g, g, torch.where(going, turn, -1).unsqueeze(1))
        for r in torch.nonzero(going).flatten().tolist():
            out[r].append(int(tok[r]))
        going = going & (tok != codec.eos)
    return [(start, o) for o in out]


def _step_env(env, codec: Codec, gen: list[int]):
    body = gen[:-1] if gen and gen[-1] == codec.eos else gen
    response = codec.render(body)
    obs, reward, done, info = env.step(response)
    return response, obs, float(reward), bool(done), info


def _turn(traj: int, group: int, turn: int, state: str, step, row: int, start: int, end: int) -> Turn:
    """The Turn of one environment step, `step` being `_step_env`'s (response, observation, reward, done, info)."""
    response, _, reward, done, info = step
    success = bool(info.get("success", False))
    next_state = "success" if success else info["state_key"]
    valid, actions = bool(info.get("valid", True)), list(info.get("actions", []))
    return Turn(traj, group, turn, state, next_state, reward, valid, done, success, response, actions, row, start, end)


def _finish_rows(rows: _Rows, row_traj: list[int], turns, seeds, groups) -> Rollout:
    ids, attn, loss, turn = (x.to("cpu", copy=True) for x in (rows.ids, rows.attn, rows.loss, rows.turn))
    return Rollout(ids, attn, loss, turn, torch.tensor(row_traj), turns, list(seeds), list(groups))


def rollout(
    policy,
    envs: Sequence,
    seeds: Sequence[int],
    groups: Sequence[int],
    codec: Codec,
    sampler,
    *,
    mode: str,
    max_turns: int,
    max_new_tokens: int,
    device,
    bf16: bool = True,
    kv_cache: bool = True,
    engine=None,
    reuse_history: bool = True,
) -> Rollout:
    """Play one episode per environment (env i reset with seeds[i], in group groups[i]) and record tokens.

    `kv_cache=False` recomputes the prefix for every token (same result, slower; a benchmark baseline).
    `engine` (a decode.StaticDecoder, synced to `policy`) decodes on its static KV cache instead.
    `reuse_history=False` prefills a concat chat turn's whole prompt afresh (same result, slower; a benchmark baseline)."""
    if engine is not None:
        engine.sync(policy)
    new_rows = _row_maker(policy, device, bf16, kv_cache, engine, max_new_tokens, codec.bos)
    if mode == "concat" and not codec.chat:
        return _rollout_concat(envs, seeds, groups, codec, sampler, max_turns, max_new_tokens, new_rows)
    if mode == "concat" and reuse_history:
        return _rollout_chat_history(envs, seeds, groups, codec, sampler, max_turns, max_new_tokens, new_rows)
    return _rollout_turn_rows(envs, seeds, groups, codec, sampler, mode, max_turns, max_new_tokens, new_rows)


def _row_maker(policy, device, bf16, kv_cache, engine, max_new_tokens, bos):
    """n_rows -> (rows, generate one turn on them): the eager rows or the static engine's."""

    def new_rows(n: int):
        if engine is not None:
            static = StaticRows(engine, n, bos, max_new_tokens)
            return static, static.generate
        eager = _Rows(policy, device, bf16, n, bos, kv_cache)
        return eager, lambda *args: _generate(eager, *args)

    return new_rows


def _rollout_concat(envs, seeds, groups, codec, sampler, max_turns, max_new_tokens, new_rows) -> Rollout:
    n = len(envs)
    current = [env.reset(int(s)) for env, s in zip(envs, seeds)]
    live = [True] * n
    rows, generate = new_rows(n)
    turns: list[Turn] = []
    for t in range(max_turns):
        rows.append_chunks([codec.prompt(*current[i]) if live[i] else [] for i in range(n)], codec.pad, t)
        generated = generate(live, list(range(n)), codec, sampler, max_new_tokens, t)
        for i in range(n):
            if not live[i]:
                continue
            start, gen = generated[i]
            state = current[i][1]["state_key"]
            step = _step_env(envs[i], codec, gen)
            _, obs, _, done, info = step
            last = done or t == max_turns - 1
            turns.append(_turn(i, int(groups[i]), t, state, step, i, start, start + len(gen)))
            current[i] = (obs, info)
            live[i] = not last
        if not any(live):
            break
    return _finish_rows(rows, list(range(n)), turns, seeds, groups)


def _rollout_chat_history(envs, seeds, groups, codec, sampler, max_turns, max_new_tokens, new_rows) -> Rollout:
    """A concat chat rollout whose trajectories each keep one decoding row, so a turn prefills only what its prompt adds.

    A turn's prompt is the template's rendering of the whole conversation (as in `_rollout_turn_rows`). Where every
    live row's rendering begins with the tokens the row already holds (the earlier prompts and the tokens generated
    for them), only the rest is appended and the rows' cached keys and values serve the history. Where one does not
    (an earlier response re-tokenizes differently from what was generated, as a chat server re-renders it), its
    whole rendering would make every row's prefill that wide, so all rows start afresh from their renderings, as
    `_rollout_turn_rows` does every turn: the model reads exactly the served prompt either way, as a server with prefix
    caching would. Each turn's training row is its row's attended tokens, so the result (one row per turn,
    `per_turn_rows`) equals `_rollout_turn_rows`'s; `extra["history"]` counts the turns after the first that extended
    their row or were re-rendered, and the restarts."""
    n = len(envs)
    current = [env.reset(int(s)) for env, s in zip(envs, seeds)]
    dialogues = [codec.dialogue(env, "concat", *c) for env, c in zip(envs, current)]
    held: dict[int, list[int]] = {i: [] for i in range(n)}  # each row's attended tokens after the first
    live = list(range(n))
    rows, generate = new_rows(n)
    pieces: list[tuple[int, list[torch.Tensor]]] = []  # per (traj, turn): its training row
    turns: list[Turn] = []
    history = {"extended": 0, "rerendered": 0, "restarts": 0}
    for t in range(max_turns):
        if not live:
            break
        rendered = dict(zip(live, prompts([dialogues[i] for i in live])))
        extending = [rendered[i][: len(held[i])] == held[i] for i in live]
        if t:
            history["extended"] += sum(extending)
            history["rerendered"] += len(live) - sum(extending)
        if all(extending):
            chunks = [rendered[i][len(held[i]) :] if i in rendered else [] for i in range(n)]
        else:  # the whole rendering of one row makes every row's prefill that wide anyway: all rows start afresh
            rows, generate = new_rows(n)
            history["restarts"] += 1
            chunks = [rendered.get(i, []) for i in range(n)]
        held.update(rendered)
        rows.append_chunks(chunks, codec.pad, t)
        is_live = [False] * n
        for i in live:
            is_live[i] = True
        generated = generate(is_live, list(range(n)), codec, sampler, max_new_tokens, t)
        still = []
        for i in live:
            start, gen = generated[i]
            held[i] = held[i] + gen
            state = current[i][1]["state_key"]
            step = _step_env(envs[i], codec, gen)
            response, obs, _, done, info = step
            piece = _turn_row(rows, i, start + len(gen), t)
            pieces.append((i, piece))
            length = piece[0].shape[0]
            turns.append(_turn(i, int(groups[i]), t, state, step, len(pieces) - 1, length - len(gen), length))
            current[i] = (obs, info)
            if not (done or t == max_turns - 1):
                dialogues[i].step(response, obs, info)
                still.append(i)
        live = still
    ro = _stack_turn_rows([(i, *piece) for i, piece in pieces], turns, seeds, groups, codec.pad)
    ro.extra["history"] = history
    return ro


def _turn_row(rows, row: int, end: int, turn: int) -> list[torch.Tensor]:
    """Turn `turn`'s training row from decoding row `row` (columns before `end`): its attended tokens, the loss on
    this turn's generated tokens only, every token but the first in turn `turn` (as a row of its own would be)."""
    keep = rows.attn[row, :end].bool()
    ids = rows.ids[row, :end][keep].to("cpu", copy=True)
    loss = (rows.loss[row, :end][keep] * (rows.turn[row, :end][keep] == turn)).to("cpu", copy=True)
    turn_ids = torch.full_like(ids, turn)
    turn_ids[0] = -1
    return [ids, torch.ones_like(ids), loss, turn_ids]


def _stack_turn_rows(pieces, turns, seeds, groups, pad_id: int) -> Rollout:
    """One padded row per (traj, ids, attention, loss, turn) piece, in order; a Rollout of per-turn rows."""
    width = max(p[1].shape[0] for p in pieces)

    def pad(k, value):
        out = torch.full((len(pieces), width), value, dtype=torch.long)
        for r, p in enumerate(pieces):
            out[r, : p[k].shape[0]] = p[k].cpu()
        return out

    return Rollout(
        pad(1, pad_id),
        pad(2, 0),
        pad(3, 0),
        pad(4, -1),
        torch.tensor([p[0] for p in pieces]),
        turns,
        list(seeds),
        list(groups),
        per_turn_rows=True,
    )


def _rollout_turn_rows(envs, seeds, groups, codec, sampler, mode, max_turns, max_new_tokens, new_rows) -> Rollout:
    n = len(envs)
    current = [env.reset(int(s)) for env, s in zip(envs, seeds)]
    dialogues = [codec.dialogue(env, mode, *c) for env, c in zip(envs, current)]
    live = list(range(n))
    pieces: list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []  # per (traj, turn) row
    turns: list[Turn] = []
    for t in range(max_turns):
        if not live:
            break
        rows, generate = new_rows(len(live))
        rows.append_chunks(prompts([dialogues[i] for i in live]), codec.pad, t)
        generated = generate([True] * len(live), list(live), codec, sampler, max_new_tokens, t)
        still = []
        for r, i in enumerate(live):
            start, gen = generated[r]
            state = current[i][1]["state_key"]
            step = _step_env(envs[i], codec, gen)
            response, obs, _, done, info = step
            # trim this row's trailing padding (columns generated for other rows)
            length = start + len(gen)
            row_index = len(pieces)
            # copies: the static engine's rows are reused by the next turn
            pieces.append(
                (i, *(x[r, :length].to("cpu", copy=True) for x in (rows.ids, rows.attn, rows.loss, rows.turn)))
            )
            turns.append(_turn(i, int(groups[i]), t, state, step, row_index, start, length))
            current[i] = (obs, info)
            if not (done or t == max_turns - 1):
                dialogues[i].step(response, obs, info)
                still.append(i)
        live = still
    return _stack_turn_rows(pieces, turns, seeds, groups, codec.pad)
