"""W&B for verl-agent's training, where the manifest asks for it (`train.wandb`; the script's logger then gets wandb:
test_verl_agent.py): verl's own `Tracking` (verl/utils/tracking.py of verl-agent @ 20bd331, extracted at test time from its
source archive in the folder AGENTREPRO_FRAMEWORKS names; skipped where it is not given) logs every attempt of a
run to the run directory's one W&B run, through the environment agentrepro.tracking gives the launch: verl calls
`wandb.init(project=, name=, config=)` with no id, so WANDB_RUN_ID and WANDB_RESUME decide the run. Offline W&B,
as in a reproduction. Stood in: the `verl`, `verl.utils` and `verl.utils.logger` packages' __init__ files (empty:
verl's own import its GPU-side requirements); tracking.py and the console logger it imports are verl's."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from agentrepro import tracking

ARCHIVE = Path(os.environ.get("AGENTREPRO_FRAMEWORKS", "frameworks-not-given")) / "verl-agent-20bd331.tar.gz"
SOURCES = ("verl/utils/tracking.py", "verl/utils/logger/aggregate_logger.py")  # and the console logger it imports
ATTEMPT = """
import sys
sys.path.insert(0, sys.argv[1])
from verl.utils.tracking import Tracking
tracker = Tracking(project_name="graphgpo-alfworld", experiment_name="gigpo-seed1",
                   default_backend=["console", "wandb"], config={"seed": 1})
tracker.log({"train/reward": float(sys.argv[2])}, step=int(sys.argv[2]))
tracker.logger["wandb"].finish()
"""


def test_verls_own_tracking_logs_every_attempt_of_a_run_to_its_one_wandb_run(tmp_path):
    pytest.importorskip("wandb")
    if not ARCHIVE.is_file():
        pytest.skip(f"verl-agent's source archive is not here ({ARCHIVE}): set AGENTREPRO_FRAMEWORKS to its folder")
    source = tmp_path / "verl-agent"
    with tarfile.open(ARCHIVE) as tar:
        for name in SOURCES:
            member = next(m for m in tar.getmembers() if m.name.endswith(name))
            member.name = name
            tar.extract(member, source, filter="data")
    for package in ("verl", "verl/utils", "verl/utils/logger"):  # empty: verl's own __init__ imports its GPU stack
        (source / package / "__init__.py").write_text("")
    run = tmp_path / "run"
    run.mkdir()
    logs = run / "logs"
    record = tracking.wandb_run(run, study="graphgpo-alfworld", method="gigpo", seed=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(tracking.environment(record, logs), WANDB_SILENT="true")
    for step in (1, 2):  # two attempts of the run, as a resumed job makes them
        again = tracking.wandb_run(run, study="graphgpo-alfworld", method="gigpo", seed=1)
        assert again == record
        done = subprocess.run(
            [sys.executable, "-c", ATTEMPT, str(source), str(step)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    offline = sorted((logs / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all((p / f"run-{record['id']}.wandb").is_file() for p in offline), offline
    assert env["WANDB_MODE"] == "offline" and env["WANDB_RESUME"] == "allow"
