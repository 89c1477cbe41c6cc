"""Training backends: one interface (`base.Backend`), a registry, and the `train` / `eval` verbs around them.

Backends: `builtin` (the harness's own trainer, agentrepro.trainer), `command` (any external trainer
described by a command template, run without a shell), `verl-agent` and `relax` (launch those frameworks, Relax through its own recipe, with
converters of their outputs into the run-directory contract of docs/design.md §3.3 and §3.4).
"""

from agentrepro.backends.base import Backend, BackendRegistry, get_backend

__all__ = ["Backend", "BackendRegistry", "get_backend"]
