"""Patch a module when the program imports it: `PatchOnImport({name: patch})`, put first on sys.meta_path, finds
each named module with the usual machinery and, once the module has run, calls its patch with it. Standard library
only; the verl-agent integration (agentrepro_verl_hook.py), its data preparation (agentrepro_verl_prepare.py) and a
rehearsal's GPU boundary (agentrepro_rehearsal.py) patch the framework's modules this way.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from typing import Any


class PatchOnImport(importlib.abc.MetaPathFinder):
    """The finder: `patches` maps a module's full name to what is called with the module once it has run."""

    def __init__(self, patches: dict[str, Callable[[Any], None]]):
        self.patches = patches

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.patches:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self.patches[fullname])
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner, patch: Callable[[Any], None]):
        self.inner, self.patch = inner, patch

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.patch(module)
