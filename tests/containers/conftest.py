"""Fixtures of the container tests: real podman images (tests/podman_kit.py)."""

from podman_kit import podman_images  # noqa: F401 - a fixture
