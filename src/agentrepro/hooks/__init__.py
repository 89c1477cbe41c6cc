"""What every framework integration shares inside the framework's processes (standard library only, no import of the
rest of agentrepro): the start-up hook of a job's processes (startup/sitecustomize.py, which installs the hooks the
job's environment names), a rehearsal's GPU boundary (agentrepro_rehearsal.py), the patcher of a module on import
(agentrepro_import_patch.py), the step-row dump of the parity certificate (agentrepro_step_rows.py), the
pinned-signature check of a patched function (agentrepro_signature.py), and the job's own Ray head
(agentrepro_ray_head.py, a script run with the image's Python). Each backend's own integration lives in its
folder's hooks/.

The directory itself goes on that framework's PYTHONPATH, so its modules are imported there by their own
names, without agentrepro's dependencies or its site-packages.
"""

from pathlib import Path

HOOKS_DIR = Path(__file__).resolve().parent
STARTUP_DIR = HOOKS_DIR / "startup"  # not a package: its sitecustomize.py runs at every process's start
STARTUP_ENV = "AGENTREPRO_STARTUP"  # the hook modules startup/sitecustomize.py installs, comma-separated
