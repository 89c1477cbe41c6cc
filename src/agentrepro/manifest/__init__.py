"""Study manifests and their locks (docs/design.md §3.1, §3.2).

Public interface (docs/internals.md): `load_manifest`, `lock_sha256`, `read_lock`, `run_config`; the verbs freeze
and resolve live in cli_*.py. Whether outputs came from a lock is the audit's question (agentrepro.audit).
"""

from agentrepro.lockfile import lock_sha256, read_lock
from agentrepro.manifest.loading import load_manifest
from agentrepro.manifest.resolve import run_config

__all__ = ["load_manifest", "lock_sha256", "read_lock", "run_config"]
