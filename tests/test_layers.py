"""The package's import graph (scripts/import_graph.py): every import goes down the layers of docs/design.md §2, no
cycle anywhere (function-body imports included), and a function-body import only for a heavy or optional dependency,
with its reason beside it."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from helpers import REPO, load_file_module

graph = load_file_module("import_graph", REPO / "scripts" / "import_graph.py")

SRC = REPO / "src"
MODULES = graph.modules(SRC)
EDGES = graph.imports(SRC)
# Imported inside a function on purpose: seconds to load, or an extra a user may not have.
HEAVY = ("torch", "scipy", "transformers", "tokenizers", "weasyprint", "PIL", "pypdf", "alfworld", "textworld", "wandb")
# The one place agentrepro imports its own modules inside a function: the builtin backend's trainer (torch), so that
# planning, freezing and auditing never load it.
HEAVY_OWN = {"agentrepro.backends.builtin.backend": "agentrepro.trainer."}


def integration(module: str) -> bool:
    """Framework integrations (hooks/) import each other by their own names inside the framework's processes."""
    return "hooks" in module.split(".")


def test_every_part_has_a_layer():
    """Every module of the package belongs to a part named in LAYERS (a new top-level module must be placed)."""
    assert sorted({graph.part(m) for m in MODULES if m != "agentrepro"} - set(graph.RANK)) == []


def test_imports_go_down_the_layers():
    """No module imports a part of its own layer or above (within its own part anything goes, cycles aside)."""
    assert [f"{e.source}:{e.line} imports {e.target}" for e in graph.upward(EDGES, MODULES)] == []


def test_no_import_cycle_between_modules():
    """The module graph, function-body imports included, has no cycle."""
    assert graph.cycles(EDGES, MODULES) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    """The checks above can fail: a two-module loop and an upward import are found in a tree written for it."""
    package = tmp_path / "agentrepro"
    (package / "errors").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "errors" / "__init__.py").write_text("from agentrepro.errors import b\n")
    (package / "errors" / "b.py").write_text(
        "def f():\n    from agentrepro import reading  # heavy\n    from agentrepro.errors import c\n"
    )
    (package / "errors" / "c.py").write_text("from agentrepro.errors import b\n")
    (package / "reading.py").write_text("")
    edges, known = graph.imports(tmp_path), graph.modules(tmp_path)
    assert graph.cycles(edges, known) == [["agentrepro.errors.b", "agentrepro.errors.c"]]
    assert [e.target for e in graph.upward(edges, known)] == ["agentrepro.reading"]


def test_function_body_imports_are_heavy_or_optional_with_a_reason():
    """An import inside a function is of a heavy or optional dependency (or the builtin backend's trainer), and says
    why on its line; the framework integrations are exempt (they import each other by their own names)."""
    wrong = [
        f"{e.source}:{e.line}: {e.text.strip()}"
        for e in EDGES
        if e.inside
        and not integration(e.source)
        and not (
            (e.target.split(".")[0] in HEAVY or e.target.startswith(HEAVY_OWN.get(e.source, "\0"))) and "#" in e.text
        )
    ]
    assert wrong == []


def test_the_design_states_the_same_layers():
    """docs/design.md states the layer order in one line, the one the checks use."""
    assert graph.layer_line() in (REPO / "docs" / "design.md").read_text(encoding="utf-8")


def test_the_script_prints_the_counts():
    """`python scripts/import_graph.py` prints the counts the design page quotes: no cycle, nothing going up."""
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "import_graph.py")], capture_output=True, text=True, check=True
    )
    assert "cycles 0;" in result.stdout and "parts importing each other 0;" in result.stdout
    assert result.stdout.rstrip().endswith("imports going up the layers 0")


@pytest.mark.parametrize(
    "hook", sorted(p.relative_to(SRC).as_posix() for p in (SRC / "agentrepro").rglob("agentrepro_*.py"))
)
def test_integrations_import_only_the_standard_library_and_each_other(hook):
    """A framework integration imports the standard library and other integrations; agentrepro itself only in the
    fallback used when the harness imports it as part of the package."""
    tree = ast.parse((SRC / hook).read_text(encoding="utf-8"))
    fallback = {
        n.lineno
        for t in ast.walk(tree)
        if isinstance(t, ast.Try)
        for h in t.handlers
        for n in ast.walk(h)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }
    foreign = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in fallback:
            for name in [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]:
                top = name.split(".")[0]
                if (
                    top
                    and top not in sys.stdlib_module_names
                    and not top.startswith("agentrepro_")
                    and top != "__future__"
                ):
                    foreign.append(f"{node.lineno}: {name}")
    assert foreign == []
