"""The bottom line: the analysis in four sentences of words, for the first page of the report.

`bottom_line(doc)` reads analysis.json's object (its settings, tables, parity checks and certificate, and the runs'
provenance against the lock) and says what was compared, what held, what did not, and what was not checked (among
it, training jobs that ran other code than the lock names: agentrepro.software). Every number in it comes from the tables;
nothing is computed here but counts and choices of words. It is part of analysis.json (`bottom_line`), so the
audit recomputes it with the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentrepro.analysis.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from agentrepro.attempts import newest_attempt
from agentrepro.outcomes import matrix_gaps
from agentrepro.software import differences

ARTICLE = {
    "paper": "a paper",
    "reference implementation": "a reference implementation",
    "earlier run": "an earlier run",
}


def _pp(x) -> str:
    return "—" if x is None else f"{100 * x:+.1f} pp"


def _p(p) -> str:
    return "—" if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def _names(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _learning(rows: list[dict], alpha: float) -> tuple[list[str], list[str]]:
    """(held, did not hold) of every method against its step 0, seeds pooled."""
    pooled = [r for r in rows if r["seed"] == "all"]
    if not pooled:
        return [], []
    family = pooled[0].get("family")
    beat = [r for r in pooled if r["delta"] > 0 and r["p_holm"] is not None and r["p_holm"] < alpha]
    missed = [r for r in pooled if r not in beat]
    where = f"Holm p < {alpha:g} in family {family}" if family else f"Holm p < {alpha:g}"
    held, failed = [], []
    if beat:
        who = "every method" if not missed else _names([r["method"] for r in beat])
        low, high = min(r["delta"] for r in beat), max(r["delta"] for r in beat)
        size = _pp(low) if low == high else f"{_pp(low)} to {_pp(high)}"
        held.append(
            f"{who} beat {'its' if not missed or len(beat) == 1 else 'their'} step {pooled[0]['baseline_step']} ({size}; {where})"
        )
    for r in missed:
        failed.append(
            f"{r['method']} did not beat its step {r['baseline_step']} ({_pp(r['delta'])}, Holm p {_p(r['p_holm'])})"
        )
    return held, failed


def _claims(rows: list[dict]) -> tuple[list[str], list[str]]:
    held: list[str] = []
    failed: list[str] = []
    for r in rows:
        if r.get("kind") == "equivalence":
            if r.get("seed") != "all":
                continue
            (held if r.get("verdict") == REPRODUCED else failed).append(
                f"the equivalence '{r['claim']}' is {str(r.get('verdict')).replace('_', ' ')} ({_pp(r['delta'])})"
            )
        elif r["holds"]:
            held.append(f"the claim '{r['claim']}' holds ({_pp(r['delta'])}, Holm p {_p(r['p_holm'])})")
        else:
            failed.append(f"the claim '{r['claim']}' is not supported ({_pp(r['delta'])}, Holm p {_p(r['p_holm'])})")
    return held, failed


def _verdicts(rows: list[dict], kind: str) -> tuple[list[str], list[str]]:
    held = [
        f"{r['method']} reproduced the {kind} within ±{100 * r['tolerance']:g} pp ({_pp(r['delta'])})"
        for r in rows
        if r["verdict"] == REPRODUCED
    ]
    failed = [
        f"{r['method']} did not reproduce the {kind} ({_pp(r['delta'])})"
        for r in rows
        if r["verdict"] == NOT_REPRODUCED
    ]
    failed += [
        f"{r['method']} is inconclusive against the {kind} ({_pp(r['delta'])}; tasks needed: {r.get('needed') or '—'})"
        for r in rows
        if r["verdict"] == INCONCLUSIVE
    ]
    return held, failed


def _parity(doc: dict) -> tuple[list[str], list[str], list[str]]:
    """(held, did not hold, not checked) of the parity certificate and parity checks."""
    cert = doc.get("certificate") or []
    held: list[str] = []
    failed: list[str] = []
    unchecked: list[str] = []
    passed = [e for e in cert if e.get("status") == "pass"]
    if passed:
        held.append(f"the trainers' advantages matched the reference estimator in {len(passed)} dumped batch(es)")
    failed += [
        f"the parity certificate failed for {e['method']} seed {e.get('seed')} step {e['step']}"
        for e in cert
        if e.get("status") == "fail"
    ]
    skipped = [e for e in cert if e.get("status") == "not_run"]
    if skipped:
        methods = ", ".join(dict.fromkeys(str(e["method"]) for e in skipped))
        unchecked.append(f"the advantages of {len(skipped)} batch(es) of {methods} (see the parity certificate)")
    if not cert:
        unchecked.append("implementation parity (no run dumped its step rows: train.step_rows)")
    failed += [f"the parity check '{p['check']}' failed" for p in doc.get("parity") or [] if p.get("status") == "fail"]
    return held, failed, unchecked


def _code(doc: dict) -> list[str]:
    """Whether the training jobs ran the code the lock names (each run's newest attempt, agentrepro.software)."""
    provenance = doc.get("provenance") or {}
    lock, runs = provenance.get("lock"), provenance.get("runs") or []
    if not isinstance(lock, dict) or not runs:
        return []
    unlike: dict[tuple[str, ...], int] = {}
    for run in runs:
        found = tuple(differences(lock, newest_attempt(run).get("software")))
        if found:
            unlike[found] = unlike.get(found, 0) + 1
    if not unlike:
        return []
    found, count = max(unlike.items(), key=lambda kv: kv[1])
    said = "; ".join(found[:2]) + (f"; and {len(found) - 2} more" if len(found) > 2 else "")
    return [
        f"that the training jobs ran the code the lock names: {sum(unlike.values())} of {len(runs)} did not "
        f"({count} ran {said}; `agentrepro audit` lists every difference)"
    ]


def _imported(doc: dict) -> list[str]:
    """Outcomes `agentrepro import` wrote: that they came from the training they name is not checked."""
    imported = (doc.get("provenance") or {}).get("imported") or []
    files = sum(len(i.get("files") or []) for i in imported)
    formats = sorted({str(i.get("format")) for i in imported})
    if not imported:
        return []
    return [
        f"that the outcomes came from the training they name: they were imported from {files} file(s) of "
        f"{', '.join(formats)} records, not sealed (the import's record, `unsealed`, lists what that leaves unproven)"
    ]


def bottom_line(doc: dict) -> list[str]:
    """Four sentences: Compared, Held, Did not hold, Not checked (see the module docstring)."""
    t, settings = doc["tables"], doc["settings"]
    alpha = settings.get("alpha") or 0.05
    step = settings.get("final_step")
    reference = settings.get("reference")
    kind = (reference or {}).get("kind", "paper")
    at_final = [r for r in t["methods"] if r["step"] == step]
    methods = [r["method"] for r in at_final]
    seeds = max((r["seeds"] for r in at_final), default=0)
    lock = (doc.get("provenance") or {}).get("lock")
    tasks = (
        len(lock.get("task_panel") or [])
        if isinstance(lock, dict)
        else max((r["n"] for r in t["runs"] if r["step"] == step), default=0)
    )
    base = next((r["baseline_step"] for r in t["learning"]), None)
    against = []
    if base is not None:
        against.append(f"against its own step {base}")
    if reference:
        against.append(f"against {ARTICLE.get(kind, kind)} ({reference.get('paper')})")
    claims = [r for r in t["claims"] if r.get("seed") in ("all", None)]
    gaps = matrix_gaps((r["method"], r["seed"]) for r in t["runs"] if r["step"] == step)
    fewest = min((r["seeds"] for r in at_final), default=0)
    over = (
        f"{fewest}-{seeds} seed(s) (a partial matrix: {len(gaps)} method-seed pair(s) missing)"
        if gaps
        else f"{seeds} seed(s)"
    )
    compared = (
        f"Compared: {len(methods)} method(s) ({_names(methods) if methods else 'none'}) over {over} on "
        f"{tasks} {'frozen ' if lock else ''}task(s) at step {step}"
        + (", each " + " and ".join(against) if against else "")
        + (f", and {len(claims)} claim(s) declared before running" if claims else "")
        + "."
    )
    held: list[str] = []
    failed: list[str] = []
    unchecked: list[str] = []
    for h, f in (_learning(t["learning"], alpha), _claims(t["claims"]), _verdicts(t["verdicts"], kind)):
        held += h
        failed += f
    h, f, u = _parity(doc)
    held, failed, unchecked = held + h, failed + f, unchecked + u
    if reference and kind != "paper":
        unchecked.insert(0, f"the reference is {ARTICLE.get(kind, kind)}, not a paper")
    caveats = (reference or {}).get("caveats") or []
    if caveats:
        unchecked.append(f"what the {kind}'s {len(caveats)} caveat(s) say (listed with the verdicts)")
    if reference and any(not r.get("checked", True) for r in t["verdicts"]):
        unchecked.append(f"the {kind}'s values were not checked against their source")
    if not reference:
        unchecked.insert(0, "no reference values: nothing was compared with a paper or an earlier run")
    if seeds == 1:
        unchecked.append("seed-to-seed variation (one seed)")
    if not lock:
        unchecked.append("that the study was frozen before running (no lock)")
    unchecked += _code(doc) + _imported(doc)
    return [
        compared,
        "Held: " + ("; ".join(held) if held else "nothing that was tested") + ".",
        "Did not hold: " + ("; ".join(failed) if failed else "nothing") + ".",
        "Not checked: " + ("; ".join(unchecked) if unchecked else "nothing the analysis knows of") + ".",
    ]
