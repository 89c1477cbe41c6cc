"""`agentrepro train` and `agentrepro eval` (builtin path) on a local chat model, as subprocesses: metrics, checkpoints,
outcomes, and the chat template's hash in the train and eval provenance."""

import hashlib
import json

from helpers import run_cli
from trainer_helpers import chat_config, train_verb
from transformers import AutoTokenizer

from agentrepro.reading import read_jsonl


def test_a_short_chat_run_trains_and_evaluates_on_the_chat_prompts(tiny_chat_model, tmp_path):
    """Two CPU steps on the tiny chat model write metrics and checkpoints; train and eval record the chat template's sha256."""
    config = chat_config(tiny_chat_model, steps=2, max_turns=2, max_new_tokens=5)
    config["eval"]["max_turns"] = 2
    run = train_verb(config, tmp_path)
    metrics = read_jsonl(run / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2] and all(m["tokens_trained"] > 0 for m in metrics)
    for name in ("checkpoints/step0.pt", "checkpoints/step1.pt", "checkpoints/step2.pt", "OUTPUTS.sha256"):
        assert (run / name).is_file(), name
    template = AutoTokenizer.from_pretrained(tiny_chat_model).chat_template
    expected = {
        "kind": "chat_template",
        "mode": "concat",
        "rows": "one per turn",
        "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest(),
    }
    train_attempt = json.loads((run / "provenance.json").read_text())["attempts"][-1]
    assert train_attempt["status"] == "ok" and train_attempt["prompt"] == expected
    done = run_cli("eval", "--run", run, "--step", 2)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(run / "eval" / "step2" / "outcomes.jsonl")
    assert [r["task_id"] for r in rows] == [f"frozenlake-{s}" for s in range(10001, 10005)]
    assert all(1 <= r["turns"] <= 2 for r in rows)
    eval_attempt = json.loads((run / "eval" / "step2" / "provenance.json").read_text())["attempts"][-1]
    assert eval_attempt["evaluator"] == {"engine": "builtin", "prompt": expected}
