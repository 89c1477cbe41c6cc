"""The shipped paper studies: `agentrepro freeze` names exactly the fields a user must pin, and once they are
filled with test values (in a scratch copy) `snakemake -n` plans the whole DAG, every method x seed."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import REPO, run_cli
from wfkit import snakemake

COMMIT, DIGEST = "0123456789abcdef0123456789abcdef01234567", "sha256:" + "ab" * 32
RELAX = {"backends.relax.image.ref", "backends.relax.image.digest"}
HUB = {"model.revision", "model.tokenizer_revision"}
PLACEHOLDERS = {
    # Relax at the commit holding its recipe; the model at the revision the Relax recipe pins (a fixed choice, not a placeholder)
    "graphgpo-alfworld": {"image.ref", "image.digest", "data.eval.path", *RELAX},
    "vagen-lite-sokoban": {"image.ref", "image.digest", *HUB},
    "vagen-lite-frozenlake": {"image.ref", "image.digest", *HUB},
}
FIELD = re.compile(r"(?:^|: |; )((?:image|model|data|backends?)\.[\w.@-]+): ")


def _scratch(tmp_path, study):
    (tmp_path / "manifests").mkdir()
    shutil.copytree(REPO / "manifests" / "references", tmp_path / "manifests" / "references")
    return Path(shutil.copy(REPO / "manifests" / f"{study}.yaml", tmp_path / "manifests"))


def _fill(node, key=None):
    """The manifest with every TODO placeholder replaced by a test value of its kind."""
    if isinstance(node, dict):
        return {k: _fill(v, k) for k, v in node.items()}
    if not (isinstance(node, str) and node.startswith("TODO")):
        return node
    return {"ref": "example.org/test:1", "digest": DIGEST}.get(key, COMMIT)


@pytest.mark.parametrize("study", sorted(PLACEHOLDERS))
def test_freeze_names_exactly_the_placeholders(tmp_path, study):
    """freeze exits 2 naming each placeholder of the shipped study (and nothing else) in one message (subprocess)."""
    _scratch(tmp_path, study)
    result = run_cli("freeze", f"manifests/{study}.yaml", "--allow-dirty", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert set(FIELD.findall(result.stderr)) == PLACEHOLDERS[study], result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("study", sorted(PLACEHOLDERS))
def test_filled_study_plans_the_whole_dag(tmp_path, study):
    """With test values in place of the placeholders, `snakemake -n -p` plans a train job per method x seed, each
    shown with the programs `agentrepro command` prints for it, its shell staying `agentrepro train` on its paths."""
    path = _scratch(tmp_path, study)
    manifest = _fill(yaml.safe_load(path.read_text()))
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    proc = snakemake(tmp_path, "-n", "-p", "--config", f"manifest=manifests/{study}.yaml", "freeze_flags=--allow-dirty")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    trains = {
        m.group(1) for m in re.finditer(r"^Job \d+: train (\S+) seed \d+: agentrepro train runs$", proc.stdout, re.M)
    }
    assert trains == set(manifest["methods"]), proc.stdout[-2000:]
    assert any("@relax" in m for m in trains) == (study == "graphgpo-alfworld")
    counts = re.search(r"^train\s+(\d+)$", proc.stdout, re.M)
    assert counts and int(counts.group(1)) == len(manifest["methods"]) * len(manifest["seeds"])


@pytest.mark.slow
def test_dry_run_shows_the_official_launch_line(tmp_path):
    """`snakemake -n -p` on graphgpo-alfworld (test values) shows, for graphgpo seed 0, exactly the programs `agentrepro
    command` prints: the recipe's official script with the appended overrides (trainer.save_freq, the hf_model copy); the train
    job's shell command is `agentrepro train` with its quoted paths and no manifest value."""
    path = _scratch(tmp_path, "graphgpo-alfworld")
    manifest = _fill(yaml.safe_load(path.read_text()))
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    proc = snakemake(
        tmp_path, "-n", "-p", "--config", "manifest=manifests/graphgpo-alfworld.yaml", "freeze_flags=--allow-dirty"
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    command = run_cli(
        "command", "manifests/graphgpo-alfworld.yaml", "--method", "graphgpo", "--seed", "0", cwd=tmp_path
    )
    assert command.returncode == 0, command.stderr
    # its programs (the sbatch flags and the demand table follow)
    printed, _, after = command.stdout.partition("\n\n# under `snakemake --profile slurm`")
    assert "sbatch -t 1440 --mem 200000 --cpus-per-task=55 --gpus=2" in after  # the manifest's resources
    launch = next(line for line in printed.splitlines() if "recipe/GraphGPO/run_qwen2.5_1.5b_alfworld_train.sh" in line)
    assert "trainer.save_freq=5" in launch and "hf_model" in launch
    assert f"train graphgpo seed 0: agentrepro train runs\n{printed}\n" in proc.stdout
    shells = [m.group(1) for m in re.finditer(r"^Shell command: (.*agentrepro train --config .*)$", proc.stdout, re.M)]
    assert shells and all("run_qwen2.5" not in s and "trainer." not in s for s in shells)
