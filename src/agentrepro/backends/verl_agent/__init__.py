"""The verl-agent backend (backend.py): the authors' official ALFWorld scripts at 20bd331 (their facts: scripts.py
and scripts.json; what the harness appends: recipes.py), the integration that runs inside verl's processes
(hooks/, switched on by integration.py) and the conversion of its outputs (outputs.py)."""
