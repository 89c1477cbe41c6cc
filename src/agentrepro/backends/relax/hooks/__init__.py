"""Relax's integration, run inside its Ray workers (standard library only, no import of the rest of agentrepro).

This folder and the shared agentrepro/hooks/ go on the PYTHONPATH of the job's Ray head, so its modules are
imported there by their own names (`agentrepro_relax_eval`), without agentrepro's dependencies.
"""
