"""Hostile inputs for the reliability suite, and the in-process way of running a verb.

Each *class* of hostile input is a hypothesis strategy of `Hostile(name, text)` values: raw JSON or YAML
text that replaces one leaf of an otherwise valid document (`splice_json`, `splice_yaml`), or a byte
mutation of the whole file (`mutate_bytes`). Every one of them must be refused: there is no place in any
of our contracts where such a value is acceptable, so a verb given one must exit 2 naming the file.

`invoke(argv)` runs `agentrepro.cli.main` in this process (cheap enough for hundreds of examples) and
returns (exit status, stderr); an exception other than SystemExit escapes, which fails the test with
its traceback. `COUNTS` records, per class, the inputs generated, the verbs and readers that saw them,
and the failures; the session writes it to $AGENTREPRO_HOSTILE_COUNTS when that is set.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import sys
import tarfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from agentrepro import cli
from agentrepro.audit.bundle import BUNDLE_SHA256
from agentrepro.fileio import sha256_bytes

CLASSES = (
    "encoding",
    "nesting_and_huge_numbers",
    "nan_and_infinity",
    "duplicates_and_aliases",
    "options",
    "output_paths",
)
COUNTS: dict[str, dict[str, Any]] = defaultdict(lambda: {"inputs": 0, "targets": set(), "failures": 0})
PLACEHOLDER = "__HOSTILE_VALUE__"


def record(klass: str, target: str, ok: bool = True) -> None:
    entry = COUNTS[klass]
    entry["inputs"] += 1
    entry["targets"].add(target)
    entry["failures"] += 0 if ok else 1


@dataclass(frozen=True)
class Hostile:
    klass: str
    name: str
    json_text: str | None = None  # raw JSON text for one value
    yaml_text: str | None = None  # raw YAML flow text for one value


# ------------------------------------------------------------------------------------------ value classes

_DEPTH = st.integers(min_value=65, max_value=3000)
_BIG = st.one_of(
    st.integers(min_value=2**63, max_value=10**60), st.integers(min_value=-(10**60), max_value=-(2**63) - 1)
)


def _nested(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a": ' * depth + "1" + "}" * depth


def encoding_values() -> st.SearchStrategy[Hostile]:
    """Text that is not text: lone surrogates and control characters (as JSON escapes and YAML escapes)."""
    surrogate = st.integers(0xD800, 0xDFFF).map(
        lambda c: Hostile("encoding", f"surrogate U+{c:04X}", f'"\\u{c:04x}"', f'"\\u{c:04x}"')
    )
    controls = st.sampled_from([c for c in range(32) if c not in (9, 10, 13)] + [127])
    control = controls.map(lambda c: Hostile("encoding", f"control U+{c:04X}", f'"a\\u{c:04x}b"', f'"a\\x{c:02x}b"'))
    return st.one_of(surrogate, control)


def nesting_values() -> st.SearchStrategy[Hostile]:
    """Nesting past the bound, and integers beyond 64 bits (also with thousands of digits)."""
    deep = st.builds(
        lambda d, k: Hostile(
            "nesting_and_huge_numbers", f"depth {d} {k}", _nested(d, k), _nested(d, k).replace('"a": ', "a: ")
        ),
        _DEPTH,
        st.sampled_from(["list", "map"]),
    )
    big = _BIG.map(lambda n: Hostile("nesting_and_huge_numbers", f"integer {str(n)[:12]}..", str(n), str(n)))
    digits = st.integers(100, 6000).map(lambda k: Hostile("nesting_and_huge_numbers", f"{k} digits", "7" * k, "7" * k))
    return st.one_of(deep, big, digits)


def nan_values() -> st.SearchStrategy[Hostile]:
    """NaN and infinities: JSON's non-standard tokens, overflowing literals, YAML's .nan/.inf."""
    json_tokens = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "1.7976931348623159e308"])
    yaml_tokens = st.sampled_from([".nan", ".NaN", ".inf", "-.inf", "+.Inf", "1.0e+999"])
    return st.builds(lambda j, y: Hostile("nan_and_infinity", f"{j} / {y}", j, y), json_tokens, yaml_tokens)


def any_value() -> st.SearchStrategy[Hostile]:
    return st.one_of(encoding_values(), nesting_values(), nan_values())


# ------------------------------------------------------------------------------------------ splicing


def leaves(obj: Any, parts: tuple = ()) -> list[tuple]:
    """Key paths of every scalar (and empty container) in a JSON-like document."""
    if isinstance(obj, dict) and obj:
        return [p for k, v in obj.items() for p in leaves(v, (*parts, k))]
    if isinstance(obj, list) and obj:
        return [p for i, v in enumerate(obj) for p in leaves(v, (*parts, i))]
    return [parts]


def _replace(obj: Any, parts: tuple, value: Any) -> Any:
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if isinstance(obj, dict):
        return {k: (_replace(v, rest, value) if k == head else v) for k, v in obj.items()}
    return [(_replace(v, rest, value) if i == head else v) for i, v in enumerate(obj)]


def splice_json(doc: Any, index: int, value: Hostile, *, indent: int | None = 2) -> str:
    """`doc` as JSON text with the `index`-th leaf (mod their number) replaced by the hostile raw text."""
    if value.json_text is None:
        raise ValueError(f"{value.name} has no JSON text")
    paths = leaves(doc)
    text = json.dumps(_replace(doc, paths[index % len(paths)], PLACEHOLDER), indent=indent)
    return text.replace(json.dumps(PLACEHOLDER), value.json_text, 1)


def splice_yaml(doc: Any, index: int, value: Hostile) -> str:
    if value.yaml_text is None:
        raise ValueError(f"{value.name} has no YAML text")
    paths = leaves(doc)
    text = yaml.safe_dump(
        _replace(doc, paths[index % len(paths)], PLACEHOLDER), sort_keys=False, default_flow_style=None, width=10**6
    )
    return text.replace(PLACEHOLDER, value.yaml_text, 1)


def duplicate_key_line(text: str, index: int) -> str | None:
    """YAML text with one `key: value` line repeated right after itself (the same key twice in one mapping)."""
    lines = text.splitlines(keepends=True)
    candidates = [
        i
        for i, line in enumerate(lines)
        if ": " in line and not line.lstrip().startswith(("- ", "#")) and not line.rstrip().endswith(":")
    ]
    if not candidates:
        return None
    i = candidates[index % len(candidates)]
    return "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])


def alias_bomb(levels: int, width: int) -> str:
    """A YAML "billion laughs": each level lists the previous one `width` times."""
    rows = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    rows += [f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * width)}]" for k in range(1, levels)]
    return "\n".join(rows) + "\n"


def mutate_bytes(data: bytes, position: int, junk: bytes) -> bytes:
    """`data` with `junk` (bytes that cannot be UTF-8) inserted at `position` (mod its length)."""
    at = position % (len(data) + 1)
    return data[:at] + junk + data[at:]


NOT_UTF8 = st.sampled_from(
    [b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\x80abc", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"]
)


# ------------------------------------------------------------------------------------------ running verbs


class _Stdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)

    def readline(self) -> str:
        return self.buffer.readline().decode("utf-8", "replace")

    def __iter__(self):
        return iter(self.buffer.read().decode("utf-8", "replace").splitlines(keepends=True))


def invoke(*argv: Any, stdin: bytes = b"") -> tuple[int, str]:
    """Run `agentrepro ARGV` in this process; (exit status, stderr then stdout). Any other exception propagates.

    (audit lists its problems on stdout; every other verb's message is on stderr.)
    """
    err, out = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = _Stdin(stdin)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                status = cli.main([str(a) for a in argv])
            except SystemExit as exc:  # argparse's usage errors
                status = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = old_stdin
    return status, err.getvalue() + out.getvalue()


def refused(status: int, stderr: str, *names: Any, allowed: tuple[int, ...] = (2,)) -> bool:
    """The verb exited with one of `allowed` and its message names one of `names` (files or options)."""
    return status in allowed and any(str(n) in stderr for n in names) and "Traceback" not in stderr


def fresh_copy(src: Path, dst: Path) -> Path:
    import shutil

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def step_rows(n: int) -> list[dict[str, Any]]:
    """`n` valid step rows of one group (an advantages input): the first fails its episode, the others succeed."""
    return [
        {
            "group": "g0",
            "traj": f"t{i}",
            "turn": 0,
            "state": "s0",
            "next_state": "success" if i else "s1",
            "reward": float(i),
            "episode_reward": float(i),
            "valid": True,
            "success": bool(i),
        }
        for i in range(n)
    ]


def pick(seq: list, index: int) -> Any:
    return seq[index % len(seq)]


def shuffled(seq: list, seed: int) -> list:
    out = list(seq)
    random.Random(seed).shuffle(out)
    return out


# ------------------------------------------------------------------------------------------ whole-file attacks


@dataclass(frozen=True)
class Attack:
    """One hostile edit of a valid document: `render(fmt, doc)` gives the file's bytes, `klass` its class."""

    klass: str
    mode: str  # "value", "bytes" or "duplicate"
    value: Hostile | None = None
    index: int = 0
    junk: bytes = b""

    def render(self, fmt: str, doc: Any) -> bytes:
        if self.mode == "duplicate":
            text = self._duplicate(fmt, doc)
            if text is not None:
                return text.encode()
        if self.mode == "bytes":
            return mutate_bytes(render_plain(fmt, doc).encode(), self.index, self.junk)
        value = self.value or Hostile("nan_and_infinity", "NaN", "NaN", ".nan")
        if fmt == "yaml":
            return splice_yaml(doc, self.index, value).encode("utf-8", "surrogatepass")
        if fmt == "json":
            return splice_json(doc, self.index, value).encode("utf-8", "surrogatepass")
        rows = list(doc)
        line = self.index % len(rows)
        return "".join(
            (splice_json(r, self.index, value, indent=None) if i == line else json.dumps(r)) + "\n"
            for i, r in enumerate(rows)
        ).encode("utf-8", "surrogatepass")

    def _duplicate(self, fmt: str, doc: Any) -> str | None:
        """The document with one key given twice (YAML: a repeated line; JSON: a repeated first pair), or None."""
        if fmt == "yaml":
            return duplicate_key_line(yaml.safe_dump(doc, sort_keys=False), self.index)
        rows = [doc] if fmt == "json" else list(doc)
        line = self.index % len(rows)
        if not isinstance(rows[line], dict) or not rows[line]:
            return None
        key = list(rows[line])[self.index % len(rows[line])]
        twice = "{" + json.dumps(key) + ": " + json.dumps(rows[line][key]) + ", " + json.dumps(rows[line])[1:]
        if fmt == "json":
            return twice
        return "".join((twice if i == line else json.dumps(r)) + "\n" for i, r in enumerate(rows))

    def klass_for(self, fmt: str, doc: Any) -> str:
        """The class actually rendered (a duplicate that cannot be made falls back to a NaN value)."""
        return "nan_and_infinity" if self.mode == "duplicate" and self._duplicate(fmt, doc) is None else self.klass


def render_plain(fmt: str, doc: Any) -> str:
    if fmt == "yaml":
        return yaml.safe_dump(doc, sort_keys=False)
    if fmt == "json":
        return json.dumps(doc, indent=2)
    return "".join(json.dumps(r) + "\n" for r in doc)


INDEXES = st.integers(min_value=0, max_value=10**6)


def attacks(*, duplicates: bool = True) -> st.SearchStrategy[Attack]:
    """Every class of hostile file edit: a hostile value, bytes that are not UTF-8, a key given twice."""
    value = st.builds(lambda v, i: Attack(v.klass, "value", v, i), any_value(), INDEXES)
    junk = st.builds(lambda j, i: Attack("encoding", "bytes", None, i, j), NOT_UTF8, INDEXES)
    options = [value, junk]
    if duplicates:
        options.append(st.builds(lambda i: Attack("duplicates_and_aliases", "duplicate", None, i), INDEXES))
    return st.one_of(*options)


def forge_bundle(members: dict[str, bytes], path: Path) -> Path:
    """Write `members` as a bundle whose BUNDLE.sha256 matches them (a consistent forgery)."""
    members = {k: v for k, v in members.items() if k != BUNDLE_SHA256}
    sums = "".join(f"{sha256_bytes(data)}  {name}\n" for name, data in sorted(members.items()))  # plain names only
    members = {BUNDLE_SHA256: sums.encode(), **members}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue()))
    return path
