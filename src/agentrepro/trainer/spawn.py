"""Start a run's data-parallel ranks (trainer/parallel.py) and turn any rank's failure into one error line.

`train_ranks(world, config, run_dir, resume=)` is what the builtin backend calls for more than one rank. It
opens the process group's store on a port the operating system picks (so two jobs on one node never collide,
and the port is held from before the first rank starts until the last one ends), starts `world` processes
(torch.multiprocessing with the spawn method, which CUDA needs) with torchrun's variables RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT, and waits. When one rank fails, the others are stopped (they may be
waiting in a collective for it) and the job ends with `data-parallel rank R of N failed: <its last error
line>` (a Failure; BadInput stays BadInput, exit 2). If the job itself is stopped, its ranks are stopped too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

from agentrepro.errors import BadInput, Failure
from agentrepro.trainer.loop import train
from agentrepro.trainer.parallel import TIMEOUT, Ranks

HOST = "127.0.0.1"
GRACE_S = 20.0  # seconds a rank gets to end after SIGTERM before SIGKILL


def train_ranks(world: int, config: dict[str, Any], run_dir: Path, *, resume: bool) -> None:
    store = dist.TCPStore(HOST, 0, None, True, timeout=TIMEOUT, wait_for_workers=False)  # port 0: a free one
    context = mp.start_processes(
        _rank_main,
        args=(world, store.port, config, str(run_dir), resume),
        nprocs=world,
        join=False,
        start_method="spawn",
    )
    try:
        while not context.join(grace_period=GRACE_S):
            pass
    except mp.ProcessRaisedException as exc:
        raise _one_line(exc.error_index, world, exc.msg) from None
    except mp.ProcessExitedException as exc:
        how = f"signal {exc.signal_name}" if exc.signal_name else f"exit status {exc.exit_code}"
        raise Failure(f"data-parallel rank {exc.error_index} of {world} died ({how})") from None
    finally:
        _stop(context.processes)
        del store


def _rank_main(rank: int, world: int, port: int, config: dict[str, Any], run_dir: str, resume: bool) -> None:
    """One rank: join the group, train, leave the group."""
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR=HOST, MASTER_PORT=str(port)
    )
    ranks = Ranks.join(str((config.get("train") or {}).get("device", "cpu")))
    try:
        train(config, run_dir, resume=resume, ranks=ranks)
    finally:
        dist.destroy_process_group()


def _one_line(rank: int, world: int, trace: str) -> Exception:
    """The exception of a rank's traceback text, as one line: BadInput for the user's input, else Failure."""
    lines = [ln for ln in trace.splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else "no traceback"
    kind, _, message = last.partition(": ")
    if kind.rsplit(".", 1)[-1] == BadInput.__name__:
        return BadInput(message)
    return Failure(f"data-parallel rank {rank} of {world} failed: {last}")


def _stop(processes) -> None:
    """SIGTERM the ranks still running, SIGKILL those that outlive GRACE_S (only this job's own processes)."""
    alive = [p for p in processes if p.is_alive()]
    for p in alive:
        p.terminate()
    for p in alive:
        p.join(GRACE_S)
        if p.is_alive():
            p.kill()
            p.join()
