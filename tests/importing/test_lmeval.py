"""`agentrepro import --format lm-eval`: the samples lm-evaluation-harness writes with `--log_samples` become one
outcome row per document of the chosen filter, the success read from the named 0/1 metric and the task from a field
of the doc; a sample whose doc does not hash to its doc_hash, repeats a document or carries no 0/1 success is one
line naming the file and the line, exit 2, nothing written.

The samples are built here as lm-eval builds and writes them (EleutherAI/lm-evaluation-harness at 4e7e0d4,
0.4.13.dev0: the example of lm_eval/evaluator.py, with doc_hash, prompt_hash and target_hash the SHA-256 of the doc
as JSON with indent 2 and non-ASCII kept, of the prompt and of the target as text; then
loggers/evaluation_tracker.py's save_results_samples: arguments as gen_args_i/arg_j, responses as strings, target
as text, json.dumps with non-ASCII kept, one line per document and filter). lm-eval itself does not run here: it
needs a model and a task's dataset, which these tests do not fetch."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers import run_cli

from agentrepro.environments import task_panel
from agentrepro.seal import verify_outputs

SEEDS = "10001-10006"
FILTERS = ("strict-match", "flexible-extract")  # GSM8K's two filters: two lines per document


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sample(doc_id: int, doc: dict, filter_key: str, metrics: dict, prompt: str = "Q: 2+2? A:", target="4") -> dict:
    """One sample as lm-eval logs it: the evaluator's example, then save_results_samples' sanitising."""
    arguments = [(prompt, {"until": ["\n\n"], "do_sample": False})]
    example = {
        "doc_id": doc_id,
        "doc": doc,
        "target": target,
        "arguments": arguments,
        "resps": [["The answer is 4.\n#### 4"]],
        "filtered_resps": ["4"],
        "filter": filter_key,
        "metrics": list(metrics),
        "doc_hash": sha256(json.dumps(doc, indent=2, ensure_ascii=False)),
        "prompt_hash": sha256(prompt),
        "target_hash": sha256(str(target)),
        **metrics,
    }
    example["arguments"] = {
        f"gen_args_{i}": {f"arg_{j}": part for j, part in enumerate(arg)} for i, arg in enumerate(arguments)
    }
    example["target"] = str(example["target"])
    return example


def write(path, samples):
    path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples), encoding="utf-8")
    return path


def gsm8k_like(docs):
    """Each doc under both filters, as lm-eval writes them: every document of the first filter, then the second;
    flexible-extract solves the even documents, strict-match only the first."""
    return [
        sample(i, doc, f, {"exact_match": float(i == 0 if f == "strict-match" else i % 2 == 0)})
        for f in FILTERS
        for i, doc in enumerate(docs)
    ]


def lmeval(tmp_path, *files, extra=(), out="out"):
    return run_cli(
        "import",
        *files,
        "--format",
        "lm-eval",
        "--env",
        "frozenlake",
        "--seeds",
        SEEDS,
        "--out",
        tmp_path / out,
        "--method",
        "grpo",
        "--seed",
        "0",
        "--step",
        "100",
        *extra,
        cwd=tmp_path,
    )


def test_each_document_of_the_chosen_filter_is_one_episode_traced_to_its_line(tmp_path):
    """Six documents under two filters, each doc naming its task by seed, non-ASCII text kept: six rows, the success
    of the chosen filter's metric, each row traced to that filter's line; `audit --import` derives them again; the
    reward is said to be absent (the success is written), not invented."""
    docs = [{"seed": 10001 + i, "question": f"Wie viele Äpfel? {i}"} for i in range(6)]
    path = write(tmp_path / "samples_sokoban_2026-12-06T00-00-00.jsonl", gsm8k_like(docs))
    chosen = ("--metric", "exact_match", "--filter", "flexible-extract", "--task-field", "seed")
    result = lmeval(tmp_path, path.name, extra=chosen)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    rows = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    panel = {t["seed"]: t for t in task_panel("frozenlake", {}, range(10001, 10007))}
    assert [(r["task_id"], r["success"]) for r in rows] == [
        (panel[10001 + i]["task_id"], int(i % 2 == 0)) for i in range(6)
    ]
    assert {(r["method"], r["seed"], r["step"]) for r in rows} == {("grpo", 0, 100)}
    record = json.loads((out / "import.json").read_text())
    lines = path.read_text(encoding="utf-8").splitlines()
    for row, source in zip(rows, record["sources"]):
        logged = json.loads(lines[source["line"] - 1])
        assert logged["filter"] == "flexible-extract" and logged["doc"]["seed"] == panel_seed(panel, row)
    assert record["absent"] == {"reward (success written)": 6, "turns (0 written)": 6, "tokens (0 written)": 6}
    assert record["given"]["metric"] == "exact_match" and verify_outputs(out / "OUTPUTS.sha256") == []
    audit = run_cli("audit", "--import", out, cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    strict = lmeval(
        tmp_path,
        path.name,
        extra=("--metric", "exact_match", "--filter", "strict-match", "--task-field", "seed"),
        out="strict",
    )
    assert strict.returncode == 0, strict.stderr
    again = [json.loads(x)["success"] for x in (tmp_path / "strict" / "outcomes.jsonl").read_text().splitlines()]
    assert again == [1, 0, 0, 0, 0, 0]


def panel_seed(panel, row) -> int:
    return next(seed for seed, task in panel.items() if task["task_id"] == row["task_id"])


def test_a_nested_task_field_and_the_one_filter_of_a_file(tmp_path):
    """A doc naming the panel's task_id under meta.task; a file of one filter needs no --filter."""
    panel = task_panel("frozenlake", {}, range(10001, 10007))
    docs = [{"meta": {"task": t["task_id"]}, "question": "..."} for t in panel]
    path = write(tmp_path / "s.jsonl", [sample(i, d, "none", {"acc": i < 3}) for i, d in enumerate(docs)])
    result = lmeval(tmp_path, path.name, extra=("--metric", "acc", "--task-field", "meta.task"))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(x) for x in (tmp_path / "out" / "outcomes.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["success"]) for r in rows] == [(t["task_id"], int(i < 3)) for i, t in enumerate(panel)]


def bad(tmp_path, samples, *options):
    path = write(tmp_path / "s.jsonl", samples)
    return lmeval(tmp_path, path.name, extra=options)


DOCS = [{"task_id": str(10001 + i)} for i in range(6)]
GOOD = [sample(i, d, "none", {"exact_match": 1.0}) for i, d in enumerate(DOCS)]


@pytest.mark.parametrize(
    "samples, options, said",
    [
        (GOOD, (), "s.jsonl: lm-eval's samples name no run and no success metric: give --metric"),
        (GOOD, ("--metric", "acc"), "s.jsonl: line 1: metrics: no metric 'acc' in this sample"),
        (
            [sample(i, d, "none", {"f1": 0.5}) for i, d in enumerate(DOCS)],
            ("--metric", "f1"),
            "s.jsonl: line 1: f1: expected 0 or 1 (a success per document), got 0.5",
        ),
        (
            [*GOOD[:2], {**GOOD[2], "doc": {"task_id": "10006"}}, *GOOD[3:]],
            ("--metric", "exact_match"),
            "s.jsonl: line 3: doc_hash: doc_hash is not the SHA-256 of this doc as lm-eval hashes it",
        ),
        (
            [*GOOD, GOOD[1]],
            ("--metric", "exact_match"),
            "s.jsonl: line 7: document 1 under filter 'none' again (first at line 2)",
        ),
        (
            gsm8k_like(DOCS),
            ("--metric", "exact_match"),
            "s.jsonl: holds the filters flexible-extract, strict-match: give --filter",
        ),
        (
            GOOD,
            ("--metric", "exact_match", "--task-field", "seed"),
            "s.jsonl: line 1: doc.seed: expected the task's id or seed",
        ),
        (
            GOOD,
            ("--metric", "exact_match", "--filter", "strict-match"),
            "s.jsonl: holds no sample under filter 'strict-match'",
        ),
        (
            [{"doc_id": 0, "filter": "none"}],
            ("--metric", "acc"),
            "s.jsonl: line 1: expected an lm-eval sample with a doc object",
        ),
    ],
)
def test_a_bad_sample_is_one_line_naming_its_file_and_line_and_nothing_is_written(tmp_path, samples, options, said):
    result = bad(tmp_path, samples, *options)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_lm_eval_options_go_with_its_format(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("method,seed,step,task_id,success\ngrpo,0,100,10001,1\n", encoding="utf-8")
    result = run_cli(
        "import",
        path,
        "--format",
        "plain",
        "--env",
        "frozenlake",
        "--seeds",
        SEEDS,
        "--out",
        tmp_path / "out",
        "--metric",
        "acc",
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "--metric: goes with --format lm-eval" in result.stderr
