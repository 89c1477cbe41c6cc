"""The builtin backend through the `agentrepro train` and `eval` verbs, as subprocesses."""

import yaml
from helpers import run_cli
from trainer_helpers import tiny_config

from agentrepro.backends import get_backend
from agentrepro.reading import read_jsonl


def test_backend_interface():
    """get_backend('builtin') gives default config blocks that the trainer accepts, and the checkpoint steps."""
    backend = get_backend("builtin")
    defaults = backend.default_config()
    assert set(defaults) == {"model", "train", "eval"} and defaults["train"]["estimator"] == "grpo"
    config = tiny_config(steps=6)
    config["eval"].update(every=3, checkpoint="last")
    assert backend.checkpoint_steps(config) == [0, 3, 6]
    backend.validate_config({**config, "train": {**defaults["train"], **config["train"]}})


def test_train_and_eval_verbs_write_the_run_directory(tmp_path):
    """`agentrepro train` then `agentrepro eval` at steps 0 and last: sealed run dir, one outcome row per task."""
    config = tiny_config(steps=2)
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config))
    run = tmp_path / "runs" / "tiny" / "grpo" / "seed0"
    done = run_cli("train", "--config", cfg_path, "--out", run)
    assert done.returncode == 0, done.stderr
    for name in (
        "resolved_config.yaml",
        "command.txt",
        "provenance.json",
        "metrics.jsonl",
        "timings.jsonl",
        "warmstart.json",
        "OUTPUTS.sha256",
        "checkpoints/step0.pt",
        "checkpoints/step2.pt",
    ):
        assert (run / name).is_file(), name
    for step in (0, 2):
        done = run_cli("eval", "--run", run, "--step", step)
        assert done.returncode == 0, done.stderr
        rows = read_jsonl(run / "eval" / f"step{step}" / "outcomes.jsonl")
        assert [r["task_id"] for r in rows] == [f"frozenlake-{s}" for s in range(10001, 10005)]
        assert {r["step"] for r in rows} == {step}


def test_bad_training_key_exits_2_naming_it(tmp_path):
    """An unknown train key is refused before anything runs, naming the file and train.<key>."""
    config = tiny_config()
    config["train"]["learning_rate"] = 0.1
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config))
    done = run_cli("train", "--config", cfg_path, "--out", tmp_path / "run")
    assert done.returncode == 2
    assert "train.learning_rate" in done.stderr and "config.yaml" in done.stderr
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
