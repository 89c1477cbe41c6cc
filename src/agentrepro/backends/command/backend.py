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
among an interpreter's options) are refused too (code_words.py). Pipes and redirections go in a script or
an inline `bash -c '...'` that reads values from environment variables: `env` values are filled without
any parsing, and every harness value is also there as AGENTREPRO_<NAME> (AGENTREPRO_RUN_DIR, _CONFIG, ...).

Placeholders are any key path of the resolved config (`{train.lr}`, `{seed}`), plus `{run_dir}` (absolute),
`{config}` (resolved_config.yaml), `{resume}` (true/false), `{python}` (this interpreter), and for
`eval_command` `{step}`, `{eval_dir}` and `{outcomes}` (= eval_dir/raw/outcomes.jsonl). stdout and stderr go
to RUN_DIR/logs/; the filled command, shell-quoted, is kept in RUN_DIR/external_command.txt.
With a container image (`image: {runtime, ...}`), each command runs inside it (`template_launch`, agentrepro.containers), with
the run directory and the study root mounted, and the job records which image the runtime ran; `{python}` is then the
harness's interpreter on the host, not the image's: name the image's own (`python3`).

Contract: the trainer writes the run directory contract (metrics.jsonl, checkpoints/, ...) into
{run_dir}; the evaluator writes one outcome row per episode (docs/design.md §3.4) to {outcomes}. With an
adapter, that framework's own outputs are converted instead: `adapter:` names a backend that offers one
(`Backend.adapter`: verl-agent's outputs, Relax's per-episode rollout summaries).

It may run in a container (`image: {runtime, ...}`, docs/containers.md) or without one (`image: {none: ...}`: in the
harness's own Python environment), and takes a config-built, local or hub model.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

from agentrepro import layout, runconfig
from agentrepro.backends.base import BUILTIN_FORM, COMMON, HUB_FORM, Adapter, Backend, Block, text
from agentrepro.backends.command import code_words, template
from agentrepro.backends.launch import Launch, contain, run_launch
from agentrepro.backends.registry import REGISTRY, BackendRegistry
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_text
from agentrepro.layout import RunFiles
from agentrepro.reading import read_jsonl

EXTERNAL_COMMAND = "external_command.txt"
HARNESS_VALUES = ("run_dir", "config", "resume", "python", "step", "eval_dir", "outcomes")  # also AGENTREPRO_<NAME>
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TEMPLATES = ("command", "eval_command")
BLOCK = COMMON | Block(
    {
        "command": text("the launch template"),
        "eval_command": text("the evaluation template"),
        "cwd": text("working directory of the commands"),
        "env": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "environment variables (templates)",
        },
        "adapter": {
            "type": "string",
            "minLength": 1,
            "description": "converter of the trainer's outputs: a backend that offers one",
        },
        # read by the adapter's converters (backends/convert.py)
        "task_key": text("output conversion: field holding the task id"),
        "success_key": text("output conversion: field holding success"),
        "success_threshold": {"type": "number", "description": "output conversion: success when the field is >= this"},
        "turns_key": text("output conversion: field holding the turn count"),
        "tokens_key": text("output conversion: field holding the token count"),
    },
    required=("command",),
)


def context(config: dict[str, Any], run_dir: Path, *, resume: bool = True, **extra: Any) -> dict[str, Any]:
    """Placeholder values: the resolved config plus run_dir, config, resume, python (and eval's extras)."""
    run_dir = Path(run_dir).resolve()
    return {
        **config,
        "run_dir": str(run_dir),
        "config": str(run_dir / RunFiles.RESOLVED_CONFIG),
        "resume": resume,
        "python": sys.executable,
        **{k: str(v) if isinstance(v, Path) else v for k, v in extra.items()},
    }


def parse(block: dict[str, Any], key: str) -> list[template.Word]:
    """The words of backend.<key>; BadInput for shell syntax or a placeholder where a value could become code."""
    words = template.split(block[key], where=f"backend.{key}")
    code_words.check(words, where=f"backend.{key}")
    return words


def prepare(block: dict[str, Any], key: str, ctx: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The argv of backend.<key> and the environment it adds: backend.env filled, plus AGENTREPRO_<NAME>."""
    argv = template.fill(parse(block, key), ctx, where=f"backend.{key}")
    env = {f"AGENTREPRO_{name.upper()}": template.format_value(ctx[name]) for name in HARNESS_VALUES if name in ctx}
    for name, value in (block.get("env") or {}).items():
        where = f"backend.env.{name}"
        env[name] = template.fill_word(template.text_parts(value, where=where), ctx, where=where)
    return argv, env


def template_launch(
    block: dict[str, Any], key: str, ctx: dict[str, Any], run_dir: Path, label: str, purpose: str
) -> Launch:
    """backend.<key> filled with `ctx`, as the program it runs and `agentrepro command` shows: in backend.cwd when
    given, inside the placement's container when it has one (launch.contain; its proof kept by the job it belongs to:
    the evaluation's directory, or the run's)."""
    argv, env = prepare(block, key, ctx)
    launch = Launch(purpose, tuple(argv), env, Path(block["cwd"]) if block.get("cwd") else None)
    return contain(launch, ctx, run_dir=Path(run_dir), job_dir=Path(ctx.get("eval_dir", run_dir)), label=label)


def run_template(
    block: dict[str, Any], key: str, ctx: dict[str, Any], run_dir: Path, label: str, *, record: Path | None = None
) -> list[str]:
    """Run backend.<key> (no shell) with its logs in run_dir/logs/, first writing it shell-quoted to `record`
    if given; returns the argv it ran (with its container's command line, when it has one)."""
    launch = template_launch(block, key, ctx, run_dir, label, label)
    if record is not None:
        atomic_write_text(record, shlex.join(launch.argv) + "\n")
    run_launch(launch, run_dir, label)
    return list(launch.argv)


def eval_paths(run_dir: Path, step: int) -> tuple[Path, Path]:
    """(eval/step<N>/, eval/step<N>/raw/outcomes.jsonl): where an eval_command writes its rows."""
    eval_dir = layout.eval_dir(run_dir, step).resolve()
    return eval_dir, eval_dir / "raw" / RunFiles.OUTCOMES


class CommandBackend(Backend):
    name = "command"
    block = BLOCK
    model_forms = frozenset({BUILTIN_FORM, HUB_FORM})
    container = "optional"

    def __init__(self, registry: BackendRegistry | None = None) -> None:
        self.registry = registry or REGISTRY  # where `adapter:` names are looked up (BackendRegistry.adapter)

    @classmethod
    def create(cls, registry: Any) -> CommandBackend:
        return cls(registry)

    def check_block(self, block: dict[str, Any]) -> None:
        """The block alone: its keys, templates that a shell-free run can take, variable names, a known adapter."""
        super().check_block(block)
        if not isinstance(block.get("command"), str):
            raise BadInput("a command template (string) is required", where="backend.command")
        for key in TEMPLATES:
            if key in block:
                parse(block, key)
        if "env" in block and not (isinstance(block["env"], dict) and all(isinstance(k, str) for k in block["env"])):
            raise BadInput("expected a mapping of variable names to values", where="backend.env")
        for name, value in (block.get("env") or {}).items():
            if not ENV_NAME.fullmatch(name):
                raise BadInput(
                    f"{name!r} is not a variable name (letters, digits and _, not starting with a digit)",
                    where="backend.env",
                )
            if name.startswith("AGENTREPRO_"):
                raise BadInput(
                    "names starting with AGENTREPRO_ are the harness's own values", where=f"backend.env.{name}"
                )
            template.text_parts(value, where=f"backend.env.{name}")
        if block.get("adapter") is not None:
            self._adapter(block)

    def validate_config(self, config: dict[str, Any]) -> None:
        super().validate_config(config)
        ctx = context(config, Path("."), step=0, eval_dir=".", outcomes=".")
        for key in TEMPLATES:  # unknown placeholders and unusable values fail before training
            if key in config["backend"]:
                prepare(config["backend"], key, ctx)

    def launches(self, config: dict[str, Any], run_dir: Path, *, eval_step: int | None = None) -> list[Launch]:
        """The filled `command` (or, for `eval_step`, `eval_command`), exactly as `train` / `evaluate` run it."""
        block = config["backend"]
        self.check_block(block)
        if eval_step is None:
            return [template_launch(block, "command", context(config, run_dir), run_dir, "train", "train")]
        if "eval_command" not in block:
            return []
        eval_dir, outcomes = eval_paths(run_dir, eval_step)
        ctx = context(config, run_dir, step=eval_step, eval_dir=eval_dir, outcomes=outcomes)
        return [
            template_launch(block, "eval_command", ctx, run_dir, f"eval_step{eval_step}", f"evaluate step {eval_step}")
        ]

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        run_dir, block = Path(run_dir), config["backend"]
        self.check_block(block)
        run_template(
            block,
            "command",
            context(config, run_dir, resume=resume),
            run_dir,
            "train",
            record=run_dir / EXTERNAL_COMMAND,
        )
        adapter = self._adapter(block)
        if adapter is not None:
            adapter.convert_training(run_dir, config)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        run_dir = Path(run_dir)
        config = runconfig.read_resolved_config(run_dir)
        block = config["backend"]
        self.check_block(block)
        adapter = self._adapter(block)
        eval_dir, outcomes = eval_paths(run_dir, step)
        if "eval_command" in block:
            outcomes.parent.mkdir(parents=True, exist_ok=True)
            ctx = context(config, run_dir, step=step, eval_dir=eval_dir, outcomes=outcomes)
            run_template(block, "eval_command", ctx, run_dir, f"eval_step{step}")
        elif adapter is None:
            raise BadInput(
                "an eval_command template is required to evaluate a command-backend run", where="backend.eval_command"
            )
        if adapter is not None:
            return adapter.convert_eval(run_dir, step, config)
        if not outcomes.is_file():
            raise Failure(f"{outcomes}: the eval command succeeded but wrote no outcomes there")
        return read_jsonl(outcomes)

    def _adapter(self, block: dict[str, Any]) -> Adapter | None:
        name = block.get("adapter")
        return self.registry.adapter(name) if name is not None else None
