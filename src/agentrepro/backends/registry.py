"""The registry: a backend name -> its implementation, one line per backend (adding one: docs/extending.md).

Duplicate names are errors; an unknown name is a BadInput that lists the known ones. Entries are
"module:attribute" strings, imported when a backend is first asked for. Tests build their own
`BackendRegistry` instead of changing the global one.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentrepro.backends.base import Adapter, Backend
from agentrepro.errors import BadInput, Failure

REQUIRED_METHODS = ("default_config", "train", "evaluate", "checkpoint_steps")


class BackendRegistry:
    """Names -> backend factories (a Backend class, a callable, or a lazy "module:attribute" string)."""

    def __init__(self) -> None:
        self._entries: dict[str, Any] = {}

    def register(self, name: str, factory: Any) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"backend name must be a non-empty string, got {name!r}")
        if name in self._entries:
            raise ValueError(f"backend {name!r} is already registered")
        self._entries[name] = factory

    def names(self) -> list[str]:
        return sorted(self._entries)

    def factory(self, name: str) -> Any:
        """The class (or callable) registered under `name`; BadInput (key `backend.name`) for an unknown name."""
        if name not in self._entries:
            raise BadInput(f"unknown backend {name!r} (known: {', '.join(self.names())})", where="backend.name")
        entry = self._entries[name]
        return _load(name, entry) if isinstance(entry, str) else entry

    def get(self, name: str) -> Backend:
        """A new backend instance; BadInput (key `backend.name`) for an unknown name."""
        factory = self.factory(name)
        backend = factory.create(self) if isinstance(factory, type) and issubclass(factory, Backend) else factory()
        missing = [m for m in REQUIRED_METHODS if not callable(getattr(backend, m, None))]
        if missing:
            raise Failure(f"backend {name!r} ({type(backend).__name__}) lacks {', '.join(missing)}")
        return backend

    def classes(self) -> dict[str, type[Backend]]:
        """Every registered Backend class by name (the facts the manifest checks and the schema read)."""
        return {name: cls for name in self.names() if isinstance(cls := self.factory(name), type)}

    def adapters(self) -> dict[str, Adapter]:
        """The output adapters the command backend may name, by the name of the backend that offers each."""
        return {name: cls.adapter for name, cls in self.classes().items() if cls.adapter is not None}

    def adapter(self, name: str) -> Adapter:
        """The output adapter of backend `name`; BadInput (key `backend.adapter`) when it offers none."""
        factory = self.factory(name) if name in self._entries else None
        found = getattr(factory, "adapter", None)
        if not isinstance(found, Adapter):
            raise BadInput(
                f"unknown adapter {name!r} (known: {', '.join(sorted(self.adapters()))})", where="backend.adapter"
            )
        return found


def _load(name: str, spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise Failure(f"backend {name!r} cannot be loaded from {module_name}: {exc}") from exc
    if not hasattr(module, attribute):
        raise Failure(f"backend {name!r}: {module_name} defines no {attribute}")
    return getattr(module, attribute)


REGISTRY = BackendRegistry()
REGISTRY.register("builtin", "agentrepro.backends.builtin.backend:BuiltinBackend")
REGISTRY.register("command", "agentrepro.backends.command.backend:CommandBackend")
REGISTRY.register("verl-agent", "agentrepro.backends.verl_agent.backend:VerlAgentBackend")
REGISTRY.register("relax", "agentrepro.backends.relax.backend:RelaxBackend")


def get_backend(name: str, registry: BackendRegistry | None = None) -> Backend:
    """The backend registered under `name` (internals.md: `get_backend(name) -> Backend`)."""
    return (registry or REGISTRY).get(name)


def backend_class(name: str, registry: BackendRegistry | None = None) -> type[Backend]:
    """The class registered under `name`, for its facts (block, model forms, container) without an instance."""
    return (registry or REGISTRY).factory(name)
