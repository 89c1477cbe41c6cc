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
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import load_file_module, require_ray
from podman_kit import PYTHON as PYTHON_IN_IMAGE
from podman_kit import RAY_IN_IMAGE, check_proof, leftover_containers, stand_in_gpus, with_ray

from agentrepro.attempts import newest_attempt, read_provenance
from agentrepro.backends import ray_head
from agentrepro.backends.launch import OFFLINE
from agentrepro.backends.verl_agent import backend as verl_agent
from agentrepro.backends.verl_agent import integration, outputs, recipes
from agentrepro.errors import BadInput

stand_in_checkout = load_file_module("verl_checkout", Path(__file__).with_name("verl_checkout.py")).stand_in_checkout

HASH = "b" * 64


def config(tmp_path, **block):
    return {
        "study": "graphgpo-alfworld",
        "method": "gigpo",
        "seed": 1,
        "backend": {"name": "verl-agent", "workdir": str(tmp_path), **block},
        "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct"},
        "env": {"name": "alfworld"},
        "train": {"estimator": "gigpo", "steps": 2, "groups": 16, "group_size": 8, "lr": 1e-6, "gamma": 0.95},
        "eval": {
            "every": 1,
            "temperature": 0.4,
            "tasks": 3,
            "task_panel": [{"task_id": f"alf-{i}", "task_hash": HASH, "category": "pick_and_place"} for i in range(3)],
        },
        "resources": {"gpus": 2},
    }


def test_launches_run_the_official_script_with_appended_overrides(tmp_path):
    """Train = data preparation + the method's official script (GiGPO: examples/gigpo_trainer/run_alfworld.sh) with
    only the harness's keys and the manifest values that differ appended; argv lists, never shell strings."""
    prepare, train = verl_agent.programs(config(tmp_path), tmp_path / "run")
    run = (tmp_path / "run").resolve()
    assert prepare.argv[:2] == ("python3", str(integration.PREPARE)) and prepare.cwd == tmp_path
    assert prepare.argv[-2:] == ("--local_dir", str(run / "verl_data"))
    head, script = train.argv[: train.argv.index("--")], train.argv[train.argv.index("--") + 1 :]
    assert head[:2] == ("python3", str(ray_head.SCRIPT)) and head[head.index("--num-gpus") + 1] == "2"
    assert (
        script[:3] == ("bash", "examples/gigpo_trainer/run_alfworld.sh", "") and train.cwd == tmp_path
    )  # "": ENGINE=vllm, gone from $@
    args = dict(a.split("=", 1) for a in script[3:])
    assert args["trainer.total_epochs"] == "2" and "trainer.total_training_steps" not in args
    assert (
        args["trainer.logger"] == "[console]" and args["trainer.save_freq"] == "1" and args["trainer.test_freq"] == "1"
    )
    assert (
        args["env.seed"] == str(1 * max(16, 1000 + 3)) and args["data.val_batch_size"] == "3"
    )  # seed x stride (recipes.seed_stride)
    assert args["+actor_rollout_ref.rollout.seed"] == "1" and args["+data.seed"] == "1"
    assert "algorithm.gamma" not in args and "env.rollout.n" not in args  # equal to the script's own values
    assert train.env["AGENTREPRO_VERL_OUT"] == str(run)
    # the script exports VLLM_ATTENTION_BACKEND to its driver only; the head's workers inherit the launch's environment
    assert (
        train.env["VLLM_ATTENTION_BACKEND"]
        == "XFORMERS"
        == verl_agent.scripts.SCRIPTS["gigpo"].exports["VLLM_ATTENTION_BACKEND"][0]
    )
    cfg = config(tmp_path)
    cfg["data"] = {"eval": {"path": "data/alfworld"}}
    assert verl_agent.programs(cfg, tmp_path / "run")[1].env["ALFWORLD_DATA"] == str(Path("data/alfworld").absolute())
    *_, evaluate = verl_agent.programs(config(tmp_path), tmp_path / "run", eval_step=1)
    assert evaluate.argv[-4:] == (
        "trainer.val_only=true",
        "trainer.val_before_train=true",
        "trainer.resume_mode=resume_path",
        f"trainer.resume_from_path={run / 'checkpoints' / 'global_step_1'}",
    )


def test_convert_training(tmp_path):
    """FileLogger lines merge per step into metrics.jsonl with docs/design.md names, cumulative wall_s, originals kept; timings too."""
    lines = [
        {"step": 0, "data": {"val/success_rate": 0.1}},
        {
            "step": 1,
            "elapsed_seconds": 30.0,
            "data": {
                "episode/reward/mean": 2.5,
                "episode/success_rate": 0.25,
                "actor/pg_loss": -0.01,
                "actor/lr": 1e-6,
                "timing_s/step": 30.0,
                "timing_s/gen": 20.0,
            },
        },
        {"step": 1, "data": {"val/success_rate": 0.2, "val/pick_and_place_success_rate": 0.3}},
        {"step": 2, "data": {"episode/reward/mean": 3.0, "timing_s/step": 31.0}},
    ]
    (tmp_path / "verl_metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    outputs.convert_training(tmp_path, config(tmp_path))
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert (
        metrics[0]["reward_mean"] == 2.5
        and metrics[0]["train_success_rate"] == 0.25
        and metrics[0]["loss_policy"] == -0.01
    )
    assert metrics[0]["val_success_rate"] == 0.2 and metrics[0]["val/pick_and_place_success_rate"] == 0.3
    assert metrics[1]["wall_s"] == 61.0 and "loss_policy" not in metrics[1]  # absent, not invented
    timings = [json.loads(x) for x in (tmp_path / "timings.jsonl").read_text().splitlines()]
    assert timings[0] == {"step": 1, "rollout": 20.0, "step_total": 30.0}


def test_convert_training_bad_line(tmp_path):
    """A line that is not a FileLogger record is BadInput naming the file and line."""
    (tmp_path / "verl_metrics.jsonl").write_text('{"step": 1, "data": {}}\n{"step": "x"}\n')
    with pytest.raises(BadInput, match=r"verl_metrics.jsonl: line 2"):
        outputs.convert_training(tmp_path, config(tmp_path))


def dump(tmp_path, step, records):
    folder = tmp_path / "verl_validation"
    folder.mkdir(exist_ok=True)
    (folder / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_convert_eval(tmp_path):
    """The integration's lines become outcome rows: task by id or panel index, success from `won`, hash from the panel."""
    dump(
        tmp_path,
        5,
        [
            {"task_id": "alf-0", "won": True, "reward": 10.0, "turns": 7, "tokens": 300, "category": "pick_and_place"},
            {"task_id": 1, "won": False, "reward": 0.0, "turns": 50, "tokens": 900},
            {"task_id": "alf-1", "won": False, "reward": 0.0, "turns": 50, "tokens": 800},
        ],
    )
    rows = outputs.convert_eval(tmp_path, 5, config(tmp_path))
    assert [(r["task_id"], r["episode"], r["success"], r["turns"], r["tokens"]) for r in rows] == [
        ("alf-0", 0, 1, 7, 300),
        ("alf-1", 0, 0, 50, 900),
        ("alf-1", 1, 0, 50, 800),
    ]
    assert all(r["task_hash"] == HASH and r["task_hash_source"] == "panel" and r["step"] == 5 for r in rows)
    assert rows[0]["category"] == "pick_and_place"


def test_convert_eval_errors(tmp_path):
    """Missing task or count fields are BadInput naming line and field; a task off the panel and a missing file too."""
    dump(tmp_path, 2, [{"reward": 10.0, "won": True, "turns": 3, "tokens": 10}])
    with pytest.raises(BadInput, match=r"2.jsonl: line 1: no field 'task_id'"):
        outputs.convert_eval(tmp_path, 2, config(tmp_path))
    dump(tmp_path, 3, [{"reward": 10.0, "won": True, "task_id": "alf-0", "tokens": 10}])
    with pytest.raises(BadInput, match="line 1: field 'turns'"):
        outputs.convert_eval(tmp_path, 3, config(tmp_path))
    dump(tmp_path, 4, [{"reward": 1.0, "won": True, "task_id": "alf-9", "turns": 1, "tokens": 1}])
    with pytest.raises(BadInput, match="not in the frozen task panel"):
        outputs.convert_eval(tmp_path, 4, config(tmp_path))
    with pytest.raises(BadInput, match="file not found"):
        outputs.convert_eval(tmp_path, 9, config(tmp_path))


def test_train_without_checkout_is_bad_input(tmp_path):
    """Training needs backend.workdir to be a verl-agent checkout."""
    cfg = config(tmp_path)
    cfg["backend"]["workdir"] = str(tmp_path / "missing")
    with pytest.raises(BadInput, match=r"backend.workdir"):
        verl_agent.VerlAgentBackend().train(cfg, tmp_path / "run")


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("where", ["host", "podman"])
def test_train_and_eval_verbs_with_stand_in_checkout(tmp_path, write_config, where, request):
    """`agentrepro train`/`eval` run the verl-agent backend end to end against a stand-in checkout: data preparation,
    the script under the job's own Ray head with the appended overrides, conversion of the outputs; on the host, and
    in a real podman image (its bash and python3 run every program) whose digest each program's record proves."""
    from helpers import run_cli

    workdir = tmp_path / "verl-agent"
    image = request.getfixturevalue("podman_images")["a"] if where == "podman" else None
    ray = stand_in_checkout(workdir, str(PYTHON_IN_IMAGE) if image else sys.executable)
    cfg = config(workdir, ray={"executable": str(ray), "num_cpus": 1})
    (tmp_path / "model").mkdir()  # the local snapshot verl would load (a job is refused without one)
    cfg["backend"].update(
        repo="langfengQ/verl-agent",
        commit="20bd331bdbc9026a5668e11362178e10ab7400c8",
        model_path=str(tmp_path / "model"),
    )
    prefix = ()
    if image:
        cfg["image"] = image.block()
        prefix = stand_in_gpus(
            tmp_path / "gpus"
        )  # podman resolves the job's GPUs (resources.gpus 2) to stand-in CDI devices
    run_dir = tmp_path / "run"
    gpus = {"CUDA_VISIBLE_DEVICES": "1,3"}  # as workflow/scripts/gpu_slots.py names a local job's GPUs
    result = run_cli("train", "--config", write_config(cfg), "--out", run_dir, prefix=prefix, env=gpus)
    assert result.returncode == 0, result.stderr + "".join(
        p.read_text() for p in (run_dir / "logs").glob("*.stderr.log")
    )
    metrics = jsonl(run_dir / "metrics.jsonl")
    assert [(m["step"], m["reward_mean"], m["val_success_rate"], m["wall_s"]) for m in metrics] == [
        (1, 1, 0.5, 2.0),
        (2, 2, 1.0, 4.0),
    ]
    appended = json.loads((run_dir / "verl_deviations.json").read_text())["appended"]
    assert {
        "key": "trainer.save_freq",
        "value": 1,
        "official": "-1",
        "why": "checkpoint cadence: the evaluated steps (the script saves none)",
    } in appended
    assert [g["task_id"] for g in json.loads((run_dir / "verl_panel.json").read_text())] == ["alf-0", "alf-1", "alf-2"]
    start, stop = jsonl(workdir / "bin" / "ray.jsonl")
    assert (
        start["event"] == "start"
        and "--num-cpus=1" in start["args"]
        and stop == {"event": "stop", "signal": 15, "pid": start["pid"]}
    )
    assert not (
        run_dir / "ray_head.pid"
    ).exists()  # the head's launcher stopped its head (and only it) and cleared its PID
    temp_dir = ray_head.head.temp_dir(ray_head.head.job_key(run_dir))  # the host sees a container's processes too
    assert f"--temp-dir={temp_dir}" in start["args"] and not [
        p for p in psutil.process_iter(["cmdline"]) if temp_dir in " ".join(p.info["cmdline"] or [])
    ]
    if image is None:  # a PID of the host's namespace: that head is gone (a container's PIDs are its own namespace's)
        assert subprocess.run(["kill", "-0", str(start["pid"])], capture_output=True).returncode != 0
    (run_dir / "verl_validation" / "1.jsonl").unlink()  # as for a re-evaluated checkpoint: verl's validate-only run
    result = run_cli("eval", "--run", run_dir, "--step", 1, prefix=prefix, env=gpus)
    assert result.returncode == 0, result.stderr
    rows = jsonl(run_dir / "eval" / "step1" / "outcomes.jsonl")
    assert [(r["task_id"], r["success"]) for r in rows] == [("alf-0", 1), ("alf-1", 0), ("alf-2", 0)]
    assert [e["event"] for e in jsonl(workdir / "bin" / "ray.jsonl")] == ["start", "stop"] * 2
    ran_in = jsonl(workdir / "ran_in.jsonl")
    assert [r["program"] for r in ran_in] == ["prepare.py", "fake_trainer.py"] * 2
    ran_by = (  # the image's python with the job's GPUs only, numbered from 0 inside; or the host's PATH's
        (str(PYTHON_IN_IMAGE), f"{image.variant}\n", "1,3", "0,1")
        if image
        else (shutil.which("python3"), None, "", "1,3")
    )
    assert {(r["python"], r["image"], r["gpu"], r["cuda"]) for r in ran_in} == {ran_by}
    if image:
        other = request.getfixturevalue("podman_images")["b"]
        check_proof(run_dir / "provenance.json", ["prepare_data", "train"], image, other, must_run=True)
        check_proof(
            run_dir / "eval" / "step1" / "provenance.json",
            ["eval_step1_prepare", "eval_step1_evaluate"],
            image,
            other,
            must_run=False,
        )
        assert leftover_containers() == []


def test_panel_game_files(tmp_path):
    """The integration's panel names each game: a panel's own game file, else <ALFWorld data dir>/<task_id>/game.tw-pddl
    when data.eval.path is that directory (the ALFWorld panel's join point), else the task id."""
    cfg = config(tmp_path)
    cfg["eval"]["task_panel"][0]["gamefile"] = "/data/games/0.tw"
    (tmp_path / "alfworld").mkdir()
    cfg["data"] = {"eval": {"path": str(tmp_path / "alfworld")}}
    games = json.loads(integration.write_panel(cfg, tmp_path).read_text())
    assert [g["game_file"] for g in games] == [
        "/data/games/0.tw",
        str(tmp_path / "alfworld" / "alf-1" / "game.tw-pddl"),
        str(tmp_path / "alfworld" / "alf-2" / "game.tw-pddl"),
    ]
    cfg["data"] = {"eval": {"path": str(tmp_path / "panel.jsonl")}}
    assert [g["game_file"] for g in json.loads(integration.write_panel(cfg, tmp_path).read_text())][1:] == [
        "alf-1",
        "alf-2",
    ]


def test_the_scripts_logger_gets_wandb_only_where_the_manifest_asks(tmp_path):
    def logger(cfg):
        return next(o for o in recipes.appended(cfg, tmp_path / "run", resume=True) if o.key == "trainer.logger")

    plain = config(tmp_path)
    asked = config(tmp_path)
    asked["train"]["wandb"] = True
    assert logger(plain).value == ["console"] and logger(asked).value == ["console", "wandb"]


def test_validate_config_refuses_what_verl_cannot_run(tmp_path):
    """Several episodes per task, a task count other than the panel's, a train key with no recipe setting, and no
    local model snapshot (verl would download the hub id at `main`, or fail offline) are BadInput naming the field."""
    backend = verl_agent.VerlAgentBackend()
    with pytest.raises(BadInput, match=r"^backend\.model_path: missing: the local snapshot of model\.revision"):
        backend.validate_config(config(tmp_path))
    backend.validate_config(config(tmp_path, model_path=str(tmp_path / "model")))
    for key, value, where in (("episodes_per_task", 2, "eval.episodes_per_task"), ("tasks", 5, "eval.tasks")):
        cfg = config(tmp_path, model_path=str(tmp_path / "model"))
        cfg["eval"][key] = value
        with pytest.raises(BadInput, match=where):
            backend.validate_config(cfg)
    cfg = config(tmp_path, model_path=str(tmp_path / "model"))
    cfg["train"]["entropy_coef"] = 0.01
    with pytest.raises(BadInput, match=r"train.entropy_coef"):
        backend.validate_config(cfg)


def test_each_program_runs_in_the_placements_podman_image(tmp_path, monkeypatch):
    """With a podman image, data preparation and the head-plus-script launch are `podman run ... IMAGE@digest` of exactly
    the program the image runs (its env one --env word each, its cwd the checkout); only the head's launch gets the Ray
    port reservations mounted read-write; an evaluation keeps its container's ID and proof in eval/step<N>/."""
    monkeypatch.setenv("AGENTREPRO_RAY_PORTS_DIR", str(tmp_path / "ports"))
    cfg = config(
        tmp_path / "checkout"
    )  # the checkout, like the study root, is mounted read-write: ports lie outside both
    cfg["image"] = {"runtime": "podman", "ref": "ghcr.io/org/verl:1", "digest": "sha256:" + "c" * 64}
    run = (tmp_path / "run").resolve()
    ports, reference = f"{tmp_path / 'ports'}:{tmp_path / 'ports'}", "ghcr.io/org/verl@sha256:" + "c" * 64
    for eval_step, job_dir in ((None, run), (1, run / "eval" / "step1")):
        programs = verl_agent.programs(cfg, run, eval_step=eval_step)
        launches = verl_agent.job_launches(cfg, run, eval_step=eval_step)
        for program, launch in zip(programs, launches):
            words = list(launch.argv)
            assert words[:4] == ["podman", "run", "--cidfile", str(job_dir / "logs" / f"{launch.contained.label}.cid")]
            assert words[words.index(reference) + 1 :] == list(program.argv) and launch.job_dir == job_dir
            assert words[words.index("--workdir") + 1] == str(tmp_path / "checkout") and launch.cwd is None
            assert [words[i + 1] for i, w in enumerate(words) if w == "--env" and "=" in words[i + 1]] == [
                f"{k}={v}"
                for k, v in sorted(  # every program offline, and told the lock its agentrepro holds
                    {
                        **OFFLINE,
                        **program.env,
                        ray_head.OWNER_ENV: str(ray_head.owner_lock(job_dir, launch.contained.label)),
                    }.items()
                )
            ]
            volumes = [words[i + 1] for i, w in enumerate(words) if w == "--volume"]
            assert f"{integration.HOOKS}:{integration.HOOKS}:ro" in volumes
            assert (ports in volumes) == (program is programs[1])
        assert [launch.contained.label for launch in launches] == (
            ["prepare_data", "train"] if eval_step is None else ["eval_step1_prepare", "eval_step1_evaluate"]
        )


def test_a_resumed_run_says_it_replays_its_training_games(tmp_path):
    """verl resumes from the step its tracker names (ray_trainer.py:939, resume_mode auto), but the recipe seeds each
    env worker once, when made (recipe/GraphGPO/alfworld_envs.py:62-64, 249-252, read): the run records that its
    training games start over, with the step; a fresh start records nothing."""
    run = tmp_path / "run"
    assert verl_agent.resumed_from(run) is None
    tracker = run / "checkpoints" / verl_agent.TRACKER
    tracker.parent.mkdir(parents=True)
    tracker.write_text("10\n")
    resumed = verl_agent.resumed_from(run)
    assert resumed is not None and resumed["step"] == 10
    assert resumed["training_games"].startswith("replayed: steps after 10 play the games of steps 1 to 10 again")
    tracker.write_text("garbage")
    assert verl_agent.resumed_from(run) is None


FIRST_ATTEMPT_HANGS = """\
import os, time
if not os.path.exists("first_attempt"):   # in the checkout, the working directory
    open("first_attempt", "w").write(str(os.getpid()))
    time.sleep(600)
"""


def test_a_killed_job_leaves_no_program_running_and_its_retry_removes_the_container(
    tmp_path, write_config, podman_images
):
    """SIGKILL of `agentrepro train` and its `podman run` (what a scheduler's kill of the job's processes does, with
    the container outside them under rootful podman) leaves the container running; its head launcher sees the owner
    lock free and stops the program and the head, so the container exits within seconds. The retry removes the
    container the killed attempt left (its cidfile names it) and trains to the end."""
    from podman_kit import podman

    workdir = tmp_path / "verl-agent"
    image = podman_images["a"]
    ray = stand_in_checkout(workdir, str(PYTHON_IN_IMAGE))
    trainer = workdir / "fake_trainer.py"
    trainer.write_text(FIRST_ATTEMPT_HANGS + trainer.read_text())
    cfg = config(workdir, ray={"executable": str(ray), "num_cpus": 1})
    (tmp_path / "model").mkdir()
    cfg["backend"].update(
        repo="langfengQ/verl-agent",
        commit="20bd331bdbc9026a5668e11362178e10ab7400c8",
        model_path=str(tmp_path / "model"),
    )
    cfg["image"] = image.block()
    cfg["resources"] = {"gpus": 0}
    run_dir, config_file = tmp_path / "run", write_config(cfg)
    argv = [sys.executable, "-m", "agentrepro", "train", "--config", str(config_file), "--out", str(run_dir)]
    job = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (workdir / "first_attempt").is_file():
            assert time.monotonic() < deadline and job.poll() is None
            time.sleep(0.2)
        assert podman("ps", "--quiet").stdout.split()  # the trainer runs in its container
        for process in [*psutil.Process(job.pid).children(recursive=True), psutil.Process(job.pid)]:
            process.kill()  # the job's own processes: conmon and the container are not among them
        job.wait()
        deadline = time.monotonic() + 60
        while podman("ps", "--quiet").stdout.split():  # still running until its head launcher stops it
            assert time.monotonic() < deadline, "the container outlived its killed job"
            time.sleep(0.5)
    finally:
        if job.poll() is None:
            job.kill()
    assert leftover_containers()  # stopped, not removed: nothing of the dead job was left to remove it
    retry = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert retry.returncode == 0, retry.stderr
    assert "left by a killed attempt" in retry.stderr and leftover_containers() == []


def two_node_training(tmp_path, write_config, image=None) -> tuple[Path, Path, str]:
    """(config, run directory, Python with Ray) of a verl-agent training with resources.nodes 2 on the stand-in
    checkout and real Ray, on the host or in `image` (podman_kit.with_ray: Ray in the image, and no GPU, since the
    nodes' podman has no stand-in GPU specification); skipped (required in CI) without the local SLURM's partition
    `pair` of two nodes."""
    from helpers import require

    ray, python = require_ray()
    pair = subprocess.run(["sinfo", "-h", "-p", "pair", "-o", "%D"], capture_output=True, text=True).stdout.strip()
    require("slurm", pair == "2", "the local SLURM has no partition `pair` of two nodes (scripts/slurm-cluster.sh)")
    workdir = tmp_path / "verl-agent"
    stand_in_checkout(workdir, python if image is None else str(PYTHON_IN_IMAGE))
    cfg = config(workdir, ray={"executable": ray if image is None else RAY_IN_IMAGE, "num_cpus": 1})
    (tmp_path / "model").mkdir()
    cfg["backend"].update(
        repo="langfengQ/verl-agent",
        commit="20bd331bdbc9026a5668e11362178e10ab7400c8",
        model_path=str(tmp_path / "model"),
    )
    cfg["resources"] = {"gpus": 1 if image is None else 0, "nodes": 2, "cpus": 1, "mem_mb": 3000}
    if image is not None:
        cfg["image"] = image.block()
    return write_config(cfg), tmp_path / "run", python


def submit_two_nodes(path: Path, run_dir: Path, python: str, *, step: bool = False) -> str:
    """The job of `agentrepro train` in a batch job of `--nodes=2` (partition `pair`); with `step`, in a job step of
    its own on the first node, as Snakemake's SLURM executor runs a rule (`srun`), else the batch script's child."""
    train = [python, "-m", "agentrepro", "train", "--config", str(path), "--out", str(run_dir)]
    train = ["srun", "--nodes=1", "--ntasks=1", *train] if step else train
    submit = ["sbatch", "--parsable", "-p", "pair", "--nodes=2", "--cpus-per-task=1", "--mem=3000", "--gres=gpu:1"]
    submit += ["-t", "10", "-o", str(run_dir.parent / "batch.out"), "--wrap", shlex.join(train)]
    env = {**os.environ, "PATH": f"{Path(python).parent}:{os.environ['PATH']}"}  # the stand-in's python3 imports ray
    return subprocess.run(submit, capture_output=True, text=True, check=True, env=env).stdout.strip()


def train_on_two_nodes(path: Path, run_dir: Path, python: str) -> str:
    """`agentrepro train` in a batch job of `--nodes=2` (partition `pair`), waited for; the batch job's output."""
    wait_for_end(submit_two_nodes(path, run_dir, python), time.monotonic() + 420)
    return (run_dir.parent / "batch.out").read_text()


def wait_for_end(job: str, deadline: float) -> None:
    """Until SLURM no longer lists `job`, failing past the monotonic `deadline`."""
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline, f"SLURM job {job} did not end"
        time.sleep(1)


@pytest.mark.slurm
def test_a_training_over_two_slurm_nodes_runs_a_worker_node_on_the_second(tmp_path, write_config, slurm_cluster):
    """`agentrepro train` of a verl-agent job with resources.nodes 2, run by a batch job of `--nodes=2` under the local
    SLURM (partition `pair`), real Ray, the stand-in checkout: the head binds the first node's address, `srun` starts
    `agentrepro node` on the second, which builds its worker node's launch there and joins; the trainer (told
    trainer.nnodes=2) sees both nodes' raylets, each at its node's address, and the worker node stops by itself once
    the head has gone. A job of two nodes outside SLURM is refused in one line, as is validating one of its checkpoints
    again in an eval job (one node's)."""
    from helpers import run_cli

    path, run_dir, python = two_node_training(tmp_path, write_config)
    refused = run_cli("train", "--config", path, "--out", tmp_path / "here")
    assert refused.returncode == 2 and refused.stderr.strip().endswith(
        "resources.nodes: asks 2 nodes, and this job runs outside a SLURM job: run the study with --profile slurm"
    ), refused.stderr
    batch = train_on_two_nodes(path, run_dir, python)
    logs = "".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((run_dir / "logs").glob("*.log")))
    assert (run_dir / "metrics.jsonl").is_file(), batch[-3000:] + logs
    addresses = json.loads((run_dir / "ray_nodes.json").read_text())
    assert len(addresses) == 2 and "127.0.0.1" not in addresses, addresses
    node_logs = sorted(p.name for p in (run_dir / "logs").glob("train_node_*.stderr.log"))
    assert len(node_logs) == 1, logs
    worker = (run_dir / "logs" / node_logs[0]).read_text()
    assert "has stopped; so does this worker node" in worker and any(f"at {a} on ports" in worker for a in addresses)
    assert not (run_dir / "ray_head.address").exists()
    (run_dir / "verl_validation" / "1.jsonl").unlink()  # a re-evaluation would need all its nodes again: said so
    again = run_cli("eval", "--run", run_dir, "--step", 1)
    assert again.returncode == 2 and "validate-only run of a training over 2 nodes is not built" in again.stderr


@pytest.mark.slurm
def test_a_training_over_two_slurm_nodes_runs_in_its_image_on_both(
    tmp_path, write_config, slurm_cluster, podman_images
):
    """The same two-node training in a podman image holding real Ray (podman_kit.with_ray): the head and the trainer
    in a container on the first node, the worker node in one on the second (its own network namespace: podman's host
    network there is that node's), each made under its node's job cgroup; the trainer sees both nodes' raylets at
    their nodes' addresses; each container proven by the image's digest, and none left."""
    _, python = require_ray()
    image = with_ray(tmp_path / "image", python)
    path, run_dir, python = two_node_training(tmp_path, write_config, image)
    batch = train_on_two_nodes(path, run_dir, python)
    logs = "".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((run_dir / "logs").glob("*.log")))
    assert (run_dir / "metrics.jsonl").is_file(), batch[-3000:] + logs
    addresses = json.loads((run_dir / "ray_nodes.json").read_text())
    assert len(addresses) == 2 and "127.0.0.1" not in addresses, addresses
    ran = [json.loads(line) for line in (tmp_path / "verl-agent" / "ran_in.jsonl").read_text().splitlines()]
    assert {r["program"] for r in ran} == {"prepare.py", "fake_trainer.py"} and {r["image"] for r in ran} == {"ray\n"}
    records = {r["label"]: r for r in newest_attempt(read_provenance(run_dir)).get("containers", [])}
    (node,) = [label for label in records if label.startswith("train_node_")]
    assert {"prepare_data", "train", node} <= set(records), sorted(records)
    assert all(r["resolved"]["image_id"] == image.image_id for r in records.values())
    worker = (run_dir / "logs" / f"{node}.stderr.log").read_text()
    assert "has stopped; so does this worker node" in worker and any(f"at {a} on ports" in worker for a in addresses)
    assert leftover_containers() == []


@pytest.mark.slurm
def test_a_cancelled_training_over_two_nodes_leaves_no_container_on_either(
    tmp_path, write_config, slurm_cluster, podman_images
):
    """The two-node training in its image, run as Snakemake's SLURM executor runs a job (in a job step; the worker
    nodes in a step of their own), cancelled with scancel once both nodes have joined. SLURM signals each step's own
    processes, not the containers below them, whose first processes (the trainer, the worker node's Ray) are left to
    their runtime; `agentrepro train` and `agentrepro node` each stop their container through the runtime at the
    SIGTERM, so both are gone before SLURM's SIGKILL: the training's attempt recorded as killed, the node saying it was
    terminated. (Without the node's handler its container ran on after the job: tried.)"""
    _, python = require_ray()
    image = with_ray(tmp_path / "image", python)
    path, run_dir, python = two_node_training(tmp_path, write_config, image)
    (tmp_path / "verl-agent" / "hold").touch()
    job = submit_two_nodes(path, run_dir, python, step=True)
    deadline = time.monotonic() + 300
    while not (tmp_path / "verl-agent" / "held").exists():
        assert time.monotonic() < deadline, (run_dir.parent / "batch.out").read_text()[-3000:]
        time.sleep(1)
    assert len(leftover_containers()) == 2
    subprocess.run(["scancel", job], check=True, timeout=60)
    wait_for_end(job, deadline)
    logs = "".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted((run_dir / "logs").glob("*.log")))
    batch = (run_dir.parent / "batch.out").read_text()
    assert leftover_containers() == [], batch[-3000:] + logs
    attempt = newest_attempt(read_provenance(run_dir))
    assert attempt["status"] == "killed" and "Terminated" in attempt["reason"], (attempt["status"], attempt["reason"])
    assert "agentrepro node: terminated" in (run_dir / "logs" / "train_nodes.stderr.log").read_text(), logs


@pytest.mark.slurm
def test_a_worker_node_that_cannot_start_stops_the_training_instead_of_leaving_it_waiting(
    tmp_path, write_config, slurm_cluster
):
    """The second node's `agentrepro node` fails (its owner lock is held: the same program run twice): the training's
    head stops its program at once (its owner lock let go) instead of waiting for that node until the time limit, and
    the training fails naming the worker nodes and why. The stand-in trainer, waiting for both nodes, never gets to
    give up by itself."""
    import fcntl

    path, run_dir, python = two_node_training(tmp_path, write_config)
    second = subprocess.run(["sinfo", "-h", "-N", "-p", "pair", "-o", "%N"], capture_output=True, text=True)
    node = sorted(set(second.stdout.split()))[-1]  # <host>-n2
    (run_dir / "logs").mkdir(parents=True)
    with open(run_dir / "logs" / f"train_node_{node}.owner", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        batch = train_on_two_nodes(path, run_dir, python)
    trainer = (run_dir / "logs" / "train.stderr.log").read_text()
    assert not (run_dir / "metrics.jsonl").exists()
    assert f"the worker nodes on {node} ended with exit 1: " in batch and "another process runs this program" in batch
    assert "never joined" not in trainer, trainer[-2000:]
