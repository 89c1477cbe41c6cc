"""`agentrepro command`: the programs of a job, shown before anything runs (as a subprocess, as a user runs it)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
from helpers import run_cli

from agentrepro import containers
from agentrepro.backends import ray_head
from agentrepro.hooks import agentrepro_ray_head as head_script

REPO = Path(__file__).parents[2]


def test_command_shows_the_official_script_of_a_manifest_with_placeholders():
    """On graphgpo-alfworld (placeholders not filled) it prints data preparation then the recipe's script with the
    appended overrides under the job's Ray head, each inside the study's apptainer image in the checkout, each line a
    command whose words are the Launch's argv."""
    result = run_cli("command", "manifests/graphgpo-alfworld.yaml", "--method", "graph_only", "--seed", "1", cwd=REPO)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "# 1. prepare data" and lines[3] == "# 2. train"
    words = shlex.split(lines[4])
    assert words[:4] == ["apptainer", "exec", "--cleanenv", "--contain"]
    assert words[words.index("--pwd") + 1] == str(REPO / "external" / "verl-agent")
    head = words.index(str(ray_head.SCRIPT))
    assert (
        words[head - 1] == "python3" and words[words.index("--", head) + 1] == "bash"
    )  # the head, then the script, in the image
    script = words.index("recipe/GraphGPO/run_qwen2.5_1.5b_alfworld_train.sh")
    assert words[script - 1] == "bash" and words[script + 1] == ""
    assert (
        "algorithm.graphgpo.episode_advantage_w=0" in words and "env.seed=1128" in words
    )  # seed 1 x stride 1000 + 128


def test_command_eval_step_and_refusals():
    """--eval-step shows verl's validate-only run from that checkpoint; a step the study does not evaluate and an
    unknown method are refused in one line (exit 2)."""
    result = run_cli(
        "command", "manifests/graphgpo-alfworld.yaml", "--method", "grpo", "--seed", "0", "--eval-step", "5", cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert "trainer.val_only=true" in result.stdout and "global_step_5" in result.stdout
    assert "examples/grpo_trainer/run_alfworld.sh" in result.stdout
    result = run_cli(
        "command", "manifests/graphgpo-alfworld.yaml", "--method", "grpo", "--seed", "0", "--eval-step", "7", cwd=REPO
    )
    assert result.returncode == 2 and "--eval-step: step 7 is not an evaluated step" in result.stderr
    result = run_cli("command", "manifests/graphgpo-alfworld.yaml", "--method", "ppo", "--seed", "0", cwd=REPO)
    assert result.returncode == 2 and "--method" in result.stderr and len(result.stderr.splitlines()) == 1


def test_command_of_a_backend_without_external_programs():
    """A builtin study says that its job runs inside agentrepro itself."""
    result = run_cli("command", "manifests/frozenlake-cpu.yaml", "--method", "grpo", "--seed", "0", cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert "lists no external program" in result.stdout


def test_backends_page_shows_the_current_output():
    """docs/backends.md's `agentrepro command` example is what the command prints today (run from /srv/agentrepro with its .venv)."""
    result = run_cli(
        "command",
        "manifests/graphgpo-alfworld.yaml",
        "--method",
        "graphgpo",
        "--seed",
        "0",
        cwd=REPO,
        env={"AGENTREPRO_IMAGE_CACHE": "/scratch/images", "AGENTREPRO_RAY_PORTS_DIR": "/tmp/agentrepro-ray"},
    )
    assert result.returncode == 0, result.stderr
    run = Path("runs/graphgpo-alfworld/graphgpo/seed0")  # the job's Ray key hashes its absolute run directory
    scratch = str(containers.job_scratch(REPO / run))  # and its scratch folder too, with the user's ID
    shown = (
        result.stdout.replace(head_script.job_key(REPO / run, {}), head_script.job_key("/srv/agentrepro" / run, {}))
        .replace(scratch, PAGE_SCRATCH)
        .replace(sys.executable, "/srv/agentrepro/.venv/bin/python")
        .replace(str(REPO), "/srv/agentrepro")
    )
    page = (REPO / "docs" / "backends.md").read_text(encoding="utf-8")
    command = "$ agentrepro command manifests/graphgpo-alfworld.yaml --method graphgpo --seed 0\n"
    assert binds_sorted(command + "".join(line + "\n" for line in shown.splitlines()) + "```\n") in binds_sorted(page)


PAGE_SCRATCH = "/tmp/agentrepro-1000-76d2e6dfc3e7"  # job_scratch of user 1000 for /srv/agentrepro/runs/graphgpo-alfworld/graphgpo/seed0


def binds_sorted(text: str) -> str:
    """`text` with each line's `--bind` words in one order: the runtime mounts parents before children in path order,
    so where the checkout lies (here, /srv/agentrepro on the page) moves it among the other mounts."""

    def line(words: str) -> str:
        binds = iter(sorted(re.findall(r"--bind \S+", words)))
        return re.sub(r"--bind \S+", lambda _: next(binds), words)

    return "\n".join(line(x) for x in text.split("\n"))


def test_command_backend_shows_its_filled_template(tmp_path):
    """A command-backend study shows its filled `command` (placeholders of the config filled, one word per argument)."""
    import yaml

    manifest = yaml.safe_load((REPO / "manifests" / "graphgpo-alfworld.yaml").read_text())
    manifest["backend"] = {
        "name": "command",
        "command": "python train.py --lr {train.lr} --out {run_dir}",
        "cwd": "trainer",
    }
    manifest["image"] = {"none": "on the host"}
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "graphgpo-alfworld.yaml").write_text(yaml.safe_dump(manifest))
    result = run_cli("command", "manifests/graphgpo-alfworld.yaml", "--method", "grpo", "--seed", "0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    line = result.stdout.splitlines()[2]
    assert line.startswith("cd trainer && AGENTREPRO_")
    words = shlex.split(line.split(" && ", 1)[1])
    run_dir = str((tmp_path / "runs" / "graphgpo-alfworld" / "grpo" / "seed0").resolve())
    assert words[-6:] == ["python", "train.py", "--lr", str(manifest["train"]["lr"]), "--out", run_dir]


@pytest.mark.parametrize("runtime", ["podman", "apptainer"])
def test_command_backend_shows_its_container_wrapping(tmp_path, runtime, monkeypatch):
    """With a container image the command is shown exactly as it will run: the runtime's command line, the image by
    digest (apptainer: its SIF converted from docker://REPOSITORY@sha256:... in the image cache), the study root (which
    holds the run directory) mounted, the data read-only, the working directory, each environment value one word,
    then the filled template."""
    import yaml

    digest = "sha256:" + "ab" * 32
    manifest = yaml.safe_load((REPO / "manifests" / "graphgpo-alfworld.yaml").read_text())
    manifest["backend"] = {
        "name": "command",
        "command": "python3 train.py --lr {train.lr} --out {run_dir}",
        "cwd": "trainer",
        "env": {"NOTE": "a b $(c)"},
    }
    manifest["image"] = {"runtime": runtime, "ref": "ghcr.io/org/trainer:1.2", "digest": digest}
    manifest["resources"]["gpus"] = 0
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "graphgpo-alfworld.yaml").write_text(yaml.safe_dump(manifest))
    cache = tmp_path / "cache"
    result = run_cli(
        "command",
        "manifests/graphgpo-alfworld.yaml",
        "--method",
        "grpo",
        "--seed",
        "0",
        cwd=tmp_path,
        env={"AGENTREPRO_IMAGE_CACHE": str(cache)},
    )
    assert result.returncode == 0, result.stderr
    words = shlex.split(result.stdout.splitlines()[2])
    root, run_dir = str(tmp_path.resolve()), str((tmp_path / "runs" / "graphgpo-alfworld" / "grpo" / "seed0").resolve())
    tail = ["python3", "train.py", "--lr", str(manifest["train"]["lr"]), "--out", run_dir]
    if runtime == "podman":
        image = "ghcr.io/org/trainer@" + digest
        assert words[:4] == ["podman", "run", "--cidfile", f"{run_dir}/logs/train.cid"]
        assert words[words.index("--workdir") + 1] == f"{root}/trainer" and "NOTE=a b $(c)" in words
        data = f"{root}/data/alfworld"  # data.eval, read-only
        assert [words[i + 1] for i, w in enumerate(words) if w == "--volume"] == [f"{root}:{root}", f"{data}:{data}:ro"]
    else:
        image = str(cache / "apptainer" / ("ab" * 32 + ".sif"))
        assert (
            words[:4] == ["apptainer", "exec", "--cleanenv", "--contain"]
            and words[words.index("--pwd") + 1] == f"{root}/trainer"
        )
        assert words[words.index(image) + 1 : words.index(image) + 3] == ["env", "--"] and "NOTE=a b $(c)" in words
    assert words[-len(tail) :] == tail and image in words
