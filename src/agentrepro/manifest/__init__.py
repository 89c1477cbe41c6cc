"""Study manifests, their locks, and the checks that outputs came from them (docs/design.md §3.1, §3.2).

Public interface (docs/internals.md): `load_manifest`, `lock_sha256`, `read_lock`, `run_config`,
`audit_study` (the resolved-config hash is `agentrepro.layout.config_file_sha256`); the verbs freeze, resolve, audit and bundle live in cli_*.py.
"""

from agentrepro.manifest.audit import audit_study
from agentrepro.manifest.loading import load_manifest
from agentrepro.manifest.lock import lock_sha256, read_lock
from agentrepro.manifest.resolve import run_config

__all__ = ["audit_study", "load_manifest", "lock_sha256", "read_lock", "run_config"]
