"""The jobs of a manifest before it is frozen: each method x seed's run config and what its backend would run.

`draft_config` is the run config `agentrepro resolve` would write from the lock, built from the manifest
alone (the lock's own parts, the task panel and file hashes, are not there yet; placeholders stay as they
are). `agentrepro command` shows a job's launches from it, and freeze records each job's deviations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrepro.backends import runconfig
from agentrepro.backends.base import Backend, get_backend
from agentrepro.backends.launch import Launch
from agentrepro.errors import BadInput, read_from
from agentrepro.layout import Study
from agentrepro.manifest.resolve import run_config


def draft_config(manifest: dict[str, Any], manifest_file: Path, method: str, seed: int, *,
                 check: bool = True) -> tuple[Any, dict[str, Any]]:
    """(backend, resolved run config) of method x seed, checked by the backend unless `check` is false;
    BadInput names the manifest."""
    draft = {"manifest": manifest, "study": manifest["study"], "resolved": {"files": {}}, "task_panel": []}
    config = run_config(draft, method, seed, lock_path=manifest_file)
    config["lock"] = {"path": "(not frozen)", "sha256": "(not frozen)"}
    backend = get_backend(config["backend"]["name"])
    config = runconfig.resolve_config(config, backend.default_config())
    if not check:
        return backend, config
    with read_from(manifest_file):
        backend.validate_config(config)
    return backend, config


def run_dir(manifest: dict[str, Any], manifest_file: Path, method: str, seed: int) -> Path:
    """runs/<study>/<method>/seed<k>, relative to the study root (where the workflow runs)."""
    return Study(manifest["study"], manifest_file).run_dir(method, seed)


def planned_launches(manifest: dict[str, Any], manifest_file: Path, method: str, seed: int,
                     eval_step: int | None = None, *, check: bool = True) -> tuple[str, Path, list[Launch]]:
    """(backend name, run directory, launches) of one job, as `train` (or `eval` of `eval_step`) would run it;
    `check=False` skips the backend's config check (the workflow's dry run, which plans before freeze checks)."""
    backend, config = draft_config(manifest, manifest_file, method, seed, check=check)
    if eval_step is not None and eval_step not in backend.checkpoint_steps(config):
        raise BadInput(f"step {eval_step} is not an evaluated step of this study "
                       f"({', '.join(map(str, backend.checkpoint_steps(config)))})", path=manifest_file, where="--eval-step")
    where = run_dir(manifest, manifest_file, method, seed)
    return backend.name or config["backend"]["name"], where, backend.launches(config, where, eval_step=eval_step)


def shown(manifest: dict[str, Any], manifest_file: Path, method: str, seed: int, eval_step: int | None = None, *,
          check: bool = True) -> str:
    """What `agentrepro command` prints for one job (and the workflow's train job message shows under
    `snakemake -n -p`, with `check=False`): a header line, then each launch's purpose and its `Launch.shown()`."""
    name, where, launches = planned_launches(manifest, manifest_file, method, seed, eval_step, check=check)
    job = f"the evaluation of step {eval_step}" if eval_step is not None else "the train job"
    lines = [f"# {manifest_file}: {method} seed {seed}, {job} (backend {name}, run directory {where})"]
    if not launches:
        lines.append(f"# the {name} backend lists no external program for this job (Backend.launches is empty): "
                     f"`agentrepro {'eval' if eval_step is not None else 'train'}` does the work itself")
    for number, launch in enumerate(launches, start=1):
        lines += [f"# {number}. {launch.purpose}", launch.shown()]
    return "\n".join(lines)


def deviations(manifest: dict[str, Any], manifest_file: Path) -> list[str]:
    """The backend's deviations from its official recipe over all jobs, one sentence per setting: the value when
    every job it applies to sets the same one, else "per run" (run names, paths, seeds), with the official value,
    why, and the methods concerned. Only a backend that defines `deviations` is asked (freeze does not run the
    other backends' config checks); [] otherwise. Each run keeps its own exact list (verl: verl_deviations.json)."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for method in manifest["methods"]:
        for seed in manifest["seeds"]:
            backend, config = draft_config(manifest, manifest_file, method, seed, check=False)
            if type(backend).deviations is Backend.deviations:
                continue   # this method's backend changes no official recipe (a study may mix backends)
            with read_from(manifest_file):
                found = backend.deviations(config, run_dir(manifest, manifest_file, method, seed))
            for record in found:
                entry = seen.setdefault((record["key"], str(record["official"]), record["why"]), {"values": [], "methods": []})
                entry["values"].append(json.dumps(record["value"]))
                if method not in entry["methods"]:
                    entry["methods"].append(method)
    sentences = []
    for (key, official, why), entry in seen.items():
        values = set(entry["values"])   # one value, set by every job of its methods: shown; else it varies by run
        every = len(entry["values"]) == len(entry["methods"]) * len(manifest["seeds"])
        value = values.pop() if len(values) == 1 and every else "per run"
        official = "not set by the script" if official == "None" else f"the script sets {official}"
        methods = "all methods" if len(entry["methods"]) == len(manifest["methods"]) else ", ".join(entry["methods"])
        sentences.append(f"{key} = {value} ({official}; {why}; {methods})")
    return sentences
