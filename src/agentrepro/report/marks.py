"""Marks on the values the report prints from analysis.json, so that the audit can check each against its recount.

`sourced(doc)` copies the parts of analysis.json the page prints (SOURCED: settings, bottom line, tables, notes,
parity checks, certificate) with every number and string wrapped in a subclass that remembers where it came from:
`at`, a path such as `tables/methods/3/mean` (keys and list indices joined by `/`). The formatters here (`FILTERS`
for the template; `pct`, `pp`, ... for summary.py) print such a value as

    <data data-at="tables/methods/3/mean" data-f="pct">65.4%</data>

an HTML element that shows its text as it is and carries the path and the name of the formatter that printed it
(agentrepro.analysis.format.FORMATS; `seconds:min` for a duration in a fixed unit). The audit
(agentrepro.audit.report) formats the recomputed value at that path the same way and compares the text. A value
derived in the page, or null, prints bare. Booleans stay plain booleans.
"""

from __future__ import annotations

from markupsafe import Markup

from agentrepro.analysis import format as fmt

SOURCED = ("settings", "bottom_line", "tables", "notes", "parity", "certificate")
MARK = Markup('<data data-at="{}" data-f="{}">{}</data>')


class SourcedFloat(float):
    at: str


class SourcedInt(int):
    at: str


class SourcedStr(str):
    at: str


def _wrap(value, at: str):
    if isinstance(value, dict):
        return {k: _wrap(v, f"{at}/{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_wrap(v, f"{at}/{i}") for i, v in enumerate(value)]
    kind = {float: SourcedFloat, int: SourcedInt, str: SourcedStr}.get(type(value))
    if kind is None:
        return value  # None, booleans, and values already sourced
    out = kind(value)
    out.at = at
    return out


def sourced(doc: dict) -> dict:
    """`doc` (a validated analysis.json) with the values of SOURCED parts wrapped (see the module docstring)."""
    return {k: _wrap(v, k) if k in SOURCED else v for k, v in doc.items()}


def mark(name: str, text: str, *values) -> Markup | str:
    """`text` (what formatter `name` printed for `values`) marked with the values' paths when every one is sourced."""
    ats = [at for at in (getattr(v, "at", None) for v in values) if at]
    return MARK.format(" ".join(ats), name, text) if values and len(ats) == len(values) else text


def _marking(name: str):
    def formatter(*values):
        return mark(name, fmt.FORMATS[name](*values), *values)

    formatter.__name__ = name
    return formatter


pct, pp, ci, pvalue, share, number, tol, said, verdict, status = (
    _marking(n) for n in ("pct", "pp", "ci", "pvalue", "share", "number", "tol", "text", "verdict", "status")
)


def seconds(value, unit: str | None = None) -> Markup | str:
    """A duration; with `unit`, in that unit (one unit for a column, `format.unit_for`)."""
    return mark(f"seconds:{unit}" if unit else "seconds", fmt.seconds(value, unit), value)


def cell(value, column, unit: str | None = None) -> Markup | str:
    """A value of an analysis-contract column, formatted by its kind (null: what the column says null means)."""
    name = fmt.kind_format(column)
    if name == "seconds" and unit:
        name = f"seconds:{unit}"
    return mark(name, fmt.cell(value, column, unit), value) if value is not None else fmt.cell(value, column, unit)


def sentence(value) -> Markup | str:
    """A sentence of the analysis in words, its leading 'Label:' in bold; marked as one text value (the mark's text is
    the whole sentence, as the audit reads it)."""
    label, colon, rest = str(value).partition(": ")
    shown = Markup("<strong>{}:</strong> {}").format(label, rest) if colon and len(label.split()) <= 3 else str(value)
    return MARK.format(value.at, "text", shown) if getattr(value, "at", None) else shown


FILTERS = {
    "pct": pct,
    "pp": pp,
    "ci": ci,
    "pvalue": pvalue,
    "seconds": seconds,
    "share": share,
    "number": number,
    "tol": tol,
    "said": said,
    "verdict": verdict,
    "status": status,
    "cell": cell,
    "sentence": sentence,
}
