"""The grammar of a declared claim, the one owner of it (the manifest's `analysis.claims`, `analyze --claim`).

Two kinds:

* ordering: `"graphgpo > gigpo"` or `"gigpo < graphgpo"`: the first is better (agentrepro.analysis.claims);
* equivalence: `"graphgpo@relax == graphgpo@verl-agent ± 3pp"`: the two methods' success rates agree within
  the margin on the tasks both were scored on (agentrepro.analysis.equivalence). The margin is written
  `± 3pp`, `+- 3 pp`, `± 2.5 percentage points` (or `percentage point`); it must be in (0, 100].

A method name is letters, digits, `_`, `.` and `-`, optionally followed by `@backend` in the same alphabet
(`graphgpo@verl-agent`). Anything else is BadInput naming the file and the field. This module imports
nothing heavy, so that loading a manifest can check its claims.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from agentrepro.errors import BadInput

ORDERING, EQUIVALENCE = "ordering", "equivalence"
_WORD = r"[A-Za-z0-9][A-Za-z0-9_.\-]*"
_NAME = rf"({_WORD}(?:@{_WORD})?)"
_ORDERING = re.compile(rf"[ \t]*{_NAME}[ \t]*([<>])[ \t]*{_NAME}[ \t]*")
_EQUIVALENCE = re.compile(
    rf"[ \t]*{_NAME}[ \t]*==[ \t]*{_NAME}[ \t]*(?:±|\+-|\+/-)[ \t]*([0-9]+(?:\.[0-9]+)?)"
    r"[ \t]*(?:pp|percentage[ \t]+points?)[ \t]*"
)
MAX_LENGTH = 300
FORMS = "'a > b', 'a < b' or 'a == b ± 3pp' (also '+- 3 pp', '± 3 percentage points')"


@dataclass(frozen=True)
class Claim:
    """A parsed claim. Ordering: `a` is the method claimed better. Equivalence: a − b within ±`margin_pp`."""

    text: str
    kind: str  # ORDERING or EQUIVALENCE
    a: str
    b: str
    margin_pp: float | None = None

    @property
    def margin(self) -> float | None:
        """The margin as a fraction (rates are fractions everywhere)."""
        return None if self.margin_pp is None else self.margin_pp / 100.0


def parse_claim_text(text: object, *, where: str, path: object = None) -> Claim:
    """The claim `text` parsed; BadInput naming `path` (the file, if any) and `where` (the field) otherwise."""

    def bad(why: str) -> BadInput:
        return BadInput(f"claim {text!r}: {why}", path=path, where=where)

    if not isinstance(text, str):
        raise bad(f"expected a string of the form {FORMS}")
    if len(text) > MAX_LENGTH:
        raise BadInput(
            f"claim of {len(text)} characters (at most {MAX_LENGTH}): expected {FORMS}", path=path, where=where
        )
    match = _ORDERING.fullmatch(text)
    if match:
        left, op, right = match.groups()
        a, b = (left, right) if op == ">" else (right, left)
        claim = Claim(text.strip(), ORDERING, a, b)
    else:
        match = _EQUIVALENCE.fullmatch(text)
        if not match:
            raise bad(f"expected {FORMS}")
        a, b, margin = match.group(1), match.group(2), float(match.group(3))
        if not (math.isfinite(margin) and 0 < margin <= 100):
            raise bad(f"the margin must be in (0, 100] percentage points, got {match.group(3)}")
        claim = Claim(text.strip(), EQUIVALENCE, a, b, margin)
    if claim.a == claim.b:
        raise bad("compares a method with itself")
    return claim


def check_methods(claim: Claim, methods: list[str], *, where: str, path: object = None) -> Claim:
    """`claim` if both of its methods are among `methods`; BadInput naming the unknown one otherwise."""
    for name in (claim.a, claim.b):
        if name not in methods:
            raise BadInput(
                f"claim {claim.text!r}: {name!r} is not a method of this study ({', '.join(methods)})",
                path=path,
                where=where,
            )
    return claim
