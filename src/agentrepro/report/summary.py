"""The reviewer's summary at the top of the report: the questions reviews of a reproduction ask, each answered
from analysis.json (its tables, parity checks and the lock it carries) with its evidence, or "not provided".

Nothing here computes a statistic: every value is selected from the analysis or the lock. `reviewer_summary`
returns one `Answer` per question, in the order the page shows them. Values of a sourced analysis
(agentrepro.report.marks) are printed marked, so each line is Markup built with `Markup.format`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from markupsafe import Markup

from agentrepro.layout import checkpoint_file, hf_checkpoint
from agentrepro.outcomes import matrix_gaps
from agentrepro.report.glossary import Glossary
from agentrepro.report.marks import ci, number, pct, pp, pvalue, said, seconds, share
from agentrepro.runconfig import EvalConfig
from agentrepro.serving.servers import ServerConfig, determinism

NOT_PROVIDED = "not provided"
TASK_SEEDS_CHECK = "training and evaluation task seeds are disjoint"  # agentrepro.analysis.rundirs.task_seed_check
STEP_TOTAL = "step_total"  # the whole step in timings.jsonl (agentrepro.analysis.overhead)
JOIN = Markup("; ")
HOW_STARTED = "how_started"  # a training attempt's start in words (agentrepro.backends.cli_train)


@dataclass(frozen=True)
class Answer:
    question: str
    lines: Sequence[str]  # the answer (Markup is a str); empty: not provided
    evidence: str  # where it was read from, or why it is missing
    flags: list[str] = field(default_factory=list)  # what a reviewer should be warned about

    @property
    def provided(self) -> bool:
        return bool(self.lines)


def _flat(value, prefix: str = "") -> list[str]:
    """'key value' words of a (nested) identifier block, dotted keys for nesting."""
    if isinstance(value, dict):
        return [w for k, v in value.items() for w in _flat(v, f"{prefix}{k}.")]
    if isinstance(value, list):
        return [f"{prefix.rstrip('.')} {', '.join(map(str, value))}"]
    return [f"{prefix.rstrip('.')} {value}"]


def _find(obj, key: str, path: str = "") -> list[tuple[str, object]]:
    """Every (key path, value) of `key` anywhere in `obj`."""
    found: list[tuple[str, object]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            here = f"{path}.{k}" if path else k
            found += [(here, v)] if k == key else _find(v, key, here)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += _find(v, key, f"{path}[{i}]")
    return found


def identifiers(lock: dict | None) -> Answer:
    q = "Exact commits and images"
    if not lock or not isinstance(lock.get("resolved"), dict):
        return Answer(q, [], "no lock: the outcomes were analysed without a frozen study")
    lines, flags = [], []
    for name, block in lock["resolved"].items():
        if name == "files":
            continue
        lines.append(f"{name}: " + "; ".join(_flat(block)))
        if isinstance(block, dict) and "none" in block:
            flags.append(f"{name}: none ({block['none']})")
    harness = lock.get("harness") or {}
    if harness:
        commit = harness.get("commit")
        if commit:
            lines.append(f"harness: commit {commit}" + (" (dirty working tree)" if harness.get("dirty") else ""))
        else:  # frozen outside a git checkout: no commit names the code
            lines.append(f"harness: no commit recorded ({harness.get('note') or 'not frozen in a git checkout'})")
        if harness.get("dirty") and commit:
            flags.append("the harness ran from a dirty working tree")
        elif not commit:
            flags.append("no commit names the harness's code: only the package versions the lock records")
    files = lock["resolved"].get("files") or {}
    if files:
        lines.append(f"{len(files)} data file(s) hashed: " + ", ".join(sorted(files)))
    return Answer(q, lines, "the lock's resolved identifiers", flags)


def tokenizer(analysis: dict) -> Answer:
    """The tokenizer the runs used: as the lock names it, and as every run sealed it (checkpoints/tokenizer/)."""
    q = "Tokenizer"
    lock = analysis["provenance"].get("lock") or {}
    named = (lock.get("resolved") or {}).get("tokenizer")
    sealed: dict[str, set[str]] = {}
    for run in analysis["provenance"].get("runs") or []:
        for path, digest in (run.get("outputs") or {}).items():
            if "/checkpoints/tokenizer/" in path:
                sealed.setdefault(path.rsplit("/", 1)[1], set()).add(digest)
    lines = [("lock: " + "; ".join(_flat(named))) if isinstance(named, dict) else "the lock names none"]
    lines += [
        f"{name}: sha256 {next(iter(d))[:16]} in every run's seal"
        if len(d) == 1
        else f"{name}: {len(d)} different hashes across the runs"
        for name, d in sorted(sealed.items())
    ]
    flags = [f"{name} differs between runs" for name, d in sorted(sealed.items()) if len(d) > 1]
    if not named and not sealed:
        return Answer(q, [], "neither the lock nor the runs' seals name a tokenizer")
    return Answer(q, lines, "the lock's resolved.tokenizer and the runs' sealed checkpoints/tokenizer/ files", flags)


def evaluation_set(analysis: dict, step) -> Answer:
    q = "Evaluation set and its size"
    lock = analysis["provenance"].get("lock") or {}
    panel = lock.get("task_panel") or []
    if panel:
        manifest = lock.get("manifest") or {}
        env, ev = manifest.get("env") or {}, manifest.get("eval") or {}
        seeds = [t.get("seed") for t in panel if isinstance(t.get("seed"), int)]
        categories = sorted({str(t.get("category")) for t in panel})
        words = [f"{len(panel)} tasks frozen in the lock's task panel"]
        if env.get("name"):
            words.append(f"environment {env['name']}" + (f", split {env['split']}" if env.get("split") else ""))
        if seeds:
            words.append(f"task seeds {min(seeds)}–{max(seeds)}")
        if ev.get("episodes_per_task"):
            words.append(f"{ev['episodes_per_task']} episode(s) per task")
        words.append(f"{len(categories)} categor{'y' if len(categories) == 1 else 'ies'}")
        lines, flags = ["; ".join(words)], []
        for check in (p for p in analysis["parity"] if p["check"] == TASK_SEEDS_CHECK):
            lines.append(
                Markup("training vs evaluation seeds: {} ({})").format(
                    check["status"].replace("_", " "), said(check.get("detail") or "")
                )
            )
            flags += ["training and evaluation seeds overlap"] if check["status"] == "fail" else []
        return Answer(
            q,
            lines,
            "lock: task_panel (every run was checked against it); runs' resolved configs (training seeds)",
            flags,
        )
    runs = [r for r in analysis["tables"]["runs"] if r["step"] == step]
    if runs:
        sizes = sorted({r["n"] for r in runs})
        return Answer(
            q,
            [
                f"{', '.join(map(str, sizes))} episodes per run at step {step}; task sets were checked equal between "
                "methods, not against a frozen panel"
            ],
            "runs.csv (no lock)",
            ["no task panel was frozen before running"],
        )
    return Answer(q, [], "no runs at the final step")


def checkpoints(analysis: dict, step) -> Answer:
    q = "How checkpoints were chosen"
    lock = analysis["provenance"].get("lock") or {}
    manifest = lock.get("manifest") or {}
    if step is None:
        return Answer(q, [], "no evaluated step")
    if not manifest:
        return Answer(
            q,
            [f"step {step}: the last step every method was evaluated at"],
            "analysis settings (no lock)",
            ["not declared before running: no lock"],
        )
    rule = (manifest.get("eval") or {}).get("checkpoint", EvalConfig.checkpoint)  # a lock read as found: no key checks
    declared = (manifest.get("analysis") or {}).get("final_step")
    line = f"step {step} for every method; declared before running: eval.checkpoint = {rule}"
    line += f", analysis.final_step = {declared}" if declared is not None else " (the last evaluated step)"
    flags = (
        ["'best' selects the checkpoint on the evaluation set itself: optimistic"]
        if "best" in str(rule).lower()
        else []
    )
    lines, runs = [line], analysis["provenance"].get("runs") or []
    replayable, kind, why_not = _replayable(runs, step, manifest.get("eval") or {})
    if replayable:
        lines.append(
            f"re-derivable: {len(replayable)} of {len(runs)} run(s) sealed their step-{step} checkpoint {kind}: "
            "`agentrepro audit --re-eval` plays it again where it is kept and compares outcome by outcome (`bundle` "
            "ships it where small)"
        )
    if len(replayable) < len(runs):
        flags.append(
            f"{len(runs) - len(replayable)} run(s) sealed no step-{step} checkpoint the harness can play again "
            f"({why_not}): their outcomes rest on the seals alone"
        )
    return Answer(q, lines, "lock: manifest eval.checkpoint and analysis.final_step; the runs' seals", flags)


def _replayable(runs: list[dict], step, evaluation: dict) -> tuple[list[str], str, str]:
    """(the runs whose seal lists a checkpoint of `step` that `audit --re-eval` can play again, what kind it is, why
    the others cannot be): the harness's own checkpoint file (layout.checkpoint_file), or where a chat server scored
    the outcomes (`eval.engine: served`) the Hugging Face directory it served, if that server repeats its outcomes."""
    sealed = {run["path"]: run.get("outputs") or {} for run in runs if isinstance(run.get("path"), str)}
    paths = list(sealed)
    if evaluation.get("engine") != "served":
        kept = [p for p in paths if checkpoint_file(p, step).as_posix() in sealed[p]]
        return kept, "in the harness's own format", "a framework's evaluation needs its image and a GPU"
    temperature = float(evaluation.get("temperature", EvalConfig.temperature))
    repeats = determinism(ServerConfig.from_dict(evaluation.get("server") or {}), temperature=temperature)
    if repeats["deterministic"] is not True:
        return [], "", f"the chat server that scored them does not repeat its outcomes: {repeats['why']}"
    kept = [p for p in paths if any(k.startswith(hf_checkpoint(p, step).as_posix() + "/") for k in sealed[p])]
    return kept, "as the Hugging Face directory the served evaluator scored", "no Hugging Face directory sealed"


def per_seed(analysis: dict, step, glossary: Glossary) -> Answer:
    q = "Per-seed raw values, mean ± std"
    t = analysis["tables"]
    lines = []
    for m in (r for r in t["methods"] if r["step"] == step):
        seeds = sorted(
            (r for r in t["runs"] if r["method"] == m["method"] and r["step"] == step), key=lambda r: str(r["seed"])
        )
        raw = Markup(", ").join(
            Markup("seed {} {} ({}/{})").format(r["seed"], pct(r["rate"]), number(r["successes"]), number(r["n"]))
            for r in seeds
        )
        lines.append(Markup("{}: {} → {} ± {}").format(m["method"], raw, pct(m["mean"]), pct(m["std"])))
    evidence = Markup("runs.csv and methods.csv at step {} (std over seeds, {} = 1)").format(
        step, glossary.term("ddof")
    )
    gaps = matrix_gaps((r["method"], r["seed"]) for r in t["runs"] if r["step"] == step)
    flags = [
        f"partial method × seed matrix: no outcomes for {', '.join(gaps)}; each mean is over the method's own seeds, "
        "each paired delta over the seeds both methods have"
    ]
    return Answer(q, lines, evidence if lines else "no runs at the final step", flags if gaps else [])


def _comparison(r: dict, glossary: Glossary) -> Markup:
    """'+1.2 pp [−3.0, 5.1] pp (95% CI, test; Holm p 0.479 in family F; 128 tasks)' of a paired or learning row."""
    family = r.get("family")
    return Markup("{} {} pp (95% CI, {}; {} p {}{}; {} tasks)").format(
        pp(r["delta"]),
        ci(r["ci_lo"], r["ci_hi"]),
        glossary.term(r.get("test") or "paired"),
        glossary.term("Holm"),
        pvalue(r["p_holm"]),
        Markup(" in family {}").format(said(family)) if family else "",
        number(r["n_tasks"]),
    )


def paired_deltas(analysis: dict, step, glossary: Glossary) -> Answer:
    q = "Paired deltas with intervals"
    rows = [r for r in analysis["tables"]["paired"] if r["seed"] == "all" and r["step"] == step]
    lines = [Markup("{} − {}: {}").format(r["method_a"], r["method_b"], _comparison(r, glossary)) for r in rows]
    return Answer(q, lines, f"paired.csv at step {step}: seeds pooled by task" if lines else "fewer than two methods")


def learning(analysis: dict, step, glossary: Glossary) -> Answer:
    q = "Did each method improve on its starting policy?"
    rows = [r for r in analysis["tables"].get("learning") or [] if r["seed"] == "all" and r["step"] == step]
    alpha = analysis["settings"]["alpha"]
    lines = [
        Markup("{} vs its step {}: {}").format(r["method"], r["baseline_step"], _comparison(r, glossary)) for r in rows
    ]
    flags = [
        f"{r['method']} did not beat its step {r['baseline_step']} (Holm p ≥ {alpha:g} or a loss)"
        for r in rows
        if not (r["delta"] > 0 and r["p_holm"] is not None and r["p_holm"] < alpha)
    ]
    return Answer(
        q,
        lines,
        f"learning.csv at step {step}: the same tasks and seeds at step 0 and step {step}"
        if lines
        else "no step 0 to compare with",
        flags,
    )


def restarts(analysis: dict) -> Answer:
    """Killed and retried training attempts (resumed or started over), and the CPUs each attempt actually had."""
    q = "Restarts and the CPUs each run had"
    lines, flags = [], []
    for run in analysis["provenance"].get("runs") or []:
        attempts = [a for a in run.get("attempts") or [] if a.get("stage") == "train"]
        killed = [a for a in attempts if a.get("status") in ("killed", "failed")]
        if killed:
            last = attempts[-1]
            lines.append(
                f"{run['method']} seed {run['seed']}: {len(killed)} attempt(s) {', '.join(sorted({a['status'] for a in killed}))}; "
                f"the last {last.get(HOW_STARTED) or 'did not record how it started (resumed or started over)'}"
            )
            flags.append(f"{run['method']} seed {run['seed']} was restarted")
    used = [
        u
        for run in analysis["provenance"].get("runs") or []
        for a in run.get("attempts") or []
        if (u := cpu_use(a)) is not None
    ]
    if used:
        cpus = sorted(
            {
                a.get("cpus")
                for run in analysis["provenance"].get("runs") or []
                for a in run.get("attempts") or []
                if a.get("cpus")
            }
        )
        lines.append(
            f"CPU time over wall time of the attempts: {min(used):.2f} to {max(used):.2f} CPUs "
            f"(machine: {'/'.join(map(str, cpus)) or '?'} CPUs; the appendix lists each attempt)"
        )
    if not lines:
        return Answer(q, [], "no attempt was restarted, and none recorded its CPU time")
    return Answer(q, lines, "provenance.json of every run: its attempts (start, end, cpu_s, cpus)", flags)


def cpu_use(attempt: dict) -> float | None:
    """CPU time over wall time of a finished attempt: how many CPUs it had on average (None if not recorded)."""
    from_, to = attempt.get("start"), attempt.get("end")
    cpu = attempt.get("cpu_s")
    if not (isinstance(cpu, (int, float)) and from_ and to):
        return None
    wall = (datetime.fromisoformat(to) - datetime.fromisoformat(from_)).total_seconds()
    return cpu / wall if wall > 0 else None


def categories(analysis: dict, step) -> Answer:
    q = "Per-category results"
    rows = [r for r in analysis["tables"]["categories"] if r["step"] == step]
    if not rows:
        return Answer(q, [], "no categories at the final step")
    names = sorted({str(r["category"]) for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    flags = [f"one category only ({names[0]}): no breakdown by category is possible"] if len(names) == 1 else []
    return Answer(
        q,
        [
            f"{len(names)} categor{'y' if len(names) == 1 else 'ies'} × {len(methods)} methods at step {step} "
            "(section Per-category results)"
        ],
        "categories.csv",
        flags,
    )


def deviations(analysis: dict) -> Answer:
    q = "Deviations from the official recipe"
    lock = analysis["provenance"].get("lock")
    found = _find(lock, "deviations") if lock else []
    lines = [f"{where}: {item}" for where, value in found for item in (value if isinstance(value, list) else [value])]
    flags = [
        f"{r['method']} ({r['placement']}) did not run the pinned sources: "
        + ", ".join(sorted({d["path"] for d in r.get("differences") or []}) or ["no record of what ran"])
        + " (section Source parity)"
        for r in analysis["provenance"].get("source_parity") or []
        if r.get("status") == "fail"
    ]
    if lines:
        return Answer(q, lines, "lock: " + ", ".join(where for where, _ in found), flags)
    return Answer(q, [], "the lock records no deviations" if lock else "no lock", flags)


def seed_streams(analysis: dict) -> Answer:
    """Which random streams each backend's seed reaches (the lock's seed_streams); a stream shared across seeds is
    flagged: the spread over seeds does not include its randomness."""
    q = "Randomness the seed reaches"
    lock = analysis["provenance"].get("lock")
    found = (lock or {}).get("seed_streams") or {}
    lines, flags = [], []
    for backend, streams in found.items():
        reached = [s["stream"] for s in streams if s["reached"] is True]
        lines.append(f"{backend}: the seed reaches {', '.join(reached) or 'no stream'}")
        for s in streams:
            if s["reached"] is not True:
                state = "shared across seeds" if s["reached"] is False else "not known whether the seed reaches it"
                flags.append(f"{backend}: {s['stream']} {state} ({s['how']})")
    if lines:
        return Answer(q, lines, "lock: seed_streams", flags)
    return Answer(q, [], "the lock records no seed streams" if lock else "no lock")


def advantage_parity(analysis: dict) -> Answer:
    """One line, however many batch dumps were checked: how many checks pass, which fail, how many did not run; each
    check with its measured differences is in the sections Parity certificate and Parity checks."""
    q = "Parity of the backend's advantages with the reference estimator"
    checks = [p for p in analysis["parity"] if "advantage" in p["check"].lower()]
    by = {s: [p for p in checks if p["status"] == s] for s in ("pass", "fail", "not_run")}
    flags = [f"{len(by[s])} check(s) {s.replace('_', ' ')}" for s in ("fail", "not_run") if by[s]]
    if not checks or len(by["not_run"]) == len(checks):
        details = dict.fromkeys(
            f"not run: {p['check']}" + (f" ({p['detail']})" if p.get("detail") else "") for p in checks
        )
        return Answer(q, [], "; ".join(details) or "no advantage parity check in the analysis", flags)
    line = f"{len(by['pass'])} of {len(checks)} check(s) pass"
    if by["fail"]:
        named = [p["check"].rpartition(" from ")[2] for p in by["fail"]]
        line += f"; {len(named)} fail: {', '.join(named[:3])}" + (" ..." if len(named) > 3 else "")
    if by["not_run"]:
        line += f"; {len(by['not_run'])} not run"
    line += " (each check, its largest difference and the tolerance: sections Parity certificate and Parity checks)"
    return Answer(q, [line], "analysis parity checks (batch dumps recomputed with the reference estimator)", flags)


def overhead(analysis: dict) -> Answer:
    q = "Overhead p50 / p95 and its share of a step"
    rows = analysis["tables"]["overhead"]
    lines = []
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        total = next((r for r in mine if r["component"] == STEP_TOTAL), None)
        parts = [
            Markup("{} {} / {} ({})").format(
                r["component"], seconds(r["p50_s"]), seconds(r["p95_s"]), share(r["share_of_step"])
            )
            for r in sorted(mine, key=lambda r: -(r["share_of_step"] or 0))
            if r["component"] != STEP_TOTAL
        ]
        head = Markup("step {} / {}; ").format(seconds(total["p50_s"]), seconds(total["p95_s"])) if total else ""
        lines.append(Markup("{}: {}{}").format(method, head, JOIN.join(parts)))
    return Answer(q, lines, "overhead.csv (timings.jsonl of every run)" if lines else "no timings were recorded")


def imported(analysis: dict) -> Answer | None:
    """Outcomes `agentrepro import` wrote from another tool's records (provenance.imported): which files, hashed,
    and, flagged, everything that is therefore not sealed; None for outcomes the harness produced itself."""
    found = analysis["provenance"].get("imported") or []
    if not found:
        return None
    q = "Imported, not sealed"
    lines, flags = [], []
    for record in found:
        for f in record["files"]:
            lines.append(f"{f['path']}: {f['records']} record(s) ({record['format']}), sha256 {f['sha256'][:16]}")
        flags += [f"{field}: absent from {n} record(s)" for field, n in record["absent"].items()]
    flags += list(dict.fromkeys(reason for record in found for reason in record["unsealed"]))
    evidence = "; ".join(f"{r['record']['path']} (sha256 {r['record']['sha256'][:16]})" for r in found)
    return Answer(q, lines, f"the import's record: {evidence}", flags)


def reviewer_summary(analysis: dict, step, glossary: Glossary | None = None) -> list[Answer]:
    """Every question of the summary, answered from `analysis` (validated analysis.json) at the final `step`;
    `glossary` glosses the jargon where the page first uses it."""
    glossary = glossary or Glossary()
    return [
        *filter(None, [imported(analysis)]),
        identifiers(analysis["provenance"].get("lock")),
        tokenizer(analysis),
        evaluation_set(analysis, step),
        checkpoints(analysis, step),
        per_seed(analysis, step, glossary),
        learning(analysis, step, glossary),
        paired_deltas(analysis, step, glossary),
        categories(analysis, step),
        deviations(analysis),
        seed_streams(analysis),
        advantage_parity(analysis),
        restarts(analysis),
        overhead(analysis),
    ]
