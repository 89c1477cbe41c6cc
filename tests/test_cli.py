"""Tests for the command-line entry points: console script, `python -m`, help of every verb."""

import shutil
import subprocess

import pytest
from helpers import run_cli

from agentrepro.cli import VERBS


def test_python_m_and_console_script_agree():
    """`python -m agentrepro --version` works and the installed `agentrepro` script prints the same."""
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("agentrepro ")
    script = shutil.which("agentrepro")
    if script:
        assert subprocess.run([script, "--version"], capture_output=True, text=True).stdout == proc.stdout


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_has_help(verb):
    """Each verb of docs/design.md §3.7 answers --help with exit 0 (its module imports and declares its options)."""
    proc = run_cli(verb, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage: agentrepro " + verb in proc.stdout


def test_unknown_verb_is_usage_error():
    """An unknown verb is a usage error (exit 2) that lists the verbs."""
    proc = run_cli("nonsense")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_every_verb_lives_in_its_own_module():
    """`agentrepro X` is agentrepro/cli/X.py (a keyword verb: the name MODULES gives), with its arguments and its run;
    no other module defines a verb."""
    from helpers import REPO

    from agentrepro.cli import MODULES

    package = REPO / "src" / "agentrepro"
    verbs = sorted(MODULES.get(v, v) for v in VERBS)
    assert sorted(p.stem for p in (package / "cli").glob("*.py") if p.stem != "__init__") == verbs
    defines_a_verb = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "def add_arguments(parser" in p.read_text(encoding="utf-8") and p.parent.name != "cli"
    )
    assert defines_a_verb == []
