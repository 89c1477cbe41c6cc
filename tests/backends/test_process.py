"""External programs: logs per attempt, failures with their reason, and SIGTERM stopping the trainer it started."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from agentrepro.errors import Failure
from agentrepro.process import run_logged


def test_logs_accumulate_per_attempt_and_failure_names_the_reason(tmp_path):
    """Each call appends a header and the output; a non-zero exit is a Failure with the status and the last stderr line."""
    run_logged([sys.executable, "-c", "print('first')"], log_dir=tmp_path, label="job")
    with pytest.raises(Failure, match=r"exit status 7; see .*job.stderr.log \(last line: boom\)"):
        run_logged(
            [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(7)"],
            log_dir=tmp_path,
            label="job",
        )
    out = (tmp_path / "job.stdout.log").read_text()
    assert out.count("=== agentrepro") == 2 and "first" in out
    with pytest.raises(Failure, match="cannot start"):
        run_logged([str(tmp_path / "missing-program")], log_dir=tmp_path, label="x")


@pytest.mark.slow
def test_sigterm_to_train_stops_the_trainer_and_records_killed(tmp_path, make_config, write_config):
    """SIGTERM to `agentrepro train` alone (not its group) terminates the trainer under /bin/sh, exits 143, attempt 'killed'."""
    config = write_config(make_config(steps=200))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrepro", "train", "--config", str(config), "--out", str(run_dir)],
        env={**os.environ, "MINI_SLEEP": "0.2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = run_dir / "logs" / "train.stdout.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and "mini_trainer pid" in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    trainer_pid = int(re.search(r"mini_trainer pid (\d+)", log.read_text()).group(1))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    assert "terminated" in proc.stderr.read()
    assert not psutil.pid_exists(trainer_pid) or psutil.Process(trainer_pid).status() == psutil.STATUS_ZOMBIE
    attempt = json.loads((run_dir / "provenance.json").read_text())["attempts"][-1]
    assert attempt["status"] == "killed" and "signal 15" in attempt["reason"]
    assert not (run_dir / "OUTPUTS.sha256").exists()
