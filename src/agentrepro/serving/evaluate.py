"""One evaluation through a chat server: the server up, the panel played, the server down, rows and provenance.

`evaluate_model` is shared by both forms of `agentrepro eval`: a run's checkpoint (`evaluate_run`, when the
run config says `eval.engine: served`) and a model directory on given seeds (`eval --model`). The
sampling settings come from the run config's `eval` block (temperature, top_p, sample_seed,
episodes_per_task, max_turns) and `eval.server` (max_tokens, concurrency); the dialogue mode is the
run's `train.mode`. The evaluation as a whole ends, failed, when `eval.server.deadline_s` (`--deadline`) has passed,
each request when `eval.server.request_timeout_s` (`--request-timeout`) has (client.py); the failure says which.
Sampling (temperature > 0) through `transformers serve` needs `do_sample: true` in
the model's generation_config.json (the server does not turn it on from the temperature): without it the
evaluation is refused rather than silently greedy.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from agentrepro import outcomes
from agentrepro.environments import make_env, validate_params
from agentrepro.errors import BadInput
from agentrepro.layout import RunFiles, eval_dir
from agentrepro.reading import load_json
from agentrepro.runconfig import EvalConfig
from agentrepro.serving.chat import MODES
from agentrepro.serving.client import ChatClient, ServerError
from agentrepro.serving.engine import Sampling, evaluate_panel
from agentrepro.serving.servers import ServerConfig, determinism, serve

DEFAULT_MAX_TURNS = 5


def check_sampling(model_dir: str | Path | None, server: ServerConfig, temperature: float) -> None:
    if server.kind != "transformers" or temperature == 0 or model_dir is None:
        return
    path = Path(model_dir) / "generation_config.json"
    config = load_json(path) if path.is_file() else {}
    if not isinstance(config, dict) or config.get("do_sample") is not True:
        raise BadInput(
            "temperature > 0 through transformers serve needs do_sample: true here (else it decodes greedily)",
            path=path,
            where="do_sample",
        )


def evaluate_model(
    model_dir: str | Path | None,
    *,
    identity: dict[str, Any],
    step: int,
    env_name: str,
    env_params: dict[str, Any],
    panel: list[dict[str, Any]],
    evaluation: EvalConfig,
    mode: str,
    server: ServerConfig,
    log_dir: Path,
    tensor_parallel: int = 1,
    positions: list[int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Outcome rows of `model_dir` on `panel` (only its `positions` where given), and the provenance of how they
    were produced."""
    if mode not in MODES:
        raise BadInput(f"expected one of {', '.join(MODES)}, got {mode!r}", where="train.mode")
    sampling = Sampling(
        temperature=float(evaluation.temperature),
        top_p=float(evaluation.top_p),
        max_tokens=server.max_tokens,
        sample_seed=int(evaluation.sample_seed),
    )
    check_sampling(model_dir, server, sampling.temperature)
    max_turns = int(DEFAULT_MAX_TURNS if evaluation.max_turns is None else evaluation.max_turns)
    episodes = int(evaluation.episodes_per_task)
    with serve(server, model_dir, log_dir=log_dir, seed=sampling.sample_seed, tensor_parallel=tensor_parallel) as live:

        async def play() -> list[dict[str, Any]]:
            client = ChatClient(
                live.url,
                live.model,
                timeout_s=server.request_timeout_s,
                is_alive=live.alive,
                max_connections=max(server.concurrency, 1),
            )
            try:
                return await asyncio.wait_for(
                    evaluate_panel(
                        lambda: make_env(env_name, env_params),
                        panel,
                        identity=identity,
                        step=step,
                        client=client,
                        sampling=sampling,
                        mode=mode,
                        max_turns=max_turns,
                        episodes=episodes,
                        concurrency=server.concurrency,
                        category=env_name,
                        positions=positions,
                    ),
                    server.deadline_s,
                )
            except asyncio.TimeoutError:
                raise ServerError(
                    f"{live.url}: the evaluation's deadline of {server.deadline_s:g} s passed before its "
                    f"{len(panel) * episodes} episodes were played (eval.server.deadline_s, --deadline)"
                ) from None
            finally:
                await client.aclose()

        rows = asyncio.run(play())
        record = dict(live.provenance)
    record.update(determinism(server, temperature=sampling.temperature))
    provenance = {
        "engine": "served",
        "server": record,
        "mode": mode,
        "concurrency": server.concurrency,
        "time_limits_s": {"request": server.request_timeout_s, "deadline": server.deadline_s},
        "sampling": {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "sample_seed": sampling.sample_seed,
            "max_turns": max_turns,
        },
        "model_dir": None if model_dir is None else str(model_dir),
    }
    return rows, provenance


def run_model_dir(
    config: dict[str, Any], run_dir: Path, step: int, checkpoint: Path | None, exported: Path | None
) -> Path | None:
    """The model directory of checkpoint `step`: given, the backend's Hugging Face copy (`exported`,
    `Backend.checkpoint(...).hf`), or at step 0 the local base model (None only for a URL server whose
    `eval.server.model` names what it serves)."""
    if checkpoint is not None:
        return checkpoint
    server = EvalConfig.of(config).server or {}
    if server.get("kind") == "url" and server.get("model"):
        return None  # a server someone else runs, serving the model it names
    if exported is not None and exported.is_dir():
        return exported
    base = (config.get("model") or {}).get("path")
    if step == 0 and base and Path(base).is_dir():
        return Path(base)
    record = eval_dir(run_dir, step) / RunFiles.PRUNED
    why = f"pruned after its evaluation ({record})" if record.is_file() else "export it there, or pass --checkpoint DIR"
    raise BadInput(f"no Hugging Face checkpoint of step {step} ({why})", path=exported or run_dir)


def evaluate_run(
    config: dict[str, Any],
    run_dir: Path,
    step: int,
    *,
    log_dir: Path,
    exported: Path | None,
    checkpoint: Path | None = None,
    time_limits: dict[str, float] | None = None,
    positions: list[int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`agentrepro eval --run` for a run whose config says `eval.engine: served`; `exported`: the backend's Hugging
    Face copy of checkpoint `step` (None: it has none); `time_limits` (the command line's request_timeout_s and
    deadline_s) take the place of eval.server's; `positions`: only these tasks of the panel (the audit's sample)."""
    evaluation = EvalConfig.of(config)
    env = config["env"]
    params = validate_params(env["name"], env.get("params") or {})
    panel = outcomes.frozen_panel(env["name"], params, evaluation)
    if evaluation.max_turns is None:  # the run's own train.max_turns, as the backend's evaluation plays
        turns = (config.get("train") or {}).get("max_turns", DEFAULT_MAX_TURNS)
        evaluation = dataclasses.replace(evaluation, max_turns=turns)
    server = ServerConfig.from_dict({**(evaluation.server or {}), **(time_limits or {})})
    model_dir = run_model_dir(config, run_dir, step, checkpoint, exported)
    identity = {"study": config["study"], "method": config["method"], "seed": config["seed"]}
    return evaluate_model(
        model_dir,
        identity=identity,
        step=step,
        env_name=env["name"],
        env_params=params,
        panel=panel,
        evaluation=evaluation,
        mode=(config.get("train") or {}).get("mode", "concat"),
        server=server,
        log_dir=log_dir,
        tensor_parallel=max(1, int((config.get("resources") or {}).get("gpus", 1) or 1)),
        positions=positions,
    )


def replay_run(
    config: dict[str, Any],
    run_dir: Path,
    step: int,
    *,
    exported: Path | None,
    positions: list[int] | None,
    log_dir: Path,
) -> list[dict[str, Any]]:
    """`audit --re-eval` of served outcomes: the run's evaluation of `step` played again through a server of the
    recorded kind started here (its requests carry the same seeds: a task keeps its panel position), where that
    server repeats its outcomes; BadInput saying why where it does not (a URL server someone else runs, sampling
    with several requests in flight), or where the Hugging Face checkpoint is not here."""
    evaluation = EvalConfig.of(config)
    server = ServerConfig.from_dict(evaluation.server or {})
    repeats = determinism(server, temperature=float(evaluation.temperature))
    if repeats["deterministic"] is not True:
        raise BadInput(f"its outcomes came from a chat server that does not repeat them ({repeats['why']})")
    return evaluate_run(config, run_dir, step, log_dir=log_dir, exported=exported, positions=positions)[0]
