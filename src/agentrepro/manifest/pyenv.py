"""The Python environment a lock records: interpreter version and every installed distribution."""

from __future__ import annotations

import importlib.metadata
import platform
import re
from typing import Any

from agentrepro.fileio import sha256_json


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages() -> list[str]:
    """Sorted, de-duplicated `name==version` of every distribution importlib.metadata sees."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.add(f"{_normalise(name)}=={dist.version}")
    return sorted(found)


def python_environment() -> dict[str, Any]:
    packages = installed_packages()
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "packages": packages,
        "packages_sha256": sha256_json(packages),
    }
