"""The `command` backend: any external trainer, described by command templates in the backend block.

```yaml
backend:
  name: command
  command: "python train.py --lr {train.lr} --steps {train.steps} --out {run_dir}"
  eval_command: "python evaluate.py --ckpt {run_dir}/checkpoints/step{step} --out {outcomes}"   # optional
  cwd: path/to/trainer        # optional, relative to where agentrepro runs
  env: {WANDB_MODE: offline, NOTE: "{train.note}"}   # optional; values may use placeholders
  adapter: relax              # optional: convert that framework's outputs (verl-agent | relax)
```

No shell runs a template: it is split once into words (shell quoting rules) and each word, placeholders
filled in, becomes exactly one argument of the program (template.py); shell syntax in a template is refused.
Templates in which a program would run a value as code (`bash -c "... {x}"`, `python -c`, a placeholder
among an interpreter's options) are refused too (reevaluation.py). Pipes and redirections go in a script or
an inline `bash -c '...'` that reads values from environment variables: `env` values are filled without
any parsing, and every harness value is also there as AGENTREPRO_<NAME> (AGENTREPRO_RUN_DIR, _CONFIG, ...).

Placeholders are any key path of the resolved config (`{train.lr}`, `{seed}`), plus `{run_dir}` (absolute),
`{config}` (resolved_config.yaml), `{resume}` (true/false), `{python}` (this interpreter), and for
`eval_command` `{step}`, `{eval_dir}` and `{outcomes}` (= eval_dir/raw/outcomes.jsonl). stdout and stderr go
to RUN_DIR/logs/; the filled command, shell-quoted, is kept in RUN_DIR/external_command.txt.
With a container image (`image: {runtime, ...}`), each command runs inside it (`program`, agentrepro.containers), with
the run directory and the study root mounted, and the job records which image the runtime ran; `{python}` is then the
harness's interpreter on the host, not the image's: name the image's own (`python3`).

Contract: the trainer writes the run directory contract (metrics.jsonl, checkpoints/, ...) into
{run_dir}; the evaluator writes one outcome row per episode (docs/design.md §3.4) to {outcomes}. With an
adapter, the framework's own outputs are converted instead (see verl_agent.py and relax_results.py).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

from agentrepro import containers, layout
from agentrepro.backends import reevaluation, runconfig, template
from agentrepro.backends.base import Backend
from agentrepro.backends.launch import Launch
from agentrepro.backends.process import run_logged
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_text, read_jsonl
from agentrepro.layout import RunFiles

# Adapter options (task_key, ...) are read by the adapter's converters; see verl_agent.py and relax_results.py.
BLOCK_KEYS = {"name", "command", "eval_command", "cwd", "env", "adapter", "repo", "commit",
              "workdir", "sources",   # the checkout and its algorithm files, for source parity (agentrepro.sourceparity)
              "task_key", "success_key", "success_threshold", "turns_key", "tokens_key"}
ADAPTERS = {"verl-agent": "agentrepro.backends.verl_agent", "relax": "agentrepro.backends.relax_results"}
EXTERNAL_COMMAND = "external_command.txt"
HARNESS_VALUES = ("run_dir", "config", "resume", "python", "step", "eval_dir", "outcomes")  # also AGENTREPRO_<NAME>
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def context(config: dict[str, Any], run_dir: Path, *, resume: bool = True, **extra: Any) -> dict[str, Any]:
    """Placeholder values: the resolved config plus run_dir, config, resume, python (and eval's extras)."""
    run_dir = Path(run_dir).resolve()
    return {**config, "run_dir": str(run_dir), "config": str(run_dir / RunFiles.RESOLVED_CONFIG), "resume": resume,
            "python": sys.executable, **{k: str(v) if isinstance(v, Path) else v for k, v in extra.items()}}


def validate_block(block: dict[str, Any]) -> None:
    unknown = sorted(set(block) - BLOCK_KEYS)
    if unknown:
        raise BadInput(f"unknown key (expected {', '.join(sorted(BLOCK_KEYS))})", where=f"backend.{unknown[0]}")
    if not isinstance(block.get("command"), str):
        raise BadInput("a command template (string) is required", where="backend.command")
    for key in ("command", "eval_command"):
        if key in block:
            parse(block, key)
    if "env" in block and not (isinstance(block["env"], dict) and all(isinstance(k, str) for k in block["env"])):
        raise BadInput("expected a mapping of variable names to values", where="backend.env")
    for name, value in (block.get("env") or {}).items():
        if not ENV_NAME.fullmatch(name):
            raise BadInput(f"{name!r} is not a variable name (letters, digits and _, not starting with a digit)",
                           where="backend.env")
        if name.startswith("AGENTREPRO_"):
            raise BadInput("names starting with AGENTREPRO_ are the harness's own values", where=f"backend.env.{name}")
        template.text_parts(value, where=f"backend.env.{name}")
    if block.get("adapter") is not None and block["adapter"] not in ADAPTERS:
        raise BadInput(f"unknown adapter {block['adapter']!r} (known: {', '.join(sorted(ADAPTERS))})", where="backend.adapter")


def parse(block: dict[str, Any], key: str) -> list[template.Word]:
    """The words of backend.<key>; BadInput for shell syntax or a placeholder where a value could become code."""
    words = template.split(block[key], where=f"backend.{key}")
    reevaluation.check(words, where=f"backend.{key}")
    return words


def _adapter(block: dict[str, Any]):
    import importlib

    name = block.get("adapter")
    return importlib.import_module(ADAPTERS[name]) if name else None


def prepare(block: dict[str, Any], key: str, ctx: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The argv of backend.<key> and the environment it adds: backend.env filled, plus AGENTREPRO_<NAME>."""
    argv = template.fill(parse(block, key), ctx, where=f"backend.{key}")
    env = {f"AGENTREPRO_{name.upper()}": template.format_value(ctx[name]) for name in HARNESS_VALUES if name in ctx}
    for name, value in (block.get("env") or {}).items():
        where = f"backend.env.{name}"
        env[name] = template.fill_word(template.text_parts(value, where=where), ctx, where=where)
    return argv, env


def program(block: dict[str, Any], key: str, ctx: dict[str, Any], run_dir: Path, label: str) -> containers.Program:
    """backend.<key> as it runs: filled, and inside the placement's container (agentrepro.containers) when it has one."""
    argv, env = prepare(block, key, ctx)
    return containers.program(ctx, argv, env, block.get("cwd"), run_dir=Path(run_dir), job_dir=_job_dir(ctx, run_dir), label=label)


def _job_dir(ctx: dict[str, Any], run_dir: Path) -> Path:
    """Where the attempt that runs the program keeps its records: the evaluation's directory, or the run's."""
    return Path(ctx.get("eval_dir", run_dir))


def run_template(block: dict[str, Any], key: str, ctx: dict[str, Any], run_dir: Path, label: str,
                 *, record: Path | None = None) -> list[str]:
    """Run backend.<key> (no shell) with its logs in run_dir/logs/, first writing it shell-quoted to `record`
    if given; returns the argv it ran (with its container's command line, when it has one)."""
    run = program(block, key, ctx, run_dir, label)
    if record is not None:
        atomic_write_text(record, shlex.join(run.argv) + "\n")
    with containers.proven(run, _job_dir(ctx, run_dir)):
        run_logged(list(run.argv), log_dir=run_dir / RunFiles.LOGS, label=label, cwd=run.cwd, env=dict(run.env))
    return list(run.argv)


class CommandBackend(Backend):
    name = "command"

    def validate_config(self, config: dict[str, Any]) -> None:
        validate_block(config["backend"])
        ctx = context(config, Path("."), step=0, eval_dir=".", outcomes=".")
        for key in ("command", "eval_command"):  # unknown placeholders and unusable values fail before training
            if key in config["backend"]:
                prepare(config["backend"], key, ctx)

    def launches(self, config: dict[str, Any], run_dir: Path, *, eval_step: int | None = None) -> list[Launch]:
        """The filled `command` (or, for `eval_step`, `eval_command`), exactly as `train` / `evaluate` run it."""
        block = config["backend"]
        validate_block(block)
        if eval_step is None:
            key, ctx = "command", context(config, run_dir)
        elif "eval_command" in block:
            eval_dir = layout.eval_dir(run_dir, eval_step).resolve()
            key, ctx = "eval_command", context(config, run_dir, step=eval_step, eval_dir=eval_dir,
                                               outcomes=eval_dir / "raw" / RunFiles.OUTCOMES)
        else:
            return []
        run = program(block, key, ctx, run_dir, "train" if eval_step is None else f"eval_step{eval_step}")
        return [Launch("train" if eval_step is None else f"evaluate step {eval_step}", run.argv, dict(run.env), run.cwd)]

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        block = config["backend"]
        validate_block(block)
        ctx = context(config, run_dir, resume=resume)
        run_template(block, "command", ctx, Path(run_dir), "train", record=Path(run_dir) / EXTERNAL_COMMAND)
        adapter = _adapter(block)
        if adapter is not None:
            adapter.convert_training(Path(run_dir), config)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        run_dir = Path(run_dir)
        config = runconfig.read_resolved_config(run_dir)
        block = config["backend"]
        validate_block(block)
        adapter = _adapter(block)
        eval_dir = layout.eval_dir(run_dir, step).resolve()
        outcomes = eval_dir / "raw" / RunFiles.OUTCOMES
        if "eval_command" in block:
            outcomes.parent.mkdir(parents=True, exist_ok=True)
            ctx = context(config, run_dir, step=step, eval_dir=eval_dir, outcomes=outcomes)
            run_template(block, "eval_command", ctx, run_dir, f"eval_step{step}")
        elif adapter is None:
            raise BadInput("an eval_command template is required to evaluate a command-backend run", where="backend.eval_command")
        if adapter is not None:
            return adapter.convert_eval(run_dir, step, config)
        if not outcomes.is_file():
            raise Failure(f"{outcomes}: the eval command succeeded but wrote no outcomes there")
        return read_jsonl(outcomes)
