"""Per-call component timers: `Timings` collects seconds per named component (docs/design.md §3.3 timings.jsonl)."""

from __future__ import annotations

import time
from contextlib import contextmanager


class Timings(dict):
    """A dict component → seconds (float); `with t.time("graph_build"): ...` adds the elapsed time."""

    @contextmanager
    def time(self, component: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self[component] = self.get(component, 0.0) + (time.perf_counter() - start)
