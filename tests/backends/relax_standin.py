"""A stand-in Relax checkout and `ray` for the relax backend's end-to-end test (no Relax code: behaviour only).

`make_checkout(root)` writes, under root:
* examples/graphgpo/run_alfworld_qwen2_5_1_5b.sh: checks the knobs the real recipe requires, refuses to run
  unless DRY_RUN=1 and RELAX_ENTRYPOINT_MODE are set (so the test fails if the harness would let the recipe
  source local.sh), and prints `ray job submit --address=http://127.0.0.1:8265 -- python3
  relax/entrypoints/train.py ...` with its knobs, as the real one does;
* examples/graphgpo/prepare_alfworld.py: lists the games under --data-root into eval_in_distribution.prompts.jsonl,
  one row per game in the form the recipe's prepare_alfworld.py writes (metadata.task_id = the game file relative
  to the data root), beside its other outputs (the two manifests and prepare.lock.json, here placeholders);
* examples/graphgpo/configs/alfworld_qwen2_5_1_5b.yaml: the recipe's ALFWorld config (a placeholder);
* examples/graphgpo/eval_logger.py: the recipe's logger, recording its calls;
* relax/entrypoints/train.py: Relax's loop as the facts describe it: evaluation before training (rollout 0),
  a rollout_result/train/<r>.jsonl per rollout, an evaluation when (r + 1) % eval_interval == 0, the eval hook
  loaded from its dotted path and given per-turn samples, a save (iter_<r:07d>/ under --save and the --save-hf
  copy formatted with r) when (r + 1) % save_interval == 0 or at the last rollout, each after removing the iter_*
  directories beyond the newest --max-actor-ckpt-to-keep (Relax's rotation); it records its environment.
`make_ray(bin_dir)` writes a `ray` whose `start --head --block` listens on --port and --dashboard-port and
serves its own environment and working directory on the dashboard port; `job submit` connects to
RAY_ADDRESS (else --address) and runs the entrypoint with the head's environment and directory, as a Ray
job's driver gets them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

RECIPE = r"""#!/usr/bin/env bash
set -euo pipefail
[ "${DRY_RUN:-0}" = "1" ] || { echo "stand-in recipe: only DRY_RUN=1 is supported" >&2; exit 3; }
[ -n "${RELAX_ENTRYPOINT_MODE:-}" ] || { echo "stand-in recipe: local.sh would be sourced" >&2; exit 4; }
for name in METHOD SEED ALFWORLD_DATA HF_CHECKPOINT SAVE_DIR DATA_ARTIFACT_DIR DEPENDENCY_LOCK MODEL_LOCK OUTER_EPOCHS; do
    [ -n "${!name:-}" ] || { echo "ERROR: ${name} must be set." >&2; exit 2; }
done
[ -f "${DATA_ARTIFACT_DIR}/eval_in_distribution.prompts.jsonl" ] || { echo "ERROR: no eval data" >&2; exit 2; }
CMD=(python3 relax/entrypoints/train.py --save "${SAVE_DIR}/checkpoints/${METHOD}/seed-${SEED}"
     --num-rollout "${OUTER_EPOCHS}" --advantage-estimator grpo --eval-interval 5
     --eval-prompt-data alfworld "${DATA_ARTIFACT_DIR}/eval_in_distribution.prompts.jsonl"
     --custom-eval-rollout-log-function-path examples.graphgpo.eval_logger.log_eval_rollout_data
     --agentic-custom-advantage-path examples.graphgpo.custom_advantage.compute_custom_advantage)
printf 'ray job submit --address=http://127.0.0.1:8265 -- '
printf '%q ' "${CMD[@]}"
printf '\n'
"""

PREPARE = """
import argparse, json, os
p = argparse.ArgumentParser(); p.add_argument("--data-root"); p.add_argument("--output-dir")
p.add_argument("--max-steps", type=int); p.add_argument("--limit", action="append", default=[]); a = p.parse_args()
games = sorted(os.path.relpath(os.path.join(d, f), a.data_root) for d, _, fs in os.walk(a.data_root) for f in fs if f == "game.tw-pddl")
os.makedirs(a.output_dir, exist_ok=True)
for name in ("train.manifest.json", "eval_in_distribution.manifest.json", "prepare.lock.json"):   # its other outputs
    with open(os.path.join(a.output_dir, name), "w") as fh:
        json.dump({"games": games, "file": name}, fh)
with open(os.path.join(a.output_dir, "eval_in_distribution.prompts.jsonl"), "w") as fh:   # prompt_rows_bytes' row form
    for i, g in enumerate(games):
        meta = {"alfworld_train_eval": "eval_in_distribution", "manifest_index": i, "manifest_sha256": "0" * 64,
                "manifest_task_id": g, "max_tokens": 512, "max_steps": a.max_steps, "task_id": g,
                "task_type": g.split("/")[-3].split("-")[0], "temperature": 0.4, "top_p": 1.0}
        fh.write(json.dumps({"messages": [{"role": "user", "content": "Start."}], "metadata": meta}, sort_keys=True) + "\\n")
"""

LOGGER = """
import json, os
def log_eval_rollout_data(rollout_id, args, data, extra_metrics=None):
    with open(os.path.join(args.save, "recipe_logger_calls.jsonl"), "a") as fh:
        fh.write(json.dumps({"rollout_id": rollout_id, "rows": sum(len(d["samples"]) for d in data.values())}) + "\\n")
    return True
"""

TRAIN = """
import argparse, importlib, json, os, shutil, types
p = argparse.ArgumentParser()
for flag in ("--save", "--advantage-estimator", "--custom-eval-rollout-log-function-path", "--agentic-custom-advantage-path"):
    p.add_argument(flag)
p.add_argument("--num-rollout", type=int); p.add_argument("--eval-interval", type=int)
p.add_argument("--eval-prompt-data", nargs="+"); p.add_argument("--save-interval", type=int); p.add_argument("--save-hf")
p.add_argument("--max-actor-ckpt-to-keep", type=int); p.add_argument("--rollout-seed", type=int); a = p.parse_args()
os.makedirs(a.save, exist_ok=True)
json.dump({"env": dict(os.environ), "cwd": os.getcwd()}, open(os.path.join(a.save, "driver.json"), "w"))
module, _, name = a.custom_eval_rollout_log_function_path.rpartition(".")
hook = getattr(importlib.import_module(module), name)
if a.agentic_custom_advantage_path.startswith("agentrepro_"):   # loadable where the driver runs (the recipe's own is not in the stand-in)
    module, _, name = a.agentic_custom_advantage_path.rpartition(".")
    getattr(importlib.import_module(module), name)
tasks = [json.loads(x)["metadata"]["task_id"] for x in open(a.eval_prompt_data[1])]
def evaluate(rollout_id):
    samples = []
    for i, task in enumerate(tasks):
        won = (i + rollout_id) % 3 == 0
        for t in range(1 + i % 4):
            samples.append(types.SimpleNamespace(response_length=7, metadata={
                "task_id": task, "trajectory_id": f"r{rollout_id}-{i}", "turn_index": t, "success": won,
                "episode_return": 10.0 if won else 0.0, "truncated": False}))
    hook(rollout_id, a, {"alfworld": {"samples": samples}}, None)
for rollout_id in range(a.num_rollout):
    if rollout_id == 0:
        evaluate(0)
    path = os.path.join(a.save, "rollout_result", "train", f"{rollout_id}.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(json.dumps({"rollout_id": rollout_id, "reward": 10.0 * (rollout_id % 2), "response_length": 4}) + "\\n")
    if (rollout_id + 1) % a.eval_interval == 0:
        evaluate(rollout_id)
    if a.save_interval and ((rollout_id + 1) % a.save_interval == 0 or rollout_id + 1 == a.num_rollout):
        if a.max_actor_ckpt_to_keep is not None:   # rotation before the save: iter_* under --save beyond the newest N
            older = sorted((d for d in os.listdir(a.save) if d.startswith("iter_")), reverse=True)
            for old in older[a.max_actor_ckpt_to_keep:]:
                shutil.rmtree(os.path.join(a.save, old))
        iteration = os.path.join(a.save, f"iter_{rollout_id:07d}")   # Megatron's dist checkpoint, then the HF export
        os.makedirs(iteration, exist_ok=True)
        for name in ("__0_0.distcp", "common.pt"):
            open(os.path.join(iteration, name), "w").write(f"{name} {rollout_id}")
        open(os.path.join(a.save, "latest_checkpointed_iteration.txt"), "w").write(str(rollout_id))
        if a.save_hf:
            os.makedirs(a.save_hf.format(rollout_id=rollout_id), exist_ok=True)
            open(os.path.join(a.save_hf.format(rollout_id=rollout_id), "config.json"), "w").write("{}")
"""

RAY = """#!PYTHON
import json, os, signal, socket, subprocess, sys, threading
args = sys.argv[1:]
if args[:2] == ["start", "--head"]:
    opts = dict(x[2:].split("=", 1) for x in args if x.startswith("--") and "=" in x)
    state = json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}).encode()
    def serve(port, payload):
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", int(port))); s.listen()
        while True:
            conn, _ = s.accept()
            if payload: conn.sendall(payload)
            conn.close()
    for port, payload in ((opts["port"], b""), (opts["dashboard-port"], state)):
        threading.Thread(target=serve, args=(port, payload), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.pause()
elif args[:2] == ["job", "submit"]:
    split = args.index("--")
    address = os.environ.get("RAY_ADDRESS") or [x for x in args[:split] if x.startswith("--address=")][0].split("=", 1)[1]
    host, port = address.split("//", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        data = b"".join(iter(lambda: conn.recv(65536), b""))
    head = json.loads(data)
    # as Ray's job CLI and supervisor: the entrypoint's words joined by list2cmdline, run through /bin/sh
    entrypoint = subprocess.list2cmdline(args[split + 1:])
    sys.exit(subprocess.run(entrypoint, shell=True, env=head["env"], cwd=head["cwd"]).returncode)
sys.exit(f"stand-in ray: unsupported {args}")
"""


def make_checkout(root: Path) -> Path:
    files = {
        "examples/__init__.py": "",
        "examples/graphgpo/__init__.py": "",
        "examples/graphgpo/run_alfworld_qwen2_5_1_5b.sh": RECIPE,
        "examples/graphgpo/prepare_alfworld.py": PREPARE,
        "examples/graphgpo/eval_logger.py": LOGGER,
        "examples/graphgpo/configs/alfworld_qwen2_5_1_5b.yaml": "env: alfworld\n",
        "relax/entrypoints/train.py": TRAIN,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def make_ray(bin_dir: Path, python: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "ray"
    path.write_text(RAY.replace("PYTHON", python, 1))
    path.chmod(0o755)
    return path
