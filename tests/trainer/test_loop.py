"""The training loop: run-directory files, kill-and-resume bit for bit, same seed same run."""

import json

import pytest
import torch
from trainer_helpers import tiny_config

from agentrepro.jobs.bookkeeping import clear_outputs
from agentrepro.reading import read_jsonl
from agentrepro.trainer.checkpoint import load_checkpoint, saved_steps
from agentrepro.trainer.loop import train

TIMING_FIELDS = {"wall_s", "gpu_hours", "cpu_rss_gb"}  # machine-dependent


def _metrics(run_dir):
    return [{k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in read_jsonl(run_dir / "metrics.jsonl")]


@pytest.mark.parametrize(
    "train_opts",
    [
        {
            "estimator": "ppo",
            "kl_coef": 0.05,
            "entropy_coef": 0.01,
            "epochs": 2,
            "minibatches": 2,
            "lr_schedule": "linear",
        },
        {"estimator": "gigpo", "mode": "non_concat"},
        {"estimator": "ppo", "kl_coef": 0.05, "epochs": 2, "minibatches": 2, "update_precision": "bf16-master"},
    ],
)
def test_kill_and_resume_ends_bit_for_bit_where_an_uninterrupted_run_ends(tmp_path, train_opts):
    """Stopped after an unsaved step and resumed from the last checkpoint: same weights, optimizer and logs."""
    config = tiny_config(steps=4, checkpoint_every=2, **train_opts)
    whole = tmp_path / "whole"
    train(config, whole, resume=False)
    broken = tmp_path / "broken"
    train(config, broken, resume=False, stop_at=3)  # step 3 ran but was never checkpointed: a kill
    assert saved_steps(broken) == [0, 2]
    assert [r["step"] for r in read_jsonl(broken / "metrics.jsonl")] == [1, 2, 3]
    train(config, broken, resume=True)
    a, b = load_checkpoint(whole, 4), load_checkpoint(broken, 4)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    opt_a, opt_b = a["optimizer"]["state"], b["optimizer"]["state"]
    assert all(torch.equal(opt_a[i]["exp_avg"], opt_b[i]["exp_avg"]) for i in opt_a)
    assert a["scheduler"] == b["scheduler"]
    assert _metrics(whole) == _metrics(broken)
    assert [r["step"] for r in read_jsonl(broken / "timings.jsonl")] == [1, 2, 3, 4]


def test_run_directory_files_follow_the_contract(tmp_path):
    """metrics/timings/graph diagnostics per step with the docs/design.md §3.3 names; batch dumps in step-row form."""
    run = tmp_path / "run"
    train(tiny_config(steps=2, estimator="graphgpo", dump_batches_every=1), run, resume=False)
    metrics = read_jsonl(run / "metrics.jsonl")
    names = {
        "step",
        "env_steps",
        "episodes",
        "tokens_generated",
        "tokens_trained",
        "train_success_rate",
        "reward_mean",
        "valid_action_ratio",
        "loss_policy",
        "loss_value",
        "kl",
        "entropy",
        "grad_norm",
        "lr",
        "wall_s",
        "gpu_hours",
    }
    assert names <= set(metrics[0]) and [m["step"] for m in metrics] == [1, 2]
    assert metrics[1]["episodes"] == 2 * metrics[0]["episodes"] == 8  # cumulative
    # no budget set: the CPU's passes are sized from the host's memory too (trainer/memory.py), a multiple of 1,024
    assert metrics[0]["micro_batch_tokens"] >= 1024 and metrics[0]["micro_batch_tokens"] % 1024 == 0
    timings = read_jsonl(run / "timings.jsonl")
    assert {"rollout", "update", "step_total", "graph_build", "shortest_paths"} <= set(timings[0])
    assert "checkpoint" in timings[0] and all(v >= 0 for k, v in timings[0].items() if k != "step")
    assert "token_stats" not in timings[0]  # one on-policy pass without a critic or a reference: none before the update
    diag = read_jsonl(run / "graph_diagnostics.jsonl")
    assert {"step", "nodes", "edges", "distance_hist"} <= set(diag[0])
    rows = read_jsonl(run / "batches" / "step1.jsonl")
    assert {
        "group",
        "traj",
        "turn",
        "state",
        "next_state",
        "reward",
        "episode_reward",
        "valid",
        "success",
        "advantage",
    } <= set(rows[0])
    warm = json.loads((run / "warmstart.json").read_text())
    assert warm["enabled"] and warm["steps"] <= 2 and warm["curve"][0]["step"] == 0


def test_same_seed_same_run_and_another_seed_differs(tmp_path):
    """Two fresh runs of one seed write identical metrics and weights; another seed does not."""
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        config = tiny_config(steps=2)
        config["seed"] = seed
        train(config, tmp_path / name, resume=False)
        runs[name] = (_metrics(tmp_path / name), load_checkpoint(tmp_path / name, 2)["model"])
    assert runs["a"][0] == runs["b"][0]
    assert all(torch.equal(runs["a"][1][k], runs["b"][1][k]) for k in runs["a"][1])
    assert any(not torch.equal(runs["a"][1][k], runs["c"][1][k]) for k in runs["a"][1])


def test_checkpoints_are_exactly_the_evaluated_steps(tmp_path):
    """The trainer saves the steps runconfig.checkpoint_steps names (0, every `eval.every`, the last) and no others."""
    from agentrepro.runconfig import checkpoint_steps

    config = tiny_config(steps=5, checkpoint_every=2)
    config["eval"].update(every=2, checkpoint="last")
    train(config, tmp_path / "run", resume=False)
    assert saved_steps(tmp_path / "run") == checkpoint_steps(config) == [0, 2, 4, 5]
    saved_in_timings = [r["step"] for r in read_jsonl(tmp_path / "run" / "timings.jsonl") if "checkpoint" in r]
    assert saved_in_timings == [2, 4, 5]


def test_zero_rl_steps_keeps_the_warm_started_policy_as_step_zero(tmp_path):
    """train.steps = 0: the warm-started checkpoint step 0 and empty per-step logs, nothing else."""
    train(tiny_config(steps=0), tmp_path / "run", resume=False)
    assert saved_steps(tmp_path / "run") == [0]
    assert read_jsonl(tmp_path / "run" / "metrics.jsonl") == []


def test_warm_start_is_identical_for_every_method_of_a_seed(tmp_path):
    """grpo, graphgpo and ppo runs of one seed share the step-0 (post-warm-start) weights exactly."""
    weights = []
    for method in ("grpo", "graphgpo", "ppo"):
        train(tiny_config(steps=0, estimator=method, lr=5e-3), tmp_path / method, resume=False)
        weights.append(load_checkpoint(tmp_path / method, 0)["model"])
    assert all(torch.equal(weights[0][k], w[k]) for w in weights[1:] for k in weights[0])
    assert json.loads((tmp_path / "grpo" / "warmstart.json").read_text())["steps"] == 2


def test_wandb_logging_is_offline_and_mirrors_the_metrics(tmp_path, monkeypatch):
    """With `wandb: true` and no WANDB_MODE, W&B writes an offline run under logs/ whose log holds the step metrics."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    train(tiny_config(steps=2, wandb=True), run, resume=False)
    wandb.teardown()  # wandb-core (0.31) writes the record log after `finish()` returns: wait for its service to end
    offline = sorted((run / "logs" / "wandb").glob("offline-run-*"))
    assert len(offline) == 1, list((run / "logs").rglob("*"))[:20]
    run_id = json.loads((run / "wandb_run.json").read_text())["id"]
    log = (offline[0] / f"run-{run_id}.wandb").read_bytes()  # W&B's protobuf record log
    for name in ("train/episodes", "train/reward_mean", "train/loss_policy"):
        assert name.encode() in log, name
    assert wandb.run is None  # the run was finished


def test_a_resumed_run_continues_its_wandb_run_and_a_run_started_over_is_a_new_one(tmp_path, monkeypatch):
    """The run's W&B id is made at its first attempt (wandb_run.json) and every resumed attempt logs to it with
    resume allowed: the two attempts' offline runs log to the same id; a run started
    over (its outputs cleared, as `--no-resume` does) gets a new id."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    config = tiny_config(steps=3, wandb=True)
    train(config, run, resume=False, stop_at=1)  # an attempt killed after its first step
    wandb.teardown()
    first = json.loads((run / "wandb_run.json").read_text())
    train(config, run, resume=True)
    wandb.teardown()
    assert json.loads((run / "wandb_run.json").read_text()) == first
    offline = sorted((run / "logs" / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all((p / f"run-{first['id']}.wandb").is_file() for p in offline), offline
    assert first["name"] == f"{config['study']}/{config['method']}/seed{config['seed']}"
    clear_outputs(run)
    train(config, run, resume=False)
    wandb.teardown()
    assert json.loads((run / "wandb_run.json").read_text())["id"] != first["id"]


def test_static_engine_micro_batches_and_checkpointing_train_and_log_memory(tmp_path):
    """The GPU code paths on the CPU (static rollout engine, token-budgeted passes, activation checkpointing, a KL
    reference): a run trains and logs the step's memory (RSS on the CPU; GPU peak null)."""
    run = tmp_path / "run"
    trainer = train(
        tiny_config(
            steps=2,
            rollout_engine="static",
            micro_batch_tokens=40,
            grad_checkpointing=True,
            kl_coef=0.05,
            estimator="ppo",
        ),
        run,
        resume=False,
    )
    lm = trainer.policy.lm  # transformers >= 5.2x: is_activation_checkpointing; earlier: is_gradient_checkpointing
    assert trainer.engine is not None and getattr(lm, "is_activation_checkpointing", None) in (True, None)
    assert getattr(lm, "is_activation_checkpointing", None) or lm.is_gradient_checkpointing
    metrics = read_jsonl(run / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2] and all(
        m["kl"] is not None and m["tokens_trained"] > 0 for m in metrics
    )
    assert all(m["gpu_peak_mem_gb"] is None and 0 < m["cpu_rss_gb"] < 1024 for m in metrics)


def test_step_rows_dump_the_named_steps_and_certify(tmp_path):
    """train.step_rows [2]: only batches/step2.jsonl is written, and the parity certificate recomputes its advantages
    within tolerance in the declared mode (rows): the builtin trainer computes the reference's advantages."""
    import yaml

    from agentrepro.analysis.parity import certificate

    run = tmp_path / "runs" / "s" / "graphgpo" / "seed0"
    config = tiny_config(steps=2, estimator="graphgpo", step_rows=[2])
    train(config, run, resume=False)
    assert not (run / "batches" / "step1.jsonl").exists() and (run / "batches" / "step2.jsonl").exists()
    (run / "resolved_config.yaml").write_text(yaml.safe_dump(config))  # what `agentrepro train` writes beside the run
    [entry] = certificate([run])
    assert entry["status"] == "pass" and entry["step"] == 2 and entry["declared"] == "rows", entry


_TRAIN_IN_A_PROCESS = """
import sys, yaml
from agentrepro.trainer.loop import train
config = yaml.safe_load(open(sys.argv[1]))
stop = None if sys.argv[3] == "none" else int(sys.argv[3])
train(config, sys.argv[2], resume=sys.argv[4] == "resume", stop_at=stop)
"""


def test_kill_and_resume_in_new_processes_saves_the_global_rng_state_of_an_uninterrupted_run(tmp_path):
    """Each part in its own process (torch seeds its global generator at random in each): the uninterrupted run and the
    run stopped after an unsaved step and resumed save the same CPU torch RNG state, and everything else, at every step."""
    import subprocess
    import sys

    import yaml

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(steps=4, checkpoint_every=2, estimator="ppo", kl_coef=0.05)))

    def part(run, stop, mode):
        done = subprocess.run(
            [sys.executable, "-c", _TRAIN_IN_A_PROCESS, config, tmp_path / run, stop, mode],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr

    part("whole", "none", "fresh")
    part("broken", "3", "fresh")
    part("broken", "none", "resume")
    for step in (0, 2, 4):
        a, b = load_checkpoint(tmp_path / "whole", step), load_checkpoint(tmp_path / "broken", step)
        assert torch.equal(a["rng"]["torch_cpu"], b["rng"]["torch_cpu"]), step
        assert all(torch.equal(a["rng"]["generators"][k], b["rng"]["generators"][k]) for k in a["rng"]["generators"])
        assert a["rng"]["numpy"] == b["rng"]["numpy"] and all(
            torch.equal(a["model"][k], b["model"][k]) for k in a["model"]
        )
    assert _metrics(tmp_path / "whole") == _metrics(tmp_path / "broken")
