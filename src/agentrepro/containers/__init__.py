"""Containers: every external program of a job runs inside the image its lock pins, and the run proves which.

The layer just above the process helpers and below the backends (it imports only errors, reading and fileio).
`runtimes` describes apptainer, podman and docker once each; `image` reads a placement's image block;
`job` builds a job's container and wraps a program for it; `prepare` pulls, loads or converts an image once
per node; `running.proven` records, around a program's run, what the runtime says it ran; `proof` owns that
record and the rule the audit applies to it; `rehearsal` says what a rehearsed job's programs get instead (no
network, no GPU devices, the rehearsal's folder and variables). docs/containers.md is the user's page.
"""

from agentrepro.containers.image import RUNTIMES, Image, archive_image_id, file_problem, image_of
from agentrepro.containers.job import (
    Container,
    Program,
    check_mount,
    checked_mounts,
    container_for,
    image_cache,
    job_scratch,
    mounted_fields,
    program,
)
from agentrepro.containers.prepare import prepare
from agentrepro.containers.proof import attempt_extra, clear_records, mismatch, problems, record
from agentrepro.containers.running import proven, stop
from agentrepro.containers.runtimes import RUNTIME, Mount, RunRequest

__all__ = [
    "RUNTIME",
    "RUNTIMES",
    "Container",
    "Image",
    "Mount",
    "Program",
    "RunRequest",
    "archive_image_id",
    "attempt_extra",
    "check_mount",
    "checked_mounts",
    "clear_records",
    "container_for",
    "file_problem",
    "image_cache",
    "image_of",
    "job_scratch",
    "mismatch",
    "mounted_fields",
    "prepare",
    "problems",
    "program",
    "proven",
    "record",
    "stop",
]
