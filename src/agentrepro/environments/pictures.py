"""Pictures written by `agentrepro env show --image` and `env replay|play --images` (the drawing is images.py's)."""

from __future__ import annotations

from agentrepro.environments.base import Env
from agentrepro.environments.images import png_bytes
from agentrepro.errors import BadInput, given_by
from agentrepro.fileio import atomic_write_bytes, check_output_dir, check_output_file, make_dir

OPTION = "--images"  # the option of `env replay` and `env play` that names the pictures' folder


def _pixels(env: Env, option: str):
    try:
        return env.render_image()
    except BadInput:  # the sprites' package is missing: the message names render_mode and the extra
        raise
    except ValueError as exc:  # a game without pictures, or a board too large to draw as the reference does
        raise BadInput(str(exc), where=option) from None


def write_picture(env: Env, path: str) -> None:
    """The PNG of `env`'s current state at `path` (checked before drawing; BadInput names --image)."""
    target = check_output_file(path, option="--image")
    atomic_write_bytes(target, png_bytes(_pixels(env, "--image")))


class TurnPictures:
    """DIR/turn-K.png for each state of a replayed episode (K = 0 after the reset, K = N after turn N)."""

    def __init__(self, folder: str):
        with given_by(OPTION):
            self.folder = make_dir(check_output_dir(folder, option=OPTION))

    def write(self, env: Env, turn: int) -> str:
        """Write the current state's picture as turn-`turn`.png; returns its path."""
        with given_by(OPTION):
            return str(atomic_write_bytes(self.folder / f"turn-{turn}.png", png_bytes(_pixels(env, OPTION))))
