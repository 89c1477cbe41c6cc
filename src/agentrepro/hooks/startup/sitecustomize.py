"""Python imports this module at start-up when its folder is on PYTHONPATH (the `site` mechanism): a framework
backend puts it there for every process of a job, Ray workers included, because they inherit the environment. First
it runs the sitecustomize it shadows, the next one on sys.path (an image's own, or the interpreter's), as `site` would
have run it; then it installs the hooks the job's environment names, each a module on the job's PYTHONPATH with an
`install()`: those of AGENTREPRO_STARTUP (comma-separated; verl-agent's outcome integration, agentrepro_verl_hook),
and, when AGENTREPRO_REHEARSAL is set, a rehearsal's GPU boundary (agentrepro_rehearsal, beside this folder)."""

import importlib
import importlib.util
import os
import sys
from importlib.machinery import PathFinder

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_shadowed() -> None:
    others = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
    spec = PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_run_shadowed()

for _name in filter(None, os.environ.get("AGENTREPRO_STARTUP", "").split(",")):
    importlib.import_module(_name.strip()).install()

if os.environ.get("AGENTREPRO_REHEARSAL"):
    import agentrepro_rehearsal

    agentrepro_rehearsal.install()
