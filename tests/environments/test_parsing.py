"""Response parsing: the reference's parse cases, and the linear-time matcher against the reference regex."""

from __future__ import annotations

import json

import pytest
from helpers import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrepro.environments.parsing import REFERENCE_PATTERNS, match_tags, parse_response, split_actions

with open(FIXTURES / "vagen" / "parse_cases.jsonl", encoding="utf-8") as fh:
    CASES = [json.loads(line) for line in fh if line.strip()]


@pytest.mark.parametrize("case", CASES, ids=[c["case_id"] for c in CASES])
def test_parse_cases_match_reference(case):
    """Every parser output recorded from the reference (all formats, both envs' limits) is reproduced."""
    assert case["results"]
    for result in case["results"]:
        got = parse_response(
            case["response"],
            prompt_format=result["prompt_format"],
            action_sep=result["action_sep"],
            max_actions=result["max_actions"],
        )
        assert got == result["output"], (result["parser_env"], result["prompt_format"])


TOKENS = [
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "<observation>",
    "</observation>",
    "<prediction>",
    "</prediction>",
    " ",
    "\n",
    "\t",
    "a",
    "Up",
    ",",
    "<THINK>",
    "\u3000",
    "é",
]


LAYOUT = [
    "<observation>",
    "a",
    "</observation>",
    " ",
    "<think>",
    "a",
    "</think>",
    "\n",
    "<answer>",
    "Up",
    "</answer>",
    " ",
    "<prediction>",
    "a",
    "</prediction>",
]


@st.composite
def tag_soups(draw):
    """A well-formed wm layout mutated by random insertions and deletions (so matches and near misses both occur)."""
    tokens = list(LAYOUT)
    for _ in range(draw(st.integers(0, 3))):
        if tokens:
            del tokens[draw(st.integers(0, len(tokens) - 1))]
    for _ in range(draw(st.integers(0, 8))):
        tokens.insert(draw(st.integers(0, len(tokens))), draw(st.sampled_from(TOKENS)))
    return "".join(tokens)


@settings(max_examples=500, deadline=None)
@given(st.one_of(tag_soups(), st.lists(st.sampled_from(TOKENS), max_size=24).map("".join)))
def test_linear_matcher_agrees_with_reference_regex(text):
    """match_tags gives exactly the groups of the reference regex search (or no match) on random tag soups."""
    for prompt_format, pattern in REFERENCE_PATTERNS.items():
        ref = pattern.search(text)
        assert match_tags(text, prompt_format) == (None if ref is None else ref.groups())


def test_mutated_layouts_exercise_matches_and_misses():
    """The property test's generator yields both matching and non-matching texts for every format."""
    import random

    rng = random.Random(0)
    seen = {fmt: set() for fmt in REFERENCE_PATTERNS}
    for _ in range(300):
        tokens = list(LAYOUT)
        for _ in range(rng.randint(0, 3)):
            del tokens[rng.randrange(len(tokens))]
        for _ in range(rng.randint(0, 8)):
            tokens.insert(rng.randint(0, len(tokens)), rng.choice(TOKENS))
        text = "".join(tokens)
        for fmt, pattern in REFERENCE_PATTERNS.items():
            seen[fmt].add(pattern.search(text) is not None)
            ref = pattern.search(text)
            assert match_tags(text, fmt) == (None if ref is None else ref.groups())
    assert all(outcomes == {True, False} for outcomes in seen.values())


@pytest.mark.parametrize(
    "text",
    [
        "<think>a</think> \n<answer>b</answer>",
        "<observation>o</observation>x<think>t</think>"
        "<answer>u</answer><prediction>p</prediction><observation>o</observation>"
        "<think>t</think><answer>d</answer><prediction>p</prediction>",
        "<observation>1</observation> y <answer>a</answer> z <prediction>p</prediction>",
    ],
)
def test_linear_matcher_on_hand_cases(text):
    """Hand-written layouts (whitespace gaps, a first failed candidate, free text) agree with the regex."""
    for fmt, pattern in REFERENCE_PATTERNS.items():
        ref = pattern.search(text)
        assert match_tags(text, fmt) == (None if ref is None else ref.groups())


@pytest.mark.timeout(60)  # a hang guard, not a timing assertion: the reference regex takes minutes here
def test_adversarial_long_responses_parse():
    """Tag soups that make the reference regex backtrack for minutes parse (as no match) without hanging."""
    for fmt in REFERENCE_PATTERNS:
        for text in ["<think>" * 20000, "<observation></observation><think></think><answer>" * 5000, "x" * 10**6]:
            assert parse_response(text, prompt_format=fmt)["format_correct"] is False
        long_ok = (
            "<observation>o</observation><think>"
            + "a" * 10**6
            + "</think><answer>up</answer><prediction>p</prediction>"
        )
        assert parse_response(long_ok, prompt_format=fmt)["actions"] == ["up"]


def test_split_actions_rules():
    """Pieces are stripped, lower-cased, empties dropped, and cut to max (content rewritten only then)."""
    assert split_actions(" Up ,, LEFT ", ",", 3) == (["up", "left"], " Up ,, LEFT ")
    assert split_actions("a;b;c;d", ";", 2) == (["a", "b"], "a;b")


def test_unknown_format_and_non_string_raise():
    """Programming errors (unknown format, non-string response) raise instead of parsing garbage."""
    with pytest.raises(ValueError):
        parse_response("x", prompt_format="json")
    with pytest.raises(TypeError):
        parse_response(None, prompt_format="wm")
