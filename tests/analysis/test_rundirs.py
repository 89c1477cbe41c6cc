"""What analyze reads beside the outcomes: training task seeds against the evaluation panel, runs that overlapped."""

import yaml

from agentrepro.analysis.rundirs import overlapping_runs, task_seed_check

PANEL = {"task_panel": [{"task_id": f"frozenlake-{s}", "seed": s} for s in range(10001, 10129)]}


def run_dir(tmp_path, name, backend="builtin", **train):
    run = tmp_path / name / "seed0"
    run.mkdir(parents=True)
    config = {
        "backend": {"name": backend},
        "train": {
            "train_first_seed": 0,
            "train_num_seeds": 10000,
            "warmstart": True,
            "warmstart_val_first_seed": 20001,
            "warmstart_val_seeds": 128,
            **train,
        },
    }
    (run / "resolved_config.yaml").write_text(yaml.safe_dump(config))
    return run


def test_disjoint_seeds_pass_and_name_the_ranges(tmp_path):
    """The default ranges (train 0–9999, warm-start validation 20001–20128, evaluation 10001–10128) are disjoint."""
    check = task_seed_check(PANEL, [run_dir(tmp_path, "grpo")])
    assert check["status"] == "pass"
    assert "0–9999, 20001–20128" in check["detail"] and "seeds 10001–10128: disjoint" in check["detail"]


def test_overlapping_seeds_fail_with_their_count(tmp_path):
    """A training range that covers evaluation seeds fails and says how many could have been trained on."""
    check = task_seed_check(PANEL, [run_dir(tmp_path, "grpo", train_num_seeds=10050)])
    assert (
        check["status"] == "fail" and "49 evaluation seed(s) could also be trained on (10001–10049)" in check["detail"]
    )


def test_backends_that_draw_their_own_tasks_are_not_checked(tmp_path):
    """An external backend's training tasks are not seeds the harness knows: not run, naming the run."""
    check = task_seed_check(PANEL, [run_dir(tmp_path, "gigpo", backend="verl-agent")])
    assert check["status"] == "not_run" and "gigpo/seed0" in check["detail"]
    assert task_seed_check(None, [])["status"] == "not_run"


def test_training_attempts_that_overlapped_on_one_host_are_named():
    """Two training attempts on the same host at the same time are named; one on another host, or later, is not."""

    def run(method, host, start, end):
        return {
            "method": method,
            "seed": 0,
            "attempts": [{"stage": "train", "host": host, "cpus": 2, "start": start, "end": end}],
        }

    runs = [
        run("grpo", "a", "2026-01-01T10:00:00+00:00", "2026-01-01T10:30:00+00:00"),
        run("gigpo", "a", "2026-01-01T10:20:00+00:00", "2026-01-01T10:50:00+00:00"),
        run("ppo", "b", "2026-01-01T10:00:00+00:00", "2026-01-01T10:50:00+00:00"),
        run("graphgpo", "a", "2026-01-01T11:00:00+00:00", "2026-01-01T11:30:00+00:00"),
    ]
    note = overlapping_runs(runs)
    assert note.startswith(
        "2 of 4 runs trained at the same time as another on the same host (2 CPUs): gigpo seed 0, grpo seed 0."
    )
    assert overlapping_runs(runs[2:]) is None


def test_a_runs_provenance_gives_its_warm_starts_and_evaluations_commands(tmp_path):
    """The commands of the shared warm start the run started from and of each evaluation (the newest attempt's), so
    the appendix gives every job's; a warmstart.json naming a folder outside the study's warm starts gives none."""
    import json

    from agentrepro.analysis.rundirs import run_provenance

    run = tmp_path / "runs" / "s" / "m" / "seed0"
    warm = tmp_path / "runs" / "s" / "_warmstart" / "seed0-abc"
    for folder in (run / "eval" / "step0", run / "eval" / "step5", warm):
        folder.mkdir(parents=True)
    (warm / "command.txt").write_text("agentrepro warmstart --config c.yaml --out w\n")
    (run / "warmstart.json").write_text(json.dumps({"shared": {"dir": "../../_warmstart/seed0-abc"}}))
    (run / "command.txt").write_text("agentrepro train --config c.yaml --out r\n")
    for step in (0, 5):
        attempts = [{"command": "agentrepro eval (killed)"}, {"command": f"agentrepro eval --run r --step {step}"}]
        (run / "eval" / f"step{step}" / "provenance.json").write_text(json.dumps({"attempts": attempts}))
    found = run_provenance(run, "m", 0, tmp_path)
    assert found["warmstart_command"] == "agentrepro warmstart --config c.yaml --out w"
    assert found["eval_commands"] == {"0": "agentrepro eval --run r --step 0", "5": "agentrepro eval --run r --step 5"}
    (run / "warmstart.json").write_text(json.dumps({"shared": {"dir": "../../../../etc"}}))
    assert run_provenance(run, "m", 0, tmp_path)["warmstart_command"] is None
