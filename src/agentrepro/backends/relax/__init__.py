"""The Relax backend (backend.py): Relax's GraphGPO recipe driven as its authors wrote it (recipe.py), submitted to a
Ray head of the job's own (submit.py), with the integration that runs inside its Ray workers (hooks/) and the
readers of its outputs (results.py, also the command backend's `relax` adapter)."""
