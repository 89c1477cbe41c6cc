"""How the analysis's values are written for people: rates are fractions in the data and percentages on the page.

The report prints every value of analysis.json through these functions, and the audit formats its recomputed
values through them to check what the report printed (`FORMATS` names each, as the report's marks do).
Every function maps a missing value (None) to an em dash, so that an absent number is visibly absent.
Negative numbers use the typographic minus sign. A value is one unbreakable unit on the page and in the
PDF: the space between a number and its unit and the one inside an interval are no-break spaces (NBSP),
so that a table cell may wrap between values but never inside one ("[−12.9, 3.1]", "−2.0 pp", "1.2 ms").
"""

from __future__ import annotations

import math
from collections.abc import Callable

DASH = "—"
MINUS = "−"
NBSP = "\u00a0"


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def _signed(text: str) -> str:
    return text.replace("-", MINUS)


def pct(x, digits: int = 1) -> str:
    """A fraction as a percentage: 0.7891 → '78.9%'."""
    return DASH if _missing(x) else _signed(f"{100 * x:.{digits}f}%")


def pp(x, digits: int = 1) -> str:
    """A difference of fractions in percentage points, signed: -0.02 → '−2.0 pp'."""
    return DASH if _missing(x) else _signed(f"{100 * x:+.{digits}f}{NBSP}pp")


def ci(lo, hi, digits: int = 1) -> str:
    """A CI of fractions in percent (or percentage points): (0.75, 0.81) → '[75.0, 81.0]'."""
    if _missing(lo) or _missing(hi):
        return DASH
    return _signed(f"[{100 * lo:.{digits}f},{NBSP}{100 * hi:.{digits}f}]")


def pvalue(p) -> str:
    """A p-value with three decimals, or '<0.001'."""
    if _missing(p):
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.3f}"


UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


def unit_for(values) -> str:
    """The unit a column of durations is shown in: that of its largest value (ms below 1 s, s below 10 min, min
    below 10 h, else h), so that one column never mixes "472 s" with "15.0 min"."""
    finite = [abs(v) for v in values if not _missing(v)]
    top = max(finite, default=0.0)
    return "ms" if top < 1 else "s" if top < 600 else "min" if top < 36000 else "h"


def seconds(s, unit: str | None = None) -> str:
    """A duration in `unit` (default: the unit of the value itself, `unit_for`): 0.0012 → '1.2 ms', 3.4 → '3.4 s',
    4000 → '66.7 min'; seconds and milliseconds with 3 significant digits, minutes and hours with one decimal."""
    if _missing(s):
        return DASH
    unit = unit or unit_for([s])
    value = s / UNITS[unit]
    return f"{value:.3g}{NBSP}{unit}" if unit in ("ms", "s") else f"{value:.1f}{NBSP}{unit}"


def share(x) -> str:
    """A share of step time, with enough digits for 0.04%: 0.0004 → '0.040%'."""
    if _missing(x):
        return DASH
    return f"{100 * x:.3g}%" if x < 0.1 else f"{100 * x:.1f}%"


def number(x, digits: int = 3) -> str:
    """A plain number with `digits` significant digits; integers as they are, with thousands separators."""
    if _missing(x):
        return DASH
    if isinstance(x, int) and not isinstance(x, bool):
        return _signed(f"{x:,}")
    return _signed(f"{x:.{digits}g}")


def tol(x) -> str:
    """A tolerance or margin (a fraction) in percentage points: 0.05 → '±5.0 pp'."""
    return DASH if _missing(x) else f"±{100 * x:.1f}{NBSP}pp"


def text(x) -> str:
    """A word or sentence of the analysis, as it is."""
    return DASH if x is None else str(x)


VERDICT_WORDS = {"reproduced": "✔ reproduced", "not_reproduced": "✘ not reproduced", "inconclusive": "? inconclusive"}
STATUS_WORDS = {"pass": "✔ pass", "fail": "✘ fail", "not_run": "not run"}


def verdict(x) -> str:
    """A verdict in words with its sign: 'not_reproduced' → '✘ not reproduced'."""
    return DASH if x is None else VERDICT_WORDS.get(x, str(x))


def status(x) -> str:
    """A parity check's status in words: 'pass' → '✔ pass'."""
    return DASH if x is None else STATUS_WORDS.get(x, str(x))


# Every formatter by name (the report's marks say which one printed a value; the audit looks it up here).
FORMATS: dict[str, Callable[..., str]] = {
    "pct": pct,
    "pp": pp,
    "ci": ci,
    "pvalue": pvalue,
    "seconds": seconds,
    "share": share,
    "number": number,
    "tol": tol,
    "text": text,
    "verdict": verdict,
    "status": status,
}
BY_KIND = {"rate": "pct", "p": "pvalue", "seconds": "seconds", "share": "share", "int": "number", "num": "number"}


def kind_format(column) -> str:
    """The name of the formatter of an analysis-contract column (agentrepro.analysis.contract.Column), by its kind."""
    return BY_KIND.get(column.kind.rstrip("?"), "text")


def cell(x, column, unit: str | None = None) -> str:
    """A value of an analysis-contract column formatted by its kind (durations in `unit`).

    Null shows what the column declares it to mean (e.g. 'not reached'), else an em dash.
    """
    if _missing(x):
        return column.null or DASH
    name = kind_format(column)
    return seconds(x, unit) if name == "seconds" else FORMATS[name](x)
