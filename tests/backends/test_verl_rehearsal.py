"""`agentrepro rehearse` of the shipped GraphGPO study on verl-agent @ 20bd331's own code, in a podman image that holds
its pinned requirements (verl_image.py), offline, as a job step of the local SLURM (`srun`), with a tiny local model
and generated ALFWorld games.

Everything up to the GPUs is verl-agent's: the recipe's script run_qwen2.5_1.5b_alfworld_train.sh with the harness's
overrides, Hydra's composition, the job's own Ray head (real Ray 2.49.2 in the image), the TaskRunner, the
validation and training env workers (real ALFWorld games), the tokenizer read from the model directory, the
datasets and the trainer, and the GPU placement group, whose first worker then asks torch for the device's name:
the startup hook (hooks/agentrepro_rehearsal.py) records that call as the boundary. What differs from the train job
on a GPU node, said so: the rollout engine is `hf` (`backend.overrides`), since vLLM is not in an image that installs
on a CPU (the script's `vllm` imports it at main_graphgpo.py:81), and the image's torchvision is a stand-in
(verl_image.py). What is not rehearsed: the GPU kernels, NCCL, vLLM's engine, memory at model size.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import REPO, load_file_module, require_alfworld, run_cli
from podman_kit import leftover_containers

verl_image = load_file_module("verl_image", Path(__file__).with_name("verl_image.py"))

pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def verl_agent(podman_images, tmp_path_factory):
    """verl-agent's tree and its image in the tests' podman store."""
    directory = tmp_path_factory.mktemp("verl-agent")
    checkout = verl_image.extract(directory / "verl-agent")
    return checkout, verl_image.build(directory / "image")


def tiny_snapshot(target: Path) -> Path:
    """A random tiny Qwen2 with a ChatML tokenizer, as a hub snapshot of transformers 4 names its tokenizer class
    (transformers 5 writes `TokenizersBackend`, which the image's transformers 4.51.1 does not know)."""
    from agentrepro.serving import tiny

    tiny.build(str(target), shape="tiny")
    config = json.loads((target / "tokenizer_config.json").read_text())
    (target / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"}))
    return target


def shipped_study(root: Path, checkout: Path, image) -> Path:
    """manifests/graphgpo-alfworld.yaml with its placeholders filled for this machine, scaled to 2 groups of 2."""
    from agentrepro.environments.alfworld_testgames import write_data_dir

    manifest = yaml.safe_load((REPO / "manifests" / "graphgpo-alfworld.yaml").read_text())
    del manifest["backends"]  # the Relax port: not rehearsed (its source is not here)
    manifest["methods"] = {name: method for name, method in manifest["methods"].items() if "@" not in name}
    manifest["backend"].update(
        workdir=str(checkout),
        model_path=str(tiny_snapshot(root / "model")),
        ray={"executable": "/usr/local/lib/python3.11/dist-packages/bin/ray"},  # the image's, where pip put it
        overrides={"actor_rollout_ref.rollout.name": "hf"},  # no vLLM in an image built on a CPU (module docstring)
    )
    manifest["image"] = image.block()
    manifest["train"].update(groups=2, group_size=2, steps=2, step_rows=[1, 2])
    manifest["eval"].update(tasks=4, every=1)
    manifest["resources"].update(cpus=8, mem_mb=16000)
    for split in ("eval_in_distribution", "train"):  # what verl validates on, and what it trains on
        write_data_dir(root / "data" / "alfworld", split=split)
    (root / "manifests" / "references").mkdir(parents=True)
    shutil.copy(REPO / "manifests" / "references" / "graphgpo.yaml", root / "manifests" / "references")
    path = root / "manifests" / "graphgpo-alfworld.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


def test_verl_agents_own_code_reaches_the_gpus_offline_in_its_image(tmp_path, verl_agent, slurm_cluster):
    """The data preparation ends; the train program runs verl-agent up to its GPU workers, whose first call on the
    device (verl/single_controller/base/worker.py, the worker's constructor, scheduled on a GPU bundle of the
    placement group) is the boundary; the env workers found ALFWorld's games (the panel's 4 for validation); nothing
    is left behind. The job step has the memory the study's train job asks, which holds the container too (its cgroup
    is made under the step's)."""
    require_alfworld()
    checkout, image = verl_agent
    manifest = shipped_study(tmp_path / "study", checkout, image)
    out = tmp_path / "rehearsal"
    result = run_cli(
        "rehearse", manifest, "--method", "graphgpo", "--seed", "0", "--out", out, "--timeout-s", "900",
        cwd=manifest.parents[1], timeout=1200,
        prefix=("srun", "--ntasks=1", "--cpus-per-task=2", "--mem=16000", "--time=30"),
    )  # as a user on a CPU partition: a SLURM job step of the local cluster, of the memory its job asks  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "memory:" not in result.stdout  # the job's memory, under its cgroup: the containers' too
    assert "| prepare_data (prepare data) | ended |" in result.stdout
    worker = checkout / "verl" / "single_controller" / "base" / "worker.py"
    assert f"| train (train) | reached the GPUs | torch.cuda._lazy_init at {worker}:" in result.stdout
    assert "no network (--network none)" in result.stdout
    (boundary,) = json.loads((out / "rehearsal.json").read_text())["boundary"]
    assert boundary["program"] == "train" and boundary["argv"][0].endswith("ray/_private/workers/default_worker.py")
    assert boundary["frames"][0]["file"] == str(worker) and boundary["frames"][0]["function"] == "__init__"
    (attempt,) = json.loads((out / "run" / "provenance.json").read_text())["attempts"]
    assert attempt["slurm_job_id"], attempt  # it ran as a SLURM job
    assert len(json.loads((out / "run" / "verl_panel.json").read_text())) == 4
    said = (out / "run" / "logs" / "train.stdout.log").read_text()
    assert "Training with 6 games" in said and "we have 6 games in split=eval_in_distribution" in said
    assert leftover_containers() == []
