"""The reviewer's summary: every question answered from analysis.json with its evidence, or 'not provided'."""

from __future__ import annotations

from agentrepro.report import render
from agentrepro.report.summary import reviewer_summary

QUESTIONS = [
    "Exact commits and images",
    "Tokenizer",
    "Evaluation set and its size",
    "How checkpoints were chosen",
    "Per-seed raw values, mean ± std",
    "Did each method improve on its starting policy?",
    "Paired deltas with intervals",
    "Per-category results",
    "Deviations from the official recipe",
    "Randomness the seed reaches",
    "Parity of the backend's advantages with the reference estimator",
    "Restarts and the CPUs each run had",
    "Overhead p50 / p95 and its share of a step",
]


def answers(analysis, step=150) -> dict:
    return {a.question: a for a in reviewer_summary(analysis, step)}


def test_every_question_in_order_with_values_from_the_analysis(analysis):
    """The questions come in order; identifiers, panel size, per-seed rates and paired deltas are the analysis' own."""
    got = reviewer_summary(analysis, 150)
    assert [a.question for a in got] == QUESTIONS
    by = {a.question: a for a in got}
    ids = "\n".join(by["Exact commits and images"].lines)
    resolved = analysis["provenance"]["lock"]["resolved"]
    assert resolved["image"]["digest"] in ids and resolved["backend"]["commit"] in ids and "f" * 40 in ids
    assert by["Evaluation set and its size"].lines[0].startswith("128 tasks frozen in the lock's task panel")
    seeds = by["Per-seed raw values, mean ± std"].lines
    runs = [r for r in analysis["tables"]["runs"] if r["method"] == "grpo" and r["step"] == 150]
    grpo = next(line for line in seeds if line.startswith("grpo:"))
    assert all(f"{100 * r['rate']:.1f}% ({r['successes']}/{r['n']})" in grpo for r in runs)
    pairs = [r for r in analysis["tables"]["paired"] if r["seed"] == "all" and r["step"] == 150]
    assert len(by["Paired deltas with intervals"].lines) == len(pairs)
    assert "step 150 for every method" in by["How checkpoints were chosen"].lines[0]
    assert not by["Deviations from the official recipe"].provided
    overhead = by["Overhead p50 / p95 and its share of a step"].lines
    assert {line.split(":")[0] for line in overhead} == {r["method"] for r in analysis["tables"]["overhead"]}


def test_a_lock_frozen_outside_git_names_no_commit_and_says_so(analysis):
    """A lock frozen where no git checkout names the code (a device with the source copied over) reads 'no commit
    recorded' with the lock's reason, flagged, never 'commit None'."""
    from agentrepro.report.summary import identifiers

    lock = {
        **analysis["provenance"]["lock"],
        "harness": {"commit": None, "dirty": True, "note": "/x is not inside a git repository"},
    }
    answer = identifiers(lock)
    assert "harness: no commit recorded (/x is not inside a git repository)" in answer.lines
    assert not any("None" in line for line in answer.lines)
    assert answer.flags[-1] == "no commit names the harness's code: only the package versions the lock records"
    dirty = identifiers({**lock, "harness": {"commit": "a" * 40, "dirty": True}})
    assert f"harness: commit {'a' * 40} (dirty working tree)" in dirty.lines
    assert dirty.flags[-1] == "the harness ran from a dirty working tree"


def test_the_checkpoint_answer_says_which_runs_the_audit_can_play_again(analysis):
    """Runs whose seal lists the harness's own checkpoint of the final step are re-derivable (`audit --re-eval`);
    the others are flagged as resting on their seals alone. Where a chat server scored the outcomes, the Hugging
    Face directory it served counts instead, and none does where that server does not repeat its outcomes."""
    import copy

    from agentrepro.report.summary import checkpoints

    a = copy.deepcopy(analysis)
    runs = a["provenance"]["runs"]
    for i, run in enumerate(runs):
        run["path"] = f"runs/s/{run['method']}/seed{run['seed']}"
        if i % 2 == 0:
            run["outputs"][f"{run['path']}/checkpoints/step150.pt"] = "0" * 64
    answer = checkpoints(a, 150)
    kept = (len(runs) + 1) // 2
    assert answer.lines[1].startswith(f"re-derivable: {kept} of {len(runs)} run(s) sealed their step-150 checkpoint")
    assert answer.flags == [
        f"{len(runs) - kept} run(s) sealed no step-150 checkpoint the harness can play again (a framework's "
        "evaluation needs its image and a GPU): their outcomes rest on the seals alone"
    ]
    assert checkpoints(a, 140).lines[1:] == []  # no run sealed a checkpoint of that step

    lock = a["provenance"]["lock"]["manifest"]
    lock["eval"] = {**(lock.get("eval") or {}), "engine": "served", "temperature": 0, "server": {"kind": "sglang"}}
    assert checkpoints(a, 150).lines[1:] == []  # the builtin files do not count where a chat server scored
    for run in runs[:2]:
        run["outputs"][f"{run['path']}/checkpoints/hf/step150/model.safetensors"] = "0" * 64
    served = checkpoints(a, 150)
    assert served.lines[1].startswith(
        f"re-derivable: 2 of {len(runs)} run(s) sealed their step-150 checkpoint as the Hugging Face directory the "
        "served evaluator scored"
    )
    assert served.flags == [
        f"{len(runs) - 2} run(s) sealed no step-150 checkpoint the harness can play again (no Hugging Face directory "
        "sealed): their outcomes rest on the seals alone"
    ]
    lock["eval"]["server"] = {"kind": "url", "url": "http://127.0.0.1:9"}
    elsewhere = checkpoints(a, 150)
    assert elsewhere.lines[1:] == [] and "does not repeat its outcomes: a server the user runs" in elsewhere.flags[0]


def test_deviations_best_checkpoint_and_parity_flags(analysis):
    """Deviations recorded in the lock are listed; a 'best' checkpoint is flagged optimistic; failed parity is flagged."""
    lock = analysis["provenance"]["lock"]
    lock["manifest"]["deviations"] = ["rollout temperature 0.4 instead of 1.0 (memory)"]
    lock["manifest"]["eval"] = {"checkpoint": "best"}
    analysis["parity"] = [
        {"check": "advantages recomputed from runs/x/batches/step5.jsonl", "status": "fail", "detail": "max |diff| 0.3"}
    ]
    by = answers(analysis)
    assert by["Deviations from the official recipe"].lines == [
        "manifest.deviations: rollout temperature 0.4 instead of 1.0 (memory)"
    ]
    assert any("optimistic" in f for f in by["How checkpoints were chosen"].flags)
    parity = by["Parity of the backend's advantages with the reference estimator"]
    assert parity.provided and parity.flags == ["1 check(s) fail"]
    assert parity.lines == [
        "0 of 1 check(s) pass; 1 fail: runs/x/batches/step5.jsonl (each check, its largest difference and the "
        "tolerance: sections Parity certificate and Parity checks)"
    ]


def test_the_parity_answer_is_one_line_however_many_dumps(analysis):
    """Twenty-five checked dumps make one line on page 1 (the details are in the section Parity checks)."""
    passed = {"status": "pass", "detail": "implements episode statistics over rows, as declared (rows: 1e-07)"}
    analysis["parity"] = [
        {"check": f"parity certificate: advantages recomputed from runs/s/m/seed{k}/batches/step{k}.jsonl", **passed}
        for k in range(24)
    ] + [
        {
            "check": "parity certificate: advantages recomputed from runs/s/m/seed9/batches/step99.jsonl",
            "status": "not_run",
            "detail": "the rows could not be recomputed",
        }
    ]
    parity = answers(analysis)["Parity of the backend's advantages with the reference estimator"]
    assert parity.lines == [
        "24 of 25 check(s) pass; 1 not run (each check, its largest difference and the tolerance: sections Parity "
        "certificate and Parity checks)"
    ]
    assert parity.flags == ["1 check(s) not run"]


def test_streams_the_seed_does_not_reach_are_flagged(analysis):
    """The lock's seed_streams: each backend's reached streams are listed; a stream shared across seeds or not known is
    flagged with how (the spread over seeds does not include its randomness)."""
    analysis["provenance"]["lock"]["seed_streams"] = {
        "verl-agent": [
            {"stream": "environment games", "reached": True, "how": "env.seed = seed x 1128"},
            {"stream": "model initialisation", "reached": False, "how": "the same pretrained weights"},
        ],
        "command": [{"stream": "data order", "reached": None, "how": "the command's own"}],
    }
    found = answers(analysis)["Randomness the seed reaches"]
    assert found.lines == ["verl-agent: the seed reaches environment games", "command: the seed reaches no stream"]
    assert found.flags == [
        "verl-agent: model initialisation shared across seeds (the same pretrained weights)",
        "command: data order not known whether the seed reaches it (the command's own)",
    ]


def test_without_a_lock_answers_say_not_provided(analysis):
    """Outcomes analysed without a lock: identifiers and deviations are not provided; the checkpoint is flagged as undeclared."""
    analysis["provenance"] = {"lock": None, "lock_sha256": None, "runs": []}
    analysis["parity"] = [
        {"check": "advantages recomputed from batch dumps", "status": "not_run", "detail": "outcome files only"}
    ]
    by = answers(analysis)
    for q in (
        "Exact commits and images",
        "Deviations from the official recipe",
        "Parity of the backend's advantages with the reference estimator",
    ):
        assert not by[q].provided, q
    assert "outcome files only" in by["Parity of the backend's advantages with the reference estimator"].evidence
    assert by["How checkpoints were chosen"].flags == ["not declared before running: no lock"]
    assert "not against a frozen panel" in by["Evaluation set and its size"].lines[0]


def test_summary_is_at_the_top_of_the_page(analysis):
    """The summary is the first section, each question a row, 'not provided' written where nothing answers it."""
    analysis["provenance"]["lock"]["resolved"] = None
    html = render.render_html(
        render.build_context(analysis, figures=[], audit={"status": "passed", "problems": [], "message": ""}, files={})
    )
    section = html[html.index('<section id="summary">') : html.index('<section id="equivalence">')]
    assert html.index('<section id="summary">') == html.index("<section")
    assert all(q.replace("'", "&#39;") in section for q in QUESTIONS)
    assert (
        section.count("<strong>not provided</strong>") == 4
    )  # identifiers and tokenizer (no resolved block), deviations, seed streams


def test_tokenizer_restarts_cpus_and_learning_are_answered(analysis):
    """The tokenizer as the lock names it and as every run sealed it; a killed run that resumed; the CPUs attempts had;
    each method against its step 0 with its family's Holm p."""
    runs = analysis["provenance"]["runs"]
    for r in runs:
        r["outputs"]["runs/x/checkpoints/tokenizer/tokenizer.json"] = "ab" * 32
    runs[0]["attempts"] = [
        {"stage": "train", "status": "killed", "start": "2026-01-01T10:00:00+00:00", "end": None, "cpus": 2},
        {
            "stage": "train",
            "status": "ok",
            "how_started": "resumed from the checkpoints of an earlier attempt",
            "start": "2026-01-01T10:10:00+00:00",
            "end": "2026-01-01T10:20:00+00:00",
            "cpu_s": 300.0,
            "cpus": 2,
        },
    ]
    by = answers(analysis)
    tokenizer = by["Tokenizer"].lines
    assert (
        tokenizer[0].startswith("lock: ") and tokenizer[1] == f"tokenizer.json: sha256 {'ab' * 8} in every run's seal"
    )
    restarts = by["Restarts and the CPUs each run had"]
    assert (
        f"{runs[0]['method']} seed {runs[0]['seed']}: 1 attempt(s) killed; the last resumed from the checkpoints"
        in restarts.lines[0]
    )
    assert any(
        "graphgpo seed 1: 1 attempt(s) failed" in line for line in restarts.lines
    )  # the synthetic study's retried run
    assert "0.50 to 0.50 CPUs (machine: 2 CPUs" in restarts.lines[-1]
    learning = by["Did each method improve on its starting policy?"]
    pooled = [r for r in analysis["tables"]["learning"] if r["seed"] == "all"]
    assert len(learning.lines) == len(pooled) and all("in family learning@150/all" in line for line in learning.lines)


def test_the_appendix_says_each_attempts_code_and_machine(analysis):
    """Each attempt's row in the appendix names the commit it ran (and uncommitted changes), its packages' hash, the
    CPU with its vector instruction sets, and the BLAS with its threads; an attempt that recorded none says so."""
    runs = analysis["provenance"]["runs"]
    runs[0]["attempts"] = [
        {
            "stage": "train",
            "status": "ok",
            "software": {"harness": {"commit": "c" * 40, "dirty": True}, "python": {"packages_sha256": "d" * 64}},
            "machine": {
                "cpu_model": "AMD EPYC 9654",
                "isa": ["avx2", "avx512f"],
                "blas": {"name": "scipy-openblas", "version": "0.3.31", "threads": [{"num_threads": 16}]},
            },
        },
        {"stage": "train", "status": "ok"},
    ]
    html, _, _ = render.render_report(analysis, audit={"status": "passed", "problems": [], "message": ""}, files={})
    assert f"{'c' * 12} + changes; packages {'d' * 12}" in html
    assert "AMD EPYC 9654 (avx2, avx512f); scipy-openblas 0.3.31, 16 thread(s)" in html
    assert "not recorded" in html


def test_the_references_caveats_stand_with_the_verdicts_as_text(analysis):
    """The reference's caveats are listed under the verdicts, as text (markup in them is escaped)."""
    analysis["settings"]["reference"]["caveats"] = ["Another recipe <b>and</b> other seeds."]
    html, _, _ = render.render_report(analysis, audit={"status": "passed", "problems": [], "message": ""}, files={})
    verdicts = html[html.index('id="verdicts"') :]
    assert "<li>Another recipe &lt;b&gt;and&lt;/b&gt; other seeds.</li>" in verdicts[: verdicts.index("</table>")]
