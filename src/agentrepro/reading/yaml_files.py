"""YAML documents for the reading layer (see agentrepro.reading).

`parse_yaml`/`load_yaml` use PyYAML's safe loader (libyaml's with `fast`), plus: a duplicate key is an error
naming both lines (the last one would silently win, and the lock would hash that); nesting deeper than
`MAX_DEPTH` and a document whose aliases expand past `MAX_NODES` values (an "alias bomb") are refused before
anything walks them; over-long integer literals are refused before int() sees them. The result is walked with
`text.check_value` (64-bit integers, finite floats, JSON's types only).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import yaml

from agentrepro.errors import BadInput
from agentrepro.reading.text import (
    MAX_DEPTH,
    MAX_INT_CHARS,
    MAX_NODES,
    check_value,
    decode,
    describe_char,
    read_bytes,
    short_int,
)


class _Checks:
    """Constructor checks shared by both loaders: duplicate keys, over-long integer literals."""

    _path: object = None

    def _bad(self, message: str, mark) -> BadInput:
        return BadInput(message, path=self._path, where=f"line {mark.line + 1}" if mark else None)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:
                    raise self._bad(
                        "a mapping key must be a plain value, not a list or mapping", key_node.start_mark
                    ) from None
                if first is not None:
                    raise self._bad(
                        f"duplicate key {key!r} (first at line {first}): the last one would silently win",
                        key_node.start_mark,
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_expansion(node, self)
        return node

    def construct_yaml_int(self, node):
        text = str(node.value).replace("_", "").lstrip("+-")
        if len(text) > MAX_INT_CHARS:
            raise self._bad(f"integer {short_int(str(node.value))} is outside the 64-bit range", node.start_mark)
        return super().construct_yaml_int(node)  # the 64-bit range is checked by check_value, with the key path


class _BoundedLoader(_Checks, yaml.SafeLoader):
    """PyYAML's pure safe loader, plus the checks and a nesting bound applied while composing."""

    def __init__(self, stream, path: object):
        super().__init__(stream)
        self._path, self._depth = path, 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self._bad(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_expansion(root, loader: _Checks) -> None:
    """Refuse a node graph whose aliases expand past MAX_NODES, before anything walks it (an "alias bomb").

    Sizes are memoised per node, so this costs one pass over the distinct nodes.
    """
    sizes: dict[int, int] = {}
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        if id(node) in sizes:
            continue
        sizes[id(node)] = 1
        order.append(node)
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
    for node in reversed(order):  # children before parents (a parent is pushed before its children)
        if isinstance(node, yaml.SequenceNode):
            total = 1 + sum(sizes[id(c)] for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            total = 1 + sum(sizes[id(c)] for pair in node.value for c in pair)
        else:
            continue
        if total > MAX_NODES:
            raise loader._bad(
                f"aliases expand this document past {MAX_NODES:,} values (an alias bomb?)", node.start_mark
            )
        sizes[id(node)] = total


def _construct_int(loader: Any, node: yaml.Node) -> Any:
    """The int constructor both loaders register: PyYAML's table holds SafeConstructor's own function, so the
    bounded `_Checks.construct_yaml_int` is reached only through this."""
    return loader.construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_LOADERS: list[Callable[[str, object], Any]] = [_BoundedLoader]
if hasattr(yaml, "CSafeLoader"):  # libyaml: ~20x faster on large run configs; it bounds nesting itself (1000)

    class _BoundedCLoader(_Checks, yaml.CSafeLoader):
        def __init__(self, stream, path: object):
            super().__init__(stream)
            self._path = path

    _BoundedCLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    _LOADERS.append(_BoundedCLoader)


def parse_yaml(text: str, *, path: object = None, fast: bool = False) -> Any:
    """Parse YAML text with the bounded safe loader; any problem is BadInput naming `path` and the line.

    `fast` uses libyaml where PyYAML has it (same checks; a nesting error then names a column of line 1 less
    precisely); for large machine-written files such as resolved configs.
    """
    loader = None
    try:
        loader = _LOADERS[-1 if fast else 0](text, path)
        obj = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise BadInput(f"YAML syntax error: {exc.problem or exc}", path=path, where=where) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise BadInput(
            f"{describe_char(chr(exc.character)) if isinstance(exc.character, int) else 'unreadable character'} "
            "in YAML",
            path=path,
            where=f"line {line}",
        ) from None
    except yaml.YAMLError as exc:
        raise BadInput(f"YAML error: {exc}", path=path) from None
    except RecursionError:
        raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path) from None
    finally:
        if loader is not None:
            loader.dispose()
    return check_value(obj, path=path)


def load_yaml(path: str | os.PathLike, *, missing: str = "file not found", fast: bool = False) -> Any:
    """A YAML file, decoded and parsed with the bounds above; BadInput names the file and the line."""
    return parse_yaml(decode(read_bytes(path, missing=missing), path=path), path=path, fast=fast)
