"""The user documentation holds together: every relative link of README.md and docs/ reaches a file (and, for a
page, its heading), every Python name and repository path they (and pyproject.toml and the Makefile) cite exists,
design.md lists every verb, and the README stays short enough for a newcomer."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest
from helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
README_MAX_LINES = 160
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:


def _outside_fences(text: str):
    """The lines of `text` outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation (backticks included) dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page, repeated headings numbered as GitHub numbers them (-1, -2, ...)."""
    seen: dict[str, int] = {}
    for line in _outside_fences(page.read_text(encoding="utf-8")):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            seen[base] = seen.get(base, -1) + 1
    return {base if n == 0 else f"{base}-{n}" for base, count in seen.items() for n in range(count + 1)}


def links(page: Path) -> list[str]:
    """The link and image targets of a page's prose (fenced code blocks and code spans hold none)."""
    return [
        m.group(1)
        for line in _outside_fences(page.read_text(encoding="utf-8"))
        for m in LINK.finditer(CODE_SPAN.sub("``", line))
    ]


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file, or whose heading in a Markdown page, does not exist."""
    broken = []
    for target in links(page):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    """Each relative link or image of README.md and docs/ names an existing file, and an existing heading of a page."""
    assert broken_links(page) == []


def test_the_link_check_finds_a_broken_link(tmp_path):
    """The check reports a missing file, a missing heading and a link to an existing heading as it should."""
    (tmp_path / "other.md").write_text("# Title\n\n## A `code` heading (with: punctuation)\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-with-punctuation) [gone](missing.md) [bad](other.md#nope)\n"
        "`[in code](missing2.md)` [web](https://example.org/x)\n```\n[fenced](missing3.md)\n```\n",
        encoding="utf-8",
    )
    problems = broken_links(page)
    assert len(problems) == 2
    assert problems[0].startswith("missing.md: no file") and problems[1].startswith("other.md#nope: no heading")


def test_the_readme_stays_short():
    """README.md is a newcomer's page: under 160 lines, the reference material lives in docs/."""
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"


# -- cited names --------------------------------------------------------------------------------------------------
PACKAGE = REPO / "src" / "agentrepro"
CITING = [*PAGES, REPO / "pyproject.toml", REPO / "Makefile"]
#: a dotted name in a code span, with an optional call: `agentrepro.layout.hf_checkpoint`, `outcomes.row(...)`
DOTTED = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?P<call>\(.*\))?$")
#: a path ending in a source or text file's extension, anywhere in a line (not part of a URL, a placeholder or a glob)
PATH = re.compile(
    r"(?<![\w/.<>{}*~$:-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:py|smk|md|sh|toml|yaml|yml|j2|css))(?![\w/])"
)
#: the last part of a file's name, not of a Python name (`outcomes.jsonl`)
FILE_SUFFIXES = {"json", "jsonl", "parquet", "csv", "yaml", "yml", "md", "html", "pdf", "png", "txt", "sha256", "pt"}
#: paths extending.md invents for its worked example of a fifth backend
EXAMPLE_PATHS = re.compile(r"(^|/)(openrlhf|test_openrlhf\.py)(/|$)")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def _defined(body: list[ast.stmt]) -> dict[str, ast.ClassDef | None]:
    """The names a module or class body binds at its top level (classes kept, to look inside them)."""
    names: dict[str, ast.ClassDef | None] = {}
    for node in body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = None
        elif isinstance(node, ast.Assign):
            names.update({t.id: None for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
    return names


def python_name_exists(name: str, package: Path = PACKAGE) -> bool:
    """Whether `a.b.c` names a module of the package, or something a module or one of its classes defines. The name
    is read from the package (`agentrepro.a.b`, `a.b`) or, as pages write within a section on one part, from any of
    its folders (`client.ChatClient` in serving/)."""
    if name.startswith("agentrepro."):
        return _exists_under(package, name.split(".")[1:])
    folders = [package, *(p for p in sorted(package.rglob("*")) if p.is_dir() and p.name != "__pycache__")]
    return any(_exists_under(folder, name.split(".")) for folder in folders)


def _exists_under(folder: Path, parts: list[str]) -> bool:
    where, i = folder, 0
    while i < len(parts) and (where / parts[i]).is_dir():
        where, i = where / parts[i], i + 1
    if i < len(parts) and (where / f"{parts[i]}.py").exists():
        where, i = where / f"{parts[i]}.py", i + 1
    elif where.is_dir():
        where = where / "__init__.py"
    if i == 0 or not where.exists():
        return i > 0 and i == len(parts)
    scope: dict[str, ast.ClassDef | None] = _defined(ast.parse(where.read_text(encoding="utf-8")).body)
    for depth, part in enumerate(parts[i:], start=i + 1):
        if part not in scope:
            return False
        node = scope[part]
        if node is None:
            return depth == len(parts)
        scope = _defined(node.body)
    return True


def cited_python_names(text: str, package: Path = PACKAGE) -> list[str]:
    """The dotted names of `text`'s code spans that claim to be agentrepro's: those written `agentrepro.…`, those whose
    first part is a top-level module of agentrepro (`planning.StudyPlan`), and those whose first part is a package of
    agentrepro and that are written as a call or whose second part is one of its modules (so that manifest keys such
    as `eval.tasks`, framework keys such as `trainer.nnodes` and file names such as `analysis.json` are not taken for
    Python, nor a call on a variable such as `plan.job(...)`)."""
    parts = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    found = []
    for span in CODE_SPAN.findall(text):
        match = DOTTED.match(span.strip("`").strip())
        if not match:
            continue
        name = match.group("name")
        if name.rsplit(".", 1)[1] in FILE_SUFFIXES:
            continue
        first, second = name.split(".")[:2]
        module = package / first / f"{second}.py"
        top_module = (package / f"{first}.py").exists()
        ours = first in parts and (match.group("call") or module.exists())
        if name.startswith("agentrepro.") or top_module or ours:
            found.append(name)
    return found


def cited_paths(text: str) -> list[str]:
    """The repository paths a page's prose and code spans cite (fenced examples excluded)."""
    return [m.group(1) for line in _outside_fences(text) for m in PATH.finditer(line)]


def missing_path(path: str, page: Path, tracked: list[str]) -> bool:
    """Whether a cited path that claims to be the repository's is not there. A path is the repository's when its
    first part is a top-level entry of the repository or of the package (`backends/relax/recipe.py`), or it is a
    bare test or benchmark file name; other paths (the frameworks' own files) are not ours to check."""
    if EXAMPLE_PATHS.search(path):
        return False
    first = path.split("/")[0]
    top = {t.split("/")[0] for t in tracked}
    if any(part.split(".")[0].isupper() for part in path.split("/")) or (page.parent / path).exists():
        return False  # a placeholder (manifests/STUDY.yaml), or a path relative to the page
    if "/" not in path:
        return path.startswith(("test_", "bench_")) and path not in {Path(t).name for t in tracked}
    if first == "agentrepro":
        return not (REPO / "src" / path).exists()
    if first in top or (PACKAGE / first).exists():
        return not ((REPO / path).exists() or (PACKAGE / path).exists())
    return False


@pytest.mark.parametrize("page", CITING, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cited_name_and_path_exists(page):
    """Each agentrepro name (`layout.hf_checkpoint`) and repository path (`tests/test_docs.py`) a page cites exists."""
    text = page.read_text(encoding="utf-8")
    tracked = _tracked()
    gone = [name for name in cited_python_names(text) if not python_name_exists(name)]
    gone += [path for path in cited_paths(text) if missing_path(path, page, tracked)]
    assert gone == []


def test_the_name_check_finds_a_stale_name(tmp_path):
    """A renamed function, a moved module, a call to a gone name and a removed test file are reported; a manifest key,
    an output file's name and a framework's own path are not."""
    text = (
        "`backends.base.Backend.checkpoint` `agentrepro.layout.hf_checkpoint` `layout.nothing_here(run)` "
        "`backends.outcomes.row(identity)` `agentrepro.backends.base.Backend.nope` `eval.tasks` `analysis.json` "
        "`trainer.total_epochs` `planning.planned_steps`\n"
    )
    names = cited_python_names(text)
    assert [n for n in names if not python_name_exists(n)] == [
        "layout.nothing_here",
        "backends.outcomes.row",
        "agentrepro.backends.base.Backend.nope",
        "planning.planned_steps",
    ]
    tracked = _tracked()
    paths = cited_paths("see tests/test_docs.py, test_ray_job.py, backends/ray_launch.py and recipe/GraphGPO/x.sh\n")
    assert [p for p in paths if missing_path(p, REPO / "README.md", tracked)] == [
        "test_ray_job.py",
        "backends/ray_launch.py",
    ]


def test_design_lists_every_verb():
    """docs/design.md's command line section names every verb `agentrepro --help` offers."""
    from agentrepro.cli import VERBS

    section = (REPO / "docs" / "design.md").read_text(encoding="utf-8").split("### 3.7 Command line", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert sorted(set(VERBS) - set(re.findall(r"[a-z]+", section))) == []
