"""Run one command on N GPUs of its own: disjoint CUDA_VISIBLE_DEVICES for concurrent local jobs.

    python workflow/scripts/gpu_slots.py --gpus N [--slots-dir DIR] -- COMMAND ARGS...

Snakemake counts GPUs (`--resources gpu=K`, the rules ask `resources: gpu=N`) but does not say *which*
devices a job gets. This wrapper picks them: each local device has a lock file `DIR/gpu<ID>.lock`; a job
takes an exclusive `flock` on N of them, sets CUDA_VISIBLE_DEVICES to those IDs, runs the command and
holds the locks until it exits. The kernel drops a lock when its holder dies, so a killed job never leaves
a device taken. With `--resources gpu=K` no larger than the number of devices, a job never waits.

* Devices: `AGENTREPRO_GPU_DEVICES` (comma-separated IDs), else the parent's `CUDA_VISIBLE_DEVICES`,
  else one ID per line of `nvidia-smi -L`.
* N = 0: CUDA_VISIBLE_DEVICES is set to "" (a CPU job sees no GPU).
* Inside SLURM (`SLURM_JOB_ID` set) the allocation already chose the devices: the command runs unchanged.
* Several jobs on one GPU (off by default): `--per-gpu K` (or `AGENTREPRO_JOBS_PER_GPU=K`) gives each device K
  slots (`gpu<ID>.<k>.lock`); a job of N GPUs takes one slot on each of N devices, and runs with
  `AGENTREPRO_GPU_SHARE=K`, so that the builtin trainer sizes its passes from 1/K of the device's memory
  (agentrepro.trainer.step_record.device_memory) and holds torch's caching allocator to that share
  (agentrepro.trainer.policy.run_device). Use it where the jobs' measured peak (`gpu_peak_mem_gb` in their
  metrics.jsonl) times K fits a device, and ask Snakemake for `--resources gpu=<K x devices>`; never on a node
  that other users' jobs share.

Exit status: the command's; 2 when N GPUs are asked and fewer devices exist.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def local_devices(env: dict[str, str] | None = None) -> list[str]:
    """The GPU IDs this machine offers to the workflow (see the module docstring for the order of sources)."""
    env = os.environ if env is None else env
    for key in ("AGENTREPRO_GPU_DEVICES", "CUDA_VISIBLE_DEVICES"):
        value = env.get(key)
        if value is not None and value.strip():
            return [d.strip() for d in value.split(",") if d.strip()]
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
        return [str(i) for i, line in enumerate(row for row in out.splitlines() if row.startswith("GPU "))]
    return []


def _slot_files(device: str, per_gpu: int) -> list[str]:
    return [f"gpu{device}.lock"] if per_gpu <= 1 else [f"gpu{device}.{k}.lock" for k in range(per_gpu)]


def _take_one(slots_dir: Path, names: list[str]):
    """An open, exclusively locked file of the first free slot of `names`; None when every slot is held."""
    for name in names:
        fh = open(slots_dir / name, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        return fh
    return None


def acquire(
    n: int, devices: list[str], slots_dir: Path, *, per_gpu: int = 1, poll_s: float = 0.5, log=sys.stderr
) -> tuple[list[str], list]:
    """Take a slot on each of `n` distinct `devices` (`per_gpu` slots a device); returns (IDs, open lock files).
    Waits while too few are free."""
    slots_dir.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        taken, handles = [], []
        for device in devices:
            fh = _take_one(slots_dir, _slot_files(device, per_gpu))
            if fh is None:
                continue
            taken.append(device)
            handles.append(fh)
            if len(taken) == n:
                return taken, handles
        for fh in handles:
            fh.close()  # closing releases the lock: never hold a partial set while waiting
        if not waited:
            print(
                f"gpu_slots: waiting for {n} free GPU(s) of {devices} (is --resources gpu larger than the devices?)",
                file=log,
            )
            waited = True
        time.sleep(poll_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, required=True, help="GPUs this job needs (the rule's gpu resource)")
    parser.add_argument("--slots-dir", default=os.environ.get("AGENTREPRO_GPU_SLOTS", ".snakemake/gpu-slots"))
    parser.add_argument(
        "--per-gpu",
        type=int,
        default=None,
        help="jobs that may share one device (default: AGENTREPRO_JOBS_PER_GPU, else 1)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    env = dict(os.environ)
    handles: list = []
    per_gpu = args.per_gpu if args.per_gpu is not None else os.environ.get("AGENTREPRO_JOBS_PER_GPU", "1")
    if not str(per_gpu).isdigit() or int(per_gpu) < 1:
        print(f"gpu_slots: jobs per GPU must be a positive integer, got {per_gpu!r}", file=sys.stderr)
        return 2
    per_gpu = int(per_gpu)
    if os.environ.get("SLURM_JOB_ID"):
        pass  # SLURM bound the job to its devices already
    elif args.gpus <= 0:
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        devices = local_devices()
        if len(devices) < args.gpus:
            print(
                f"gpu_slots: the job needs {args.gpus} GPU(s) but this machine offers {len(devices)} ({devices}); "
                "set AGENTREPRO_GPU_DEVICES or run through SLURM",
                file=sys.stderr,
            )
            return 2
        taken, handles = acquire(args.gpus, devices, Path(args.slots_dir), per_gpu=per_gpu)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(taken)
        if per_gpu > 1:
            env["AGENTREPRO_GPU_SHARE"] = str(per_gpu)
        print(f"gpu_slots: CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}", file=sys.stderr)
    child = subprocess.Popen(command, env=env)
    for sig in (signal.SIGTERM, signal.SIGINT):  # Snakemake or SLURM stopping the job stops the command too
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    code = child.wait()
    for fh in handles:
        fh.close()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    raise SystemExit(main())
