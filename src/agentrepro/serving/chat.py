"""The chat messages of one episode, as VAGEN's agent loops write them (VAGEN @ 2936322).

`vagen/agent_loop/gym_agent_loop.py` (concat): the system message is the environment's system prompt,
the first user message its initial observation; after each response the assistant message (the decoded
response) and, unless the episode ended, a user message with the next observation are appended, so turn
k sees the whole history. `gym_agent_loop_no_concat.py` (non_concat): every turn sees only the system
message and the current observation. Contents are plain text (the text-only path flattens them).
The mode names are the trainer's (`train.mode`: concat | non_concat). This is the one owner of the
messages: the served evaluator (serving/engine.py) sends them, and the builtin trainer, for a local chat
model, renders them with the tokenizer's chat template (trainer/dialogue.py), so it trains on what is evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MODES = ("concat", "non_concat")


@dataclass
class Conversation:
    """One episode's dialogue; `messages()` is what the next request sends."""

    system: str
    mode: str
    history: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def opening(cls, system: str, mode: str, observation: str) -> "Conversation":
        """The dialogue of an episode just reset: its system prompt and first observation."""
        chat = cls(system, mode)
        chat.observe(observation)
        return chat

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    def observe(self, observation: str) -> None:
        """A user message: the environment's observation."""
        self.history.append({"role": "user", "content": observation})

    def respond(self, response: str) -> None:
        """An assistant message: the model's response of this turn."""
        self.history.append({"role": "assistant", "content": response})

    def messages(self) -> list[dict[str, str]]:
        if not self.history or self.history[-1]["role"] != "user":
            raise RuntimeError("messages() needs an observation after the last response")
        turns = self.history if self.mode == "concat" else self.history[-1:]
        return [{"role": "system", "content": self.system}, *(dict(m) for m in turns)]
