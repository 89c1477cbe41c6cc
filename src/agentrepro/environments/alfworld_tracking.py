"""What the GraphGPO recipe tracks of an ALFWorld episode (its notes): where the agent is, what it holds, what it has moved.

verl-agent @ 20bd331 `recipe/GraphGPO/alfworld_envs.py` (`AlfworldWorker`) follows each command whose feedback
is not "Nothing happens." (and none after the game ended), reading the command's words:

* `heat|cool|clean|slice <obj> [with <x>]`, when the verb is in the feedback: the object becomes heated,
  cooled or cleaned (`slice` adds a `sliced` flag beside the never-set `slice` one, as the recipe does);
* `go to <place>`: the agent is there (the place must be in the feedback);
* `take <obj> [from <x>]` (hands must be empty) picks it up, `drop <obj>` and `put|place <obj> in|on <x>` put it
  down, `move <obj> [to <x>]` (the object must be held) puts it down; each only when the object is in the
  feedback. When the held object changes, the object picked up for the first time records where it came from,
  one put down records where it went, and one picked up again is back where it came from.

`recipe/GraphGPO/graphgpo_env_manager.py` (`AlfWorldEnvironmentManager.get_location_holding`) writes them as `Location: <place>. Items in hand (status):
<obj>(<flags>).` and `History moving list by you: <obj>(<flags>) from <a> move to <b>;...` (moved objects, and
processed ones not in hand), appended to the game's text. A violated precondition (a `take` with full hands,
a `move` of what is not held, a `go to` whose place is not in the feedback) stopped the recipe's worker with an
assertion; here it is a `Failure` naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentrepro.errors import Failure

NOTHING = "nothing"
START = "middle of a room"
_PROCESS = re.compile(r"^(heat|cool|clean|slice)\s+([\w\s\d]+?)(?:\s+with\s+[\w\s\d]+)?$")
_GO = re.compile(r"^go to\s+(.+)$")
_TAKE = re.compile(r"^take\s+(.+?)(?:\s+from\s+.+)?$")
_DROP = re.compile(r"^drop\s+(.+)$")
_PUT = re.compile(r"^(put|place)\s+(.+?)\s+(?:in|on)\s+.+$")
_MOVE = re.compile(r"^move\s+(.+?)(?:\s+to\s+.+)?$")
_FLAG = {"heat": "heated", "cool": "cooled", "clean": "cleaned", "slice": "sliced"}


@dataclass
class Notes:
    """The recipe's running notes of one episode (a fresh one per reset)."""

    location: str = START
    holding: str = NOTHING
    items: dict[str, dict[str, bool]] = field(default_factory=dict)  # object -> flags, in first-processed order
    moved: dict[str, dict[str, str]] = field(default_factory=dict)  # object -> {old_location, new_location}
    over: bool = False

    def follow(self, command: str, feedback: str, done: bool) -> None:
        """Update after one command and its feedback; `done`: the game ended with it."""
        if "Nothing happens" not in feedback and not self.over:
            action = command.lower().strip()
            self._process(action, feedback)
            self._go(action, feedback)
            self._hands(action, feedback)
        self.over = done

    def _process(self, action: str, feedback: str) -> None:
        match = _PROCESS.match(action)
        if not match or match.group(1) not in feedback:
            return
        verb, obj = match.group(1), match.group(2).strip()
        flags = self.items.setdefault(obj, {"heated": False, "cooled": False, "cleaned": False, "slice": False})
        flags[_FLAG[verb]] = True

    def _go(self, action: str, feedback: str) -> None:
        match = _GO.match(action)
        if match:
            target = match.group(1).strip()
            if target not in feedback:
                raise Failure(f"ALFWorld notes: went to {target!r} but the feedback does not name it: {feedback!r}")
            self.location = target

    def _hands(self, action: str, feedback: str) -> None:
        before = self.holding
        if match := _TAKE.match(action):
            obj = match.group(1).strip()
            if self.holding != NOTHING:
                raise Failure(f"ALFWorld notes: {action!r} while holding {self.holding!r}")
            if obj in feedback:
                self.holding = obj
        if (match := _DROP.match(action)) and match.group(1).strip() in feedback:
            self.holding = NOTHING
        if (match := _PUT.match(action)) and match.group(2).strip() in feedback:
            self.holding = NOTHING
        if match := _MOVE.match(action):
            obj = match.group(1).strip()
            if self.holding != obj:
                raise Failure(f"ALFWorld notes: {action!r} while holding {self.holding!r}")
            if obj in feedback:
                self.holding = NOTHING
        if before != self.holding:
            self._record(before)

    def _record(self, before: str) -> None:
        obj = self.holding if before == NOTHING else before
        if obj not in self.moved:
            self.moved[obj] = {"old_location": self.location, "new_location": self.location}
        elif before == obj:
            self.moved[obj]["new_location"] = self.location
        elif self.holding == obj:
            self.moved[obj]["new_location"] = self.moved[obj]["old_location"]

    @staticmethod
    def _flags(flags: dict[str, bool] | None) -> str:
        return " ".join(name for name, on in (flags or {}).items() if on)

    def text(self) -> tuple[str, str]:
        """(`Location: ... Items in hand (status): ....`, `History moving list by you: ...` or "")."""
        held = " ".join(
            self._flags(flags) for obj, flags in self.items.items() if obj in self.holding and self._flags(flags)
        )
        status = f"({held})" if held else ("(unprocessed)" if self.holding != NOTHING else "")
        history = ""
        for obj, where in self.moved.items():
            flags = self._flags(self.items.get(obj))
            state = f"({flags})" if flags else "(unprocessed)"
            if where["old_location"] != where["new_location"] or (state != "(unprocessed)" and self.holding != obj):
                history += f"{obj}{state} from {where['old_location']} move to {where['new_location']};"
        return (
            f"Location: {self.location}. Items in hand (status): {self.holding}{status}.",
            f"History moving list by you: {history}" if history else "",
        )
