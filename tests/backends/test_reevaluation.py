"""Templates in which a program would run a value as code are refused; values as plain arguments pass."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrepro.backends.command.code_words import check
from agentrepro.backends.command.template import fill, split
from agentrepro.errors import BadInput


def checked(template: str) -> None:
    check(split(template, where="backend.command"), where="backend.command")


@pytest.mark.parametrize(
    "template, message",
    [
        # shells: the code of -c, the script, the options
        ("bash -c {x}", "{x} (word 3) is among the options, script or code of `bash`"),
        ("sh -ec {x}", "of `sh`"),
        ("/bin/bash -lc {x}", "of `bash`"),
        ("bash {x}", "{x} (word 2) is among the options, script or code of `bash`"),
        ("bash {a} {b}", "{a} (word 2)"),
        ("bash -o {x} -c 'true'", "{x} (word 3)"),
        ("bash --rcfile {x} script.sh", "{x} (word 3)"),
        ("bash -c -- {x}", "{x} (word 4) is among the script or code"),
        ("timeout 60 sh -c {x}", "of `sh`"),
        ("env A=1 nice -n 5 dash -c {x}", "of `dash`"),
        ("bash -c '\"$@\"' sh bash -c {x}", "{x} (word 7)"),
        # a placeholder inside inline code, a here-document or an eval
        ("sh -c 'echo {x}'", "echo {x} (word 3) puts a placeholder beside blanks or shell punctuation"),
        ('bash -c "cat <<EOF\n{x}\nEOF"', "cat <<EOF\\n{x}\\nEOF (word 3) puts a placeholder beside blanks"),
        ("sh -c 'eval {x}'", "puts a placeholder beside blanks"),
        ("bash -c 'eval \"$NOTE\"'", "the code given to `bash` uses `eval`"),
        ("bash -c 'f; eval $1' sh {x}", "uses `eval`"),
        ("bash -c 'eval \"$(conda shell.bash hook)\"'", "uses `eval`"),  # whatever it evaluates: values could reach it
        ("sh -c 'printf %s $1' sh {x}", "expands $1 outside double quotes"),
        ("bash -c 'touch ${{NOTE}}'", "expands ${NOTE} outside double quotes"),
        ("eval {x}", "'eval' needs a shell"),
        ("source env.sh", "'source' needs a shell"),
        ("LR=1 python train.py", "'LR' needs a shell"),
        # other interpreters
        ("{python} -c {x}", "{x} (word 3) is among the code of `python`"),
        ("python3 -c \"print('{x}')\"", "print('{x}') (word 3) puts a placeholder beside"),
        ("{python} -m {x}", "among the code of `python`"),
        ("{python} {x} train.py", "{x} (word 2) is among the options, script or code of `python`"),
        ("{python} -W ignore -c {x}", "{x} (word 5)"),
        ("python3.11 -u -c 'exec(input())'", "uses `exec`"),
        ("perl -e 'print @ARGV' {x}", "{x} (word 4) is among the options, script or code of `perl`"),
        ("perl -e {x}", "among the code of `perl`"),
        ("ruby -e {x}", "of `ruby`"),
        ("node --eval {x}", "of `node`"),
        ("Rscript -e {x}", "of `Rscript`"),
        ("awk {x} file", "of `awk`"),
        ("gawk -v n={x} 'BEGIN{{}}'", "of `gawk`"),
        ("awk 'BEGIN{{system(ARGV[1])}}' {x}", "uses `system`"),
        ("sed {x} file", "of `sed`"),
        # the program itself
        ("{x} --lr 1", "the program {x} is a placeholder"),
        ("{run_dir}/bin/train", "the program {run_dir}/bin/train is a placeholder"),
    ],
)
def test_templates_that_would_run_a_value_as_code_are_refused(template, message):
    """Each re-evaluating form is BadInput naming backend.command and saying where the value would become code."""
    with pytest.raises(BadInput, match=re.escape(message)) as info:
        checked(template)
    assert str(info.value).startswith("backend.command: ")


@pytest.mark.parametrize(
    "template",
    [
        "{python} train.py --lr {train.lr} --out {run_dir} --note={x} a{x}b '{x}' \"{x}\"",
        "{python} -m pkg.train --steps {train.steps} {x}",
        "{python} -u -c 'import sys; print(sys.argv[1:])' {x} --flag {x}",
        "python3 -W ignore train.py {x}",
        "bash -c 'printf %s \"$1\" > out.txt' sh {x} {x}",
        "sh -c 'train \"$1\" | tee log' sh {x}",  # docs/backends.md's example
        'sh -euc \'exec "$AGENTREPRO_PYTHON" train.py --note "$NOTE" | tee log\'',
        "bash -o pipefail -c 'a | b' sh {x}",
        "bash -- script.sh {x}",
        "bash script.sh --note {x}",
        "perl -e 'print @ARGV' -- {x}",
        "awk -f prog.awk -- {x}",
        "timeout 60 {python} train.py {x}",
        "srun --ntasks=1 python train.py --note {x}",
    ],
)
def test_values_as_plain_arguments_are_accepted(template):
    """A value after the script, after `--`, or as an option's value of a non-interpreter passes the check."""
    checked(template)


PROGRAMS = ["printf", "sh", "bash", "env sh", "timeout 20 bash", "printf %s"]
WORDS = [
    "-c",
    "-e",
    "-ec",
    "--",
    "%s",
    "sh",
    "{v}",
    "a{v}",
    "'{v}'",
    '"x {v}"',
    "'printf %s \"$1\"'",
    "'printf %s $1'",
    "'eval \"$1\"'",
    "'printf %s \"$NOTE\"'",
    "'echo $NOTE'",
    "'cat <<EOF\n{v}\nEOF'",
    "'$1'",
]
VALUES = ["$(touch PWNED)", "`touch PWNED`", "; touch PWNED", "touch PWNED", "\ntouch PWNED", "-c", "--", "*"]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PROGRAMS), st.lists(st.sampled_from(WORDS), max_size=5), st.sampled_from(VALUES))
def test_a_template_is_either_refused_or_runs_no_value(program, words, value):
    """Property: a random template over shells, -c, inline code and placements with a hostile value is either
    refused (BadInput) or, run for real with the value also in $NOTE, creates no file."""
    template = " ".join([program, *words])
    try:
        parsed = split(template, where="backend.command")
        check(parsed, where="backend.command")
    except BadInput as exc:
        assert str(exc).startswith("backend.command: ") and "\n" not in str(exc)
        return
    argv = fill(parsed, {"v": value})
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(
            argv, cwd=work, env={**os.environ, "NOTE": value}, stdin=subprocess.DEVNULL, capture_output=True, timeout=30
        )
        assert list(Path(work).iterdir()) == [], (template, value)
