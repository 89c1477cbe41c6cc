"""Submit the Relax recipe's expanded command: `python -m agentrepro.backends.relax.submit EXPANDED_FILE [--flag value ...]`.

EXPANDED_FILE holds what the recipe printed with DRY_RUN=1 (its last non-empty line). The words are
submitted as they are except what recipe.submitted_argv replaces (the eval-log hook, and each
`--flag value` given after the file: recipe.replaced_args, i.e. backend.export_hf's save cadence and Hugging
Face copy, and eval.keep_checkpoints' Megatron checkpoints kept); the
submitted words are written next to the file (`submitted_command.json`) and then this process becomes
`ray job submit` (exec), so its exit status is Ray's. RAY_ADDRESS, set by the job, names the job's own
dashboard (Ray's job CLI prefers it to the recipe's --address).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from agentrepro.backends.relax.recipe import submitted_argv
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text


def read_expansion(path: Path, replace: list[str] | None = None) -> list[str]:
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise BadInput(f"cannot read the recipe's expanded command: {exc.strerror}", path=path) from None
    if not lines:
        raise BadInput("empty: the recipe's dry run printed no command", path=path)
    return submitted_argv(lines[-1], source=path, replace=replace)


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2 != 1:
        print("usage: python -m agentrepro.backends.relax.submit EXPANDED_FILE [--flag value ...]", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        words = read_expansion(path, argv[1:])
    except BadInput as exc:
        print(f"agentrepro: {exc}", file=sys.stderr)
        return 2
    atomic_write_text(path.with_name("submitted_command.json"), json.dumps(words, indent=1) + "\n")
    sys.stdout.flush()
    os.execvp(words[0], words)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
