"""A stand-in verl-agent checkout for the tests that run the verl-agent backend's jobs (test_verl_agent.py,
test_rehearse.py): the script and module paths of 20bd331, a data preparation and a trainer that record where they ran
and write what verl plus the integration write, and a stand-in `ray` that needs nothing but its Python."""

from __future__ import annotations

from pathlib import Path

from podman_kit import STAND_IN_GPU_ENV

FAKE_SCRIPT = """\
# Stand-in for examples/gigpo_trainer/run_alfworld.sh: like the real one, it passes "$@" on to the trainer.
ENGINE=${1:-vllm}
python3 fake_trainer.py actor_rollout_ref.rollout.name=$ENGINE $@
"""

RAN_IN = f"""\
import json, os, sys
IMAGE = "/etc/agentrepro-image"   # the test image's marker (tests/podman_kit.py); no such file on the host
with open("ran_in.jsonl", "a") as fh:   # in the checkout, the working directory
    fh.write(json.dumps({{"program": os.path.basename(sys.argv[0]), "python": sys.executable, "gpu": ",".join(sorted(v for k, v in os.environ.items() if k.startswith({STAND_IN_GPU_ENV + "_"!r}))),
                         "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
                         "image": open(IMAGE).read() if os.path.exists(IMAGE) else None}}) + "\\n")
"""

FAKE_PREPARE = (
    RAN_IN
    + """\
import argparse
p = argparse.ArgumentParser(); p.add_argument("--mode"); p.add_argument("--train_data_size"); p.add_argument("--val_data_size")
p.add_argument("--local_dir"); a = p.parse_args()
os.makedirs(os.path.join(a.local_dir, a.mode), exist_ok=True)
open(os.path.join(a.local_dir, a.mode, "train.parquet"), "w").write(a.train_data_size)
"""
)

FAKE_TRAINER = (
    RAN_IN
    + """\
# Stand-in trainer: reads the Hydra overrides and writes what verl plus the integration write.
args = dict(a.split("=", 1) for a in sys.argv[1:])
assert open(args["data.train_files"]).read() == "16"
nodes = int(args.get("trainer.nnodes", "1"))
if nodes == 1:
    assert os.environ["RAY_ADDRESS"].startswith("127.0.0.1:"), "not run against the job's own Ray head"
else:  # as verl's placement groups wait for every node's GPU workers: the job's Ray cluster, every node joined
    import ray, time
    ray.init()
    deadline = time.monotonic() + 180
    while sum(n["Alive"] for n in ray.nodes()) < nodes:
        assert time.monotonic() < deadline, "the job's worker nodes never joined"
        time.sleep(0.5)
    with open(os.path.join(os.environ["AGENTREPRO_VERL_OUT"], "ray_nodes.json"), "w") as fh:
        json.dump(sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]), fh)
    if os.path.exists("hold"):   # a test that stops the job while every node runs: held here until then
        open("held", "w").close()
        time.sleep(600)
    ray.shutdown()
out = os.environ["AGENTREPRO_VERL_OUT"]
steps, val_dir = int(args["trainer.total_epochs"]), os.path.join(out, "verl_validation")
os.makedirs(val_dir, exist_ok=True)
def validate(step):
    with open(os.path.join(val_dir, f"{step}.jsonl"), "w") as dump:
        for i in range(3):
            dump.write(json.dumps({"task_id": i, "won": i < step, "reward": 10.0 * (i < step), "turns": 5, "tokens": 40}) + "\\n")
if args.get("trainer.val_only") == "true":   # validate-only: the checkpoint it resumes from, its step's dump
    validate(int(args["trainer.resume_from_path"].rsplit("global_step_", 1)[1]))
    sys.exit(0)
with open(os.path.join(out, "verl_metrics.jsonl"), "a") as log:
    for step in range(0, steps + 1):
        if step:
            log.write(json.dumps({"step": step, "data": {"episode/reward/mean": step, "actor/pg_loss": -step, "timing_s/step": 2.0}}) + "\\n")
            actor = os.path.join(out, "checkpoints", f"global_step_{step}", "actor")   # verl's FSDP checkpoint, a shard
            os.makedirs(actor, exist_ok=True)
            open(os.path.join(actor, "model_world_size_1_rank_0.pt"), "w").write(str(step))
        log.write(json.dumps({"step": step, "data": {"val/success_rate": step / steps}}) + "\\n")
        validate(step)
"""
)

# A stand-in for `ray start --head --block` that needs nothing but its Python (the host's, or the image's, where a
# program sees only the job's environment): listens on --port, spawns a child as the real head spawns raylet and
# GCS, and appends to ray.jsonl beside itself its start (arguments, PIDs) and, once signalled, its stop.
STANDIN_RAY = """\
#!{python}
import json, os, signal, socket, subprocess, sys, time
LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ray.jsonl")
def note(**entry):
    with open(LOG, "a") as fh:
        fh.write(json.dumps(entry) + "\\n")
def stop(signum, frame):
    note(event="stop", signal=signum, pid=os.getpid())
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
args = sys.argv[1:]
port = int(next(a for a in args if a.startswith("--port=")).split("=", 1)[1])
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen()
note(event="start", args=args, pid=os.getpid(), child=child.pid)
time.sleep(300)
"""


def stand_in_checkout(workdir: Path, python: str) -> Path:
    """A verl-agent checkout with the script and module paths of 20bd331, and a stand-in `ray` run by `python`."""
    (workdir / "examples" / "gigpo_trainer").mkdir(parents=True)
    (workdir / "examples" / "data_preprocess").mkdir()
    (workdir / "examples" / "gigpo_trainer" / "run_alfworld.sh").write_text(FAKE_SCRIPT)
    (workdir / "examples" / "data_preprocess" / "prepare.py").write_text(FAKE_PREPARE)
    (workdir / "fake_trainer.py").write_text(FAKE_TRAINER)
    ray = workdir / "bin" / "ray"
    ray.parent.mkdir()
    ray.write_text(STANDIN_RAY.format(python=python))
    ray.chmod(0o755)
    return ray
