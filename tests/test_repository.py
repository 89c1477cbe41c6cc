"""The repository is self-contained: no file of it reads or cites a path outside the checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import FIXTURES, REPO

OUTSIDE = ("../shared", 'parent / "shared"', "shared/fixtures")


def _tracked_text_files():
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        path = REPO / name
        if path.suffix in {".py", ".smk", ".yaml", ".json", ".j2", ".toml", ".cfg", ".sh", ".md"} or name in {
            "Snakefile",
            "Makefile",
            ".ci/run",
        }:
            if not path.is_relative_to(FIXTURES) and path != Path(__file__):
                yield name, path


def test_no_file_refers_to_a_folder_beside_the_checkout():
    """Code, workflow, tests and docs never name a folder beside the checkout (a user's clone has nothing beside it)."""
    hits = [
        f"{name}: {needle}"
        for name, path in _tracked_text_files()
        if path.is_file()
        for needle in OUTSIDE
        if needle in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert hits == [], "\n".join(hits)


def test_every_fixture_folder_says_where_its_data_came_from():
    """Each reference-fixture folder has a README naming its source commit."""
    folders = [p for p in FIXTURES.iterdir() if p.is_dir()]
    assert {p.name for p in folders} >= {"vagen", "advantages", "frameworks"}
    for folder in folders:
        readme = (folder / "README.md").read_text(encoding="utf-8")
        assert "commit" in readme.lower() or "@" in readme, folder
