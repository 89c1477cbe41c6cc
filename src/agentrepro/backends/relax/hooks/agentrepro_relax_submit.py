"""Submit the Relax recipe's expanded command: `python3 agentrepro_relax_submit.py EXPANDED_FILE [--flag value ...]`.

Standard library only: it runs inside the job's image, under the job's Ray head (agentrepro_ray_head.py), with the
image's Python. EXPANDED_FILE holds what the recipe printed with DRY_RUN=1 (its last non-empty line). The words
are submitted as they are except what `submitted_argv` replaces (the eval-log hook, and each `--flag value` given
after the file: the backend's recipe.replaced_args, i.e. backend.export_hf's save cadence and Hugging Face copy,
and eval.keep_checkpoints' Megatron checkpoints kept); the submitted words are written next to the file
(`submitted_command.json`, as the program will receive them) and then this process becomes `ray job submit` (exec),
so its exit status is Ray's.
RAY_ADDRESS, set by the job's head, names the job's own dashboard (Ray's job CLI prefers it to the recipe's
--address). A line that is not the recipe's expected command is refused with exit status 2, naming the file.

Ray's job CLI joins the entrypoint's words with `subprocess.list2cmdline` (Windows quoting: `"` becomes `\"`, a word
with whitespace is wrapped in double quotes) and its supervisor runs the result through /bin/sh, so a word holding
`$`, a backtick, a quote or a glob would be read again by the shell. Each word after `--` is written so that sh,
given list2cmdline's text, reads back exactly the word (`for_ray_shell`); a word with whitespace, which no such
spelling survives, is refused.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

LAUNCHER = ("ray", "job", "submit", "--address=http://127.0.0.1:8265", "--")
ENTRY = ("python3", "relax/entrypoints/train.py")
HOOK_FLAG = "--custom-eval-rollout-log-function-path"
RECIPE_HOOK = "examples.graphgpo.eval_logger.log_eval_rollout_data"
HOOK = "agentrepro_relax_eval.log_eval_rollout_data"  # this folder, on the PYTHONPATH of Ray's workers
SUBMITTED = "submitted_command.json"


class Refused(ValueError):
    """The recipe's expanded command is not what this integration expects; the message names the file."""


def submitted_argv(printed: str, *, source: Path, replace: list[str] | None = None) -> list[str]:
    """The recipe's DRY_RUN=1 line -> the command to submit: the same words, the eval hook replaced by HOOK,
    and the value of each `--flag value` pair in `replace` set (appended when the recipe lacks the flag)."""
    words = shlex.split(printed)
    n = len(LAUNCHER)
    if tuple(words[:n]) != LAUNCHER or tuple(words[n : n + len(ENTRY)]) != ENTRY:
        raise Refused(
            f"{source}: expected the recipe to print `{shlex.join(LAUNCHER + ENTRY)} ...`, got {printed[:120]!r}"
        )
    hooks = [i for i, word in enumerate(words) if word == HOOK_FLAG]
    if len(hooks) != 1 or hooks[0] + 1 >= len(words) or words[hooks[0] + 1] != RECIPE_HOOK:
        raise Refused(
            f"{source}: expected one {HOOK_FLAG} {RECIPE_HOOK} (the recipe's eval logger, which agentrepro's "
            "hook hands over to)"
        )
    words[hooks[0] + 1] = HOOK
    pairs = list(replace or [])
    for flag, value in zip(pairs[0::2], pairs[1::2]):
        where = [i for i, word in enumerate(words) if word == flag]
        if len(where) > 1 or (where and (where[0] + 1 >= len(words) or words[where[0] + 1].startswith("--"))):
            raise Refused(f"{source}: expected {flag} at most once, with one value")
        if where:
            words[where[0] + 1] = value
        else:
            words += [flag, value]
    return words


def ray_argv(words: list[str], source: Path) -> list[str]:
    """`ray job submit ... -- ENTRYPOINT` with each entrypoint word spelled for Ray's shell (module docstring)."""
    n = len(LAUNCHER)
    return [*words[:n], *(for_ray_shell(word, source) for word in words[n:])]


SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def for_ray_shell(word: str, source: Path) -> str:
    """`word` spelled so that /bin/sh, reading what list2cmdline makes of it, gets `word` back: safe characters as
    they are, `"` bare (list2cmdline writes `\"`, which sh reads as `"`), `'` as `\'`, any other character single-quoted
    (never a backslash right before a `"`, which list2cmdline would double)."""
    if not word or any(ch.isspace() for ch in word):
        raise Refused(
            f"{source}: {word!r} is empty or holds whitespace, which Ray's job submission (list2cmdline, then "
            "/bin/sh) cannot pass on unchanged"
        )
    return "".join(ch if ch in SAFE or ch == '"' else "\\'" if ch == "'" else f"'{ch}'" for ch in word)


def read_expansion(path: Path, replace: list[str] | None = None) -> list[str]:
    """The words to submit, from the recipe's expanded command in `path`; Refused naming the file."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise Refused(f"{path}: cannot read the recipe's expanded command: {exc.strerror}") from None
    if not lines:
        raise Refused(f"{path}: empty: the recipe's dry run printed no command")
    return submitted_argv(lines[-1], source=path, replace=replace)


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2 != 1:
        print("usage: python3 agentrepro_relax_submit.py EXPANDED_FILE [--flag value ...]", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        words = read_expansion(path, argv[1:])
        spelled = ray_argv(words, path)
    except Refused as exc:
        print(f"agentrepro: {exc}", file=sys.stderr)
        return 2
    written = path.with_name(SUBMITTED)
    scratch = written.with_name(f".{SUBMITTED}.{os.getpid()}")
    scratch.write_text(json.dumps(words, indent=1) + "\n", encoding="utf-8")
    os.replace(scratch, written)
    sys.stdout.flush()
    os.execvp(spelled[0], spelled)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
