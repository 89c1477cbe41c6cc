"""The claim grammar: ordering and equivalence forms, `@backend` names, and hostile strings refused naming the field."""

import pytest

from agentrepro.analysis.claim_text import EQUIVALENCE, ORDERING, check_methods, parse_claim_text
from agentrepro.errors import BadInput


@pytest.mark.parametrize(
    "text, margin",
    [
        ("graphgpo@relax == graphgpo@verl-agent ± 3pp", 3.0),
        ("graphgpo@relax==graphgpo@verl-agent±3pp", 3.0),
        ("graphgpo@relax == graphgpo@verl-agent +- 3 pp", 3.0),
        ("graphgpo@relax == graphgpo@verl-agent +/- 2.5 percentage points", 2.5),
        ("  graphgpo@relax == graphgpo@verl-agent ± 1 percentage point ", 1.0),
        ("graphgpo@relax == graphgpo@verl-agent ± 100pp", 100.0),
    ],
)
def test_equivalence_forms(text, margin):
    """Every accepted spelling of the margin parses to the same methods and the margin as a fraction."""
    claim = parse_claim_text(text, where="--claim")
    assert (claim.kind, claim.a, claim.b) == (EQUIVALENCE, "graphgpo@relax", "graphgpo@verl-agent")
    assert claim.margin_pp == margin and claim.margin == pytest.approx(margin / 100)


def test_ordering_forms_with_backends():
    """'a > b' and 'b < a' name the same better method, with or without @backend."""
    for text in ("gigpo@relax > grpo", "grpo < gigpo@relax"):
        claim = parse_claim_text(text, where="--claim")
        assert (claim.kind, claim.a, claim.b, claim.margin) == (ORDERING, "gigpo@relax", "grpo", None)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "a == b",
        "a == b ± 3",
        "a == b ± 3%",
        "a == b ± -3pp",
        "a == b ± 0pp",
        "a == b ± 0.0 pp",
        "a == b ± 101pp",
        "a == b ± 1e400pp",
        "a == b ± nanpp",
        "a == b ± infpp",
        "a = b ± 3pp",
        "a != b ± 3pp",
        "a == b ±± 3pp",
        "a == b ± 3pp; rm -rf /",
        "a == b ± 3pp\n",
        "a\n== b ± 3pp",
        "a == b ± 3pp\x00",
        "a@ == b ± 3pp",
        "@a == b ± 3pp",
        "a@b@c == b ± 3pp",
        "a == a ± 3pp",
        "a > a",
        "a >= b",
        "a > b > c",
        "ａ == b ± 3pp",
        "a == b ± ３pp",
        "a == b ± 3 pp pp",
        "a" * 400 + " == b ± 3pp",
        None,
        3,
        ["a > b"],
    ],
)
def test_hostile_strings_are_one_line_bad_input(text):
    """Anything outside the grammar is BadInput naming the file and the field, on one line."""
    with pytest.raises(BadInput) as info:
        parse_claim_text(text, where="analysis.claims[2]", path="manifests/s.yaml")
    message = str(info.value)
    assert message.startswith("manifests/s.yaml: analysis.claims[2]: ") and "\n" not in message and len(message) < 600


def test_unknown_method_names_the_methods():
    """A claim on a method the study does not have lists the study's methods."""
    claim = parse_claim_text("x@relax == x@verl ± 3pp", where="--claim")
    with pytest.raises(BadInput, match=r"--claim: .*'x@verl' is not a method of this study \(x@relax, y\)"):
        check_methods(claim, ["x@relax", "y"], where="--claim")
