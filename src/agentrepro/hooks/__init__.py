"""Functions that run inside another framework's processes (stdlib only, no import of the rest of agentrepro).

The directory itself goes on that framework's PYTHONPATH, so its modules are imported there by their own
names (e.g. `agentrepro_relax_eval`), without agentrepro's dependencies or its site-packages.
"""

from pathlib import Path

HOOKS_DIR = Path(__file__).resolve().parent
