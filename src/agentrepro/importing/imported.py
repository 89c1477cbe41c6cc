"""The import's record, `import.json` beside the imported outcomes: what `agentrepro import` read and wrote, and
what is not sealed. `read_import_record` reads one back for the analysis, which carries its summary into
analysis.json (`provenance.imported`) so that the report's first page says, in words, that the outcomes were
imported and what that leaves unproven."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_file
from agentrepro.reading import load_json

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
    record = load_json(path)
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
