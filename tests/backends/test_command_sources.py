"""Each job records the backend sources it actually ran: `agentrepro train` and `agentrepro eval` of a command backend
whose trainer lives in a git checkout (made with `git init`), with an uncommitted edit between the two jobs."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

from helpers import run_cli


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_train_and_eval_each_record_what_they_ran(tmp_path, make_config, write_config, mini_trainer):
    """train's backend_sources.json holds the committed blob; after an uncommitted edit, the evaluation's record (sealed in
    eval/step<N>/) holds the edited file's blob and the training record is unchanged."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(mini_trainer, checkout / "mini_trainer.py")
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pinned")
    config = make_config()
    for key in ("command", "eval_command"):
        config["backend"][key] = config["backend"][key].replace(
            shlex.quote(str(mini_trainer)), shlex.quote(str(checkout / "mini_trainer.py"))
        )
    config["backend"].update(
        commit=git(checkout, "rev-parse", "HEAD"), workdir=str(checkout), sources=["mini_trainer.py"]
    )
    run = tmp_path / "run"
    result = run_cli("train", "--config", write_config(config), "--out", run)
    assert result.returncode == 0, result.stderr
    pinned = git(checkout, "rev-parse", "HEAD:mini_trainer.py")
    trained = json.loads((run / "backend_sources.json").read_text())
    assert trained["files"] == {"mini_trainer.py": pinned} and trained["backend"] == "command"

    with open(checkout / "mini_trainer.py", "a") as fh:
        fh.write("# patched after training, never committed\n")
    result = run_cli("eval", "--run", run, "--step", 3)
    assert result.returncode == 0, result.stderr
    evaluated = json.loads((run / "eval" / "step3" / "backend_sources.json").read_text())
    assert (
        evaluated["files"] == {"mini_trainer.py": git(checkout, "hash-object", "mini_trainer.py")} != trained["files"]
    )
    assert "backend_sources.json" in (run / "eval" / "step3" / "OUTPUTS.sha256").read_text()
    assert json.loads((run / "backend_sources.json").read_text()) == trained
