"""The import graph of the agentrepro package, and the layer order it must follow (docs/design.md §2).

    python scripts/import_graph.py [--src DIR] [--png FILE] [--title TEXT]

Prints the counts a reviewer asks for (modules, cycles between modules, pairs of parts that import each other,
imports inside function bodies, imports that go up the layers) and, with --png, draws the graph of the package's
parts, bottom layer at the bottom: an arrow per part that imports another, red where it goes up or sideways (a
loop). `--src` reads another tree (e.g. an older commit checked out elsewhere). tests/test_layers.py asserts on
the same graph, with the same LAYERS.
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Bottom to top. A module may import its own part and any part of a lower layer, never one of its own layer or above.
LAYERS = (
    ("errors",),
    ("reading",),
    ("bounds", "fileio"),
    ("layout", "schema", "placement", "software"),
    ("process", "slurm", "cgroups", "seal", "runconfig", "lockfile"),
    ("attempts", "containers", "tracking"),
    ("hooks", "environments", "algorithms"),
    ("outcomes",),
    ("serving", "importing"),
    ("trainer",),
    ("backends",),
    ("analysis",),
    ("manifest",),
    ("planning",),
    ("preflight",),
    ("jobs",),
    ("report",),
    ("audit",),
    ("cli",),
    ("__main__",),
)
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module (agentrepro.x.y)
    target: str  # the imported agentrepro module, or a third-party module name
    line: int
    inside: bool  # inside a function body
    text: str  # the source line


def layer_line() -> str:
    """The layer order in one line, as docs/design.md states it."""
    return " → ".join(", ".join(parts) for parts in LAYERS)


def modules(src: Path) -> dict[str, Path]:
    """agentrepro's modules under `src` (the folder holding the agentrepro package) by dotted name."""
    found = {}
    for path in (src / "agentrepro").rglob("*.py"):
        parts = path.relative_to(src).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def part(module: str) -> str:
    """The layer part of a module: its top-level package or module under agentrepro."""
    return module.split(".")[1] if "." in module else module


def imports(src: Path) -> list[Import]:
    """Every import statement of the package, with agentrepro targets resolved to the module they name."""
    known = modules(src)
    return [edge for module, path in sorted(known.items()) for edge in _module_imports(module, path, known)]


def _module_imports(module: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """The import statements of one module, each marked as inside a function body or not."""
    found: list[Import] = []
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
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
                    kept = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(kept + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in child.names]
            else:
                visit(child, inside)
                continue
            for name in names:
                while name.startswith("agentrepro.") and name not in known and "." in name:
                    name = name.rpartition(".")[0]
                found.append(Import(module, name, child.lineno, inside, lines[child.lineno - 1]))

    visit(ast.parse(source), False)
    return found


def own(edges: list[Import], known: dict[str, Path]) -> list[Import]:
    """The imports of agentrepro's own modules (by another module)."""
    return [e for e in edges if e.target in known and e.target != e.source]


def cycles(edges: list[Import], known: dict[str, Path]) -> list[list[str]]:
    """The cycles between modules (Tarjan's strongly connected components of more than one module)."""
    graph: dict[str, set[str]] = {m: set() for m in known}
    for e in own(edges, known):
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return found


def part_edges(edges: list[Import], known: dict[str, Path]) -> dict[tuple[str, str], int]:
    """(importing part, imported part) -> how many imports, between different parts."""
    counts: dict[tuple[str, str], int] = {}
    for e in own(edges, known):
        key = (part(e.source), part(e.target))
        if key[0] != key[1] and "agentrepro" not in key:
            counts[key] = counts.get(key, 0) + 1
    return counts


def upward(edges: list[Import], known: dict[str, Path]) -> list[Import]:
    """Imports of a part of the importer's own layer or above (parts not in LAYERS count as going up; the package's
    own __init__, which holds only its version, is below everything)."""
    return [
        e
        for e in own(edges, known)
        if part(e.target) != part(e.source)
        and "agentrepro" not in (e.source, e.target)
        and RANK.get(part(e.target), len(LAYERS)) >= RANK.get(part(e.source), -1)
    ]


def summary(src: Path) -> dict[str, object]:
    known = modules(src)
    edges = imports(src)
    pairs = part_edges(edges, known)
    return {
        "modules": len(known),
        "cycles": cycles(edges, known),
        "mutual_parts": sorted({tuple(sorted(k)) for k in pairs if (k[1], k[0]) in pairs}),
        "function_body_imports": sum(1 for e in edges if e.inside),
        "own_function_body_imports": sum(1 for e in own(edges, known) if e.inside),
        "upward": [f"{e.source}:{e.line} -> {e.target}" for e in upward(edges, known)],
    }


def draw(src: Path, png: Path, title: str) -> None:
    """The parts as boxes, one row per layer (parts outside LAYERS in a row on top), an arrow per import between parts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    known = modules(src)
    pairs = part_edges(imports(src), known)
    parts = sorted({p for key in pairs for p in key} | {part(m) for m in known if m != "agentrepro"})
    rows: dict[int, list[str]] = {}
    for p in parts:
        rows.setdefault(RANK.get(p, len(LAYERS)), []).append(p)
    where = {}
    for rank, names in rows.items():
        for i, name in enumerate(sorted(names)):
            where[name] = ((i + 1) / (len(names) + 1), rank)
    fig, ax = plt.subplots(figsize=(9, 0.55 * (max(rows) + 2)))
    for (a, b), n in sorted(pairs.items()):
        (xa, ya), (xb, yb) = where[a], where[b]
        bad = RANK.get(b, len(LAYERS)) >= RANK.get(a, -1)
        ax.annotate(
            "",
            xy=(xb, yb),
            xytext=(xa, ya),
            zorder=1,
            arrowprops={
                "arrowstyle": "-|>",
                "lw": 0.6 + 0.15 * min(n, 10),
                "color": "#c62828" if bad else "#9e9e9e",
                "alpha": 0.9 if bad else 0.5,
                "shrinkA": 9,
                "shrinkB": 9,
                "connectionstyle": "arc3,rad=0.08",
            },
        )
    for name, (x, y) in where.items():
        ax.text(
            x,
            y,
            name,
            ha="center",
            va="center",
            fontsize=8,
            zorder=2,
            bbox={"boxstyle": "round,pad=0.3", "fc": "#e3f2fd" if name in RANK else "#fff3e0", "ec": "#546e7a"},
        )
    facts = summary(src)
    ax.set_title(
        f"{title}\n{facts['modules']} modules, {len(facts['cycles'])} cycles, {len(facts['mutual_parts'])} parts importing "
        f"each other, {len(facts['upward'])} imports going up (red), {facts['own_function_body_imports']} of its own "
        "modules imported inside functions",
        fontsize=8,
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(-1, max(rows) + 1)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(png, dpi=130)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--src", type=Path, default=HERE.parent / "src", help="the folder holding the agentrepro package"
    )
    parser.add_argument("--png", type=Path, help="draw the graph of parts into this file")
    parser.add_argument("--title", default="agentrepro: imports between parts")
    args = parser.parse_args(argv)
    facts = summary(args.src)
    print(
        f"modules {facts['modules']}; cycles {len(facts['cycles'])}; parts importing each other {len(facts['mutual_parts'])}; "
        f"imports inside functions {facts['function_body_imports']} ({facts['own_function_body_imports']} of agentrepro's own); "
        f"imports going up the layers {len(facts['upward'])}"
    )
    if args.png:
        draw(args.src, args.png, args.title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
