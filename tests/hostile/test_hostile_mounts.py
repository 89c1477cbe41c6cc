"""Paths a job's container would mount, given as a user might: the mount rule (containers.check_mount) is applied at
freeze and again before any container starts, one line naming the field, exit 2. A path that shows the host to the
container (its root, a folder holding the study) is refused, and so is one no runtime can mount (':' and ',' split
their mount options), which would otherwise freeze and then fail every job at the runtime's mount parser."""

from __future__ import annotations

import pytest
from helpers import run_cli
from study_kit import BASE, set_key, write_study


def cases(tmp_path):
    outside = tmp_path / "outside"
    odd = tmp_path / "study" / "data" / "a,b"
    return [
        ("data.eval.path", "/", "the host's root"),
        ("data.eval.path", str(tmp_path), "a folder that holds the study"),
        ("backend.model_path", str(tmp_path), "a folder that holds the study"),
        ("backend.model_path", "/", "the host's root"),
        ("backend.workdir", "..", "a folder that holds the study"),
        ("data.eval.path", "data/a,b", "split their mount options"),
        ("backend.model_path", f"{outside}:/etc", "split their mount options"),
    ], odd


@pytest.mark.parametrize("case", range(7))
def test_a_path_that_exposes_the_host_or_cannot_be_mounted_is_refused_at_freeze(tmp_path, case):
    """Freeze and `command` both refuse it in one line naming the field."""
    chosen, odd = cases(tmp_path)
    field, value, says = chosen[case]
    odd.mkdir(parents=True)
    root = tmp_path / "study"
    (root / "checkout").mkdir(parents=True)  # the framework's checkout (`command` looks for it)
    manifest = write_study(root, set_key(set_key(BASE, "backend.workdir", "checkout"), field, value))
    for argv in (["freeze", manifest, "--allow-dirty"], ["command", manifest, "--method", "grpo", "--seed", "0"]):
        result = run_cli(*argv, cwd=root)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert f"{field}: " in lines[0] and says in lines[0], (argv[0], lines[0])


def test_a_folder_of_its_own_is_mounted(tmp_path):
    """The same study with the model in a folder of its own beside the study freezes."""
    root = tmp_path / "study"
    (tmp_path / "model").mkdir()
    manifest = write_study(root, set_key(BASE, "backend.model_path", str(tmp_path / "model")))
    result = run_cli("freeze", manifest, "--allow-dirty", cwd=root)
    assert result.returncode == 0, result.stderr
