"""The report's picture of what the agents saw: the first observation of a few tasks of the frozen panel.

Only for a study whose environment observes images (the lock's `manifest.env.params.render_mode` is
`vision`, environments/images.py): each picture is re-rendered from the task's seed by the harness's
environment, and the task hash is recomputed from it (the hash covers the picture's `image_sha256`), so
the caption can say whether the pictures are those the panel was frozen with.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt

from agentrepro.environments import make_env, validate_params

SHOWN = 4  # tasks pictured (the panel's first ones, in panel order)


def first_observations(lock: dict[str, Any] | None, shown: int = SHOWN) -> tuple[plt.Figure, str] | None:
    """(figure, caption), or None when the study has no lock or its environment's observations are text."""
    if not lock:
        return None
    env_block = lock["manifest"].get("env") or {}
    name = env_block.get("name")
    if name is None:
        return None
    params = validate_params(name, env_block.get("params") or {}, path="lock: manifest.env.params")
    if params.get("render_mode") != "vision":
        return None
    tasks = lock["task_panel"][:shown]
    fig, axes = plt.subplots(1, len(tasks), figsize=(1.8 * len(tasks), 2.1), layout="constrained", squeeze=False)
    differing = []
    for ax, task in zip(axes.flat, tasks):
        env = make_env(name, params)
        observation, info = env.reset_task(task)
        if env.task_entry(observation, info)["task_hash"] != task["task_hash"]:
            differing.append(task["task_id"])
        ax.imshow(env.render_image(), interpolation="nearest")
        ax.set_title(task["task_id"], fontsize=8)
        ax.set_axis_off()
    binding = (
        "each recomputed task hash (it covers the picture's SHA-256) equals the frozen panel's"
        if not differing
        else "the recomputed task hash differs from the frozen panel's for "
        + ", ".join(differing)
        + ": these are not the pictures the panel was frozen with"
    )
    caption = (
        f"The first observation of the first {len(tasks)} of {len(lock['task_panel'])} panel tasks ({name}), "
        f"re-rendered as VAGEN-Lite's vision mode draws it (render_mode: vision); {binding}."
    )
    return fig, caption
