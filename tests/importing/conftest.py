"""Fixtures of the import tests: the demo study of study_kit.py, whose lock holds a frozen panel with task types."""

from study_kit import frozen, frozen_template, study  # noqa: F401 - fixtures
