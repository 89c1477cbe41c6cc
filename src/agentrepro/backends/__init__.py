"""Training backends: one interface (base.Backend), a registry (registry.py), and one folder per backend.

* builtin/: the harness's own trainer (agentrepro.trainer);
* command/: any external trainer described by command templates, run without a shell;
* verl_agent/: verl-agent's official ALFWorld scripts, with the integrations that run inside its processes;
* relax/: Relax's GraphGPO recipe, with the integrations that run inside its processes.
Shared by the framework backends: launch.py (programs as data, put into the job's container), ray_head.py (the job's
Ray head, run by hooks/agentrepro_ray_head.py inside the image), ray_nodes.py (a job's Ray cluster over the nodes of
its SLURM allocation), convert.py (framework outputs into the run contract), step_rows.py (the parity certificate's dump),
checkpoints.py (pruning), sources.py (source parity), schema.py (the manifest's backend block, generated).
"""

from agentrepro.backends.base import Adapter, Backend, Block, StepCheckpoint
from agentrepro.backends.registry import REGISTRY, BackendRegistry, backend_class, get_backend

__all__ = [
    "REGISTRY",
    "Adapter",
    "Backend",
    "BackendRegistry",
    "Block",
    "StepCheckpoint",
    "backend_class",
    "get_backend",
]
