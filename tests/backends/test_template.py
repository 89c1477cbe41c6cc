"""Command templates: split once with shell quoting, each word one argument, values pasted in unparsed."""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrepro.backends.command.template import MAX_ARG_BYTES, Slot, fill, placeholders, split, text_parts
from agentrepro.errors import BadInput

HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "x; touch PWNED",
    "a\ntouch PWNED",
    "it's",
    'say "hi"',
    "a b",
    "--flag",
    "-c",
    "$HOME",
    "\\",
    "{x}",
    "",
    "*",
    "~",
    "#",
    "é ✓",
]
# Every place a placeholder may stand, and what the word becomes for a value v.
PLACEMENTS = [
    ("{v}", lambda v: v),
    ("--note={v}", lambda v: "--note=" + v),
    ("a{v}b", lambda v: "a" + v + "b"),
    ("'{v}'", lambda v: v),
    ('"{v}"', lambda v: v),
    ("'pre-'{v}", lambda v: "pre-" + v),
    ("{v}{v}", lambda v: v + v),
]


def escape_braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_characters="\0")), min_size=1, max_size=6))
def test_split_reads_shell_quoting_like_the_shell(words):
    """Property: split() of shlex.join(words) (braces doubled) gives the words back, as shlex.split does."""
    template = escape_braces(shlex.join(words))
    assert split(template) == [(w,) for w in words]
    assert shlex.split(shlex.join(words)) == words  # the reference reading of the same text


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_characters="\0")), st.sampled_from(PLACEMENTS))
def test_any_value_in_any_placement_is_one_intact_argument(value, placement):
    """Property: for any text and any placement, the filled argv has the same words, the placeholder's one holding the value."""
    form, expected = placement
    argv = fill(split(f"prog {form} --out {{run_dir}}"), {"v": value, "run_dir": "/r d"})
    assert argv == ["prog", expected(value), "--out", "/r d"]


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"])))
def test_a_real_program_receives_any_value_and_runs_nothing_from_it(value):
    """Property: `printf %s {v}` run for real prints the value exactly and creates no file (no shell in between)."""
    with tempfile.TemporaryDirectory() as work:
        out = subprocess.run(
            fill(split("printf %s {v}"), {"v": value}), cwd=work, capture_output=True, check=True
        ).stdout
        assert out.decode("utf-8") == value
        assert list(Path(work).iterdir()) == []


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("form, expected", PLACEMENTS)
def test_hostile_values_in_every_placement(value, form, expected):
    """Each hostile value (substitutions, `;`, newline, quotes, option-like) becomes exactly the expected one argument."""
    assert fill(split(f"prog {form}"), {"v": value}) == ["prog", expected(value)]


@pytest.mark.parametrize(
    "template, words",
    [
        ("a  b\tc", ["a", "b", "c"]),
        ("a 'b c' \"d e\" f\\ g", ["a", "b c", "d e", "f g"]),
        ("a '' \"\"", ["a", "", ""]),
        ("a \\\n  b", ["a", "b"]),
        ("a\n", ["a"]),
        ('a "x\\"y\\\\z\\$w"', ["a", 'x"y\\z$w']),
        ("a 'x\\y' x#y \\; '|' \"<\" '$(x)' 'BEGIN{{}}'", ["a", "x\\y", "x#y", ";", "|", "<", "$(x)", "BEGIN{}"]),
    ],
)
def test_split_examples(template, words):
    """Blanks, both quotes, backslashes, continuation lines and quoted shell characters split as a shell would."""
    assert split(template) == [(w,) for w in words]


@pytest.mark.parametrize(
    "template, message",
    [
        ("prog a; touch PWNED", "shell syntax ';'"),
        ("prog a && b", "shell syntax '&'"),
        ("prog | tee log", "shell syntax '|'"),
        ("prog > out", "shell syntax '>'"),
        ("cat <<EOF", "shell syntax '<'"),
        ("(prog)", "shell syntax '('"),
        ("prog $(date)", "shell syntax '$'"),
        ("prog $HOME", "shell syntax '$'"),
        ("prog `date`", "shell syntax '`'"),
        ('prog "$HOME"', "'$' inside double quotes"),
        ('prog "`date`"', "'`' inside double quotes"),
        ("prog *.json", "shell syntax '*'"),
        ("prog ~/x", "shell syntax '~'"),
        ("prog # comment", "shell syntax '#'"),
        ("prog a\nprog b", "line break"),
        ("prog 'open", "unterminated ' quote"),
        ("prog \\", "lone backslash"),
        ("prog {x:>5}", "format spec"),
        ("prog {x", "unclosed"),
        ("prog }", "single '}'"),
        ("   ", "empty"),
    ],
)
def test_shell_syntax_and_broken_templates_are_refused(template, message):
    """Shell syntax (no shell runs the command), broken quotes and broken braces are BadInput naming the field."""
    with pytest.raises(BadInput, match=re.escape(message)) as info:
        split(template, where="backend.command")
    assert str(info.value).startswith("backend.command: ")


def test_unknown_null_and_nul_values_are_refused():
    """An unknown placeholder lists the known names; a null value and a value holding NUL are BadInput naming it."""
    words = split("prog {x}")
    with pytest.raises(BadInput, match=r"backend.command: unknown placeholder \{x\} \(top-level names: run_dir, y"):
        fill(words, {"y": 1, "run_dir": "/r"}, where="backend.command")
    with pytest.raises(BadInput, match=r"placeholder \{x\} is null"):
        fill(words, {"x": None})
    with pytest.raises(BadInput, match=r"placeholder \{x\}: the value holds a NUL character"):
        fill(words, {"x": "a\0touch PWNED"})


def test_values_up_to_the_argument_limit_pass_and_longer_ones_are_refused():
    """A value that fills one argument to Linux's limit is passed whole; one byte more is BadInput naming the placeholder."""
    assert fill(split("prog a{x}"), {"x": "é" * ((MAX_ARG_BYTES - 1) // 2)}) == [
        "prog",
        "a" + "é" * ((MAX_ARG_BYTES - 1) // 2),
    ]
    with pytest.raises(
        BadInput, match=rf"backend.command: filled with \{{x\}} this argument is {MAX_ARG_BYTES + 1} bytes"
    ):
        fill(split("prog a{x}"), {"x": "x" * MAX_ARG_BYTES}, where="backend.command")


def test_value_formats_and_braces():
    """Booleans are true/false, numbers by repr, lists and mappings canonical JSON; {{ and }} are literal braces."""
    ctx = {"b": True, "f": 1e-6, "i": 3, "l": [1, "a"], "m": {"z": 1, "a": 2}, "t": {"k": [5, 6]}}
    assert fill(split("{b} {f} {i} {l} {m} {t.k.1} {{b}}"), ctx) == [
        "true",
        "1e-06",
        "3",
        '[1,"a"]',
        '{"a":2,"z":1}',
        "6",
        "{b}",
    ]
    assert placeholders(split("a {b.c} {{d}} x{e}y")) == ["b.c", "e"]


def test_environment_values_are_plain_text():
    """An environment value is one text: blanks and quotes in it are literal, placeholders are filled as elsewhere."""
    assert text_parts('it\'s {a.b} "x" {{y}}', where="backend.env.X") == ("it's ", Slot("a.b"), ' "x" {y}')
    with pytest.raises(BadInput, match=r"backend.env.X: unclosed"):
        text_parts("{a", where="backend.env.X")
