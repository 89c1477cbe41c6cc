"""`agentrepro env show | replay | play`: look at, replay and play the text environments.

* `show --env E (--seed N | --seeds 0-99,10001-10256) [--param k=v]... [--json]`: the initial grid and
  observation; `--json` (implied by `--seeds`) prints one object per seed with `seed`, `grid`,
  `observation`, `state_key`, `player_pos`, `task_id`, `task_hash`, `solution` and `params` (and
  `image_sha256` with `--param render_mode=vision`). `--image out.png` (with --seed) also writes the
  picture of the initial state as VAGEN-Lite's vision mode draws it (images.py), in either render mode;
  `replay --responses FILE --images DIR` writes DIR/turn-0.png (reset) … DIR/turn-N.png (after turn N).
* `replay --env E --seed N --responses FILE [--json]`: FILE has one JSON string per line, each a model
  response; one object per turn (`turn`, `grid`, `observation`, `reward`, `done`, `success`, `actions`,
  `valid`, `effective`, `state_key`), stopping after the turn that ends the episode.
  `replay --env E --episodes FILE`: each line `{"seed": N, "responses": [...]}`; each output line
  `{"seed": N, "turns": [...]}`. FILE may be `-` (stdin). Input is validated completely before any output.
* `seeds --name Sokoban --n-envs 256 --directive '[10001, 10256, 1]'`: the ordered seed list VAGEN's dataset
  builds from one spec (see seeds.py), as one JSON object with `seeds`.
* `play --env E --seed N [--images DIR]`: type responses in the terminal (or pipe them); a line not starting with `<` is
  taken as the answer and wrapped in the configured format's tags.

`--param name=value` takes the reference's parameter names; the value is JSON (`'min_solution_steps=[1,5]'`),
and a value that is not JSON is taken as a plain string (`prompt_format=wm`); types are then validated.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from agentrepro.bounds import MAX_SEED, MAX_TASKS, SEED, integer
from agentrepro.environments.pictures import TurnPictures, write_picture
from agentrepro.environments.play import run_play
from agentrepro.environments.registry import REGISTRY, env_names, make_env, parse_params
from agentrepro.environments.seeds import directive_payload, expand_directive, parse_seed_ranges
from agentrepro.errors import BadInput
from agentrepro.fileio import check_output_file, iter_input_jsonl
from agentrepro.reading import MalformedJSON, parse_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="env_command", metavar="COMMAND", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--env", required=True, choices=env_names(), help="environment name")
        p.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="environment parameter (reference name; JSON value), repeatable",
        )
        p.add_argument(
            "--data-dir",
            metavar="DIR",
            help="data directory of a game-file environment (alfworld): the same as --param data_dir=DIR",
        )

    show = sub.add_parser("show", help="print the initial grid and observation of seeds")
    common(show)
    which = show.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=SEED, help="one seed")
    which.add_argument("--task", metavar="GAME_DIR", help="one game, relative to --data-dir (game-file environments)")
    which.add_argument("--seeds", help="numbers and inclusive ranges, e.g. 0-99,10001-10256 (JSON lines)")
    show.add_argument("--json", action="store_true", help="one JSON object per seed")
    show.add_argument("--system-prompt", action="store_true", help="also print the system prompt (text mode)")
    show.add_argument(
        "--image", metavar="PNG", help="also write the initial state's picture (as VAGEN's vision mode) to PNG"
    )

    replay = sub.add_parser("replay", help="feed recorded responses to an environment")
    common(replay)
    replay.add_argument("--seed", type=SEED, help="seed of the single episode (with --responses)")
    replay.add_argument(
        "--task", metavar="GAME_DIR", help="game of the single episode (with --responses; game-file environments)"
    )
    src = replay.add_mutually_exclusive_group(required=True)
    src.add_argument("--responses", help="JSONL file (or -): one response string per line")
    src.add_argument("--episodes", help='JSONL file (or -): {"seed": N, "responses": [...]} per line')
    replay.add_argument("--json", action="store_true", help="one JSON object per turn (default: text)")
    replay.add_argument(
        "--images",
        metavar="DIR",
        help="also write each state's picture (as VAGEN's vision mode): "
        "DIR/turn-0.png (the reset) … DIR/turn-N.png (after turn N); with --responses",
    )

    seeds = sub.add_parser("seeds", help="expand a VAGEN dataset seed directive into its ordered seed list")
    seeds.add_argument("--name", required=True, help="spec name as in the dataset yaml (e.g. Sokoban, FrozenLake)")
    seeds.add_argument(
        "--n-envs", type=integer(0, MAX_TASKS), required=True, help="number of environments (seeds) to draw"
    )
    seeds.add_argument("--directive", required=True, help="JSON list: [x], [min, max] or [min, max, limit]")
    seeds.add_argument("--base-seed", type=integer(0), default=0)
    seeds.add_argument("--spec-idx", type=integer(0), default=0)

    play = sub.add_parser("play", help="play a seed interactively")
    common(play)
    start = play.add_mutually_exclusive_group(required=True)
    start.add_argument("--seed", type=SEED)
    start.add_argument("--task", metavar="GAME_DIR", help="game relative to --data-dir (game-file environments)")
    play.add_argument("--max-turns", type=integer(0), default=None, help="stop after this many turns")
    play.add_argument("--images", metavar="DIR", help="write each state's picture to DIR/turn-K.png as you play")


def _dump(obj: Any, out: TextIO) -> None:
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")


def task_arg(name: str, args: argparse.Namespace) -> int | str:
    """The task the command names: `--seed` for seeded environments, `--task` for game-file ones (their
    `task_option`); BadInput when the other one, or neither, is given."""
    option = REGISTRY.get(name).task_option
    seed, task = getattr(args, "seed", None), getattr(args, "task", None)
    if option == "--task" and seed is not None:
        raise BadInput(
            f"environment {name!r} plays game files, not seeds: give --task GAME_DIR (and --data-dir)", where="--seed"
        )
    if option == "--seed" and task is not None:
        raise BadInput(f"environment {name!r} is generated from seeds: give --seed", where="--task")
    value = task if option == "--task" else seed
    if value is None:
        raise BadInput(f"environment {name!r} needs {option}", where=option)
    return value


def _reset(env, task: int | str, where: str):
    try:
        return env.reset(task)
    except BadInput:
        raise
    except ValueError as exc:
        raise BadInput(str(exc), where=where) from None


def show_record(name: str, params: dict[str, Any], seed: int | str) -> dict[str, Any]:
    env = make_env(name, params)
    observation, info = _reset(env, seed, env.task_option)
    task = env.task_entry(observation, info)
    record = {
        env.task_option.lstrip("-"): seed,
        "env": name,
        "grid": info["grid"],
        "observation": observation,
        "state_key": info["state_key"],
        "player_pos": info["player_pos"],
        "task_id": task["task_id"],
        "task_hash": task["task_hash"],
        "solution": env.solve(),
        **env.show_fields(),
        "params": params,
    }
    if "image_sha256" in info:
        record["image_sha256"] = info["image_sha256"]
    return record


def _turn_record(env, turn: int, observation: str, reward: float, done: bool, info: dict[str, Any]) -> dict[str, Any]:
    return {
        "turn": turn,
        "grid": info["grid"],
        "observation": observation,
        "reward": reward,
        "done": done,
        "success": info["success"],
        "actions": info["actions"],
        "valid": info["valid"],
        "effective": info["effective"],
        "state_key": info["state_key"],
        **env.turn_fields(info),
    }


def replay_episode(
    name: str,
    params: dict[str, Any],
    seed: int | str,
    responses: list[str],
    where: str,
    pictures: TurnPictures | None = None,
) -> list[dict[str, Any]]:
    """Per-turn records of one episode; stops after the turn that ends it (`pictures` gets every state)."""
    env = make_env(name, params)
    _reset(env, seed, where)
    if pictures is not None:
        pictures.write(env, 0)
    turns = []
    for i, response in enumerate(responses):
        observation, reward, done, info = env.step(response)
        turns.append(_turn_record(env, i, observation, reward, done, info))
        if pictures is not None:
            pictures.write(env, i + 1)
        if done:
            break
    return turns


def read_responses(path: str) -> list[str]:
    responses = []
    for number, obj in iter_input_jsonl(path):
        if not isinstance(obj, str):
            raise BadInput(
                f"expected a JSON string (one response), got {type(obj).__name__}", path=path, where=f"line {number}"
            )
        responses.append(obj)
    return responses


def read_episodes(path: str) -> list[tuple[int, int, list[str]]]:
    episodes = []
    for number, obj in iter_input_jsonl(path):
        where = f"line {number}"
        if not isinstance(obj, dict):
            raise BadInput('expected an object {"seed": N, "responses": [...]}', path=path, where=where)
        unknown = sorted(set(obj) - {"seed", "responses"})
        if unknown:
            raise BadInput(f"unknown key {unknown[0]!r}; expected seed and responses", path=path, where=where)
        seed, responses = obj.get("seed"), obj.get("responses")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise BadInput(f"seed: expected an integer in [0, {MAX_SEED}], got {seed!r}", path=path, where=where)
        if not isinstance(responses, list) or not all(isinstance(r, str) for r in responses):
            raise BadInput("responses: expected a list of strings", path=path, where=where)
        episodes.append((number, seed, responses))
    return episodes


def _run_show(args, params: dict[str, Any], out: TextIO) -> int:
    if args.image is not None and args.seeds is not None:
        raise BadInput("--image writes one picture: give --seed (or --task), not --seeds", where="--image")
    if args.image is not None:
        check_output_file(args.image, option="--image")  # before any work
    if args.seeds is not None:
        if REGISTRY.get(args.env).task_option != "--seed":
            raise BadInput(
                f"environment {args.env!r} plays game files, not seeds: give --task GAME_DIR", where="--seeds"
            )
        records = [show_record(args.env, params, seed) for seed in parse_seed_ranges(args.seeds)]
        for record in records:
            _dump(record, out)
        return 0
    record = show_record(args.env, params, task_arg(args.env, args))
    if args.image is not None:
        env = make_env(args.env, params)
        _reset(env, task_arg(args.env, args), env.task_option)
        write_picture(env, args.image)
    if args.json:
        _dump(record, out)
    else:
        if args.system_prompt:
            out.write(make_env(args.env, params).system_prompt() + "\n\n")
        out.write(record["observation"])
    return 0


def _run_replay(args, params: dict[str, Any], out: TextIO) -> int:
    if args.episodes is not None:
        if REGISTRY.get(args.env).task_option != "--seed":
            raise BadInput(
                f"environment {args.env!r} plays game files: give --task GAME_DIR with --responses", where="--episodes"
            )
        if args.seed is not None:
            raise BadInput("--seed is given per line of --episodes, not on the command line", where="--seed")
        if args.images is not None:
            raise BadInput("pictures are written for one episode: use --responses", where="--images")
        episodes = read_episodes(args.episodes)
        results = [
            {"seed": seed, "turns": replay_episode(args.env, params, seed, responses, f"{args.episodes}: line {n}")}
            for n, seed, responses in episodes
        ]
        for result in results:
            _dump(result, out)
        return 0
    task = task_arg(args.env, args)
    pictures = None if args.images is None else TurnPictures(args.images)
    turns = replay_episode(
        args.env, params, task, read_responses(args.responses), REGISTRY.get(args.env).task_option, pictures
    )
    for turn in turns:
        if args.json:
            _dump(turn, out)
        else:
            out.write(
                f"turn {turn['turn']}: actions {turn['actions']} reward {turn['reward']} done {turn['done']} "
                f"success {turn['success']} valid {turn['valid']}\n{turn['grid']}\n"
            )
    return 0


def _run_seeds(args, out: TextIO) -> int:
    try:
        directive = parse_json(args.directive, where="--directive")
    except MalformedJSON as exc:
        raise BadInput(f"expected a JSON list such as [10001, 10256, 1]: {exc}", where="--directive") from None
    seeds = expand_directive(args.name, args.n_envs, directive, args.base_seed, args.spec_idx)
    _dump(
        {
            "name": args.name,
            "n_envs": args.n_envs,
            "seed": directive,
            "base_seed": args.base_seed,
            "spec_idx": args.spec_idx,
            "rng_payload": directive_payload(args.name, directive, args.base_seed, args.spec_idx),
            "seeds": seeds,
        },
        out,
    )
    return 0


def run(args: argparse.Namespace) -> int:
    if args.env_command == "seeds":
        return _run_seeds(args, sys.stdout)
    params = parse_params(args.param, args.env, args.data_dir)
    out = sys.stdout
    if args.env_command == "show":
        return _run_show(args, params, out)
    if args.env_command == "replay":
        return _run_replay(args, params, out)
    return run_play(args, params, out, sys.stdin, task=task_arg(args.env, args), reset=_reset)
