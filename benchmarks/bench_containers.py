"""Start-up overhead of running a job's program in a podman container, against the same job on the host.

Baseline: `agentrepro train` of a command-backend run config whose image is `{none: ...}` (the program runs on the
host). Measured: the same config with `image: {runtime: podman, ref, digest}` (the program runs in the image,
which is already in the store, and the job records what podman ran). The trainer is tests/workflow/image_trainer.py
(standard library only, 2 steps: it does almost nothing, so the difference is the container's cost). Then the parts
of that cost, timed in-process around one program: preparing the image (present), asking podman's version, the
wrapped run against the bare `python3` run, and the inspection and removal of the container afterwards; and
loading the image once from an OCI archive (what the first job on a node does for an image file).

The image is built as the tests build it (tests/podman_kit.py), in a private store. Needs podman and runc.
Run: .venv/bin/python benchmarks/bench_containers.py
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
import podman_kit  # noqa: E402

from agentrepro import containers  # noqa: E402
from agentrepro.containers import running  # noqa: E402
from agentrepro.containers.prepare import prepare  # noqa: E402
from agentrepro.fileio import sha256_file  # noqa: E402

REPEATS = 5
TRAINER = REPO / "tests" / "workflow" / "image_trainer.py"
PYTHON = podman_kit.PYTHON  # Debian's /usr/bin/python3, on the host and (the same binary) in the image


def config(image: dict) -> dict:
    return {
        "study": "bench",
        "method": "grpo",
        "seed": 0,
        "image": image,
        "resources": {"gpus": 0},
        "backend": {
            "name": "command",
            "command": f"{PYTHON} image_trainer.py train --run {{run_dir}} --steps {{train.steps}}",
        },
        "train": {"steps": 2},
        "eval": {"episodes_per_task": 1},
    }


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median(fn, repeats: int = REPEATS) -> float:
    return statistics.median(timed(fn) for _ in range(repeats))


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-containers-"))
    os.environ.update(podman_kit.configure(work / "podman"))
    image = podman_kit.build(work, "a")
    os.chdir(work)
    shutil.copy(TRAINER, work / "image_trainer.py")
    rows = []
    for name, block in (("host (image: none)", {"none": "on the host"}), ("podman", image.block())):
        path = work / f"{name.split()[0]}.yaml"
        path.write_text(yaml.safe_dump(config(block)))
        argv = [sys.executable, "-m", "agentrepro", "train", "--config", str(path)]
        argv += ["--out", str(work / "runs" / name.split()[0]), "--no-resume"]
        rows.append((name, median(functools.partial(subprocess.run, argv, check=True, capture_output=True))))
    print(f"| job | agentrepro train (s, median of {REPEATS}) |\n|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} |")
    print(f"\nadded per job by the container: {rows[1][1] - rows[0][1]:.2f} s\n")

    program = containers.program(
        config(image.block()), [str(PYTHON), "-c", "pass"], {}, None, run_dir=work, job_dir=work, label="p"
    )
    container = program.container
    parts = {
        "prepare (image present)": median(lambda: prepare(container)),
        "podman version": median(lambda: running._version(container)),
        "bare python3 -c pass on the host": median(lambda: subprocess.run([str(PYTHON), "-c", "pass"], check=True)),
        "the same, wrapped (podman run, no removal)": None,
        "inspect container and image, remove it": None,
    }
    runs, asks = [], []
    program.cidfile.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(REPEATS):
        program.cidfile.unlink(missing_ok=True)
        runs.append(timed(lambda: subprocess.run(list(program.argv), check=True, capture_output=True)))
        asks.append(timed(lambda: (running._ask(container, program), running._remove(container, program))))
    parts["the same, wrapped (podman run, no removal)"] = statistics.median(runs)
    parts["inspect container and image, remove it"] = statistics.median(asks)
    archive = work / "a.tar"
    podman_kit.podman("save", "--format", "oci-archive", "--output", str(archive), image.ref)
    file_block = {"runtime": "podman", "file": str(archive), "sha256": sha256_file(archive)}
    loads = []
    for _ in range(3):
        podman_kit.podman("rmi", "--force", image.image_id)
        file_container = containers.container_for(config(file_block), run_dir=work)
        loads.append(timed(functools.partial(prepare, file_container)))
    parts[f"load a {archive.stat().st_size / 1e6:.0f} MB OCI archive (first job on a node; median of 3)"] = (
        statistics.median(loads)
    )
    print("| part | seconds (median) |\n|---|---|")
    for name, seconds in parts.items():
        print(f"| {name} | {seconds:.3f} |")
    podman_kit.podman("rmi", "--all", "--force", check=False)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
