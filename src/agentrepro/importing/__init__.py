"""Evaluations the harness did not launch, made outcome rows: `agentrepro import` (cli/imports.py).

A reader turns one tool's files into `Record`s (records.py: method, seed, step, task, success and what else the
tool wrote, each with the file and line it came from); `to_rows` matches every record to a task of a panel frozen
from the same environment and writes the harness's outcome rows, refusing a record whose task is not on the panel
or that repeats another, in one line naming the file and the record. Readers, each `read(path, source, given)`
(`given`: the command line's method, seed and step): `plain` (plain.py: CSV or JSONL of method, seed, step,
task_id, success[, reward, turns, tokens, episode]), `relax` (relax.py: the per-turn records Relax's GraphGPO
agent exports, one episode per trajectory) and `lm-eval` (lmeval.py: lm-evaluation-harness's `--log_samples`
records, one episode per document, with `given` also naming the success metric, the filter and the doc's task
field).
"""

from __future__ import annotations

from agentrepro.importing.imported import READERS, check_import, import_records
from agentrepro.importing.records import Record, to_rows

__all__ = ["READERS", "Record", "check_import", "import_records", "to_rows"]
