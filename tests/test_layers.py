"""The package's import graph: every import goes down the layers of docs/design.md §2, no cycle anywhere (function-body
imports included), and a function-body import only for a heavy or optional dependency, with its reason beside it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import REPO

PACKAGE = REPO / "src" / "agentrepro"
# Bottom to top. A module may import its own part and any part of a lower layer, never one of its own layer or above.
LAYERS = (
    ("errors",),
    ("reading",),
    ("bounds", "fileio"),
    ("layout", "schema", "placement"),
    ("process", "seal", "runconfig"),
    ("attempts",),
    ("hooks", "environments", "algorithms"),
    ("outcomes",),
    ("serving",),
    ("trainer",),
    ("backends",),
    ("analysis",),
    ("manifest",),
    ("planning",),
    ("jobs",),
    ("audit",),
    ("report",),
    ("cli",),
    ("__main__",),
)
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}
# Imported inside a function on purpose: seconds to load, or an extra a user may not have.
HEAVY = ("torch", "transformers", "tokenizers", "weasyprint", "PIL", "alfworld", "textworld", "wandb")
# The one place agentrepro imports its own module inside a function: the builtin backend's trainer (torch), so that
# planning, freezing and auditing never load it.
HEAVY_OWN = {"agentrepro.backends.builtin.backend": "agentrepro.trainer."}
# Imported by a framework's processes by their own names (their folders are on its PYTHONPATH), not as agentrepro.
INTEGRATIONS = ("hooks",)


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def part(module: str) -> str:
    """The layer part of a module: its top-level package or module under agentrepro."""
    return module.split(".")[1] if "." in module else module


def imports(module: str, path: Path) -> list[tuple[str, int, bool, str]]:
    """(imported agentrepro module or third-party name, line, inside a function, source line) of every import."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: list[tuple[str, int, bool, str]] = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, True)
                continue
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in child.names]
            else:
                visit(child, inside)
                continue
            for name in names:
                while name not in MODULES and "." in name and name.startswith("agentrepro"):
                    name = name.rpartition(".")[0]
                found.append((name, child.lineno, inside, lines[child.lineno - 1]))
    visit(ast.parse(source), False)
    return found


GRAPH = {module: imports(module, path) for module, path in MODULES.items()}


def test_every_part_has_a_layer():
    """Every module of the package belongs to a part named in LAYERS (a new top-level module must be placed)."""
    assert sorted({part(m) for m in MODULES if m != "agentrepro"} - set(RANK)) == []


def test_imports_go_down_the_layers():
    """No module imports a part of its own layer or above (within its own part anything goes, cycles aside)."""
    wrong = [f"{m} ({part(m)}) imports {target} ({part(target)}), line {line}"
             for m, edges in GRAPH.items() for target, line, _, _ in edges
             if target.startswith("agentrepro.") and part(target) != part(m) and m != "agentrepro"
             and RANK[part(target)] >= RANK[part(m)]]
    assert wrong == []


def test_no_import_cycle_between_modules():
    """The module graph, function-body imports included, has no cycle (Tarjan's strongly connected components)."""
    edges = {m: {t for t, _, _, _ in e if t in MODULES and t != m} for m, e in GRAPH.items()}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            connect(module)
    assert cycles == []


def test_function_body_imports_are_heavy_or_optional_with_a_reason():
    """An import inside a function is of a heavy or optional dependency (or the builtin backend's trainer), and says
    why on its line; the framework integrations are exempt (they import each other by their own names)."""
    wrong = []
    for m, edges in GRAPH.items():
        if any(p in INTEGRATIONS for p in m.split(".")):
            continue
        for target, line, inside, text in edges:
            if not inside:
                continue
            allowed = target.split(".")[0] in HEAVY or target.startswith(HEAVY_OWN.get(m, "\0"))
            if not allowed or "#" not in text:
                wrong.append(f"{m}:{line}: {text.strip()}")
    assert wrong == []


def test_the_layers_are_the_ones_the_design_states():
    """docs/design.md states the same order, in one line."""
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    line = " → ".join(", ".join(parts) for parts in LAYERS)
    assert line in design


@pytest.mark.parametrize("integration", sorted(p for p in PACKAGE.rglob("agentrepro_*.py")))
def test_integrations_import_only_the_standard_library_and_each_other(integration):
    """A framework integration (hooks/) imports the standard library and other integrations, never agentrepro itself
    except as the fallback used when the harness imports it as part of the package."""
    tree = ast.parse(integration.read_text(encoding="utf-8"))
    fallback = {n.lineno for t in ast.walk(tree) if isinstance(t, ast.Try)
                for h in t.handlers for n in ast.walk(h) if isinstance(n, (ast.Import, ast.ImportFrom))}
    third = []
    import sys
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in fallback:
            for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]):
                top = name.split(".")[0]
                if top and top not in sys.stdlib_module_names and not top.startswith("agentrepro_") and top != "__future__":
                    third.append(f"{integration.name}:{node.lineno}: {name}")
    assert third == []
