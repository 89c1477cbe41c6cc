"""Rollout decoding at model size: a static KV cache over every trajectory in flight, one decode step per token
for the whole batch (captured once in a CUDA graph on the GPU), sampling on the device, no per-token host
round-trips.

`StaticDecoder` holds a replica of the policy's language model in the rollout dtype (bf16 on CUDA when
`train.bf16`, the policy's own dtype on the CPU), refreshed in place from the policy before every rollout,
and its own forward over that replica's modules (Qwen2-family models: tiny-qwen2, Qwen2.5). Its buffers
are the rollout's token rows: `ids`, `attn`, `loss`, `turn` (rows, width) with the layout of
agentrepro.trainer.rollout (one column per token for every row, padding with attention 0), and a K/V
cache (layers x rows x kv-heads x width x head-dim) whose column c holds the keys and values of token
column c. A decode step reads the whole width, masked by `attn` (columns not yet written are 0 there),
so its shapes never change and its graph is captured once per (rows, width); a prefill (not captured)
reads only the columns up to its last query. A training's decode step on CUDA runs each layer's work around its
attention as two compiled functions (`_fused`: norms, RoPE, residuals and silu x up fused), fewer kernels where their
count bounds the step. The tokens every row's first prompt begins with (a chat template's
system prompt: 444 of 523 tokens of the shipped Sokoban study's first prompt) are prefilled once, on one row, and
their keys and values copied to the others (`StaticRows.generate`).

`StaticRows` is `rollout._Rows` on these buffers: the same columns, the same masks, the same positions
(the count of attended tokens before a column). The host looks at the rows once every `check_every`
tokens (whether any row is still generating) and once at the end of each turn (the generated ids).
"""

from __future__ import annotations

import copy
import functools

import torch
import torch.nn.functional as F

from agentrepro.errors import BadInput

SUPPORTED = ("Qwen2ForCausalLM",)
"""Language models whose forward `StaticDecoder` implements (its attention, RoPE and MLP are Qwen2's)."""


def supports(policy) -> bool:
    return supports_model(policy.lm)


def supports_model(lm) -> bool:
    return type(lm).__name__ in SUPPORTED


def engine_for(
    choice: str, policy, device: torch.device, bf16: bool, *, training: bool = False
) -> StaticDecoder | None:
    """`train.rollout_engine`: the static engine (static; auto on CUDA for a supported model) or None (eager). A
    training's engine on CUDA decodes through the compiled layer halves (`_fused`): its many rollouts repay the compile
    (about 10 s at the job's first rollout on an H100, benchmarks/RESULTS.md); an evaluation job's one would not."""
    if choice == "auto":
        choice = "static" if device.type == "cuda" and supports(policy) else "eager"
    fused = training and device.type == "cuda"
    return StaticDecoder(policy, device, bf16, fused=fused) if choice == "static" else None


class StaticDecoder:
    """A decoding replica of `policy.lm` with a static KV cache; `sync(policy)` before each rollout."""

    # the buffers `allocate` makes: token rows (ids, attention, loss mask, turn) and the K/V cache per layer
    ids: torch.Tensor
    attn: torch.Tensor
    loss: torch.Tensor
    turn: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    logits: torch.Tensor

    def __init__(self, policy, device: torch.device, bf16: bool, *, graphs: bool | None = None, fused: bool = False):
        if not supports(policy):
            raise BadInput(
                f"the static rollout engine supports {', '.join(SUPPORTED)}, not {type(policy.lm).__name__}",
                where="train.rollout_engine",
            )
        self.device = torch.device(device)
        self.dtype = torch.bfloat16 if self.device.type == "cuda" and bf16 else next(policy.lm.parameters()).dtype
        if getattr(policy.lm.config, "hidden_act", "silu") != "silu":
            raise BadInput(
                f"the static rollout engine's MLP is silu(gate) x up, not {policy.lm.config.hidden_act}",
                where="train.rollout_engine",
            )
        self.lm = copy.deepcopy(policy.lm).to(device=self.device, dtype=self.dtype).eval().requires_grad_(False)
        cfg = self.lm.config
        self.n_heads, self.n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.graphs = self.device.type == "cuda" if graphs is None else graphs
        self.fused = fused  # decode steps through the compiled layer halves (`_fused`)
        self.shape: tuple[int, int] | None = None
        self.graph: torch.cuda.CUDAGraph | None = None
        # fewer, larger kernels per layer (a decode step is bound by their count): q, k, v as one matmul, gate and up as one
        layers = self.lm.model.layers
        self.qkv = [
            (
                torch.cat(
                    [layer.self_attn.q_proj.weight, layer.self_attn.k_proj.weight, layer.self_attn.v_proj.weight]
                ),
                torch.cat([layer.self_attn.q_proj.bias, layer.self_attn.k_proj.bias, layer.self_attn.v_proj.bias]),
            )
            for layer in layers
        ]
        self.gate_up = [torch.cat([layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight]) for layer in layers]

    @torch.no_grad()
    def sync(self, policy) -> None:
        """Copy the policy's current weights into the replica (in place: captured graphs stay valid)."""
        for dst, src in zip(self.lm.parameters(), policy.lm.parameters(), strict=True):
            dst.copy_(src)
        for layer, (w, b), gu in zip(self.lm.model.layers, self.qkv, self.gate_up):
            a = layer.self_attn
            torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight], out=w)
            torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias], out=b)
            torch.cat([layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight], out=gu)

    # --- buffers ---------------------------------------------------------------------------------
    def allocate(self, rows: int, width: int, *, keep: int = 0) -> None:
        """Buffers for `rows` x at least `width` columns; the first `keep` columns of the old ones are carried over.
        Buffers of the same rows and at least that width are cleared and kept, and with them the captured decode
        graph (each new shape costs a capture): columns past a row's tokens have attention 0."""
        old = None
        if self.shape is not None:
            if self.shape[0] == rows and width <= self.shape[1] and keep == 0:
                self.ids.fill_(0), self.attn.zero_(), self.loss.zero_(), self.turn.fill_(-1)
                return
            old = (self.ids, self.attn, self.loss, self.turn, self.k, self.v)
        dev, layers = self.device, self.lm.config.num_hidden_layers
        self.ids = torch.zeros(rows, width, dtype=torch.long, device=dev)
        self.attn = torch.zeros_like(self.ids)
        self.loss = torch.zeros_like(self.ids)
        self.turn = torch.full_like(self.ids, -1)
        self.k = torch.zeros(layers, rows, self.n_kv, width, self.head_dim, dtype=self.dtype, device=dev)
        self.v = torch.zeros_like(self.k)
        if old is not None and keep:
            for new, prev in zip((self.ids, self.attn, self.loss, self.turn), old[:4]):
                new[:, :keep] = prev[:, :keep]
            self.k[:, :, :, :keep] = old[4][:, :, :, :keep]
            self.v[:, :, :, :keep] = old[5][:, :, :, :keep]
        self.shape = (rows, width)
        self.graph = None
        self.tok = torch.zeros(rows, 1, dtype=torch.long, device=dev)
        self.pos = torch.zeros(rows, 1, dtype=torch.long, device=dev)
        self.col = torch.zeros(1, dtype=torch.long, device=dev)

    # --- the model -------------------------------------------------------------------------------
    def _forward(self, ids, pos, cols, mask, rows: slice | None = None):
        """ids, pos (B, T); cols (T,) the columns they occupy; mask (B, T, N) bool: which of the first N key
        columns each query attends; `rows` the cache's rows they are (all of them by default). Writes their K/V into
        the cache; returns the last column's logits (B, V) float32.
        Qwen2's layer (transformers' modeling_qwen2) with fused projections and one RoPE pass over q and k."""
        lm, (B, T) = self.lm, ids.shape
        model, H, K = lm.model, self.n_heads, self.n_kv
        h = model.embed_tokens(ids)
        cos, sin = model.rotary_emb(h, pos)
        cos, sin = cos[:, :, None], sin[:, :, None]  # (B, T, 1, D): broadcast over heads
        g = H // K
        # grouped-query attention without repeating K/V: query head h uses kv head h // g, so the g query
        # heads of a kv head become g x T queries of that head
        n = mask.shape[-1]  # key columns: the whole width in a decode step, up to the last query's in a prefill
        attend = mask[:, None, None].expand(B, 1, g, T, n).reshape(B, 1, g * T, n)
        before, after = _fused() if self.fused and T == 1 else (_before_attention, _after_attention)
        for i, layer in enumerate(model.layers):
            a, (w_qkv, b_qkv), norm = layer.self_attn, self.qkv[i], layer.input_layernorm
            q, k, v = before(h, norm.weight, norm.variance_epsilon, w_qkv, b_qkv, cos, sin, H, K)
            keys, values = (self.k[i], self.v[i]) if rows is None else (self.k[i][rows], self.v[i][rows])
            keys.index_copy_(2, cols, k)
            values.index_copy_(2, cols, v)
            o = F.scaled_dot_product_attention(q, keys[:, :, :n], values[:, :, :n], attn_mask=attend, scale=a.scaling)
            norm, mlp = layer.post_attention_layernorm, layer.mlp
            h = after(h, o, a.o_proj.weight, norm.weight, norm.variance_epsilon, self.gate_up[i], mlp.down_proj.weight)
        return lm.lm_head(_rms(model.norm, h[:, -1])).float()

    def allocated(self) -> tuple[int, int]:
        """(rows, width) of the buffers; an error before the first `allocate`."""
        if self.shape is None:
            raise RuntimeError("StaticDecoder used before allocate()")
        return self.shape

    @torch.no_grad()
    def prefill(self, start: int, end: int, rows: slice | None = None) -> torch.Tensor:
        """Run columns [start, end) (already in `ids`/`attn`) of `rows` (all by default); logits of column end - 1."""
        self.allocated()
        rows = slice(None) if rows is None else rows
        attn = self.attn[rows, :end]
        cols = torch.arange(start, end, device=self.device)
        pos = (attn.cumsum(-1)[:, start:end] - 1).clamp(min=0)
        causal = torch.arange(end, device=self.device)[None, :] <= cols[:, None]  # (T, end): no query reads past `end`
        mask = attn.bool()[:, None, :] & causal[None]
        return self._forward(self.ids[rows, start:end], pos, cols, mask, rows)

    @torch.no_grad()
    def copy_columns(self, row: int, cols: torch.Tensor) -> None:
        """Copy the K/V of columns [0, n) of row `row` to columns `cols[r]` of every row r (`cols`: rows x n): the
        keys and values of tokens that every row has at the same positions after the same tokens."""
        cols = cols.to(self.device)
        rows = torch.arange(cols.shape[0], device=self.device)[:, None]
        for cache in (self.k, self.v):
            # (layers, kv-heads, n, head-dim) -> (n, layers, kv-heads, head-dim), as the indexed target lays it out
            cache[:, rows, :, cols] = cache[:, row, :, : cols.shape[1]].permute(2, 0, 1, 3).clone()

    def _decode_step(self) -> torch.Tensor:
        return self._forward(self.tok, self.pos, self.col, self.attn.bool()[:, None, :])

    @torch.no_grad()
    def decode(self, col: int, tok: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """The token `tok` (B,) at column `col` (its attention already in `attn`), at positions `pos` (B,):
        logits of the next token (B, V). Replays a CUDA graph on the GPU."""
        self.tok.copy_(tok.unsqueeze(1))
        self.pos.copy_(pos.unsqueeze(1))
        self.col.fill_(col)
        if not self.graphs:
            return self._decode_step()
        if self.graph is None:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # warm-up writes the same K/V at `col` as the replay below
                for _ in range(2):
                    self._decode_step()
            torch.cuda.current_stream().wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.logits = self._decode_step()
        self.graph.replay()
        return self.logits


def left_padded(chunks: list[list[int]], pad: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention) of shape (rows, width): each chunk right-aligned, the columns before it `pad` with attention 0
    (the layout both rollout paths append, so their token invariants are the same)."""
    ids = torch.full((len(chunks), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for r, chunk in enumerate(chunks):
        if chunk:
            ids[r, width - len(chunk) :] = torch.tensor(chunk)
            attn[r, width - len(chunk) :] = 1
    return ids, attn


class StaticRows:
    """Token rows decoded in lockstep on a StaticDecoder's buffers (the interface of rollout._Rows)."""

    def __init__(self, engine: StaticDecoder, n_rows: int, bos: int, reserve: int, check_every: int = 8):
        self.engine, self.reserve, self.check_every = engine, reserve, check_every
        engine.allocate(n_rows, _round_up(1 + reserve))
        engine.ids[:, 0] = bos
        engine.attn[:, 0] = 1
        self.cols = 1  # columns written
        self.cached = 0  # columns whose K/V are in the cache
        self.shared: tuple[int, torch.Tensor] | None = None  # the first chunks' common tokens: (a row, columns per row)

    # the rows as rollout._Rows shows them: the written columns only
    ids = property(lambda self: self.engine.ids[:, : self.cols])
    attn = property(lambda self: self.engine.attn[:, : self.cols])
    loss = property(lambda self: self.engine.loss[:, : self.cols])
    turn = property(lambda self: self.engine.turn[:, : self.cols])

    def _room(self, more: int) -> None:
        need = self.cols + more + self.reserve
        rows, width = self.engine.allocated()
        if need > width:  # a quarter more than needed: a growing dialogue reallocates less often
            self.engine.allocate(rows, _round_up(need + need // 4), keep=self.cols)

    def append_chunks(self, chunks: list[list[int]], pad: int, turn: int) -> None:
        """Append one chunk per row, left-padded (attention 0) to the longest."""
        width = max(len(c) for c in chunks)
        if width == 0:
            return
        self._room(width)
        ids, attn = left_padded(chunks, pad, width)
        if self.cols == 1:
            self.shared = _common_prefix(chunks, width)
        e, span = self.engine, slice(self.cols, self.cols + width)
        e.ids[:, span] = ids.to(e.device)
        e.attn[:, span] = attn.to(e.device)
        e.turn[:, span] = torch.where(attn.bool(), turn, -1).to(e.device)
        self.cols += width

    def generate(
        self, live: list[bool], trajs: list[int], codec, sampler, max_new_tokens: int, turn: int
    ) -> list[tuple[int, list[int]]]:
        """Generate one turn for the live rows: per row (start column, generated ids incl. <eos>)."""
        e, start = self.engine, self.cols
        self._room(0)
        if self.cached == 0 and self.shared is not None:
            # the first token and the tokens every first chunk begins with, prefilled on the row where they are
            # columns [0, n) (its chunk is the widest) and copied to every row's columns of them
            row, cols = self.shared
            e.prefill(0, cols.shape[1], rows=slice(row, row + 1))
            e.copy_columns(row, cols)
            self.cached = cols.shape[1]
        logits = e.prefill(self.cached, self.cols)
        going = torch.tensor(live, device=e.device)
        npos = e.attn[:, : self.cols].sum(-1)  # attended tokens so far = position of the next attended one
        pad = torch.full_like(npos, codec.pad)
        for position in range(max_new_tokens):
            c = self.cols
            tok = torch.where(going, sampler(logits, trajs, turn, position), pad)
            g = going.long()
            e.ids[:, c], e.attn[:, c], e.loss[:, c] = tok, g, g
            e.turn[:, c] = torch.where(going, turn, -1)
            self.cols += 1
            going = going & (tok != codec.eos)
            if position == max_new_tokens - 1 or ((position + 1) % self.check_every == 0 and not bool(going.any())):
                break
            logits = e.decode(c, tok, npos + g - 1)
            npos = npos + g
        written = self.cols  # every written column but the last has its K/V in the cache
        gen_ids, gen_attn = e.ids[:, start:written].cpu(), e.attn[:, start:written].cpu().bool()
        out = [gen_ids[r][gen_attn[r]].tolist() for r in range(len(live))]
        self.cols = start + max((len(o) for o in out), default=0)  # drop the all-padding columns at the end
        e.ids[:, self.cols :], e.attn[:, self.cols :], e.loss[:, self.cols :] = codec.pad, 0, 0
        e.turn[:, self.cols :] = -1
        self.cached = min(written - 1, self.cols)
        return [(start, o) for o in out]


def _common_prefix(chunks: list[list[int]], width: int) -> tuple[int, torch.Tensor] | None:
    """Where the first chunks (appended after the rows' first token, right-aligned in `width` columns) begin with
    the same tokens: (a row whose chunk fills the width, each row's columns of its first token and those tokens
    (rows x n)); None where fewer than two rows have a chunk or they share no token. A row without a chunk takes the
    first column's and writes the rest to its padding, which nothing reads. At least the widest chunk's last token
    stays out, so the prefill after it gives every row's logits."""
    filled = [r for r, chunk in enumerate(chunks) if chunk]
    if len(filled) < 2:
        return None
    widest = max(filled, key=lambda r: len(chunks[r]))
    first = chunks[widest]
    n = 0
    limit = min(len(chunks[r]) for r in filled)
    while n < min(limit, len(first) - 1) and all(chunks[r][n] == first[n] for r in filled):
        n += 1
    if n == 0:
        return None
    cols = torch.arange(n + 1).repeat(len(chunks), 1)
    for r in filled:
        cols[r, 1:] = torch.arange(n) + 1 + width - len(chunks[r])
    return widest, cols


def _rms(norm, x):
    """Qwen2RMSNorm (float32 statistics, weight applied in the input dtype) as one fused op."""
    return _rms_norm(x, norm.weight, norm.variance_epsilon)


def _rms_norm(x, weight, eps: float):
    return F.rms_norm(x.float(), x.shape[-1:], eps=eps).to(x.dtype) * weight


def _before_attention(h, norm, eps: float, w_qkv, b_qkv, cos, sin, H: int, K: int):
    """A Qwen2 layer up to its attention: the input norm, q, k and v as one matmul, RoPE (rotate_half) on q and k.
    q as (B, K, g x T, D): the g query heads of each kv head as g x T queries of that head; k, v as (B, K, T, D)."""
    B, T = h.shape[:2]
    D = w_qkv.shape[0] // (H + 2 * K)
    qkv = F.linear(_rms_norm(h, norm, eps), w_qkv, b_qkv).view(B, T, H + 2 * K, D)
    qk = qkv[:, :, : H + K]
    half = D // 2
    qk = qk * cos + torch.cat([-qk[..., half:], qk[..., :half]], -1) * sin
    q, k = qk[:, :, :H].transpose(1, 2), qk[:, :, H:].transpose(1, 2)
    return q.reshape(B, K, (H // K) * T, D), k, qkv[:, :, H + K :].transpose(1, 2)


def _after_attention(h, o, w_o, norm, eps: float, w_gate_up, w_down):
    """A Qwen2 layer after its attention `o` (B, K, g x T, D): the output projection and residual, the post-attention
    norm, gate and up as one matmul, silu(gate) x up, the down projection and residual."""
    B, T = h.shape[:2]
    h = h + F.linear(o.reshape(B, -1, T, o.shape[-1]).transpose(1, 2).reshape(B, T, -1), w_o)
    gate, up = F.linear(_rms_norm(h, norm, eps), w_gate_up).chunk(2, -1)
    return h + F.linear(F.silu(gate) * up, w_down)


@functools.cache
def _fused():
    """`_before_attention` and `_after_attention` compiled (one set per process, for every batch size): a decode
    step's elementwise work (norms, RoPE, residuals, silu x up) in a few fused kernels instead of about twenty per
    layer, which bound the step (benchmarks/RESULTS.md)."""
    return (
        torch.compile(_before_attention, dynamic=True, fullgraph=True),
        torch.compile(_after_attention, dynamic=True, fullgraph=True),
    )


def _round_up(n: int, to: int = 64) -> int:
    return -(-n // to) * to
