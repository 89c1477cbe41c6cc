"""A warm start of its own, shared by every method of a seed: made once, adopted by each run, evaluated once as step 0.

* `make_warmstart(config, out)`: the warm start of a warm-start config (trainer/warmstart_id.py) into `out`:
  checkpoints/tokenizer/, checkpoints/step0.pt (the weights, the global torch random state after the warm start,
  no optimizer), warmstart.json, and the step-0 outcomes eval/step0/outcomes.jsonl. It does what a run that
  warm-starts itself does before its first RL step, in the same order, so the weights are the same bytes.
* `adopt(run_dir, warmstart_dir, resolved)`: a fresh run takes the warm start's tokenizer and step-0 checkpoint as
  its own, byte for byte (so a run's sealed checkpoints/step0.pt hashes as its warm start's does: the audit's
  check), and records where it came from in its warmstart.json (`shared`). The trainer then resumes from that
  step 0 exactly as an uninterrupted run continues after its own warm start. A run that already has
  checkpoints must have come from this warm start.
* `step0_rows(run_dir, config)`: a run's step-0 outcomes are its warm start's, relabelled with the run's study and
  method (the same weights on the same panel with the same sampling seeds: evaluated once, not once per method).

A warm start is used only when its seal still verifies, its last attempt ended ok, and its identity equals the
identity of the run's own settings; otherwise BadInput names the folder and what differs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from agentrepro.attempts import read_provenance
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_json, atomic_write_jsonl, load_json, read_jsonl, sha256_file
from agentrepro.layout import RunFiles, checkpoint_dir, outcomes_path
from agentrepro.seal import OUTPUTS, verify_outputs
from agentrepro.trainer.warmstart_id import identity, warmstart_config

STEP0 = "step0.pt"
TOKENIZER = "tokenizer"
RECORD = RunFiles.WARMSTART


def make_warmstart(config: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """Warm-start into `out` and evaluate step 0; returns the step-0 outcome rows (not yet written)."""
    import torch

    from agentrepro.trainer import checkpoint as ckpt
    from agentrepro.trainer.context import RunSpec
    from agentrepro.trainer.evaluate import evaluate_run
    from agentrepro.trainer.loop import run_device
    from agentrepro.trainer.policy import build_policy
    from agentrepro.trainer.warmstart import warm_start

    spec = RunSpec.from_config(config)
    device = run_device(spec.train)
    ckpt.seed_global_rng(spec.seed)   # as a run that warm-starts itself does (loop.Trainer)
    tokenizer = spec.build_tokenizer()
    codec = spec.make_codec(tokenizer)
    policy = build_policy(spec.model, tokenizer, spec.seed).to(device)
    policy.eval()
    ckpt.save_tokenizer(out, tokenizer)
    record = warm_start(policy, spec, codec, device)
    atomic_write_json(out / RECORD, record)
    counters = {"env_steps": 0, "episodes": 0, "tokens_generated": 0, "tokens_trained": 0, "wall_s": record.get("wall_s", 0.0)}
    # the global torch state goes with the weights; a run's own generators start from its seed (loop.Trainer)
    ckpt.save_checkpoint(out, 0, policy=policy, rng={"torch_cpu": torch.get_rng_state()}, counters=counters)
    return evaluate_run(config, out, 0)


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target, start)).as_posix()


def check_warmstart(warmstart_dir: Path, resolved: dict[str, Any]) -> str:
    """The warm start's identity, after checking that it is sealed, unchanged, finished and made with `resolved`'s settings."""
    seal = warmstart_dir / OUTPUTS
    if not seal.is_file():
        raise BadInput(f"no {OUTPUTS}: not a finished warm start (run `agentrepro warmstart` first)", path=warmstart_dir)
    problems = verify_outputs(seal)
    if problems:
        raise BadInput(f"changed after it was sealed: {problems[0]}", path=warmstart_dir)
    if read_provenance(warmstart_dir).get("status") != "ok":
        raise BadInput("its last attempt did not end ok", path=warmstart_dir / RunFiles.PROVENANCE)
    theirs = read_provenance(warmstart_dir).get("warmstart_identity")
    mine = identity(warmstart_config(resolved))
    if theirs != mine:
        raise BadInput(f"made with other settings (identity {str(theirs)[:12]}, this run's seed, model, env and warm-start "
                       f"settings give {mine[:12]}): use the warm start of this run's settings", path=warmstart_dir)
    return mine


def adopt(run_dir: Path, warmstart_dir: Path, resolved: dict[str, Any]) -> dict[str, Any]:
    """Make the warm start the starting point of `run_dir` (fresh), or check that it already is (resuming)."""
    run_dir, warmstart_dir = Path(run_dir), Path(warmstart_dir)
    ident = check_warmstart(warmstart_dir, resolved)
    source = checkpoint_dir(warmstart_dir) / STEP0
    shared = {"dir": _relative(warmstart_dir, run_dir), "identity": ident, "checkpoint_sha256": sha256_file(source),
              "outputs_sha256": sha256_file(warmstart_dir / OUTPUTS)}
    if checkpoint_dir(run_dir).is_dir() and any(checkpoint_dir(run_dir).iterdir()):
        recorded = load_json(run_dir / RECORD).get("shared") if (run_dir / RECORD).is_file() else None
        if not isinstance(recorded, dict) or recorded.get("checkpoint_sha256") != shared["checkpoint_sha256"]:
            raise BadInput("this run's checkpoints did not start from this warm start (pass --no-resume to start again from it)",
                           path=run_dir / RECORD)
        return recorded
    target = checkpoint_dir(run_dir)
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / f".{TOKENIZER}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(checkpoint_dir(warmstart_dir) / TOKENIZER, tmp)
    tmp.rename(target / TOKENIZER)
    for name in RunFiles.STEP_LOGS:
        (run_dir / name).unlink(missing_ok=True)
    for name in (RunFiles.METRICS, RunFiles.TIMINGS):
        atomic_write_jsonl(run_dir / name, [])
    atomic_write_json(run_dir / RECORD, {**load_json(warmstart_dir / RECORD), "shared": shared})
    copied = target / f".{STEP0}.tmp"
    shutil.copyfile(source, copied)
    copied.rename(target / STEP0)  # last: a run with a step-0 checkpoint has everything it resumes from
    return shared


def shared_record(run_dir: Path) -> dict[str, Any] | None:
    """The `shared` block of a run's warmstart.json: where its warm start is (relative to the run), or None."""
    path = Path(run_dir) / RECORD
    return load_json(path).get("shared") if path.is_file() else None


def step0_rows(run_dir: Path, config: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The run's step-0 outcomes: its warm start's rows with the run's study and method; None for a run that
    warm-started itself (it evaluates its own step 0)."""
    shared = shared_record(run_dir)
    if shared is None:
        return None
    warmstart_dir = Path(run_dir) / shared["dir"]
    check_warmstart(warmstart_dir, config)
    mine = sha256_file(checkpoint_dir(run_dir) / STEP0)
    if mine != shared["checkpoint_sha256"] or sha256_file(checkpoint_dir(warmstart_dir) / STEP0) != mine:
        raise BadInput("this run's step-0 checkpoint is not its warm start's", path=checkpoint_dir(run_dir) / STEP0)
    return [{**row, "study": config["study"], "method": config["method"]} for row in read_jsonl(outcomes_path(warmstart_dir, 0))]
