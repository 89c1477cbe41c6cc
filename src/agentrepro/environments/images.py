"""Image observations of the grid games, pixel for pixel as VAGEN-Lite's vision mode renders them.

VAGEN @ 2936322 with `render_mode: vision` replaces the text grid in the observation by the placeholder
`<image>` and attaches one RGB picture of the board:

* Sokoban: gym-sokoban's `room_to_rgb` (its `render("rgb_array")`): one 16×16 tile per cell from the
  package's `envs/surface/` PNGs (wall, floor, box_target, box_on_target, box, player,
  player_on_target), so a 6×6 room is 96×96 pixels.
* FrozenLake: gymnasium's `FrozenLakeEnv.render()` in `rgb_array` mode (gymnasium 1.4.0): a black
  `min(64·n, 512)`-pixel board of 64-pixel cells; each cell gets `tile_ice.png` or `tile_hole.png`, frozen
  cells a crack overlay where `(3x + 5y) mod 7 < 2`, the start a corner letter S and the goal a flag and a
  corner letter G, then a 1-pixel outline in (180, 200, 230); the agent sprite is centred on its cell
  unless it stands in a hole. Sprites with alpha are blended as pygame blits them onto an opaque
  surface: `d + (((s − d)·a + s) >> 8)` per channel.

The sprites are read at run time from the installed packages (`gym-sokoban`, `gymnasium`: the optional
extra `.[vision]`), never copied into this repository; the packages are located without importing them.
`pixel_hash` is the one rule for an image's identity (task descriptions, fixtures):
SHA-256 of `"{height}x{width}x3 uint8\\n"` followed by the C-order bytes of the RGB array.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
from collections.abc import Sequence
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from agentrepro.errors import BadInput

IMAGE_PLACEHOLDER = "<image>"  # what VAGEN's vision observations show in place of the grid
SOKOBAN_TILE = 16
FROZENLAKE_CELL = 64
FROZENLAKE_OUTLINE = (180, 200, 230)
_SOKOBAN_SURFACES = ("wall", "floor", "box_target", "box_on_target", "box", "player", "player_on_target")


class MissingRenderer(BadInput):
    """The package whose sprites an image needs is not installed (exit 2, naming render_mode)."""


def _package_dir(package: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingRenderer(
            f"image observations need the {pip_name} package (pip install 'agentrepro[vision]')", where="render_mode"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def package_versions(names: Sequence[str]) -> dict[str, str]:
    """Installed versions of the packages whose sprites are drawn (a lock of a vision panel records them)."""
    try:
        return {name: version(name) for name in names}
    except PackageNotFoundError as exc:
        raise MissingRenderer(
            f"image observations need the {exc} package (pip install 'agentrepro[vision]')", where="render_mode"
        ) from None


def _load_png(path: Path) -> np.ndarray:
    from PIL import Image  # optional: the vision extra

    with Image.open(path) as im:
        return np.asarray(im.convert("RGBA" if im.mode in ("RGBA", "LA", "P") else "RGB"), dtype=np.uint8).copy()


@lru_cache(maxsize=1)
def sokoban_tiles() -> tuple[np.ndarray, ...]:
    """gym-sokoban's seven 16×16 RGB tiles, indexed by cell code (6: player on a target)."""
    surface = _package_dir("gym_sokoban", "gym-sokoban") / "envs" / "surface"
    return tuple(_load_png(surface / f"{name}.png")[..., :3] for name in _SOKOBAN_SURFACES)


@lru_cache(maxsize=1)
def frozenlake_sprites() -> dict[str, np.ndarray]:
    """gymnasium's FrozenLake sprites (RGBA), by file stem."""
    img = _package_dir("gymnasium", "gymnasium") / "envs" / "toy_text" / "img"
    names = (
        "tile_ice",
        "tile_hole",
        "tile_ice_crack_a",
        "tile_ice_crack_b",
        "agent",
        "goal_flag",
        "letter_s",
        "letter_g",
    )
    return {name: _load_png(img / f"{name}.png") for name in names}


def sokoban_image(room_state: Sequence[int], room_fixed: Sequence[int], rows: int, cols: int) -> np.ndarray:
    """The rows·16 × cols·16 RGB picture of a room (flat cell codes, as `Sokoban` keeps them)."""
    tiles = sokoban_tiles()
    state = np.asarray(room_state, dtype=np.int64).reshape(rows, cols)
    fixed = np.asarray(room_fixed, dtype=np.int64).reshape(rows, cols)
    codes = np.where((state == 5) & (fixed == 2), 6, state)
    out = np.zeros((rows * SOKOBAN_TILE, cols * SOKOBAN_TILE, 3), dtype=np.uint8)
    for r in range(rows):
        for c in range(cols):
            out[r * SOKOBAN_TILE : (r + 1) * SOKOBAN_TILE, c * SOKOBAN_TILE : (c + 1) * SOKOBAN_TILE] = tiles[
                codes[r, c]
            ]
    return out


def _blit(dst: np.ndarray, sprite: np.ndarray, x: int, y: int) -> None:
    """Blend an RGBA sprite onto the opaque RGB `dst` at (x, y) as pygame's per-pixel-alpha blit does."""
    h, w = sprite.shape[:2]
    region = dst[y : y + h, x : x + w].astype(np.int32)
    src = sprite[..., :3].astype(np.int32)
    alpha = sprite[..., 3:4].astype(np.int32)
    dst[y : y + h, x : x + w] = ((((src - region) * alpha + src) >> 8) + region).astype(np.uint8)


def frozenlake_image(desc: Sequence[Sequence[str]], player: tuple[int, int]) -> np.ndarray:
    """The RGB picture of a FrozenLake board (`desc` rows of S/F/H/G letters; `player` = (row, col))."""
    nrow, ncol = len(desc), len(desc[0])
    width, height = min(FROZENLAKE_CELL * ncol, 512), min(FROZENLAKE_CELL * nrow, 512)
    if width // ncol != FROZENLAKE_CELL or height // nrow != FROZENLAKE_CELL:
        raise ValueError(
            f"FrozenLake images are reproduced for boards of at most 8×8 cells (64-pixel cells); "
            f"this board is {nrow}×{ncol}, which gymnasium would rescale its sprites for"
        )
    s = frozenlake_sprites()
    cell = FROZENLAKE_CELL
    margin = round(cell * 0.06)
    out = np.zeros((height, width, 3), dtype=np.uint8)
    for y in range(nrow):
        for x in range(ncol):
            cx, cy = x * cell, y * cell
            tile = desc[y][x]
            if tile == "H":
                _blit(out, s["tile_hole"], cx, cy)
            else:
                _blit(out, s["tile_ice"], cx, cy)
                crack = (x * 3 + y * 5) % 7
                if tile == "F" and crack < 2:
                    _blit(out, s["tile_ice_crack_a" if crack == 0 else "tile_ice_crack_b"], cx, cy)
                elif tile == "S":
                    _blit(out, s["letter_s"], cx + margin, cy + margin)
                elif tile == "G":
                    flag = s["goal_flag"]
                    _blit(out, flag, cx + (cell - flag.shape[1]) // 2, cy + cell - flag.shape[0] - round(cell * 0.12))
                    _blit(out, s["letter_g"], cx + margin, cy + margin)
            out[cy, cx : cx + cell] = out[cy + cell - 1, cx : cx + cell] = FROZENLAKE_OUTLINE
            out[cy : cy + cell, cx] = out[cy : cy + cell, cx + cell - 1] = FROZENLAKE_OUTLINE
    row, col = player
    if desc[row][col] != "H":
        agent = s["agent"]
        _blit(out, agent, col * cell + (cell - agent.shape[1]) // 2, row * cell + (cell - agent.shape[0]) // 2)
    return out


def pixel_hash(pixels: np.ndarray) -> str:
    """SHA-256 of an RGB image: its shape line, then its C-order uint8 bytes (the one identity rule)."""
    a = np.ascontiguousarray(pixels, dtype=np.uint8)
    if a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"expected an H×W×3 RGB array, got shape {a.shape}")
    return hashlib.sha256(f"{a.shape[0]}x{a.shape[1]}x3 uint8\n".encode() + a.tobytes()).hexdigest()


def to_pil(pixels: np.ndarray):
    """The array as a PIL RGB image (what VAGEN attaches to the observation)."""
    from PIL import Image  # optional: the vision extra

    return Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8), mode="RGB")


def png_bytes(pixels: np.ndarray) -> bytes:
    """The image as PNG (Pillow's encoder, as VAGEN's `pil_to_dataurl_png`); lossless, so it decodes to `pixels`."""
    buf = io.BytesIO()
    to_pil(pixels).save(buf, format="PNG")
    return buf.getvalue()


def data_url(pixels: np.ndarray) -> str:
    """`data:image/png;base64,…` for an OpenAI-style `image_url` content part."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(pixels)).decode("ascii")
