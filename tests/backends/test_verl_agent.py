"""verl-agent adapter: Hydra overrides of the launch command, and converters of its metrics and validation dumps.

Sample files below are shaped like the real ones:
* verl's FileLogger (verl/utils/tracking.py; its test asserts lines {"step": 0, "elapsed_seconds": 5.5,
  "data": {"metric": 1.0}}), with verl-agent's metric names from verl/trainer/ppo/ray_trainer.py
  (`val/success_rate`, `val/<task>_success_rate` via `metric_dict[f'val/{k}']`, `episode/reward/mean`,
  `actor/pg_loss`, `timing_s/step`).
* verl's validation dump (`_dump_generations`: `<global_steps>.jsonl` with input, output, score, step and
  the reward extra infos), here with the extra fields the converter requires (task_id, won, turns, response_length).
"""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from agentrepro.backends import verl_agent
from agentrepro.errors import BadInput

HASH = "b" * 64


def config(tmp_path, **block):
    return {"study": "graphgpo-alfworld", "method": "gigpo", "seed": 1,
            "backend": {"name": "verl-agent", "workdir": str(tmp_path), **block},
            "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"}, "env": {"name": "alfworld"},
            "train": {"estimator": "gigpo", "steps": 2, "groups": 16, "group_size": 8, "lr": 1e-6, "gamma": 0.95},
            "eval": {"every": 1, "temperature": 0.4,
                     "task_panel": [{"task_id": f"alf-{i}", "task_hash": HASH, "category": "pick_and_place"} for i in range(3)]},
            "resources": {"gpus": 2}}


def test_launch_argv_maps_the_config(tmp_path):
    """The config becomes verl-agent's Hydra overrides (names as in its run_alfworld.sh); backend.overrides win."""
    cfg = config(tmp_path, overrides={"env.max_steps": 50, "trainer.logger": ["console", "file", "wandb"]})
    argv = verl_agent.launch_argv(cfg, tmp_path / "run", resume=True)
    assert argv[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    args = dict(a.split("=", 1) for a in argv[3:])
    assert args["algorithm.adv_estimator"] == "gigpo" and args["env.rollout.n"] == "8"
    assert args["data.train_batch_size"] == "16" and args["actor_rollout_ref.actor.optim.lr"] == "1e-06"
    assert args["env.env_name"] == "alfworld/AlfredTWEnv" and args["trainer.n_gpus_per_node"] == "2"
    assert args["actor_rollout_ref.model.path"] == "Qwen/Qwen2.5-1.5B-Instruct"
    assert args["trainer.validation_data_dir"] == str((tmp_path / "run" / "verl_validation").resolve())
    assert args["trainer.logger"] == "[console,file,wandb]" and args["env.max_steps"] == "50"
    assert args["trainer.resume_mode"] == "auto"
    assert verl_agent.hydra_value("it's a b") == "'it\\'s a b'"


def test_launch_script_exports_metrics_path(tmp_path):
    """The launch script sets VERL_FILE_LOGGER_PATH into the run dir and runs the exact argv, shell-quoted."""
    cfg = config(tmp_path)
    script = verl_agent.launch_script(cfg, tmp_path / "run", resume=False)
    assert f"export VERL_FILE_LOGGER_PATH={shlex.quote(str((tmp_path / 'run' / 'verl_metrics.jsonl').resolve()))}" in script
    assert shlex.join(verl_agent.launch_argv(cfg, tmp_path / "run", resume=False)) + " &" in script


def test_convert_training(tmp_path):
    """FileLogger lines merge per step into metrics.jsonl with docs/design.md names, cumulative wall_s, originals kept; timings too."""
    lines = [
        {"step": 0, "data": {"val/success_rate": 0.1}},
        {"step": 1, "elapsed_seconds": 30.0, "data": {"episode/reward/mean": 2.5, "episode/success_rate": 0.25,
                                                      "actor/pg_loss": -0.01, "actor/lr": 1e-6, "timing_s/step": 30.0, "timing_s/gen": 20.0}},
        {"step": 1, "data": {"val/success_rate": 0.2, "val/pick_and_place_success_rate": 0.3}},
        {"step": 2, "data": {"episode/reward/mean": 3.0, "timing_s/step": 31.0}},
    ]
    (tmp_path / "verl_metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    verl_agent.convert_training(tmp_path, config(tmp_path))
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert metrics[0]["reward_mean"] == 2.5 and metrics[0]["train_success_rate"] == 0.25 and metrics[0]["loss_policy"] == -0.01
    assert metrics[0]["val_success_rate"] == 0.2 and metrics[0]["val/pick_and_place_success_rate"] == 0.3
    assert metrics[1]["wall_s"] == 61.0 and "loss_policy" not in metrics[1]  # absent, not invented
    timings = [json.loads(x) for x in (tmp_path / "timings.jsonl").read_text().splitlines()]
    assert timings[0] == {"step": 1, "rollout": 20.0, "step_total": 30.0}


def test_convert_training_bad_line(tmp_path):
    """A line that is not a FileLogger record is BadInput naming the file and line."""
    (tmp_path / "verl_metrics.jsonl").write_text('{"step": 1, "data": {}}\n{"step": "x"}\n')
    with pytest.raises(BadInput, match="verl_metrics.jsonl: line 2"):
        verl_agent.convert_training(tmp_path, config(tmp_path))


def dump(tmp_path, step, records):
    folder = tmp_path / "verl_validation"
    folder.mkdir(exist_ok=True)
    (folder / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_convert_eval(tmp_path):
    """Validation dump lines become outcome rows: task by id or panel index, success from `won`, hash from the panel."""
    dump(tmp_path, 5, [
        {"input": "You are in the middle of a room", "output": "go to desk 1", "score": 10.0, "step": 5,
         "task_id": "alf-0", "won": True, "turns": 7, "response_length": 300, "data_source": "alfworld"},
        {"input": "...", "output": "...", "score": 0.0, "step": 5, "task_id": 1, "won": False, "turns": 50, "response_length": 900},
        {"input": "...", "output": "...", "score": 0.0, "step": 5, "task_id": "alf-1", "won": 0, "turns": 50, "response_length": 800},
    ])
    rows = verl_agent.convert_eval(tmp_path, 5, config(tmp_path))
    assert [(r["task_id"], r["episode"], r["success"], r["turns"], r["tokens"]) for r in rows] == [
        ("alf-0", 0, 1, 7, 300), ("alf-1", 0, 0, 50, 900), ("alf-1", 1, 0, 50, 800)]
    assert all(r["task_hash"] == HASH and r["task_hash_source"] == "panel" and r["step"] == 5 for r in rows)
    assert rows[0]["category"] == "pick_and_place"


def test_convert_eval_threshold_and_errors(tmp_path):
    """With only success_threshold given the score is thresholded; missing task or count fields are BadInput naming line and field."""
    dump(tmp_path, 1, [{"score": 10.0, "task_id": "alf-2", "turns": 3, "response_length": 10}])
    rows = verl_agent.convert_eval(tmp_path, 1, config(tmp_path, success_threshold=10.0))
    assert rows[0]["success"] == 1
    dump(tmp_path, 2, [{"score": 10.0, "won": True, "turns": 3, "response_length": 10}])
    with pytest.raises(BadInput, match=r"2.jsonl: line 1: no field 'task_id'"):
        verl_agent.convert_eval(tmp_path, 2, config(tmp_path))
    dump(tmp_path, 3, [{"score": 10.0, "won": True, "task_id": "alf-0", "response_length": 10}])
    with pytest.raises(BadInput, match="line 1: field 'turns'"):
        verl_agent.convert_eval(tmp_path, 3, config(tmp_path))
    dump(tmp_path, 4, [{"score": 1.0, "won": True, "task_id": "alf-9", "turns": 1, "response_length": 1}])
    with pytest.raises(BadInput, match="not in the frozen task panel"):
        verl_agent.convert_eval(tmp_path, 4, config(tmp_path))
    with pytest.raises(BadInput, match="file not found"):
        verl_agent.convert_eval(tmp_path, 9, config(tmp_path))


def test_train_without_checkout_is_bad_input(tmp_path):
    """Training needs backend.workdir to be a verl-agent checkout."""
    cfg = config(tmp_path)
    cfg["backend"]["workdir"] = str(tmp_path / "missing")
    with pytest.raises(BadInput, match="backend.workdir"):
        verl_agent.VerlAgentBackend().train(cfg, tmp_path / "run")


FAKE_VERL = '''\
"""Stand-in for `python -m verl.trainer.main_ppo`: reads Hydra overrides, needs RAY_ADDRESS, writes what verl writes."""
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
assert os.environ["RAY_ADDRESS"].startswith("127.0.0.1:"), "no private Ray head"
steps, val_dir = int(args["trainer.total_training_steps"]), args["trainer.validation_data_dir"]
os.makedirs(val_dir, exist_ok=True)
with open(os.environ["VERL_FILE_LOGGER_PATH"], "a") as log:
    for step in range(0, steps + 1):
        if step:
            log.write(json.dumps({"step": step, "data": {"episode/reward/mean": step, "actor/pg_loss": -step, "timing_s/step": 2.0}}) + "\\n")
        log.write(json.dumps({"step": step, "data": {"val/success_rate": step / steps}}) + "\\n")
        with open(os.path.join(val_dir, f"{step}.jsonl"), "w") as dump:
            for i in range(3):
                dump.write(json.dumps({"input": "obs", "output": "act", "score": 10.0 * (i < step), "step": step, "task_id": i,
                                       "won": i < step, "turns": 5, "response_length": 40}) + "\\n")
'''


def test_train_and_eval_verbs_with_stand_in_verl_and_ray(tmp_path, fake_ray, write_config):
    """`agentrepro train`/`eval` run the verl-agent backend end to end against stand-ins of verl and ray:
    launch.sh starts the private head, the trainer runs, its FileLogger and validation dumps are converted."""
    import yaml

    from helpers import run_cli

    workdir = tmp_path / "verl-agent"
    workdir.mkdir()
    (workdir / "fake_verl.py").write_text(FAKE_VERL)
    cfg = config(workdir, python=sys.executable, entry="fake_verl", ray={"executable": str(fake_ray), "num_cpus": 1})
    cfg["backend"].update(repo="langfengQ/verl-agent", commit="20bd331bdbc9026a5668e11362178e10ab7400c8")
    run_dir = tmp_path / "run"
    env = {"FAKE_RAY_LOG": str(tmp_path / "ray.json")}
    result = run_cli("train", "--config", write_config(cfg), "--out", run_dir, env=env)
    assert result.returncode == 0, result.stderr + (run_dir / "logs" / "train.stderr.log").read_text()
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["reward_mean"], m["val_success_rate"], m["wall_s"]) for m in metrics] == [(1, 1, 0.5, 2.0), (2, 2, 1.0, 4.0)]
    assert "--num-cpus=1" in json.loads((tmp_path / "ray.json").read_text())["args"]
    assert (run_dir / "launch.sh").is_file() and not (run_dir / "ray_head.pid").exists()
    result = run_cli("eval", "--run", run_dir, "--step", 1, env=env)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(x) for x in (run_dir / "eval" / "step1" / "outcomes.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["success"]) for r in rows] == [("alf-0", 1), ("alf-1", 0), ("alf-2", 0)]
    assert yaml.safe_load((run_dir / "resolved_config.yaml").read_text())["backend"]["entry"] == "fake_verl"
