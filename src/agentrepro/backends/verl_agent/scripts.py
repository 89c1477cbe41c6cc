"""verl-agent's official ALFWorld launch scripts at 20bd331: facts read from them (no harness logic).

The facts are package data, scripts.json, read from verl-agent @ 20bd331bdbc9026a5668e11362178e10ab7400c8
(the public mirror zzj1111/alfworldauto; its "provenance" field says how): each script's path, entry module and
data-preparation arguments (with their script line), every Hydra override it passes, with its value as Hydra
receives it and its script line, its literal exports, and the composed Hydra config of its entry point (every key
with its resolved value): the keys that exist, which backend.overrides may name. `SCRIPTS` is that file, loaded
once, keyed by algorithm.adv_estimator.
tests/backends/test_verl_recipes.py checks it equal, script by script and key by key, to
tests/fixtures/frameworks/verl-agent-20bd331.recipes.json, so any key the harness appends or a manifest names in
backend.overrides is compared with the script's own value (backends/verl_agent/recipes.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrepro.reading import load_json

_FACTS = load_json(Path(__file__).with_name("scripts.json"))
COMMIT: str = _FACTS["commit"]
# The scripts read $1 as ENGINE=${1:-vllm} and also end with an unquoted $@, so their first argument would reach
# Hydra as an override ("vllm" alone is a Hydra parse error). An empty first argument gives the default engine
# (vllm) and, being empty, disappears from the unquoted $@. The same unquoted $@ splits words on blanks, so a
# value with a blank is refused (`verl_recipes.appended`).
ENGINE = ""


@dataclass(frozen=True)
class Script:
    """One official launch script: `official` maps every Hydra key it sets to (value, script line)."""

    path: str
    entry: str
    prepare: tuple[str, ...]
    official: dict[str, tuple[str, int]]
    entry_line: int  # the line of `python3 -m <entry>`
    prepare_line: int  # the line of the data-preparation command
    composed: dict[str, Any]  # the entry's composed config: key -> value before the script's overrides
    exports: dict[str, tuple[str, int]]  # `export NAME=VALUE` with a literal value -> (value, script line)


def _scripts(facts: dict) -> dict[str, Script]:
    out = {}
    for estimator, script in facts["scripts"].items():
        (entry, entry_line), (prepare, prepare_line) = script["entry"], script["prepare"]
        out[estimator] = Script(
            path=script["path"],
            entry=entry,
            prepare=tuple(prepare),
            official={key: (value, line) for key, (value, line) in script["official"].items()},
            entry_line=entry_line,
            prepare_line=prepare_line,
            composed=facts["configs"][script["config"]],
            exports={name: (value, line) for name, (value, line) in script["exports"].items()},
        )
    return out


SCRIPTS: dict[str, Script] = _scripts(_FACTS)  # keyed by algorithm.adv_estimator
