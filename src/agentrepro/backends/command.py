"""The `command` backend: any external trainer, described by command templates in the backend block.

```yaml
backend:
  name: command
  command: "python train.py --lr {train.lr} --steps {train.steps} --out {run_dir}"
  eval_command: "python evaluate.py --ckpt {run_dir}/checkpoints/step{step} --out {outcomes}"   # optional
  cwd: path/to/trainer        # optional, relative to where agentrepro runs
  env: {WANDB_MODE: offline}  # optional; values may use placeholders (not shell-quoted: no shell sees them)
  adapter: relax              # optional: convert that framework's outputs (verl-agent | relax)
```

Placeholders (template.py) are any key path of the resolved config (`{train.lr}`, `{seed}`), plus
`{run_dir}` (absolute), `{config}` (resolved_config.yaml), `{resume}` (true/false), `{python}` (this
interpreter), and for `eval_command` `{step}`, `{eval_dir}` and `{outcomes}` (= eval_dir/raw/outcomes.jsonl).
Every value is shell-quoted; the command runs under /bin/sh with stdout/stderr in RUN_DIR/logs/.

Contract: the trainer writes the run directory contract (metrics.jsonl, checkpoints/, ...) into
{run_dir}; the evaluator writes one outcome row per episode (docs/design.md §3.4) to {outcomes}. With an
adapter, the framework's own outputs are converted instead (see verl_agent.py and relax.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentrepro.backends import rundirs, template
from agentrepro.backends.base import Backend
from agentrepro.backends.process import run_logged
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_text, read_jsonl

# Adapter options (task_key, ...) are read by the adapter's converters; see verl_agent.py and relax.py.
BLOCK_KEYS = {"name", "command", "eval_command", "cwd", "env", "adapter", "repo", "commit",
              "task_key", "success_key", "success_threshold", "turns_key", "tokens_key"}
ADAPTERS = {"verl-agent": "agentrepro.backends.verl_agent", "relax": "agentrepro.backends.relax"}
EXTERNAL_COMMAND = "external_command.txt"


def context(config: dict[str, Any], run_dir: Path, *, resume: bool = True, **extra: Any) -> dict[str, Any]:
    """Placeholder values: the resolved config plus run_dir, config, resume, python (and eval's extras)."""
    run_dir = Path(run_dir).resolve()
    return {**config, "run_dir": str(run_dir), "config": str(run_dir / rundirs.RESOLVED), "resume": resume,
            "python": sys.executable, **{k: str(v) if isinstance(v, Path) else v for k, v in extra.items()}}


def validate_block(block: dict[str, Any]) -> None:
    unknown = sorted(set(block) - BLOCK_KEYS)
    if unknown:
        raise BadInput(f"unknown key (expected {', '.join(sorted(BLOCK_KEYS))})", where=f"backend.{unknown[0]}")
    if not isinstance(block.get("command"), str):
        raise BadInput("a command template (string) is required", where="backend.command")
    template.placeholders(block["command"], where="backend.command")
    if "eval_command" in block:
        template.placeholders(block["eval_command"], where="backend.eval_command")
    if "env" in block and not (isinstance(block["env"], dict) and all(isinstance(k, str) for k in block["env"])):
        raise BadInput("expected a mapping of variable names to values", where="backend.env")
    if block.get("adapter") is not None and block["adapter"] not in ADAPTERS:
        raise BadInput(f"unknown adapter {block['adapter']!r} (known: {', '.join(sorted(ADAPTERS))})", where="backend.adapter")


def _adapter(block: dict[str, Any]):
    import importlib

    name = block.get("adapter")
    return importlib.import_module(ADAPTERS[name]) if name else None


def run_template(block: dict[str, Any], key: str, ctx: dict[str, Any], run_dir: Path, label: str) -> str:
    """Render backend.<key>, run it under /bin/sh with logs in run_dir/logs/; returns the rendered command."""
    rendered = template.render(block[key], ctx, where=f"backend.{key}")
    env = {name: template.render(str(value), ctx, where=f"backend.env.{name}", quote=False)
           for name, value in (block.get("env") or {}).items()}
    env.update(AGENTREPRO_RUN_DIR=ctx["run_dir"], AGENTREPRO_CONFIG=ctx["config"])
    run_logged(["/bin/sh", "-c", rendered], log_dir=run_dir / "logs", label=label, cwd=block.get("cwd"), env=env)
    return rendered


class CommandBackend(Backend):
    name = "command"

    def validate_config(self, config: dict[str, Any]) -> None:
        validate_block(config["backend"])
        ctx = context(config, Path("."), step=0, eval_dir=".", outcomes=".")
        template.render(config["backend"]["command"], ctx, where="backend.command")  # unknown placeholders fail early
        if "eval_command" in config["backend"]:
            template.render(config["backend"]["eval_command"], ctx, where="backend.eval_command")

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        block = config["backend"]
        validate_block(block)
        ctx = context(config, run_dir, resume=resume)
        rendered = template.render(block["command"], ctx, where="backend.command")
        atomic_write_text(Path(run_dir) / EXTERNAL_COMMAND, rendered + "\n")
        run_template(block, "command", ctx, Path(run_dir), "train")
        adapter = _adapter(block)
        if adapter is not None:
            adapter.convert_training(Path(run_dir), config)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        run_dir = Path(run_dir)
        config = rundirs.read_resolved_config(run_dir)
        block = config["backend"]
        validate_block(block)
        adapter = _adapter(block)
        eval_dir = (run_dir / "eval" / f"step{step}").resolve()
        outcomes = eval_dir / "raw" / "outcomes.jsonl"
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
