"""A rehearsed job (`agentrepro rehearse`, jobs/rehearse.py): its programs run as the train job runs them, on a machine
without GPUs and without a network, up to the framework's first use of the GPUs.

A rehearsal is switched on by AGENTREPRO_REHEARSAL (the folder where the boundary records go) in the environment of
`agentrepro train`; every program the job starts then gets, here (`job.program`, the one place a program is wrapped):

* the rehearsal's variables: the folder, the program's label (AGENTREPRO_REHEARSAL_PROGRAM) and the job's GPUs
  (AGENTREPRO_REHEARSAL_GPUS, resources.gpus), which the job's start-up hook reads
  (hooks/agentrepro_rehearsal.py, which records the boundary and exits with REACHED);
* in a container: the folder mounted read-write, no network (`--network none`: loopback only; Apptainer
  `--net --network none`), and no GPU devices (the machine has none; the hook tells torch the job's count).

On the host (a placement without an image) the programs get the variables only: nothing here can take the network
away from a process, so they run offline by their environment alone (launch.OFFLINE), which the report says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

FOLDER_ENV, PROGRAM_ENV, GPUS_ENV = "AGENTREPRO_REHEARSAL", "AGENTREPRO_REHEARSAL_PROGRAM", "AGENTREPRO_REHEARSAL_GPUS"
REACHED = 86  # the exit status of a process that reached the GPUs (the hook's)
RECORDS = "boundary-*.json"  # the hook's records in the folder, one per process that reached the GPUs


def folder(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder of the rehearsal this process is part of, or None outside a rehearsal."""
    value = (os.environ if environ is None else environ).get(FOLDER_ENV)
    return Path(value).resolve() if value else None


def program_env(label: str, gpus: int) -> dict[str, str]:
    """What a program of a rehearsed job gets in its environment ({} outside a rehearsal)."""
    where = folder()
    if where is None:
        return {}
    return {FOLDER_ENV: str(where), PROGRAM_ENV: label, GPUS_ENV: str(gpus)}
