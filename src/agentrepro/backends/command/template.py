"""Command templates: `python train.py --lr {train.lr} --out {run_dir}` filled into an argv list, never a shell.

`split(template)` reads the template once, as a POSIX shell would split it into words: blanks separate
words, `'...'` and `"..."` quote, a backslash escapes one character and a backslash-newline joins lines.
A placeholder `{key}` or `{a.b.c}` may stand anywhere inside a word, quoted or not; `{{` and `}}` are
literal braces. `fill(words, context)` then gives one program argument per word, the values pasted in
*after* the split: no value is ever parsed, so spaces, quotes, `;`, `$(...)`, backticks and newlines in a
value arrive in the program as those characters, inside the one argument they were put in.

No shell runs the command, so text a shell would treat as syntax is refused rather than passed on as a
literal (the author meant the syntax): `; & | < > ( )` (sequences, pipes, redirections, here-documents,
subshells), `$` and backticks outside single quotes, `*` and `?` (globs), `#` and `~` at the start of a
word, and a line break between words. Pipes and redirections belong in a script, or in an inline
`bash -c '...'` whose values come through environment variables (see code_words.py and backend.py).

Values: strings as they are; booleans `true`/`false`; numbers by Python's repr; lists and mappings as
canonical JSON. A null value, a NUL character (no program argument can carry one) and a filled word longer
than Linux's limit on one argument are BadInput, as are unknown placeholders and format specs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import canonical_json

MAX_ARG_BYTES = 131072 - 1  # Linux MAX_ARG_STRLEN (32 pages) including the terminating NUL


@dataclass(frozen=True)
class Slot:
    """A placeholder in a parsed template: the dotted key path of the context it is filled from."""

    name: str


Part = str | Slot
Word = tuple[Part, ...]

SHELL_OPERATORS = set(";&|<>()")


def lookup(context: dict[str, Any], dotted: str) -> Any:
    """`context["a"]["b"]` for "a.b"; KeyError when a part is missing."""
    value: Any = context
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(dotted)
    return value


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return canonical_json(value)
    return str(value)


def placeholders(words: list[Word]) -> list[str]:
    """The placeholder names of parsed words, in order."""
    return [part.name for word in words for part in word if isinstance(part, Slot)]


def literal(word: Word) -> str | None:
    """The word's text when it holds no placeholder, else None."""
    texts = [p for p in word if isinstance(p, str)]
    return "".join(texts) if len(texts) == len(word) else None


def split(template: Any, *, where: str = "command") -> list[Word]:
    """The words of a command template (shell quoting, no shell syntax); BadInput naming `where` otherwise."""
    if not isinstance(template, str):
        raise BadInput(f"expected a string, got {type(template).__name__}", where=where)
    words: list[list[Part]] = []
    word: list[Part] | None = None  # the word being read; None between words
    quote: str | None = None  # None, "'" or '"'

    def add(part: Part) -> None:
        nonlocal word
        if word is None:
            word = []
            words.append(word)
        if isinstance(part, str) and word and isinstance(word[-1], str):
            word[-1] += part
        else:
            word.append(part)

    i, n = 0, len(template)
    while i < n:
        ch, col = template[i], i + 1
        if ch in "{}":
            part, i = _brace(template, i, where)
            add(part)
            continue
        if quote == "'":
            if ch == "'":
                quote = None
            else:
                add(ch)
            i += 1
            continue
        if quote == '"':
            if ch == '"':
                quote = None
            elif ch == "\\" and template[i + 1 : i + 2] in ("\\", '"', "$", "`", "\n"):
                if template[i + 1] != "\n":
                    add(template[i + 1])
                i += 1
            elif ch in "$`":
                raise BadInput(
                    f"{ch!r} inside double quotes at column {col}: a shell would expand it, but no shell runs "
                    "this command (write it inside single quotes to mean the character)",
                    where=where,
                )
            else:
                add(ch)
            i += 1
            continue
        if ch == "\\":
            if i + 1 == n:
                raise BadInput("the template ends with a lone backslash", where=where)
            if template[i + 1] != "\n":
                add(template[i + 1])
            i += 2
            continue
        if ch in "'\"":
            quote = ch
            add("")  # '' is an empty word
        elif ch in " \t":
            word = None
        elif ch == "\n":
            if template[i:].strip():
                raise BadInput(
                    f"a line break at column {col} would end the command in a shell: write one command "
                    "(end the line with a backslash to continue it)",
                    where=where,
                )
            word = None
        elif ch in SHELL_OPERATORS or ch in "$`*?" or (ch in "#~" and word is None):
            raise BadInput(
                f"shell syntax {ch!r} at column {col}: the command runs without a shell, as a list of "
                "arguments; quote it to mean the character, or put pipes, redirections and other shell "
                "syntax in a script (values reach it through backend.env)",
                where=where,
            )
        else:
            add(ch)
        i += 1
    if quote is not None:
        raise BadInput(f"unterminated {quote} quote", where=where)
    if not words:
        raise BadInput("the command is empty", where=where)
    return [tuple(w) for w in words]


def text_parts(text: Any, *, where: str) -> Word:
    """A plain text with placeholders (an environment value): no words, no quoting, braces as in split()."""
    if not isinstance(text, str):
        raise BadInput(f"expected a string, got {type(text).__name__}", where=where)
    parts: list[Part] = []
    i = 0
    while i < len(text):
        brace = min((j for j in (text.find("{", i), text.find("}", i)) if j >= 0), default=len(text))
        part, i = (text[i:brace], brace) if brace > i else _brace(text, brace, where)
        if isinstance(part, str) and parts and isinstance(parts[-1], str):
            parts[-1] += part
        else:
            parts.append(part)
    return tuple(parts)


def _brace(template: str, i: int, where: str) -> tuple[Part, int]:
    """The brace construct at template[i]: a literal `{`/`}` from `{{`/`}}`, or a Slot; and the next index."""
    ch = template[i]
    if template.startswith(ch * 2, i):
        return ch, i + 2
    if ch == "}":
        raise BadInput(f"single '}}' at column {i + 1} (write '}}}}' for a literal brace)", where=where)
    end = template.find("}", i)
    if end < 0:
        raise BadInput(f"unclosed '{{' at column {i + 1} (write '{{{{' for a literal brace)", where=where)
    name = template[i + 1 : end]
    if not name or any(c in name for c in "!:[]{ \t\n'\"\\$"):
        raise BadInput(
            f"bad placeholder {{{name}}}: use {{key}} or {{a.b.c}} without format specs "
            "(write '{{' and '}}' for literal braces)",
            where=where,
        )
    return Slot(name), end + 1


def value(context: dict[str, Any], name: str, *, where: str) -> str:
    """The text of placeholder `name` in `context`; BadInput if unknown, null or holding a NUL character."""
    try:
        found = lookup(context, name)
    except KeyError:
        known = ", ".join(sorted(k for k in context if not k.startswith("_")))
        raise BadInput(
            f"unknown placeholder {{{name}}} (top-level names: {known}; write '{{{{' and '}}}}' for literal braces)",
            where=where,
        ) from None
    if found is None:
        raise BadInput(f"placeholder {{{name}}} is null in the resolved config", where=where)
    text = format_value(found)
    if "\0" in text:
        raise BadInput(
            f"placeholder {{{name}}}: the value holds a NUL character, which no program argument or "
            "environment variable can carry",
            where=where,
        )
    return text


def fill_word(word: Word, context: dict[str, Any], *, where: str) -> str:
    """One argument (or environment value): the word's text with each placeholder's value pasted in."""
    text = "".join(part if isinstance(part, str) else value(context, part.name, where=where) for part in word)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_ARG_BYTES:
        names = ", ".join(f"{{{n}}}" for n in placeholders([word]))
        raise BadInput(
            f"filled with {names} this argument is {size} bytes, over Linux's limit of {MAX_ARG_BYTES} for "
            "one argument or environment value: let the program read the value from the resolved "
            "config ($AGENTREPRO_CONFIG)",
            where=where,
        )
    return text


def fill(words: list[Word], context: dict[str, Any], *, where: str = "command") -> list[str]:
    """The argv list: one element per word, values never re-split or parsed."""
    return [fill_word(word, context, where=where) for word in words]
