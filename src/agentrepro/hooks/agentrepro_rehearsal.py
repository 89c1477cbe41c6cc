"""The GPU boundary of a rehearsal (`agentrepro rehearse`, agentrepro/containers/rehearsal.py): in every Python
process of a rehearsed job, the first use of the GPUs is recorded and ends that process.

startup/sitecustomize.py installs it when AGENTREPRO_REHEARSAL names a folder, in every backend whose job's Python
path begins with that folder (verl-agent's and Relax's). A rehearsal runs on a machine
without GPUs, where torch reports none and a framework takes its CPU or NPU branch instead of the one the GPU node
takes (verl reads `torch.cuda.is_available()` once, at import: verl/utils/device.py:28 at 20bd331). So once
`torch.cuda` has run, torch reports the job's GPUs: `is_available()` is True and `device_count()` is
AGENTREPRO_REHEARSAL_GPUS. What would then initialise CUDA or its communication is the boundary:

* `torch.cuda._lazy_init`, which every CUDA call and every tensor or module moved to a CUDA device goes through
  (torch's C++ side calls it by name), and `torch.cuda.init`, `torch.cuda.set_device`;
* `torch.distributed.init_process_group` with an NCCL backend (verl's workers ask for "cpu:gloo,cuda:nccl",
  verl/workers/fsdp_workers.py:114).

The first process to reach one writes <folder>/boundary-<pid>.json (the program, AGENTREPRO_REHEARSAL_PROGRAM; its
argv; the call; the caller's frames outside torch, innermost first) and exits with status REACHED (86), so "reached
the GPUs" is a record, not the absence of an error. Standard library only; torch is patched only if the program
imports it.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

try:  # by its own name inside the framework's processes (the hooks folder is on their PYTHONPATH)
    import agentrepro_import_patch
except ModuleNotFoundError:  # as part of the agentrepro package (tests, the harness)
    from agentrepro.hooks import agentrepro_import_patch

FOLDER_ENV, PROGRAM_ENV, GPUS_ENV = "AGENTREPRO_REHEARSAL", "AGENTREPRO_REHEARSAL_PROGRAM", "AGENTREPRO_REHEARSAL_GPUS"
REACHED = 86  # the exit status of a process that reached the boundary
RECORD = "boundary-{pid}.json"
FRAMES = 8  # the caller's frames kept in a record


def reached(call: str) -> None:
    """Record that this process reached the GPUs through `call`, then end it (status REACHED)."""
    frames = [
        {"file": f.filename, "line": f.lineno, "function": f.name}
        for f in reversed(traceback.extract_stack()[:-2])
        if f"{os.sep}torch{os.sep}" not in f.filename and not f.filename.endswith(os.path.basename(__file__))
    ][:FRAMES]
    record = {
        "program": os.environ.get(PROGRAM_ENV, ""),
        "pid": os.getpid(),
        "argv": sys.argv,
        "call": call,
        "frames": frames,
    }
    path = os.path.join(os.environ[FOLDER_ENV], RECORD.format(pid=os.getpid()))
    try:
        with open(path + ".part", "w", encoding="utf-8") as out:
            json.dump(record, out, indent=1)
        os.replace(path + ".part", path)
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        print(f"agentrepro rehearsal: reached the GPUs ({call}); this process ends here", file=sys.stderr, flush=True)
        os._exit(REACHED)


def _gpus() -> int:
    try:
        return max(int(os.environ.get(GPUS_ENV, "1")), 1)
    except ValueError:
        return 1


def _patch_cuda(cuda) -> None:
    cuda.is_available = lambda: True
    cuda.device_count = _gpus
    for name in ("_lazy_init", "init", "set_device"):
        setattr(cuda, name, lambda *args, _call=f"torch.cuda.{name}", **kwargs: reached(_call))


def _patch_c10d(c10d) -> None:
    real = c10d.init_process_group

    def init_process_group(*args, **kwargs):
        backend = kwargs.get("backend", args[0] if args else None)
        if backend is not None and "nccl" in str(backend).lower():
            reached(f"torch.distributed.init_process_group(backend={backend!r})")
        return real(*args, **kwargs)

    c10d.init_process_group = init_process_group


def install() -> None:
    """Patch torch's CUDA and process-group entry points when the program imports them (before anything binds them)."""
    if not os.environ.get(FOLDER_ENV):
        return
    finder = agentrepro_import_patch.PatchOnImport(
        {"torch.cuda": _patch_cuda, "torch.distributed.distributed_c10d": _patch_c10d}
    )
    sys.meta_path.insert(0, finder)
