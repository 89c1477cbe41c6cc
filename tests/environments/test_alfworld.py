"""ALFWorld through the `alfworld` package, on the hand-written test games (one per task category).

The action rule is checked against verl-agent @ 20bd331 `env_package/alfworld/projection.py` (as read from
zzj1111/alfworldauto); the games are won and lost through TextWorld itself, not a model of it.
"""

from __future__ import annotations

import json

import pytest
from helpers import require_alfworld, run_cli

from agentrepro.environments import make_env
from agentrepro.environments.alfworld import parse_action
from agentrepro.environments.alfworld_data import CATEGORIES
from agentrepro.errors import BadInput


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    """A data directory with one test game per category: {game id: TestGame}, and its path."""
    require_alfworld()
    from agentrepro.environments.alfworld_testgames import write_data_dir

    root = tmp_path_factory.mktemp("alfworld-data")
    return root, write_data_dir(root)


def response(command: str) -> str:
    return f"<think>I should act.</think><action>{command}</action>"


def play(env, task_id, plan):
    env.reset(task_id)
    info, done, total = None, False, 0.0
    for command in plan:
        assert not done
        _obs, reward, done, info = env.step(response(command))
        total += reward
    return info, done, total


@pytest.mark.parametrize(
    "text, action, valid",
    [
        ("<think>a</think><action>Go To Fridge 1</action>", "go to fridge 1", True),
        ("<THINK>a</THINK><action>look</action>", "look", False),  # think tags are matched as written
        ("<think>a</think><ACTION> look </ACTION>", "look", True),  # action tags after lower-casing
        ("<action>look</action>", "look", False),  # no think: invalid, still sent
        ("<think>看</think><action>look</action>", "look", False),  # a CJK character
        ("<think>a</think><action>look</action><action>x</action>", "look", True),  # the first pair counts
    ],
)
def test_projection_follows_verl_agent(text, action, valid):
    """The command and validity of a response follow verl-agent's ALFWorld projection rule."""
    parsed = parse_action(text)
    assert (parsed["action"], parsed["valid"]) == (action, valid)


def test_projection_without_tags_sends_the_last_30_characters():
    """Without action tags the command is the last 30 characters of the lower-cased response."""
    text = "<think>x</think> Well, I will now TAKE the apple 1 from countertop 1"
    assert parse_action(text) == {**parse_action(text), "action": text.lower()[-30:], "valid": False}


@pytest.mark.slow
def test_every_test_game_is_won_by_its_walkthrough_and_not_by_a_wrong_plan(games):
    """Each category's game is won by its walkthrough (reward 10, done) and not by the wrong plan; category read."""
    root, by_id = games
    assert sorted(g.task_type for g in by_id.values()) == sorted(CATEGORIES)
    env = make_env("alfworld", {"data_dir": str(root)})
    for task_id, game in by_id.items():
        info, done, total = play(env, task_id, game.walkthrough)
        assert (info["won"], info["success"], done, total) == (True, True, True, 10.0), task_id
        assert info["category"] == CATEGORIES[game.task_type] == env.task_entry("", info)["category"]
        assert env.walkthrough() == list(game.walkthrough)
        info, done, total = play(env, task_id, game.wrong_plan)
        assert (info["won"], done, total) == (False, False, 0.0), task_id
        assert all(env.history[i][1] == c for i, c in enumerate(game.wrong_plan))


def test_turn_limit_invalid_turns_and_observations(games):
    """Turns end the episode at max_turns; an invalid turn is still played; later observations show the history."""
    root, by_id = games
    task_id = next(t for t, g in by_id.items() if g.task_type == "pick_and_place_simple")
    env = make_env("alfworld", {"data_dir": str(root), "max_turns": 3})
    first, info = env.reset(task_id)
    assert "'go to fridge 1'" in first and "'help'" not in first and "help" in info["admissible_commands"]
    assert env.solve() == list(by_id[task_id].walkthrough)
    _obs, _r, done, info = env.step("<action>go to countertop 1</action>")  # no think: invalid, but played
    assert (info["valid"], info["effective"], done, info["admissible"]) == (False, True, False, True)
    obs, _r, done, info = env.step(response("dance"))  # valid format, unknown command
    assert (info["valid"], info["effective"], info["admissible"], info["feedback"]) == (
        True,
        False,
        False,
        "Nothing happens.",
    )
    assert "Action 2: 'dance'" in obs and "already taken 2 step(s)" in obs and "step 3" in obs
    assert "Observation 1:" in obs and "put some apple in fridge" in obs
    _obs, _r, done, info = env.step(response("look"))
    assert done and not info["success"] and env.solve() == []
    with pytest.raises(RuntimeError):
        env.step(response("look"))


def test_task_hash_covers_the_game_files_not_the_data_directory(games, tmp_path):
    """The same game in two places hashes alike; one changed byte of either file changes the hash."""
    root, by_id = games
    task_id = next(iter(by_id))
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(root, copy)
    entry = lambda d: (lambda env: env.task_entry(*env.reset(task_id)))(make_env("alfworld", {"data_dir": str(d)}))  # noqa: E731
    first = entry(root)
    assert entry(copy) == first and first["task_id"] == task_id and first["seed"] is None
    for name in ("traj_data.json", "game.tw-pddl"):
        path = copy / task_id / name
        data = json.loads(path.read_text())
        data["extra"] = 1
        path.write_text(json.dumps(data))
        changed = entry(copy)
        assert changed["task_hash"] != first["task_hash"]
        first = changed


def test_bad_game_references_are_bad_input(games, tmp_path, monkeypatch):
    """A missing game, an escaping id or no data directory is BadInput naming what is wrong."""
    root, _ = games
    env = make_env("alfworld", {"data_dir": str(root)})
    with pytest.raises(BadInput, match=r"no game.tw-pddl"):
        env.reset("json_2.1.1/valid_seen/none")
    with pytest.raises(BadInput, match="plain relative path"):
        env.reset("../etc")
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(BadInput, match="ALFWORLD_DATA"):
        make_env("alfworld").reset("x")
    monkeypatch.setenv("ALFWORLD_DATA", str(root))
    assert make_env("alfworld").reset(next(iter(_)))[1]["task_id"] == next(iter(_))


@pytest.mark.slow
def test_cli_show_replay_play(games, tmp_path):
    """`env show|replay|play --env alfworld --data-dir DIR --task GAME` run as a user would run them."""
    root, by_id = games
    task_id, game = next((t, g) for t, g in by_id.items() if g.task_type == "pick_heat_then_place_in_recep")
    where = ["--env", "alfworld", "--data-dir", str(root), "--task", task_id]
    shown = run_cli("env", "show", *where, "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert (record["task"], record["category"], record["solution"]) == (task_id, "heat", list(game.walkthrough))
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(response(c)) + "\n" for c in game.walkthrough))
    replay = run_cli("env", "replay", *where, "--responses", responses, "--json")
    assert replay.returncode == 0, replay.stderr
    turns = [json.loads(line) for line in replay.stdout.splitlines()]
    assert [t["won"] for t in turns] == [False] * (len(turns) - 1) + [True] and turns[-1]["success"]
    assert [t["reward"] for t in turns][-1] == 10.0 and {t["category"] for t in turns} == {"heat"}
    played = run_cli("env", "play", *where, input="\n".join(game.walkthrough) + "\n")
    assert played.returncode == 0 and "solved after 7 turn(s), total reward 10" in played.stdout
    wrong = run_cli("env", "show", "--env", "alfworld", "--data-dir", str(root), "--seed", "3")
    assert wrong.returncode == 2 and "give --task" in wrong.stderr


def test_test_game_writer_command(tmp_path):
    """`python -m agentrepro.environments.alfworld_testgames DIR` writes the six games and prints their ids."""
    import subprocess
    import sys

    require_alfworld()
    done = subprocess.run(
        [sys.executable, "-m", "agentrepro.environments.alfworld_testgames", str(tmp_path / "d")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    ids = done.stdout.split()
    assert len(ids) == 6 and all((tmp_path / "d" / i / "game.tw-pddl").is_file() for i in ids)
    (tmp_path / "file").write_text("x")
    bad = subprocess.run(
        [sys.executable, "-m", "agentrepro.environments.alfworld_testgames", str(tmp_path / "file")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1


def test_seed_options_are_refused_for_games(games):
    """--seeds and --episodes (seed-based) are exit 2 naming the option for a game-file environment."""
    root, _ = games
    for args, option in ((["show", "--seeds", "0-3"], "--seeds"), (["replay", "--episodes", "-"], "--episodes")):
        done = run_cli("env", *args, "--env", "alfworld", "--data-dir", root, input="")
        assert done.returncode == 2 and f"{option}: environment 'alfworld' plays game files" in done.stderr


def test_notes_follow_the_graphgpo_recipe():
    """The recipe's notes: location, held object with its flags, moved objects; ignored after 'Nothing happens.'."""
    from agentrepro.environments.alfworld_tracking import Notes
    from agentrepro.errors import Failure

    notes = Notes()
    assert notes.text() == ("Location: middle of a room. Items in hand (status): nothing.", "")
    for command, feedback in [
        ("go to countertop 1", "You arrive at countertop 1. On it, you see a apple 1."),
        ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
        ("go to sinkbasin 1", "You arrive at sinkbasin 1."),
        ("cool apple 1 with fridge 1", "Nothing happens."),
        ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
    ]:
        notes.follow(command, feedback, done=False)
    assert notes.text() == ("Location: sinkbasin 1. Items in hand (status): apple 1(cleaned).", "")
    notes.follow("go to fridge 1", "You arrive at fridge 1.", done=False)
    notes.follow("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.", done=True)
    notes.follow("go to cabinet 1", "You arrive at cabinet 1.", done=False)  # after the end: not followed
    assert notes.text() == (
        "Location: fridge 1. Items in hand (status): nothing.",
        "History moving list by you: apple 1(cleaned) from countertop 1 move to fridge 1;",
    )
    with pytest.raises(Failure, match="while holding 'nothing'"):
        Notes().follow("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.", done=False)


def test_plain_verl_agent_observation(games):
    """`observation: verl-agent` shows the game's text alone and groups by it; graphgpo adds the notes and commands."""
    root, by_id = games
    task_id = next(iter(by_id))
    plain = make_env("alfworld", {"data_dir": str(root), "observation": "verl-agent"})
    _obs, info = plain.reset(task_id)
    assert info["grid"] == info["state_key"] == info["feedback"] and "Location:" not in info["grid"]
    recipe = make_env("alfworld", {"data_dir": str(root)})
    _obs, rinfo = recipe.reset(task_id)
    assert rinfo["grid"] == info["feedback"] + " Location: middle of a room. Items in hand (status): nothing. "
    assert rinfo["state_key"] == rinfo["grid"] + " " + ",".join(sorted(info["admissible_commands"]))
    assert plain.task_entry("", info)["task_hash"] != recipe.task_entry("", rinfo)["task_hash"]
