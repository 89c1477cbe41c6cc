"""`resolve`: the config of one method x seed, from the lock alone (shape in docs/internals.md).

The run config is what `agentrepro train --config` reads: the manifest's blocks as frozen in the lock,
`train` updated with `methods[<method>]`, `eval` with the lock's task panel, and `lock: {path, sha256}`
binding the run to the lock it came from. `backend`, `image` and `resources` are the method's
(`agentrepro.placement.method_placement`: the study's, or those of `backends.<name>` for `<method>@<name>`).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.lockfile import lock_sha256
from agentrepro.placement import method_placement


def run_config(lock: dict[str, Any], method: str, seed: int, *, lock_path: str | os.PathLike) -> dict[str, Any]:
    """Run config of `method` x `seed`; BadInput if the lock has no such method or seed."""
    manifest = copy.deepcopy(lock["manifest"])
    methods, seeds = manifest["methods"], manifest["seeds"]
    if method not in methods:
        raise BadInput(
            f"{method!r} is not a method of study {lock['study']!r} (methods: {', '.join(methods)})",
            path=lock_path,
            where="--method",
        )
    if seed not in seeds:
        raise BadInput(
            f"{seed} is not a seed of study {lock['study']!r} (seeds: {', '.join(map(str, seeds))})",
            path=lock_path,
            where="--seed",
        )
    resolved = lock["resolved"]
    placement = method_placement(manifest, method, path=lock_path)
    config: dict[str, Any] = {
        "study": lock["study"],
        "method": method,
        "seed": seed,
        "lock": {"path": Path(lock_path).as_posix(), "sha256": lock_sha256(lock)},
        "backend": placement.backend,  # the method's backend (agentrepro.placement)
        "image": placement.image,
        "model": manifest["model"],  # a local directory's content hash stays in the lock
        "env": manifest["env"],
    }
    if "data" in manifest:
        files = resolved["files"]
        config["data"] = {
            name: {"path": spec["path"], "sha256": files.get(Path(spec["path"]).as_posix(), spec.get("sha256"))}
            for name, spec in manifest["data"].items()
        }
    config["train"] = {**manifest["train"], **methods[method]}
    config["eval"] = {**manifest["eval"], "task_panel": copy.deepcopy(lock["task_panel"])}
    config["resources"] = placement.resources
    return config
