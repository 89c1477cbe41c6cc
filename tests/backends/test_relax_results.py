"""The command backend's `relax` adapter: converters of rollout_result/{train,eval}/*.jsonl, and a run using it.

Sample records are shaped like Relax's `_sample_to_summary_record` (redai-infra/Relax, relax/utils/...;
docs "Rollout Result Viewer": `<save>/rollout_result/eval/{rollout_id}.jsonl`, one line per sample with
rollout_id, sample_index, prompt, response, reward, response_length, total_length, agent_turns, status,
group_index and, for eval, dataset).
"""

from __future__ import annotations

import json
import textwrap

import pytest
from helpers import run_cli

from agentrepro.backends.relax import results as relax
from agentrepro.errors import BadInput

HASH = "c" * 64


def record(rollout_id, index, group, reward, *, dataset=None):
    r = {
        "rollout_id": rollout_id,
        "sample_index": index,
        "prompt": "<|im_start|>user ...",
        "response": "<answer>Left</answer>",
        "reward": reward,
        "prompt_length": 90,
        "response_length": 12,
        "total_length": 102,
        "prompt_token_count": 90,
        "response_token_count": 12,
        "total_token_count": 102,
        "image_count": 0,
        "image_token_count": 0,
        "multimodal_token_count": 0,
        "agent_turns": 3,
        "status": "completed",
        "group_index": group,
    }
    if dataset:
        r["dataset"] = dataset
    return r


def config(tmp_path, **block):
    return {
        "study": "s",
        "method": "grpo",
        "seed": 2,
        "backend": {"name": "relax", "workdir": str(tmp_path), **block},
        "model": {"name": "Qwen/Qwen3-0.6B"},
        "env": {"name": "sokoban"},
        "train": {"estimator": "grpo", "steps": 2, "groups": 4, "group_size": 2, "lr": 1e-6},
        "eval": {
            "every": 1,
            "episodes_per_task": 2,
            "task_panel": [{"task_id": f"sokoban-{i}", "task_hash": HASH, "category": "sokoban"} for i in range(2)],
        },
    }


def write(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_convert_eval(tmp_path):
    """Eval samples of rollout 2 are step 3; group_index indexes the panel, repeated samples are episodes, reward >= 1 succeeds."""
    write(
        tmp_path / "relax/rollout_result/eval/2.jsonl",
        [
            record(2, 0, 0, 1.0, dataset="sokoban"),
            record(2, 1, 0, 0.1, dataset="sokoban"),
            record(2, 2, 1, 1.1, dataset="sokoban"),
            record(2, 3, 1, 0.0, dataset="sokoban"),
        ],
    )
    rows = relax.convert_eval(tmp_path, 3, config(tmp_path))
    assert [(r["task_id"], r["episode"], r["success"], r["reward"], r["turns"], r["tokens"]) for r in rows] == [
        ("sokoban-0", 0, 1, 1.0, 3, 12),
        ("sokoban-0", 1, 0, 0.1, 3, 12),
        ("sokoban-1", 0, 1, 1.1, 3, 12),
        ("sokoban-1", 1, 0, 0.0, 3, 12),
    ]


def test_convert_eval_errors(tmp_path):
    """A group index outside the panel and a missing reward are BadInput naming file, line and field."""
    write(tmp_path / "relax/rollout_result/eval/0.jsonl", [record(0, 0, 5, 1.0)])
    with pytest.raises(BadInput, match=r"0.jsonl: line 1: group_index: task index 5 outside"):
        relax.convert_eval(tmp_path, 0, config(tmp_path))
    bad = record(2, 0, 0, 1.0)
    bad["reward"] = None
    write(tmp_path / "relax/rollout_result/eval/1.jsonl", [bad])
    with pytest.raises(BadInput, match="line 1: field 'reward'"):
        relax.convert_eval(tmp_path, 2, config(tmp_path))


def test_convert_training(tmp_path):
    """Train summaries -> metrics per rollout (step = rollout_id + 1): mean reward, success rate, cumulative counts."""
    write(tmp_path / "relax/rollout_result/train/0.jsonl", [record(0, 0, 0, 0.0), record(0, 1, 0, 1.0)])
    write(
        tmp_path / "relax/rollout_result/train/1.jsonl",
        [record(1, 0, 0, 1.0), record(1, 1, 0, 1.0), record(1, 2, 1, 0.5)],
    )
    relax.convert_training(tmp_path, config(tmp_path))
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert metrics == [
        {"step": 1, "episodes": 2, "tokens_generated": 24, "reward_mean": 0.5, "train_success_rate": 0.5},
        {"step": 2, "episodes": 5, "tokens_generated": 60, "reward_mean": 2.5 / 3, "train_success_rate": 2 / 3},
    ]


MINI_RELAX = textwrap.dedent("""\
    import argparse, json, os, sys
    p = argparse.ArgumentParser(); p.add_argument("mode"); p.add_argument("--save"); p.add_argument("--num-rollout", type=int, default=0)
    p.add_argument("--step", type=int, default=0); a = p.parse_args()
    def write(path, recs):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").write("".join(json.dumps(r) + "\\n" for r in recs))
    rec = lambda i, g, r: {"rollout_id": i, "sample_index": g, "reward": r, "response_length": 5, "agent_turns": 2, "group_index": g, "status": "completed"}
    if a.mode == "train":
        for i in range(a.num_rollout):
            write(f"{a.save}/rollout_result/train/{i}.jsonl", [rec(i, 0, 1.0), rec(i, 1, 0.0)])
    else:
        rollout = max(a.step - 1, 0)  # Relax names the evaluation after update N by rollout_id N - 1
        write(f"{a.save}/rollout_result/eval/{rollout}.jsonl", [rec(rollout, g, float(g == 0)) for g in (0, 0, 1, 1)])
    """)


def test_command_backend_with_relax_adapter(tmp_path, write_config):
    """`train`/`eval` subprocesses with the command backend and adapter relax convert a stand-in Relax's outputs."""
    (tmp_path / "mini_relax.py").write_text(MINI_RELAX)
    cfg = config(tmp_path)
    cfg["backend"] = {
        "name": "command",
        "adapter": "relax",
        "cwd": str(tmp_path),
        "command": "{python} mini_relax.py train --save {run_dir}/relax --num-rollout {train.steps}",
        "eval_command": "{python} mini_relax.py eval --save {run_dir}/relax --step {step}",
    }
    run_dir = tmp_path / "run"
    result = run_cli("train", "--config", write_config(cfg), "--out", run_dir)
    assert result.returncode == 0, result.stderr
    assert [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    result = run_cli("eval", "--run", run_dir, "--step", 2)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(x) for x in (run_dir / "eval/step2/outcomes.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["episode"], r["success"]) for r in rows] == [
        ("sokoban-0", 0, 1),
        ("sokoban-0", 1, 1),
        ("sokoban-1", 0, 0),
        ("sokoban-1", 1, 0),
    ]
