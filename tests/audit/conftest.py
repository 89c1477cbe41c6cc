"""Fixtures of the audit tests: the demo study of study_kit.py."""

from study_kit import frozen, frozen_template, study  # noqa: F401 - fixtures
