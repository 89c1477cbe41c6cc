"""The one reading layer: every file the package reads is decoded, parsed and bounded here.

A hostile or damaged file must end in one `BadInput` line naming the file and the line or key path,
never in a traceback and never in a value that breaks a later stage. The rules, for every reader:

* **Text** is UTF-8, strictly (a leading byte-order mark is dropped); a byte that does not decode is
  refused with its line. Strings may not hold lone surrogates (JSON's `\\ud800` escape) nor control
  characters other than tab, newline and carriage return: every text field of our contracts is text.
  (`reading.text`, which also owns the walk every parsed document ends with, `check_value`.)
* **YAML** is read with PyYAML's safe loader, plus: a duplicate key is an error naming both lines (the
  last one would silently win, and the lock would hash that); nesting deeper than `MAX_DEPTH` and a
  document whose aliases expand past `MAX_NODES` nodes (an "alias bomb") are refused before anything
  walks them; integers must fit in 64 bits and floats must be finite. (`reading.yaml_files`.)
* **JSON / JSONL** refuse `NaN` and `Infinity` (not JSON, though Python writes them), numbers that
  overflow to infinity, integers outside the 64-bit range, and nesting deeper than `MAX_DEPTH`.
  (`reading.json_files`.)

Contract-specific ranges (a seed's maximum, a fraction in [0, 1]) stay with the contract's owner: the
JSON Schemas in workflow/schemas/ and the validators beside each reader. Callers import from
`agentrepro.reading`; the names below are the layer's public ones.
"""

from agentrepro.reading.json_files import MalformedJSON, iter_jsonl, load_json, parse_json, read_jsonl, stdin_lines
from agentrepro.reading.text import (
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    MAX_NODES,
    check_string,
    check_value,
    decode,
    key_path,
    read_bytes,
    read_lines,
    read_text,
)
from agentrepro.reading.yaml_files import load_yaml, parse_yaml

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_DEPTH",
    "MAX_NODES",
    "MalformedJSON",
    "check_string",
    "check_value",
    "decode",
    "iter_jsonl",
    "key_path",
    "load_json",
    "load_yaml",
    "parse_json",
    "parse_yaml",
    "read_bytes",
    "read_jsonl",
    "read_lines",
    "read_text",
    "stdin_lines",
]
