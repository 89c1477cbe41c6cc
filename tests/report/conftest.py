"""Fixtures of the report tests: one synthetic analysis (with a hostile task category) rendered once."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # report_synthetic, beside this file

from report_synthetic import CATEGORIES, HOSTILE, STUDY, build_analysis, write_analysis_dir


@pytest.fixture(scope="session")
def analysis_template() -> dict:
    return build_analysis(study=STUDY, categories=[*CATEGORIES[:4], HOSTILE], note_extra=f"task {HOSTILE} was retried")


@pytest.fixture
def analysis(analysis_template) -> dict:
    """A fresh copy of the synthetic analysis.json object (tests may change it)."""
    return copy.deepcopy(analysis_template)


@pytest.fixture(scope="session")
def printed(tmp_path_factory, analysis_template):
    """printed(engine) → reports/<study>/ written by `agentrepro report` run as a subprocess (once per engine).

    'chromium': `--pdf-engine chromium` (skips without Debian's chromium); 'weasyprint': the default `auto` on a
    PATH without Chromium, as on a fresh machine or a cluster login node.
    """
    import os

    from helpers import require_executable, run_cli

    done: dict[str, Path] = {}

    def make(engine: str) -> Path:
        if engine not in done:
            args: tuple[str, ...]
            env: dict[str, str] | None
            if engine == "chromium":
                require_executable("chromium", "chromium")
                args, env = ("--pdf-engine", "chromium"), None
            else:
                args, env = (), {"PATH": os.path.dirname(sys.executable), "AGENTREPRO_CHROMIUM": ""}
            root = tmp_path_factory.mktemp(f"printed-{engine}")
            write_analysis_dir(root, analysis_template)
            result = run_cli("report", STUDY, "--root", root, *args, env=env)
            if result.returncode != 0:
                pytest.fail(f"agentrepro report ({engine}) failed ({result.returncode}): {result.stderr}")
            (root / "stderr.txt").write_text(result.stderr)
            done[engine] = root / "reports" / STUDY
        return done[engine]

    return make


@pytest.fixture(scope="session")
def rendered(printed) -> Path:
    """reports/<study>/ written by `agentrepro report` run as a subprocess, with its PDF (needs chromium)."""
    return printed("chromium")
