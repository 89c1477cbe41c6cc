"""Fixtures shared by every test."""

from pathlib import Path

import pytest
from docker_kit import docker_image  # noqa: F401 - a fixture: a private docker daemon and the test image as an archive
from helpers import FIXTURES
from podman_kit import podman_images  # noqa: F401 - a fixture: one build of the test images per session, for every folder
from slurm_kit import slurm_cluster  # noqa: F401 - a fixture: the local SLURM, for every folder


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"reference fixtures not found at {FIXTURES}: they are part of the repository")
    return FIXTURES
