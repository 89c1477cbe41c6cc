"""Overhead of the `train` / `eval` verbs' bookkeeping around an external trainer (command backend).

Baseline: the mini trainer of tests/backends/mini_trainer.py run directly (python mini_trainer.py train /
eval). Measured: the same trainer through `agentrepro train` / `agentrepro eval` (config checks,
resolved config, provenance attempts with host info, output checks, outcome validation, seals). Each
is timed REPEATS times in this run; the table gives medians and the ratio verb / direct.

Run: .venv/bin/python benchmarks/bench_backends.py
"""

from __future__ import annotations

import hashlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "tests" / "backends" / "mini_trainer.py"
REPEATS, STEPS, TASKS = 5, 20, 128


def config() -> dict:
    panel = [
        {"task_id": f"t-{i}", "task_hash": hashlib.sha256(str(i).encode()).hexdigest(), "category": "c"}
        for i in range(TASKS)
    ]
    return {
        "study": "bench",
        "method": "grpo",
        "seed": 0,
        "backend": {
            "name": "command",
            "command": f"{{python}} {MINI} train --run {{run_dir}} --steps {{train.steps}} --lr {{train.lr}} --resume {{resume}}",
            "eval_command": f"{{python}} {MINI} eval --run {{run_dir}} --step {{step}} --out {{outcomes}}",
        },
        "train": {"steps": STEPS, "lr": 0.1},
        "eval": {"episodes_per_task": 1, "task_panel": panel},
    }


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    rows = {"train direct": [], "train verb": [], "eval direct": [], "eval verb": [], "python": [], "torch": []}
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            (tmp / "config.yaml").write_text(yaml.safe_dump(config()))
            direct = tmp / "direct"
            direct.mkdir()
            (direct / "resolved_config.yaml").write_text(yaml.safe_dump(config()))
            rows["train direct"].append(
                timed([sys.executable, str(MINI), "train", "--run", str(direct), "--steps", str(STEPS)], tmp)
            )
            rows["train verb"].append(
                timed([sys.executable, "-m", "agentrepro", "train", "--config", "config.yaml", "--out", "verb"], tmp)
            )
            rows["eval direct"].append(
                timed(
                    [
                        sys.executable,
                        str(MINI),
                        "eval",
                        "--run",
                        str(direct),
                        "--step",
                        str(STEPS),
                        "--out",
                        str(direct / "o.jsonl"),
                    ],
                    tmp,
                )
            )
            rows["eval verb"].append(
                timed([sys.executable, "-m", "agentrepro", "eval", "--run", "verb", "--step", str(STEPS)], tmp)
            )
            shutil.rmtree(tmp / "verb")
            rows["python"].append(timed([sys.executable, "-c", "pass"], tmp))
            rows["torch"].append(timed([sys.executable, "-c", "import torch; torch.cuda.device_count()"], tmp))
    med = {k: statistics.median(v) for k, v in rows.items()}
    print("| stage | direct (s) | through the verb (s) | ratio | added (s) |")
    print("|---|---|---|---|---|")
    for stage in ("train", "eval"):
        d, v = med[f"{stage} direct"], med[f"{stage} verb"]
        print(f"| {stage} ({STEPS} steps / {TASKS} tasks) | {d:.2f} | {v:.2f} | {v / d:.2f} | {v - d:.2f} |")
    print(
        f"\nFor scale: `import torch` + GPU count (provenance's GPU probe) takes {med['torch'] - med['python']:.2f} s "
        f"over a bare interpreter start ({med['python']:.2f} s)."
    )


if __name__ == "__main__":
    main()
