"""Where a program would run an argument as code: placeholders there are refused (BadInput naming the field).

template.py guarantees that no shell parses a command or a value: each value is one argument. But some
programs parse an argument themselves: `bash -c 'echo {x}'` hands the value to a shell after all,
`python -c`, `perl -e`, `awk '...'` and `sed '...'` run it as their own language, and a value among an
interpreter's options (`bash {x} {y}` with x = "-c") can turn the next value into code. So:

* the program (first word) is written literally (only `{python}`, this interpreter, may stand there), and
  is no shell builtin (`eval`, `source`, ...) or `NAME=value` assignment, which only a shell understands;
* a placeholder shares its word only with plain text: a word holding a placeholder with blanks or shell
  punctuation beside it is code for some language (`"echo {x}"`, `"print('{x}')"`, a here-document);
* after a word naming a recognised interpreter (SPECS: shells, python, perl, ruby, node, Rscript, php,
  lua, awk, sed), no placeholder stands among its options, in its script or in its code; values may follow
  as the script's arguments (`bash -c '...' sh {x}` gives `$1`), where option parsing has ended;
* inline shell code may not use `eval` nor expand a parameter outside double quotes (`$1`, `$NOTE`: the
  shell would split the value and expand its wildcards), and inline code of the other interpreters uses
  neither `eval` nor `exec`, since values that reach it (as `$1` or through backend.env) would be run again.

What stays outside this check: a program that itself hands an argument to a shell or another language
(ssh, watch, a script that evals its `$1` or runs `"$1"` as a command, an SQL client). Keep placeholders
out of such arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentrepro.backends.command.template import Slot, Word, literal
from agentrepro.errors import BadInput

# Characters that, beside a placeholder in one word, make that word code for some language.
CODE_LIKE = re.compile(r"[\s;&|<>()$`'\"\\]")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
SHELL_BUILTINS = {"eval", "exec", "source", ".", "export", "set", "alias", "builtin", "command", "trap", "cd", "unset"}


@dataclass(frozen=True)
class Spec:
    """How an interpreter reads its arguments: which options carry code, which take an argument."""

    code_flags: frozenset[str]  # options whose argument is code (or names it: python -m, awk -f)
    arg_flags: frozenset[str] = frozenset()
    shell: bool = False  # -c in a cluster of short options; the first operand is then the code
    first_operand_is_code: bool = False  # awk, sed: the program text comes first unless -f/-e gives it
    code_ends_options: bool = False  # python: everything after `-c CODE` / `-m MOD` is the program's
    forbidden: tuple[str, ...] = ("eval", "exec")


SHELL = Spec(
    frozenset({"-c"}), frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}), shell=True, forbidden=("eval",)
)
PYTHON = Spec(frozenset({"-c", "-m"}), frozenset({"-W", "-X", "-Q"}), code_ends_options=True)
SPECS: list[tuple[re.Pattern[str], Spec]] = [
    (re.compile(r"(ba|da|z|k|mk|a|ya|po|fi|c|tc|rba)?sh"), SHELL),
    (re.compile(r"(python|pypy)[0-9.]*"), PYTHON),
    (re.compile(r"perl[0-9.]*"), Spec(frozenset({"-e", "-E"}), frozenset({"-I", "-M", "-m"}))),
    (re.compile(r"ruby[0-9.]*"), Spec(frozenset({"-e"}), frozenset({"-I", "-r"}))),
    (
        re.compile(r"node(js)?|deno|bun"),
        Spec(frozenset({"-e", "--eval", "-p", "--print"}), frozenset({"-r", "--require", "--import"})),
    ),
    (re.compile(r"R|Rscript"), Spec(frozenset({"-e"}))),
    (re.compile(r"php[0-9.]*"), Spec(frozenset({"-r"}), frozenset({"-d", "-c"}))),
    (re.compile(r"lua[0-9.]*|luajit"), Spec(frozenset({"-e"}), frozenset({"-l"}))),
    (
        re.compile(r"[gmn]?awk"),
        Spec(frozenset({"-f"}), frozenset({"-v", "-F"}), first_operand_is_code=True, forbidden=("system",)),
    ),
    (
        re.compile(r"sed"),
        Spec(frozenset({"-e", "--expression", "-f", "--file"}), frozenset(), first_operand_is_code=True, forbidden=()),
    ),
]


def interpreter(word: Word) -> tuple[str, Spec] | None:
    """(name, spec) when the word names a recognised interpreter (by its file name), `{python}` included."""
    if word == (Slot("python"),):
        return "python", PYTHON
    text = literal(word)
    if text is None:
        return None
    name = text.rsplit("/", 1)[-1]
    for pattern, spec in SPECS:
        if pattern.fullmatch(name):
            return name, spec
    return None


def check(words: list[Word], *, where: str) -> None:
    """BadInput naming `where` when a value could become code (the rules in this module's docstring)."""
    program = literal(words[0])
    if program is None and words[0] != (Slot("python"),):
        raise BadInput(
            f"the program {_show(words[0])} is a placeholder: a value would choose what runs; write the "
            "program itself (or {python}) as the first word",
            where=where,
        )
    if program is not None and (program in SHELL_BUILTINS or ASSIGNMENT.match(program)):
        raise BadInput(
            f"{program.split('=')[0]!r} needs a shell, and the command runs without one "
            "(environment variables go in backend.env; shell code in a script or `bash -c '...'`)",
            where=where,
        )
    for k, word in enumerate(words):
        text = "".join(p for p in word if isinstance(p, str))
        if any(isinstance(p, Slot) for p in word) and CODE_LIKE.search(text):
            raise BadInput(
                f"{_show(word)} (word {k + 1}) puts a placeholder beside blanks or shell punctuation, "
                "text that a program would parse as code; make the placeholder a word of its own, "
                "or pass the value through backend.env",
                where=where,
            )
    k = 0
    while k < len(words):
        found = interpreter(words[k])
        k = k + 1 if found is None else _check_interpreter(words, k, *found, where=where)


def _check_interpreter(words: list[Word], k: int, name: str, spec: Spec, *, where: str) -> int:
    """Refuse placeholders among `name`'s options, script or code (words k+1 until its option parsing ends);
    returns the index of the first word after them (after `$0` too, for a shell's inline code)."""
    code_first = spec.first_operand_is_code  # shells become so with -c
    code_given = False  # a code flag's argument was read: the first operand is then data
    i = k + 1
    while i < len(words):
        text = _slot_free(words[i], i, name, "options, script or code", where)
        if text == "--":
            if not code_given and i + 1 < len(words):
                code = _slot_free(words[i + 1], i + 1, name, "script or code", where)
                if code_first:
                    _check_code(code, name, spec, where=where)
            return _after_operand(i + 1, spec, code_first and not code_given)
        if not text.startswith(("-", "+")) or text in ("-", "+"):  # the first operand
            if code_first and not code_given:
                _check_code(text, name, spec, where=where)
            return _after_operand(i, spec, code_first and not code_given)
        if spec.shell and re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", text):
            code_first = True
        elif text in spec.code_flags:
            i += 1
            if i < len(words):
                _check_code(_slot_free(words[i], i, name, "code", where), name, spec, where=where)
            if spec.code_ends_options:
                return i + 1
            code_given = True
        elif text in spec.arg_flags:
            i += 1
            if i < len(words):
                _slot_free(words[i], i, name, "options", where)
        i += 1
    return i


def _after_operand(i: int, spec: Spec, was_code: bool) -> int:
    """The index after the operand at i; a shell's inline code is followed by its `$0`, a name, not a program."""
    return i + (2 if spec.shell and was_code else 1)


def _slot_free(word: Word, i: int, name: str, role: str, where: str) -> str:
    """The word's text; BadInput when it holds a placeholder."""
    text = literal(word)
    if text is None:
        raise BadInput(
            f"{_show(word)} (word {i + 1}) is among the {role} of `{name}`, where a value could become code "
            "or an option; pass values as the script's arguments (after the script, or after `--`) "
            "or through backend.env",
            where=where,
        )
    return text


def _check_code(code: str, name: str, spec: Spec, *, where: str) -> None:
    """Refuse inline code that would run values reaching it again (eval) or, in a shell, split and glob them."""
    for word in spec.forbidden:
        if re.search(rf"(?<![\w.$]){re.escape(word)}\b", code):
            raise BadInput(
                f"the code given to `{name}` uses `{word}`, which would run values that reach it "
                "(as arguments or through backend.env) as code; put that logic in a script file that "
                "treats values as data",
                where=where,
            )
    unquoted = _unquoted_expansion(code) if spec.shell else None
    if unquoted:
        raise BadInput(
            f"the code given to `{name}` expands {unquoted} outside double quotes, where the shell would "
            f'split the value into words and expand wildcards in it; write "{unquoted}"',
            where=where,
        )


def _unquoted_expansion(code: str) -> str | None:
    """The first `$name`, `$1`, `$@` or `${...}` of shell code that stands outside double quotes, if any."""
    quote, i = None, 0
    while i < len(code):
        ch = code[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "$" and quote is None:
            found = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*]|\{[^}]*\})", code[i:])
            if found:
                return found.group(0)
        i += 1
    return None


def _show(word: Word, limit: int = 80) -> str:
    """The word as written, on one line (an error message is one line), shortened past `limit` characters."""
    text = "".join(p if isinstance(p, str) else f"{{{p.name}}}" for p in word)
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return text if len(text) <= limit else text[: limit - 3] + "..."
