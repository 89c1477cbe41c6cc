"""An ALFWorld data directory: where its games are, which of them ALFWorld plays, and what each one is.

The layout is ALFWorld's (the directory `alfworld-download` fills, `$ALFWORLD_DATA`):
`json_2.1.1/<split dir>/<task>-<params>/trial_<id>/` holds `traj_data.json` (the ALFRED trajectory; its
`task_type` names the task) and `game.tw-pddl` (a JSON object `{pddl_domain, grammar, pddl_problem,
solvable, walkthrough}`). The split names are ALFWorld's `train_eval` values and map to split directories as
its `configs/config_tw.yaml` maps them: `train` → `train`, `eval_in_distribution` → `valid_seen`,
`eval_out_of_distribution` → `valid_unseen`.

A game is *eligible* when ALFWorld's `AlfredTWEnv.collect_game_files` would play it: its directory holds
`traj_data.json`, its path contains neither `movable` nor `Sliced`, its `task_type` is one of the six, and
`game.tw-pddl` exists with `solvable: true`. ALFWorld lists games in `os.walk` order (filesystem order); here
they are sorted by path, so a panel does not depend on the filesystem.

A game's id is its directory relative to the data directory, in POSIX form
(`json_2.1.1/valid_seen/pick_and_place_simple-Apple-None-Fridge-1/trial_T20190906_000000_000000`); its
content is named by the SHA-256 of its two files. Reading them needs no ALFWorld package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_file
from agentrepro.reading import load_json

JSON_DIR = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
#: ALFWorld's train_eval names → split directories (configs/config_tw.yaml, dataset.*_path)
SPLITS = {"train": "train", "eval_in_distribution": "valid_seen", "eval_out_of_distribution": "valid_unseen"}
#: ALFWorld's six task types (alfred_tw_env.py TASK_TYPES) → the category names the harness reports
CATEGORIES = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick2",
}
#: a path containing one of these is skipped by ALFWorld (movable receptacles and sliced objects are unsupported)
SKIPPED_MARKS = ("movable", "Sliced")


@dataclass(frozen=True)
class Game:
    """One game of a data directory: its id, files, task type and category, and the hashes of its two files."""

    task_id: str
    directory: Path
    task_type: str
    category: str
    game_sha256: str
    traj_sha256: str

    @property
    def game_file(self) -> Path:
        return self.directory / GAME_FILE

    @property
    def traj_file(self) -> Path:
        return self.directory / TRAJ_FILE

    def files(self) -> dict[str, str]:
        """{file name relative to the data directory: SHA-256} of the two files that define the game."""
        return {f"{self.task_id}/{GAME_FILE}": self.game_sha256, f"{self.task_id}/{TRAJ_FILE}": self.traj_sha256}


def data_dir_or_env(data_dir: str | os.PathLike | None, *, where: str) -> Path:
    """The data directory given, or `$ALFWORLD_DATA` (ALFWorld's own convention); BadInput if neither is a directory."""
    if data_dir is None:
        data_dir = os.environ.get("ALFWORLD_DATA")
        if not data_dir:
            raise BadInput(
                "no ALFWorld data directory: give one (--data-dir, env.params.data_dir) or set ALFWORLD_DATA",
                where=where,
            )
    path = Path(data_dir)
    if not path.is_dir():
        raise BadInput("ALFWorld data directory not found", path=path, where=where)
    return path


def split_dir(data_dir: Path, split: str, *, where: str = "env.split") -> Path:
    """`<data_dir>/json_2.1.1/<split dir>`; BadInput for an unknown split or a missing directory."""
    if split not in SPLITS:
        raise BadInput(f"unknown ALFWorld split {split!r}; expected one of {', '.join(SPLITS)}", where=where)
    path = data_dir / JSON_DIR / SPLITS[split]
    if not path.is_dir():
        raise BadInput(f"the split directory of {split!r} is missing", path=path, where=where)
    return path


def _load_json_object(path: Path) -> dict:
    data = load_json(path)
    if not isinstance(data, dict):
        raise BadInput("expected a JSON object", path=path)
    return data


def task_type_of(traj_file: Path) -> str:
    """`task_type` of a `traj_data.json`; BadInput naming the field if it is missing or not one of the six."""
    task_type = _load_json_object(traj_file).get("task_type")
    if task_type not in CATEGORIES:
        raise BadInput(f"expected one of {', '.join(CATEGORIES)}, got {task_type!r}", path=traj_file, where="task_type")
    return task_type


def _eligible(directory: Path, task_id: str) -> bool:
    """ALFWorld's filters on one directory holding traj_data.json (the module docstring lists them); the marks are
    looked for in the game's id (ALFWorld looks in the whole path, so a data directory named `...movable...` would
    lose every game there)."""
    if any(mark in task_id for mark in SKIPPED_MARKS):
        return False
    traj = _load_json_object(directory / TRAJ_FILE)
    if traj.get("task_type") not in CATEGORIES or not (directory / GAME_FILE).is_file():
        return False
    return _load_json_object(directory / GAME_FILE).get("solvable") is True


def eligible_games(data_dir: Path, split: str, *, where: str = "env.split") -> list[str]:
    """The ids of the split's eligible games, sorted."""
    top = split_dir(data_dir, split, where=where)
    found = []
    for root, _dirs, files in os.walk(top):
        task_id = Path(root).relative_to(data_dir).as_posix()
        if TRAJ_FILE in files and _eligible(Path(root), task_id):
            found.append(task_id)
    return sorted(found)


def task_id_of_game_file(path: str) -> str:
    """The id of a game named by its game file relative to the data directory (`.../trial_<id>/game.tw-pddl`, as
    Relax's data preparation and agent name a task): the file's directory. Any other text is returned as it is."""
    found = PurePosixPath(path)
    return found.parent.as_posix() if found.name == GAME_FILE and len(found.parts) > 1 else path


def game_id_problem(task_id: object) -> str | None:
    """Why `task_id` cannot name a game directory inside a data directory (None if it can)."""
    if not isinstance(task_id, str) or not task_id:
        return "expected a non-empty game directory relative to the data directory"
    parts = PurePosixPath(task_id).parts
    if (
        task_id.startswith("/")
        or "\\" in task_id
        or any(p in ("", ".", "..") for p in parts)
        or PurePosixPath(*parts).as_posix() != task_id.rstrip("/")
    ):
        return f"{task_id!r} is not a plain relative path (no '..', no leading '/', '/' as separator)"
    return None


def read_game(data_dir: Path, task_id: str, *, where: str = "--task") -> Game:
    """The game `task_id` of `data_dir`; BadInput naming the directory or file that is missing or malformed."""
    problem = game_id_problem(task_id)
    if problem:
        raise BadInput(problem, where=where)
    task_id = task_id.rstrip("/")
    directory = data_dir / task_id
    for name in (GAME_FILE, TRAJ_FILE):
        if not (directory / name).is_file():
            raise BadInput(f"no {name} in the game directory", path=directory, where=where)
    game = _load_json_object(directory / GAME_FILE)
    for key in ("pddl_domain", "grammar", "pddl_problem"):
        if not isinstance(game.get(key), str) or not game[key]:
            raise BadInput("expected a non-empty string", path=directory / GAME_FILE, where=key)
    task_type = task_type_of(directory / TRAJ_FILE)
    return Game(
        task_id=task_id,
        directory=directory,
        task_type=task_type,
        category=CATEGORIES[task_type],
        game_sha256=sha256_file(directory / GAME_FILE),
        traj_sha256=sha256_file(directory / TRAJ_FILE),
    )
