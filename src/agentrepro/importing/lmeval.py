"""The lm-eval reader: the per-sample records lm-evaluation-harness writes with `--log_samples`
(`samples_<task>_<date>.jsonl`: lm_eval/evaluator.py builds each record, loggers/evaluation_tracker.py's
`save_results_samples` writes it). A line is one document under one filter: `doc_id`, `doc` (the dataset's row),
`target`, `arguments`, `resps`, `filtered_resps`, `filter` (the filter's name), `metrics` (the names of the
metrics the task's `process_results` gave), `doc_hash` (SHA-256 of the doc as JSON, indent 2, non-ASCII kept),
`prompt_hash`, `target_hash`, then each metric's value under its own name.

One line of the chosen filter is one episode. What lm-eval cannot say is the import's to say: which metric is the
success (`--metric`, a 0/1 value per document such as acc or exact_match), which filter's lines are read
(`--filter`, needed when a file holds more than one: GSM8K's strict-match and flexible-extract), and which field of
`doc` names the panel's task (`--task-field`, default task_id; a dotted path reaches into nested fields); the
records name no method, seed or step either (`--method`, `--seed`, `--step`). A record whose `doc_hash` is not the
hash of its doc (the doc edited after the run) is refused; records from before lm-eval wrote `doc_hash` are read
without that check.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.importing.records import Record
from agentrepro.reading import iter_jsonl

OPTIONS = ("metric", "filter", "task_field")  # the reader's own options, beside the run's method, seed and step


def _given(given: dict[str, Any], path: Path) -> tuple[str, int, int, str]:
    missing = [f"--{k}" for k in ("method", "seed", "step", "metric") if given.get(k) is None]
    if missing:
        raise BadInput(
            f"lm-eval's samples name no run and no success metric: give {', '.join(missing)}",
            path=path,
        )
    return given["method"], given["seed"], given["step"], given["metric"]


def doc_hash(doc: Any) -> str:
    """The hash lm-eval writes as `doc_hash`: SHA-256 of the doc as JSON with indent 2 and non-ASCII kept."""
    return hashlib.sha256(json.dumps(doc, indent=2, ensure_ascii=False).encode("utf-8")).hexdigest()


def _field(doc: dict[str, Any], dotted: str) -> Any:
    value: Any = doc
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _success(sample: dict[str, Any], metric: str, where: str, path: Path) -> int:
    named = sample.get("metrics")
    if not isinstance(named, list) or metric not in named or metric not in sample:
        raise BadInput(
            f"no metric {metric!r} in this sample (its metrics: {named!r})"[:300], path=path, where=f"{where}: metrics"
        )
    value = sample[metric]
    if value in (0, 1) and not isinstance(value, str):  # True, 1, 1.0; False, 0, 0.0
        return int(value)
    raise BadInput(
        f"expected 0 or 1 (a success per document), got {value!r}: {metric!r} is not a success metric"[:300],
        path=path,
        where=f"{where}: {metric}",
    )


def read_lmeval(path: Path, source: int, given: dict[str, Any]) -> list[Record]:
    """One record per line of the chosen filter; BadInput names the file and the line of the first sample that
    cannot be read, repeats a document or whose doc does not match its doc_hash."""
    path = Path(path)
    method, seed, step, metric = _given(given, path)
    task_field = given.get("task_field") or "task_id"
    samples = []
    for line, obj in iter_jsonl(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("doc"), dict):
            raise BadInput("expected an lm-eval sample with a doc object", path=path, where=f"line {line}")
        for key, kind in (("doc_id", int), ("filter", str)):
            if not isinstance(obj.get(key), kind) or isinstance(obj.get(key), bool):
                raise BadInput(
                    f"expected {'a number' if kind is int else 'a name'}", path=path, where=f"line {line}: {key}"
                )
        samples.append((line, obj))
    filters = sorted({obj["filter"] for _, obj in samples})
    chosen = given.get("filter")
    if chosen is None and len(filters) > 1:
        raise BadInput(f"holds the filters {', '.join(filters)}: give --filter", path=path)
    chosen = chosen if chosen is not None else (filters[0] if filters else None)
    records: list[Record] = []
    first: dict[int, int] = {}
    for line, obj in samples:
        if obj["filter"] != chosen:
            continue
        where = f"line {line}"
        if obj["doc_id"] in first:
            raise BadInput(
                f"document {obj['doc_id']} under filter {chosen!r} again (first at line {first[obj['doc_id']]})",
                path=path,
                where=where,
            )
        first[obj["doc_id"]] = line
        if "doc_hash" in obj and obj["doc_hash"] != doc_hash(obj["doc"]):
            raise BadInput(
                "doc_hash is not the SHA-256 of this doc as lm-eval hashes it: the doc changed after the run",
                path=path,
                where=f"{where}: doc_hash",
            )
        task = _field(obj["doc"], task_field)
        if isinstance(task, bool) or not isinstance(task, (str, int)) or not str(task).strip() or len(str(task)) > 1000:
            raise BadInput(
                f"expected the task's id or seed (a string or a number), got {task!r}; --task-field names the doc's "
                "field that holds it"[:300],
                path=path,
                where=f"{where}: doc.{task_field}",
            )
        success = _success(obj, metric, where, path)
        records.append(Record(method, seed, step, str(task).strip(), success, source, line))
    if not records:
        said = f"no sample under filter {chosen!r} (its filters: {', '.join(filters)})" if filters else "no sample"
        raise BadInput(f"holds {said}", path=path)
    return records
