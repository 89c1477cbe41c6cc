"""Small hand-written ALFWorld games, one of each task category, in a data directory laid out as ALFWorld's.

ALFWorld's games are downloaded by `alfworld-download`, which needs the internet; these games need only the
`alfworld` package, whose PDDL domain (`alfred.pddl`) and TextWorld grammar (`alfred.twl2`) they embed, as
`alfworld-generate` does for the real ones. Each game is one room: a countertop holding two apples, a mug and
a book, a side table with a desk lamp, a fridge, a microwave and a cabinet (closed; they open) and a sink
basin. Object ids are mangled as ALFRED's (`Apple_bar__plus_00_dot_01_bar_...`) so that ALFWorld's
demangler names them `apple 1`, `apple 2`, ... The task text replaces the grammar's `UNKNOWN GOAL` as
ALFWorld's `add_task_to_grammar` does; the goals state the six task types in the domain's predicates.

Each `TestGame` carries its walkthrough (the game file's `walkthrough`, which wins) and a wrong plan (the same
moves without the step the task is about: it ends without winning). `write_data_dir(root)` writes them:
`<root>/json_2.1.1/<split dir>/<task type>-<object>-None-<receptacle>-1/trial_T20260101_000000_00000<k>/`.

    python -m agentrepro.environments.alfworld_testgames DIR   # writes the games and prints their ids
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from agentrepro.environments.alfworld_data import GAME_FILE, JSON_DIR, SPLITS, TRAJ_FILE
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_json, check_output_dir


def _mangle(kind: str, k: int) -> str:
    """An ALFRED-style id: the type, then `|`-separated coordinates, mangled as ALFWorld's game files are."""
    return f"{kind}_bar__plus_00_dot_{k:02d}_bar__plus_00_dot_90_bar__minus_01_dot_{k + 10:02d}"


# receptacle type -> (openable, object types it can hold)
RECEPTACLES = {
    "CounterTop": (False, ("Apple", "Mug", "Book")),
    "SideTable": (False, ("Apple", "Mug", "Book", "DeskLamp")),
    "Fridge": (True, ("Apple", "Mug")),
    "Microwave": (True, ("Apple", "Mug")),
    "Cabinet": (True, ("Apple", "Mug", "Book")),
    "SinkBasin": (False, ("Apple", "Mug")),
}
# object id -> (type, receptacle type it starts in, properties)
OBJECTS = {
    _mangle("Apple", 1): ("Apple", "CounterTop", ("pickupable", "heatable", "coolable", "cleanable")),
    _mangle("Apple", 2): ("Apple", "CounterTop", ("pickupable", "heatable", "coolable", "cleanable")),
    _mangle("Mug", 3): ("Mug", "CounterTop", ("pickupable", "heatable", "coolable", "cleanable")),
    _mangle("Book", 4): ("Book", "CounterTop", ("pickupable",)),
    _mangle("DeskLamp", 5): ("DeskLamp", "SideTable", ("toggleable",)),
}
# types the domain names as constants, declared as ALFWorld's problems declare every type
OTYPES = ("Apple", "Mug", "Book", "DeskLamp", "Knife", "ButterKnife")
# a sink basin is named after its sink with a `_bar_SinkBasin` suffix, which the demangler reads as `sinkbasin`
RECEPTACLE_IDS = {
    kind: _mangle(kind, 20 + i) if kind != "SinkBasin" else _mangle("Sink", 20 + i) + "_bar_SinkBasin"
    for i, kind in enumerate(RECEPTACLES)
}
LOCATIONS = {kind: f"loc_bar__minus_{i + 1}_bar_{i + 2}_bar_1_bar_30" for i, kind in enumerate(RECEPTACLES)}
START = "loc_bar_0_bar_0_bar_0_bar_0"


def _placed(obj_type: str, recep: str, extra: str = "") -> str:
    """Goal: some object of `obj_type` (with `extra` facts on ?o) in some receptacle of type `recep`."""
    return (
        f"(exists (?r - receptacle) (exists (?o - object) (and (objectType ?o {obj_type}Type) "
        f"(receptacleType ?r {recep}Type) (inReceptacle ?o ?r){extra})))"
    )


GOALS = {
    "pick_and_place_simple": _placed("Apple", "Fridge"),
    "pick_clean_then_place_in_recep": _placed("Apple", "Fridge", " (isClean ?o)"),
    "pick_heat_then_place_in_recep": _placed("Mug", "Cabinet", " (isHot ?o)"),
    "pick_cool_then_place_in_recep": _placed("Apple", "CounterTop", " (isCool ?o)"),
    "pick_two_obj_and_place": (
        "(exists (?r - receptacle) (exists (?o1 - object) (exists (?o2 - object) (and (not (= ?o1 ?o2)) "
        "(objectType ?o1 AppleType) (objectType ?o2 AppleType) (receptacleType ?r FridgeType) "
        "(inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r)))))"
    ),
    "look_at_obj_in_light": (
        "(and (exists (?ot - object ?r - receptacle ?a - agent ?l - location) (and "
        "(objectType ?ot DeskLampType) (toggleable ?ot) (isToggled ?ot) (receptacleAtLocation ?r ?l) "
        "(atLocation ?a ?l) (inReceptacle ?ot ?r))) (exists (?o - object ?a - agent) "
        "(and (objectType ?o BookType) (holds ?a ?o))))"
    ),
}


@dataclass(frozen=True)
class TestGame:
    """One test game: its task type, pddl_params, task text, walkthrough (wins) and wrong plan (does not)."""

    task_type: str
    object_target: str
    parent_target: str
    toggle_target: str
    description: str
    walkthrough: tuple[str, ...]
    wrong_plan: tuple[str, ...]

    def directory(self, split: str, trial: int) -> str:
        """The game's id: its directory relative to the data directory."""
        task = f"{self.task_type}-{self.object_target}-None-{self.parent_target or self.toggle_target}-1"
        return f"{JSON_DIR}/{SPLITS[split]}/{task}/trial_T20260101_000000_{trial:06d}"


_TAKE_APPLE = ("go to countertop 1", "take apple 1 from countertop 1")
_TO_FRIDGE = ("go to fridge 1", "open fridge 1", "move apple 1 to fridge 1")
GAMES = (
    TestGame(
        "pick_and_place_simple",
        "Apple",
        "Fridge",
        "",
        "put some apple in fridge",
        _TAKE_APPLE + _TO_FRIDGE,
        (*_TAKE_APPLE, "go to cabinet 1", "open cabinet 1", "move apple 1 to cabinet 1"),
    ),
    TestGame(
        "look_at_obj_in_light",
        "Book",
        "",
        "DeskLamp",
        "look at book under the desklamp",
        ("go to countertop 1", "take book 1 from countertop 1", "go to sidetable 1", "use desklamp 1"),
        ("go to countertop 1", "take book 1 from countertop 1", "go to sidetable 1", "examine sidetable 1"),
    ),
    TestGame(
        "pick_clean_then_place_in_recep",
        "Apple",
        "Fridge",
        "",
        "clean some apple and put it in fridge",
        (*_TAKE_APPLE, "go to sinkbasin 1", "clean apple 1 with sinkbasin 1", *_TO_FRIDGE),
        (*_TAKE_APPLE, "go to sinkbasin 1", *_TO_FRIDGE),
    ),
    TestGame(
        "pick_heat_then_place_in_recep",
        "Mug",
        "Cabinet",
        "",
        "heat some mug and put it in cabinet",
        (
            "go to countertop 1",
            "take mug 1 from countertop 1",
            "go to microwave 1",
            "heat mug 1 with microwave 1",
            "go to cabinet 1",
            "open cabinet 1",
            "move mug 1 to cabinet 1",
        ),
        (
            "go to countertop 1",
            "take mug 1 from countertop 1",
            "go to cabinet 1",
            "open cabinet 1",
            "move mug 1 to cabinet 1",
        ),
    ),
    TestGame(
        "pick_cool_then_place_in_recep",
        "Apple",
        "CounterTop",
        "",
        "cool some apple and put it in countertop",
        (
            *_TAKE_APPLE,
            "go to fridge 1",
            "cool apple 1 with fridge 1",
            "go to countertop 1",
            "move apple 1 to countertop 1",
        ),
        (*_TAKE_APPLE, "go to fridge 1", "go to countertop 1", "move apple 1 to countertop 1"),
    ),
    TestGame(
        "pick_two_obj_and_place",
        "Apple",
        "Fridge",
        "",
        "put two apple in fridge",
        _TAKE_APPLE
        + _TO_FRIDGE
        + ("go to countertop 1", "take apple 2 from countertop 1", "go to fridge 1", "move apple 2 to fridge 1"),
        _TAKE_APPLE + _TO_FRIDGE,
    ),
)


def pddl_problem(game: TestGame, name: str) -> str:
    """The PDDL problem of one test game (the shared room, the game's goal)."""
    objects = ["agent1 - agent", START + " - location"]
    objects += [f"{t}Type - otype" for t in OTYPES] + [f"{t}Type - rtype" for t in RECEPTACLES]
    objects += [f"{rid} - receptacle" for rid in RECEPTACLE_IDS.values()] + [
        f"{loc} - location" for loc in LOCATIONS.values()
    ]
    objects += [f"{oid} - object" for oid in OBJECTS]
    init = [f"(atLocation agent1 {START})"]
    for kind, (openable, holds) in RECEPTACLES.items():
        rid = RECEPTACLE_IDS[kind]
        init += [f"(receptacleType {rid} {kind}Type)", f"(receptacleAtLocation {rid} {LOCATIONS[kind]})"]
        init += [f"(openable {rid})"] * openable + [f"(canContain {kind}Type {t}Type)" for t in holds]
    for oid, (kind, recep, properties) in OBJECTS.items():
        init += [
            f"(objectType {oid} {kind}Type)",
            f"(inReceptacle {oid} {RECEPTACLE_IDS[recep]})",
            f"(objectAtLocation {oid} {LOCATIONS[recep]})",
        ] + [f"({p} {oid})" for p in properties]
    return (
        f"(define (problem {name})\n(:domain alfred)\n(:objects\n  "
        + "\n  ".join(objects)
        + "\n)\n(:init\n  "
        + "\n  ".join(init)
        + f"\n)\n(:goal {GOALS[game.task_type]})\n)\n"
    )


def logic_files() -> tuple[str, str]:
    """(PDDL domain, TextWorld grammar) as the installed `alfworld` package ships them."""
    try:
        import alfworld  # optional: the alfworld extra
    except ImportError:
        raise BadInput("the alfworld package is not installed: pip install '.[alfworld]'", where="package") from None
    data = Path(alfworld.__file__).parent / "data"
    return (data / "alfred.pddl").read_text(encoding="utf-8"), (data / "alfred.twl2").read_text(encoding="utf-8")


def write_game(root: Path, game: TestGame, *, split: str, trial: int, solvable: bool = True) -> str:
    """Write one game (game.tw-pddl beside traj_data.json) under `root`; returns its id."""
    domain, grammar = logic_files()
    task_id = game.directory(split, trial)
    folder = root / task_id
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(
        folder / GAME_FILE,
        {
            "pddl_domain": domain,
            "grammar": grammar.replace("UNKNOWN GOAL", game.description),
            "pddl_problem": pddl_problem(game, f"plan_{task_id.rsplit('/', 1)[-1]}"),
            "solvable": solvable,
            "walkthrough": list(game.walkthrough),
        },
    )
    atomic_write_json(
        folder / TRAJ_FILE,
        {
            "task_type": game.task_type,
            "pddl_params": {
                "object_target": game.object_target,
                "parent_target": game.parent_target,
                "toggle_target": game.toggle_target,
                "mrecep_target": "",
                "object_sliced": False,
            },
            "turk_annotations": {"anns": [{"task_desc": game.description}]},
        },
    )
    return task_id


def write_data_dir(
    root: str | Path, *, split: str = "eval_in_distribution", games: tuple[TestGame, ...] = GAMES
) -> dict[str, TestGame]:
    """Write `games` as the split `split` of a data directory at `root`; returns {game id: game}."""
    root = Path(root)
    return {write_game(root, game, split=split, trial=k): game for k, game in enumerate(games)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentrepro.environments.alfworld_testgames", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("dir", help="data directory to write (created; existing games of the same ids are replaced)")
    parser.add_argument("--split", default="eval_in_distribution", choices=list(SPLITS))
    args = parser.parse_args(argv)
    try:
        root = check_output_dir(args.dir, option="dir")
        for task_id in write_data_dir(root, split=args.split):
            print(task_id)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
