"""Python imports this module at start-up when its folder is on PYTHONPATH (the `site` mechanism): the
verl-agent backend puts it there for every process of a job, Ray workers included, because they inherit
the environment. It does nothing unless AGENTREPRO_VERL_OUT is set; then it installs the outcome
integration (agentrepro_verl_hook.py, in the parent folder, the next one on PYTHONPATH). It replaces any other
sitecustomize on the path: a job's image should not rely on one."""

import os

if os.environ.get("AGENTREPRO_VERL_OUT"):
    import agentrepro_verl_hook

    agentrepro_verl_hook.install()
