"""Generalised advantage estimation: token-level masked GAE (verl ≥ 0332866), masked whitening, and the
turn-level non-concat GAE of VAGEN-Lite (`no_concat_gae`).

All three take torch tensors or numpy arrays (or lists) and compute in float64 with numpy; a torch input
gets a torch result of its floating dtype and device, anything else a float64 numpy array. torch is only
imported when a tensor is passed, so the `gae` command stays light. Unlike verl's
`compute_gae_advantage_return`, `masked_gae` does not whiten: call `masked_whiten` explicitly (every
fidelity choice is a named step).
"""

from __future__ import annotations

import numpy as np


def _is_tensor(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _np(x) -> np.ndarray:
    if _is_tensor(x):
        return x.detach().cpu().to(dtype=__import__("torch").float64).numpy()
    return np.asarray(x, dtype=np.float64)


def _like(out: np.ndarray, template):
    """Return `out` as the type of `template`: a tensor of its floating dtype and device, or numpy."""
    if not _is_tensor(template):
        return out
    import torch  # heavy: torch, only when tensors are passed

    dtype = template.dtype if template.is_floating_point() else torch.float64
    return torch.from_numpy(out).to(device=template.device, dtype=dtype)


def masked_gae(rewards, values, mask, gamma: float, lam: float):
    """(advantages, returns), each of shape (batch, tokens), not whitened.

    rewards, values, mask: (batch, tokens); mask is the response mask (1 = action token, 0 = observation
    or padding; None = all ones). Backwards over t with nextvalues = lastgaelam = 0:
    δ_t = r_t + γ·nextvalues − V_t, g = δ_t + γλ·lastgaelam; where mask_t = 1, nextvalues ← V_t and
    lastgaelam ← g; where mask_t = 0 both carry over. A_t = lastgaelam at every position (a masked token
    holds the advantage of the next action token to its right; trailing masked tokens get 0).
    returns = A + V at every position.
    """
    r, v = _np(rewards), _np(values)
    if r.shape != v.shape or r.ndim != 2:
        raise ValueError(f"rewards and values must have the same shape (batch, tokens); got {r.shape} and {v.shape}")
    on = np.ones(r.shape, dtype=bool) if mask is None else _np(mask) != 0
    if on.shape != r.shape:
        raise ValueError(f"mask has shape {on.shape}, expected {r.shape}")
    batch, tokens = r.shape
    nextvalues = np.zeros(batch)
    lastgaelam = np.zeros(batch)
    adv = np.zeros_like(r)
    for t in range(tokens - 1, -1, -1):
        g = r[:, t] + gamma * nextvalues - v[:, t] + gamma * lam * lastgaelam
        mt = on[:, t]
        nextvalues = np.where(mt, v[:, t], nextvalues)
        lastgaelam = np.where(mt, g, lastgaelam)
        adv[:, t] = lastgaelam
    return _like(adv, rewards), _like(adv + v, rewards)


def masked_whiten(x, mask, *, shift_mean: bool = True, eps: float = 1e-8):
    """Whiten x (batch, tokens) with the mean and unbiased variance over mask = 1 positions only
    (verl `masked_whiten`: variance with N − 1), then (x − mean)/sqrt(var + eps) at every position.
    Raises ValueError when fewer than two positions are unmasked (as the reference does)."""
    xa = _np(x)
    on = _np(mask) != 0
    if on.shape != xa.shape:
        raise ValueError(f"mask has shape {on.shape}, expected {xa.shape}")
    n = int(on.sum())
    if n < 2:
        raise ValueError(f"whitening needs at least two unmasked tokens, got {n}")
    # verl divides the mean by Σmask + 1e-8; in its float32 that is exactly Σmask for any Σmask ≥ 1, so we
    # divide by Σmask (in float64, n + 1e-8 would move an all-equal batch to ±1e-5 instead of 0).
    # Statistics over x − x_ref (x_ref: the first unmasked value), so equal values whiten to exactly 0.
    ref = xa[on][0]
    dev = xa - ref
    mean_dev = dev[on].sum() / n
    var = ((dev[on] - mean_dev) ** 2).sum() / (n - 1)
    out = (dev - mean_dev) / np.sqrt(var + eps)
    if not shift_mean:
        out = out + ref + mean_dev
    return _like(out, x)


def turn_gae(rewards, values, gamma: float, lam: float):
    """(advantages, returns) over the K turns of one trajectory, each of shape (K,).

    VAGEN-Lite `no_concat_gae`: backwards over turns, δ_k = r_k + γ·v_{k+1} − v_k (v_K = 0),
    A_k = δ_k + γλ·A_{k+1}; returns = A + v. The trainer broadcasts A_k to all of turn k's tokens.
    """
    r, v = _np(rewards), _np(values)
    if r.ndim != 1 or r.shape != v.shape:
        raise ValueError(f"rewards and values must be 1-D of the same length; got {r.shape} and {v.shape}")
    adv = np.zeros_like(r)
    nextvalue, nextadv = 0.0, 0.0
    for k in range(r.shape[0] - 1, -1, -1):
        nextadv = r[k] + gamma * nextvalue - v[k] + gamma * lam * nextadv
        adv[k] = nextadv
        nextvalue = v[k]
    return _like(adv, rewards), _like(adv + v, rewards)
