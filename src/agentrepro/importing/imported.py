"""An import as a whole: `import_records` reads the files with a reader and makes the outcome rows and the
import's record, `import.json` beside them (what was read and written, and what is not sealed); `check_import`
derives the rows again from the files the record names and compares (`agentrepro audit --import DIR`);
`read_import_record` reads one back for the analysis, which carries its summary into analysis.json
(`provenance.imported`) so that the report's first page says, in words, that the outcomes were imported and what
that leaves unproven."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from agentrepro import outcomes
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_file
from agentrepro.importing.lmeval import read_lmeval
from agentrepro.importing.plain import read_plain
from agentrepro.importing.records import to_rows
from agentrepro.importing.relax import read_relax
from agentrepro.layout import RunFiles
from agentrepro.reading import iter_jsonl, load_json
from agentrepro.seal import OUTPUTS, verify_outputs

READERS = {"plain": read_plain, "relax": read_relax, "lm-eval": read_lmeval}

IMPORT_RECORD = "import.json"
UNSEALED = (
    "no lock froze the training before it ran: its configuration, seeds and panel were not fixed in advance",
    "no image, commit or model revision is proven: the records name none that the harness checked",
    "no checkpoint: the outcomes cannot be re-derived by `agentrepro audit --re-eval`",
)


def _strings(value: Any, path: Path, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadInput("expected a list of strings", path=path, where=where)
    return value


def read_import_record(path: str | Path) -> dict[str, Any]:
    """The summary of an import's record the analysis keeps: the record's hash, the format, each source file (path,
    SHA-256, records), the method x seed pairs missing, the fields the sources lacked and what is not sealed.
    BadInput names the file and the field."""
    path = Path(path)
    return _summary(load_json(path), path)


def _summary(record: Any, path: Path) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise BadInput("expected a JSON object", path=path)
    files = record.get("files")
    if not isinstance(files, list) or not all(
        isinstance(f, dict)
        and isinstance(f.get("path"), str)
        and isinstance(f.get("sha256"), str)
        and isinstance(f.get("records"), int)
        for f in files
    ):
        raise BadInput("expected a list of {path, sha256, records}", path=path, where="files")
    if not isinstance(record.get("format"), str):
        raise BadInput("expected the name of a reader", path=path, where="format")
    absent = record.get("absent")
    if not isinstance(absent, dict) or not all(isinstance(n, int) for n in absent.values()):
        raise BadInput("expected {field: records without it}", path=path, where="absent")
    return {
        "record": {"path": path.as_posix(), "sha256": sha256_file(path)},
        "format": record["format"],
        "files": [{k: f[k] for k in ("path", "sha256", "records")} for f in files],
        "partial": _strings(record.get("partial"), path, "partial"),
        "absent": absent,
        "unsealed": _strings(record.get("unsealed"), path, "unsealed"),
    }


def _groups(rows: list[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["method"], row["seed"], row["step"]), []).append(row)
    return groups


def import_records(
    files: list[str],
    *,
    fmt: str,
    given: dict[str, Any],
    env: dict[str, Any],
    panel: list[dict[str, Any]],
    study: str,
    command: str,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(outcome rows, the import's record) of `files` read by the `fmt` reader (`given`: the command line's method,
    seed and step) against `panel`, frozen from `env` ({name, params}); BadInput names the file and the line of the
    first record that cannot be used."""
    records = [record for index, path in enumerate(files) for record in READERS[fmt](Path(path), index, given)]
    rows, sources, absent = to_rows(records, panel, study=study, category=env["name"], files=files)
    for (method, seed, step), group in _groups(rows).items():  # the harness's own checks of each evaluation's rows
        evaluation = {"task_panel": panel, "episodes_per_task": 1 + max(r["episode"] for r in group)}
        config = {"study": study, "method": method, "seed": seed, "eval": evaluation}
        outcomes.check_rows(group, config=config, step=step, source=f"the rows imported for {method} seed {seed}")
    matrix = Counter((r["method"], r["seed"]) for r in rows)
    methods, seeds = sorted({m for m, _ in matrix}), sorted({s for _, s in matrix})
    record = {
        "study": study,
        "format": fmt,
        "given": given,
        "command": command,
        "files": [
            {"path": path, "sha256": sha256_file(path), "records": sum(r.source == i for r in records)}
            for i, path in enumerate(files)
        ],
        "env": env,
        "task_panel": panel,
        "rows": len(rows),
        "sources": [{"file": i, "line": line} for i, line in sources],
        "absent": {
            f"{field} (0 written)" if field != "reward" else "reward (success written)": n
            for field, n in absent.items()
        },
        "matrix": {m: {str(s): matrix[(m, s)] for s in seeds if (m, s) in matrix} for m in methods},
        "partial": outcomes.matrix_gaps(matrix),
        "unsealed": list(UNSEALED),
    }
    return rows, record


def check_import(folder: str | Path) -> list[str]:
    """Problems of an import's folder, one line each: its seal; each source file the record names (paths as given
    to `agentrepro import`, from the current directory) against its hash; and, where every file is as imported,
    the rows derived again from them against outcomes.jsonl and the record's sources, row by row."""
    folder = Path(folder)
    problems = verify_outputs(folder / OUTPUTS) if (folder / OUTPUTS).is_file() else [f"{folder / OUTPUTS}: missing"]
    record = load_json(folder / IMPORT_RECORD)
    if not isinstance(record, dict) or record.get("format") not in READERS:
        return [*problems, f"{folder / IMPORT_RECORD}: not the record of an import"]
    try:
        summary = _summary(record, folder / IMPORT_RECORD)
    except BadInput as exc:
        return [*problems, str(exc)]
    for f in summary["files"]:
        if not Path(f["path"]).is_file():
            problems.append(f"{f['path']}: missing (imported with sha256 {f['sha256'][:16]})")
        elif sha256_file(f["path"]) != f["sha256"]:
            problems.append(f"{f['path']}: changed since it was imported (its sha256 differs from the record's)")
    if problems:
        return problems
    files = [f["path"] for f in summary["files"]]
    try:
        rows, again = import_records(
            files,
            fmt=record["format"],
            given=record.get("given") or {},
            env=record["env"],
            panel=record["task_panel"],
            study=record["study"],
            command=record.get("command", ""),
        )
    except (BadInput, KeyError, TypeError) as exc:
        return [f"{folder / IMPORT_RECORD}: the records cannot be imported again: {exc}"]
    written = [row for _, row in iter_jsonl(folder / RunFiles.OUTCOMES)]
    for number, (old, new) in enumerate(zip(written, rows), start=1):
        if old != new:
            fields = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            problems.append(
                f"{folder / RunFiles.OUTCOMES}: row {number}: {', '.join(fields)} not what the records give"
            )
    if len(written) != len(rows):
        problems.append(f"{folder / RunFiles.OUTCOMES}: {len(written)} row(s), the records give {len(rows)}")
    if record.get("sources") != again["sources"]:
        problems.append(f"{folder / IMPORT_RECORD}: sources: not the records' lines")
    return problems
