"""Image observations against VAGEN-Lite's own vision-mode output (tests/fixtures/vision/)."""

import json

import numpy as np
import pytest
from helpers import FIXTURES, require_vision, run_cli
from PIL import Image

from agentrepro.environments.images import IMAGE_PLACEHOLDER, frozenlake_image, pixel_hash
from agentrepro.environments.registry import make_env, task_panel

REFERENCE = FIXTURES / "vision" / "reference"


def episodes() -> list[list[dict]]:
    rows = [json.loads(line) for line in (REFERENCE / "observations.jsonl").read_text(encoding="utf-8").splitlines()]
    out: list[list[dict]] = []
    for row in rows:
        if row["turn"] == 0:
            out.append([])
        out[-1].append(row)
    return out


EPISODES = episodes()


@pytest.mark.parametrize("episode", EPISODES, ids=lambda e: f"{e[0]['env']}-{e[0]['seed']}-{e[0]['episode']}")
def test_pixels_and_texts_equal_the_reference(episode):
    """Every observation of every fixture episode (reset and replayed turns) has the reference's exact pixels, text and system prompt."""
    require_vision()
    first = episode[0]
    env = make_env(first["env"], first["config"])
    observation, info = env.reset(first["seed"])
    assert env.system_prompt() == first["system_prompt"]
    for row in episode:
        if row["turn"]:
            observation, _reward, _done, info = env.step(row["response"])
        pixels = env.render_image()
        reference = np.asarray(Image.open(REFERENCE / row["png"]).convert("RGB"))
        assert pixels.shape == reference.shape and pixels.dtype == np.uint8
        assert np.array_equal(pixels, reference), (
            f"{row['png']}: {int((pixels != reference).any(axis=2).sum())} pixels differ"
        )
        assert info["image_sha256"] == pixel_hash(pixels) == row["pixel_sha256"]
        assert observation == row["obs_str"] and IMAGE_PLACEHOLDER in observation


def test_fixtures_cover_both_games_moves_and_a_fall():
    """The fixture set has resets and replayed moves for both games, and a FrozenLake episode ending in a hole."""
    kinds = {(e[0]["env"], len(e) > 1) for e in EPISODES}
    assert kinds == {("sokoban", False), ("sokoban", True), ("frozenlake", False), ("frozenlake", True)}
    assert any(e[0]["episode"] == "frozenlake-shared-rand-06" for e in EPISODES)


def test_text_mode_hashes_unchanged_and_vision_binds_pixels():
    """Text-mode task hashes ignore images; vision-mode task hashes differ from text ones and change with the pixels' hash."""
    require_vision()
    text = task_panel("sokoban", None, [0, 1])
    assert text == task_panel("sokoban", {"render_mode": "text"}, [0, 1])
    vision = task_panel("sokoban", {"render_mode": "vision"}, [0, 1])
    assert [t["task_hash"] for t in vision] != [t["task_hash"] for t in text]
    env = make_env("sokoban", {"render_mode": "vision"})
    observation, info = env.reset(0)
    description = env.task_description(observation, info)
    assert description["image_sha256"] == pixel_hash(env.render_image())
    text_env = make_env("sokoban")
    assert "image_sha256" not in text_env.task_description(*text_env.reset(0))


def test_text_mode_info_has_no_image():
    """A text-mode environment neither renders nor hashes a picture, and shows the grid in its observation."""
    env = make_env("frozenlake")
    observation, info = env.reset(3)
    assert "image_sha256" not in info and info["grid"] in observation and IMAGE_PLACEHOLDER not in observation


def test_large_frozenlake_boards_are_refused_clearly():
    """A board gymnasium would rescale sprites for (over 8 cells) is refused with a message, not drawn wrongly."""
    require_vision()
    with pytest.raises(ValueError, match="at most 8×8"):
        frozenlake_image(["S" + "F" * 8] + ["F" * 8 + "G"] * 8, (0, 0))


def test_unknown_render_mode_is_bad_input():
    """render_mode accepts only text and vision, naming the field."""
    from agentrepro.errors import BadInput

    with pytest.raises(BadInput, match="render_mode"):
        make_env("sokoban", {"render_mode": "pixels"})


def test_env_show_image_writes_the_reference_picture(tmp_path):
    """`env show --image` (a subprocess) writes a PNG whose pixels are the reference's, for both games, and prints the hash in vision mode."""
    require_vision()
    for row in (r for e in EPISODES for r in e[:1] if r["seed"] in (10001, 2)):
        out = tmp_path / f"{row['env']}-{row['seed']}.png"
        params = [a for k, v in row["config"].items() for a in ("--param", f"{k}={json.dumps(v)}")]
        result = run_cli("env", "show", "--env", row["env"], "--seed", row["seed"], *params, "--json", "--image", out)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["image_sha256"] == row["pixel_sha256"]
        written = np.asarray(Image.open(out))
        assert np.array_equal(written, np.asarray(Image.open(REFERENCE / row["png"]).convert("RGB")))


def test_env_show_image_refusals(tmp_path):
    """--image with --seeds or into a missing folder, and --images with --episodes, are one line naming the option (exit 2)."""
    cases = [
        ("--env", "sokoban", "--seeds", "0-2", "--image", tmp_path / "a.png"),
        ("--env", "sokoban", "--seed", "0", "--image", tmp_path / "missing" / "a.png"),
    ]
    for args in cases:
        result = run_cli("env", "show", *args)
        assert result.returncode == 2 and "--image" in result.stderr and "Traceback" not in result.stderr, result.stderr
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_text('{"seed": 0, "responses": []}\n', encoding="utf-8")
    result = run_cli("env", "replay", "--env", "sokoban", "--episodes", episodes, "--images", tmp_path / "p")
    assert result.returncode == 2 and "--images" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_missing_sprite_package_is_bad_input(monkeypatch):
    """Without the package holding the sprites, a vision reset is BadInput naming render_mode and the extra to install."""
    from agentrepro.environments import images
    from agentrepro.errors import BadInput

    images.sokoban_tiles.cache_clear()
    monkeypatch.setattr(images.importlib.util, "find_spec", lambda name: None)
    try:
        with pytest.raises(
            BadInput, match=r"render_mode: image observations need the gym-sokoban package .*agentrepro\[vision\]"
        ):
            make_env("sokoban", {"render_mode": "vision"}).reset(0)
    finally:
        images.sokoban_tiles.cache_clear()


def test_env_replay_images_writes_every_state(tmp_path):
    """`env replay --images DIR` (a subprocess) writes turn-0.png … turn-N.png with the reference's pixels for a replayed episode."""
    require_vision()
    episode = next(e for e in EPISODES if e[0]["env"] == "frozenlake" and len(e) > 2)
    first = episode[0]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r["response"]) + "\n" for r in episode[1:]), encoding="utf-8")
    params = [a for k, v in first["config"].items() for a in ("--param", f"{k}={json.dumps(v)}")]
    result = run_cli(
        "env",
        "replay",
        "--env",
        first["env"],
        "--seed",
        first["seed"],
        *params,
        "--responses",
        responses,
        "--json",
        "--images",
        tmp_path / "pictures",
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "pictures").iterdir()) == sorted(f"turn-{r['turn']}.png" for r in episode)
    for row in episode:
        written = np.asarray(Image.open(tmp_path / "pictures" / f"turn-{row['turn']}.png"))
        assert np.array_equal(written, np.asarray(Image.open(REFERENCE / row["png"]).convert("RGB")))


def test_env_play_images_writes_the_pictures_as_it_goes(tmp_path):
    """`env play --images DIR` in vision mode (a subprocess, piped answers) writes and names each state's picture, equal to the reference's."""
    require_vision()
    episode = next(e for e in EPISODES if e[0]["env"] == "sokoban" and len(e) > 2)
    first = episode[0]
    params = [a for k, v in first["config"].items() for a in ("--param", f"{k}={json.dumps(v)}")]
    lines = "".join(r["response"].replace("\n", " ") + "\n" for r in episode[1:]) + "quit\n"
    result = run_cli(
        "env", "play", "--env", "sokoban", "--seed", first["seed"], *params, "--images", tmp_path / "p", input=lines
    )
    assert result.returncode == 0, result.stderr
    assert "<image>" in result.stdout and f"(picture: {tmp_path / 'p' / 'turn-0.png'})" in result.stdout
    for row in episode:
        written = np.asarray(Image.open(tmp_path / "p" / f"turn-{row['turn']}.png"))
        assert np.array_equal(written, np.asarray(Image.open(REFERENCE / row["png"]).convert("RGB"))), row["png"]
