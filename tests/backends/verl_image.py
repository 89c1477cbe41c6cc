"""verl-agent @ 20bd331's own code, and a podman image that runs it, for the tests that rehearse it
(test_verl_rehearsal.py).

The source comes from its archive (verl-agent-20bd331.tar.gz, Apache-2.0) in the folder AGENTREPRO_FRAMEWORKS names,
extracted at test time; where it is not given the tests are skipped, or fail under AGENTREPRO_REQUIRE=verl-agent
(CI). The image is the tests' Python image (podman_kit.python_rootfs) with verl-agent's Python requirements installed
into Debian's /usr/local/lib/python3.11/dist-packages: requirements.txt at 20bd331 with its pins, less what does not
install on a CPU (flash-attn, liger-kernel, vllm, pre-commit, wandb, qwen-vl-utils[decord]), plus what its GraphGPO
recipe imports without declaring (cachetools, openai, matplotlib, networkx, gymnasium, alfworld: the field notes on
running verl-agent on a CPU), torch the CPU build. One thing is stood in: `torchvision.transforms`, which
recipe/GraphGPO/alfworld_envs.py:22 imports for its image frames (Compose and ToTensor, unused in ALFWorld's text
mode); the torchvision release for this torch is not installable here (PyPI's is a CUDA build).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from helpers import require
from podman_kit import TestImage, pinned, podman, python_rootfs

ARCHIVE = Path(os.environ.get("AGENTREPRO_FRAMEWORKS", "frameworks-not-given")) / "verl-agent-20bd331.tar.gz"
SITE = "/usr/local/lib/python3.11/dist-packages"  # where Debian's python3 finds packages without PYTHONPATH

REQUIREMENTS = [
    # requirements.txt @ 20bd331, as pinned there
    "accelerate",
    "codetiming",
    "datasets",
    "dill",
    "hydra-core",
    "numpy",
    "pandas",
    "peft",
    "pyarrow>=19.0.0",
    "pybind11",
    "pylatexenc",
    "ray[default]==2.49.2",  # unpinned there; setup.py asks <=2.50: the release the tests' own Ray heads use
    "tensordict<=0.6.2",
    "torchdata",
    "transformers==4.51.1",
    "packaging>=20.0",
    "uvicorn",
    "fastapi",
    # imported, not declared
    "cachetools",
    "openai",
    "matplotlib",
    "networkx",
    "gymnasium",
    "alfworld==0.4.2",
]

STAND_IN_TORCHVISION = {
    "__init__.py": '"""Stand-in (tests/backends/verl_image.py): only what verl-agent\'s ALFWorld module imports."""\n',
    "transforms.py": (
        "class Compose:\n    def __init__(self, transforms):\n        self.transforms = transforms\n\n"
        "class ToTensor:\n    def __call__(self, picture):\n"
        "        raise NotImplementedError('stand-in torchvision: image frames are not rehearsed')\n"
    ),
}


def require_archive() -> Path:
    require("verl-agent", ARCHIVE.is_file(), f"its source archive is not here ({ARCHIVE}): set AGENTREPRO_FRAMEWORKS")
    return ARCHIVE


def extract(target: Path) -> Path:
    """verl-agent's whole tree at `target`."""
    with tarfile.open(require_archive()) as tar:
        tar.extractall(target, filter="data")
    return target


def install_requirements(target: Path) -> Path:
    """verl-agent's requirements installed into `target` for Debian's Python 3.11 (binary wheels; alfworld's
    TextWorld needs jericho and fast-downward-textworld, which PyPI ships as source: AGENTREPRO_WHEELS names a folder
    of their wheels, as CI builds them)."""
    import torch

    links = os.environ.get("AGENTREPRO_WHEELS")
    wheels = ["--find-links", links] if links else []
    torch_pin = f"torch=={torch.__version__}"  # the CPU build the tests' own environment runs
    command = [sys.executable, "-m", "pip", "install", "-q", "--target", str(target), *wheels, torch_pin, *REQUIREMENTS]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    for script in (target / "bin").iterdir():  # pip writes its own interpreter into them: the image's runs them
        text = script.read_bytes()
        if text.startswith(b"#!") and b"python" in text.split(b"\n", 1)[0]:
            script.write_bytes(b"#!/usr/bin/python3\n" + text.split(b"\n", 1)[1])
    return target


def stand_in_torchvision(target: Path) -> Path:
    target.mkdir(parents=True)
    for name, source in STAND_IN_TORCHVISION.items():
        (target / name).write_text(source)
    return target


def build(directory: Path) -> TestImage:
    """The image: the tests' Python, verl-agent's requirements in its site-packages, and the stand-in torchvision."""
    trees = {
        SITE: install_requirements(directory / "site"),
        f"{SITE}/torchvision": stand_in_torchvision(directory / "torchvision"),
    }
    tar = python_rootfs(directory / "rootfs-verl-agent.tar", "verl-agent", trees)
    ref = "localhost/agentrepro-test/verl-agent:20bd331"
    podman("import", str(tar), ref)
    tar.unlink()
    return pinned(ref, "verl-agent")
