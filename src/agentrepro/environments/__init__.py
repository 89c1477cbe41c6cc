"""Multi-turn text environments with VAGEN-Lite semantics (Sokoban, FrozenLake), seed for seed.

Public interface (docs/internals.md "Environments"): `make_env`, `validate_params`, `task_panel`, `panel_packages`,
`Env` (reset / step / system_prompt / solve / action_names / grid_symbols), and `Registry` (names → classes;
the default one is `REGISTRY`). Adding an environment: docs/extending.md "Add an environment".
"""

from agentrepro.environments.base import Env
from agentrepro.environments.registry import (
    REGISTRY,
    Registry,
    env_names,
    make_env,
    panel_packages,
    task_description,
    task_panel,
    validate_params,
)

__all__ = [
    "REGISTRY",
    "Env",
    "Registry",
    "env_names",
    "make_env",
    "panel_packages",
    "task_description",
    "task_panel",
    "validate_params",
]
