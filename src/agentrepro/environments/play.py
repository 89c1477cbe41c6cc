"""`agentrepro env play`: a game in the terminal (or fed by a pipe), with its pictures on request."""

from __future__ import annotations

from typing import Any, TextIO

from agentrepro.environments.pictures import TurnPictures
from agentrepro.environments.registry import make_env


def wrap_answer(line: str, env) -> str:
    """A typed line as a response: used as-is if it starts with '<', else as the answer of a well-formed one."""
    return line if line.lstrip().startswith("<") else env.format_actions([line])


def run_play(args, params: dict[str, Any], out: TextIO, inp: TextIO, *, task: int | str, reset) -> int:
    """`env play` of `task`: the system prompt and observation, then one typed line per turn until done, quit
    or --max-turns; `reset(env, task, where)` is the CLI's reset (BadInput naming the option on a bad task)."""
    pictures = None if args.images is None else TurnPictures(args.images)
    env = make_env(args.env, params)
    observation, _ = reset(env, task, env.task_option)
    system = env.system_prompt()
    out.write((system + "\n\n" if system else "") + observation)
    if pictures is not None:
        out.write(f"(picture: {pictures.write(env, 0)})\n")
    out.write(f"(type {env.play_hint}, a full tagged response, or 'quit')\n")
    turns, total, done = 0, 0.0, False
    while not done and (args.max_turns is None or turns < args.max_turns):
        out.write("> ")
        out.flush()
        line = inp.readline()
        if not line or line.strip().lower() in ("quit", "exit"):
            break
        observation, reward, done, info = env.step(wrap_answer(line.rstrip("\n"), env))
        turns += 1
        total += reward
        out.write(f"reward {reward:g} (total {total:g}) valid {info['valid']} done {done}\n{observation}")
        if pictures is not None:
            out.write(f"(picture: {pictures.write(env, turns)})\n")
    status = "solved" if done and info["success"] else ("episode over" if done else "stopped")
    out.write(f"{status} after {turns} turn(s), total reward {total:g}\n")
    return 0
