"""verl-agent's older checkpoints lose their training state during training (eval.keep_checkpoints).

Wrapped by agentrepro_verl_hook.py, which checks the signature first, at verl-agent
20bd331bdbc9026a5668e11362178e10ab7400c8 (zzj1111/alfworldauto): `RayPPOTrainer._save_checkpoint(self)`
(recipe/GraphGPO/graphgpo_ray_trainer.py:931, verl/trainer/ppo/ray_trainer.py:911) writes
<trainer.default_local_dir>/global_step_<N>/ (actor/ with the FSDP model, optimizer and extra shards and, because
the harness adds hf_model to actor.checkpoint.contents, actor/huggingface/; critic/ with a critic; data.pt) and
then latest_checkpointed_iteration.txt = N, the step a resume loads (trainer.resume_mode=auto reads only it).

After it returns, with AGENTREPRO_VERL_PRUNE=1 (set by the verl-agent backend for training when the run config's
eval.keep_checkpoints prunes during training: agentrepro's backends/checkpoints.py decides), every older
global_step_<M>/ (M < N) loses its training state: every file in it
except those under actor/huggingface/ (HF_COPY), the copy `agentrepro eval` serves. 0, or no variable: nothing.
Before any file of step M is removed, one line per file, {"step": M, "saved": N, "path": <relative to the run
directory (AGENTREPRO_VERL_OUT)>, "sha256", "bytes"}, is appended to <default_local_dir>/pruned_in_training.jsonl
(RECORD) and flushed to disk. Hashing runs in the driver, between training steps (an 18 GB checkpoint of a 1.5B
model with its optimizer takes tens of seconds).

verl's own trainer.max_actor_ckpt_to_keep is not used: it removes whole global_step_<M>/actor/ directories, their
Hugging Face copy included, and leaves data.pt and critic/ (fsdp_checkpoint_manager.py:154-157 with
checkpoint_manager.py:77 `remove_previous_save_local_path`).

The layout constants here (STEP_DIR, HF_COPY, RECORD) are the ones agentrepro's verl-agent backend maps a step to.
Python standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

STEP_DIR = "global_step_{}"  # <default_local_dir>/global_step_<N>/ (ray_trainer.py:913)
HF_COPY = ("actor", "huggingface")  # inside it: the Hugging Face copy (fsdp_checkpoint_manager.py:208), kept
RECORD = "pruned_in_training.jsonl"  # in <default_local_dir>, next to latest_checkpointed_iteration.txt
PRUNE_ENV = "AGENTREPRO_VERL_PRUNE"  # "1": prune older steps after each save; "0" or unset: keep them
_STEP = re.compile(r"^global_step_(\d+)$")


def prunes() -> bool:
    """AGENTREPRO_VERL_PRUNE: "1" True, "0" or unset False; RuntimeError on another value, before training starts."""
    value = os.environ.get(PRUNE_ENV, "0")
    if value not in ("0", "1"):
        raise RuntimeError(f"agentrepro: {PRUNE_ENV}={value!r} is neither 0 nor 1")
    return value == "1"


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def state_files(step_dir: str) -> list[str]:
    """The files of one global_step_<M>/ that are training state: all but those under HF_COPY."""
    kept = os.path.join(step_dir, *HF_COPY)
    found = []
    for folder, subdirs, names in os.walk(step_dir):
        subdirs[:] = sorted(d for d in subdirs if os.path.join(folder, d) != kept)
        found += [os.path.join(folder, name) for name in sorted(names)]
    return found


def _relative(real_root: str, inside: str, run_dir: str) -> str:
    """A path inside the checkpoint root as the run's seal names files: relative to the run directory, with /."""
    return os.path.relpath(os.path.join(real_root, inside), run_dir).replace(os.sep, "/")


def _remove_empty_dirs(step_dir: str) -> None:
    for folder, _, _ in os.walk(step_dir, topdown=False):
        if folder != step_dir and not os.listdir(folder):
            os.rmdir(folder)


def prune_older(root: str, latest: int, run_dir: str) -> list[dict]:
    """Remove the training state of every global_step_<M>/ under `root` with M < `latest`, recording each file
    first (module docstring); returns the lines written."""
    run_dir, real_root = os.path.realpath(run_dir), os.path.realpath(root)
    if os.path.commonpath([real_root, run_dir]) != run_dir:
        raise RuntimeError(
            f"agentrepro: checkpoints in {root}, outside the run directory {run_dir}; "
            f"not pruned ({PRUNE_ENV}); trainer.default_local_dir must stay inside the run"
        )
    steps = sorted(int(m.group(1)) for m in map(_STEP.match, os.listdir(root)) if m)
    written = []
    for step in (s for s in steps if s < latest):
        step_dir = os.path.join(root, STEP_DIR.format(step))
        files = state_files(step_dir)
        if not files:
            continue
        lines = [
            {
                "step": step,
                "saved": latest,
                "path": _relative(real_root, os.path.relpath(path, root), run_dir),
                "sha256": _sha256(path),
                "bytes": os.path.getsize(path),
            }
            for path in files
        ]
        with open(os.path.join(root, RECORD), "a", encoding="utf-8") as f:
            f.writelines(json.dumps(line, sort_keys=True) + "\n" for line in lines)
            f.flush()
            os.fsync(f.fileno())
        for path in files:
            os.unlink(path)
        _remove_empty_dirs(step_dir)
        written += lines
    return written


def wrap_save_checkpoint(original):
    prune = prunes()

    def _save_checkpoint(self):
        result = original(self)
        if prune:
            prune_older(
                str(self.config.trainer.default_local_dir), int(self.global_steps), os.environ["AGENTREPRO_VERL_OUT"]
            )
        return result

    return _save_checkpoint
