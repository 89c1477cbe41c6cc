"""Number formatting for the report: rates are fractions in the data and percentages on the page.

Every function maps a missing value (None) to an em dash, so that an absent number is visibly absent.
Negative numbers use the typographic minus sign. A value is one unbreakable unit on the page and in the
PDF: the space between a number and its unit and the one inside an interval are no-break spaces (NBSP),
so that a table cell may wrap between values but never inside one ("[−12.9, 3.1]", "−2.0 pp", "1.2 ms").
"""

from __future__ import annotations

import math

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


def seconds(s) -> str:
    """A duration: 0.0012 → '1.2 ms', 3.4 → '3.40 s', 4000 → '66.7 min'."""
    if _missing(s):
        return DASH
    if s < 1:
        return f"{1000 * s:.3g}{NBSP}ms"
    if s < 600:
        return f"{s:.3g}{NBSP}s"
    return f"{s / 60:.1f}{NBSP}min" if s < 36000 else f"{s / 3600:.1f}{NBSP}h"


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


BY_KIND = {"rate": pct, "p": pvalue, "seconds": seconds, "share": share, "int": number, "num": number}


def cell(x, column) -> str:
    """A value of an analysis-contract column (agentrepro.analysis.contract.Column) formatted by its kind.

    Null shows what the column declares it to mean (e.g. 'not reached'), else an em dash.
    """
    if _missing(x):
        return column.null or DASH
    return BY_KIND.get(column.kind.rstrip("?"), str)(x)


FILTERS = {"pct": pct, "pp": pp, "ci": ci, "pvalue": pvalue, "seconds": seconds, "share": share, "number": number}
