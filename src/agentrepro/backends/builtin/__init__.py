"""The builtin backend (backend.py): the harness's own trainer, agentrepro.trainer."""
