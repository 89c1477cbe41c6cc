"""verl-agent's integration, run inside its processes (standard library only, no import of the rest of agentrepro).

This folder, its startup/ folder and the shared agentrepro/hooks/ go on the job's PYTHONPATH (integration.py), so its
modules are imported there by their own names (`agentrepro_verl_hook`), without agentrepro's dependencies.
"""
