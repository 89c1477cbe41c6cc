"""`agentrepro gae`: token-level (masked) GAE over sequences (docs/design.md §3.5).

    agentrepro gae --gamma G --lam L [--no-mask] [--whiten [--whiten-scope file|sequence]] IN.jsonl -o OUT.jsonl

Each input line is one sequence `{"id", "rewards": [...], "values": [...], "mask": [0/1 ...]}`; the output
line adds `advantages` and `returns` (returns = advantages + values, before any whitening). `--no-mask`
treats every token as an action token (the unmasked GAE; `mask` may then be absent). `--whiten` whitens the
advantages over the mask = 1 tokens of all sequences of the file together, as verl does for one batch
(`--whiten-scope sequence`: each sequence on its own, as a batch of one). Without `--gamma`/`--lam`, each
line must carry its own `gamma` / `lam` fields. A malformed line stops the command naming its line.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from agentrepro.algorithms.gae import masked_gae, masked_whiten
from agentrepro.bounds import MAX_MAGNITUDE, check_magnitude, number
from agentrepro.errors import BadInput
from agentrepro.fileio import STDIO, check_output_file, input_name, iter_input_jsonl, json_text, write_output_text
from agentrepro.seal import refuse_study_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="IN.jsonl", help="sequences, one JSON object per line (- for stdin)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.jsonl", help="output sequences (- for stdout)")
    parser.add_argument("--gamma", type=number(0, 1), default=None, help="discount γ (default: each line's `gamma`)")
    parser.add_argument("--lam", type=number(0, 1), default=None, help="GAE λ (default: each line's `lam`)")
    parser.add_argument("--no-mask", action="store_true", help="ignore `mask`: every token is an action token")
    parser.add_argument("--whiten", action="store_true", help="whiten the advantages over masked tokens")
    parser.add_argument(
        "--whiten-scope",
        choices=("file", "sequence"),
        default="file",
        help="whiten all sequences of the file together (default, verl's batch) or each alone",
    )


def _numbers(seq: dict, key: str, source: str, where: str, *, binary: bool = False) -> np.ndarray:
    value = seq.get(key)
    if not isinstance(value, list) or not value:
        raise BadInput(f"field {key!r} must be a non-empty list of numbers", path=source, where=where)
    for i, x in enumerate(value):
        if (
            isinstance(x, bool)
            or not isinstance(x, (int, float))
            or not check_magnitude(x)
            or (binary and x not in (0, 1))
        ):
            kind = "0 or 1" if binary else f"a finite number of magnitude at most {MAX_MAGNITUDE:g}"
            raise BadInput(f"{key}[{i}] must be {kind}, got {x!r}", path=source, where=where)
    return np.asarray(value, dtype=np.float64)


def _param(seq: dict, key: str, given: float | None, source: str, where: str) -> float:
    if given is not None:
        return given
    value = seq.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise BadInput(
            f"no --{key} given and field {key!r} is missing or not a number in [0, 1]", path=source, where=where
        )
    return float(value)


def run(args: argparse.Namespace) -> int:
    source = input_name(args.input)
    if args.output != STDIO:
        refuse_study_file(check_output_file(args.output, option="-o"), option="-o")
    seqs, parsed = [], []
    for line_number, seq in iter_input_jsonl(args.input):
        where = f"line {line_number}"
        if not isinstance(seq, dict):
            raise BadInput("expected a JSON object", path=source, where=where)
        if "id" not in seq:
            raise BadInput("missing field 'id'", path=source, where=where)
        rewards = _numbers(seq, "rewards", source, where)
        values = _numbers(seq, "values", source, where)
        mask = np.ones_like(rewards) if args.no_mask else _numbers(seq, "mask", source, where, binary=True)
        if not (rewards.size == values.size == mask.size):
            raise BadInput(
                f"rewards, values and mask have lengths {rewards.size}, {values.size}, {mask.size}; they must be equal",
                path=source,
                where=where,
            )
        gamma = _param(seq, "gamma", args.gamma, source, where)
        lam = _param(seq, "lam", args.lam, source, where)
        seqs.append(seq)
        parsed.append((line_number, rewards, values, mask, gamma, lam))

    # One padded (batch, T) call per (γ, λ); trailing padding has mask 0 and so changes nothing.
    adv: list = [None] * len(parsed)
    ret: list = [None] * len(parsed)
    by_params = defaultdict(list)
    for i, p in enumerate(parsed):
        by_params[(p[4], p[5])].append(i)
    for (gamma, lam), idx in by_params.items():
        width = max(parsed[i][1].size for i in idx)
        r, v, m = (np.zeros((len(idx), width)) for _ in range(3))
        for row, i in enumerate(idx):
            k = parsed[i][1].size
            r[row, :k], v[row, :k], m[row, :k] = parsed[i][1], parsed[i][2], parsed[i][3]
        a, g = masked_gae(r, v, m, gamma, lam)
        for row, i in enumerate(idx):
            k = parsed[i][1].size
            adv[i], ret[i] = a[row, :k], g[row, :k]

    if args.whiten:
        try:
            if args.whiten_scope == "sequence":
                for i, p in enumerate(parsed):
                    adv[i] = masked_whiten(adv[i][None, :], p[3][None, :])[0]
            elif parsed:
                flat = masked_whiten(np.concatenate(adv)[None, :], np.concatenate([p[3] for p in parsed])[None, :])[0]
                bounds = np.cumsum([0] + [p[1].size for p in parsed])
                adv = [flat[bounds[i] : bounds[i + 1]] for i in range(len(parsed))]
        except ValueError as exc:
            failed_at = f"line {parsed[i][0]}" if args.whiten_scope == "sequence" else None
            raise BadInput(f"cannot whiten: {exc}", path=source, where=failed_at) from None

    text = "".join(
        json_text({**seq, "advantages": a.tolist(), "returns": g.tolist()}, path=args.output) + "\n"
        for seq, a, g in zip(seqs, adv, ret)
    )
    write_output_text(args.output, text)
    return 0
