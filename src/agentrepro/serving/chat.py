"""The chat messages of one episode, as VAGEN's agent loops write them (VAGEN @ 2936322).

`vagen/agent_loop/gym_agent_loop.py` (concat): the system message is the environment's system prompt,
the first user message its initial observation; after each response the assistant message (the decoded
response) and, unless the episode ended, a user message with the next observation are appended, so turn
k sees the whole history. `gym_agent_loop_no_concat.py` (non_concat): every turn sees only the system
message and the current observation. Contents are plain text (the text-only path flattens them).
The mode names are the trainer's (`train.mode`: concat | non_concat). This is the one owner of the
messages: the served evaluator (serving/engine.py) sends them, and the builtin trainer, for a local chat
model, renders them with the tokenizer's chat template (trainer/dialogue.py), so it trains on what is evaluated.

Image observations (`render_mode: vision`) are sent as VAGEN's served evaluator sends them
(`vagen/evaluate/vision_workflow.py` with the OpenAI adapter): every content is a list of parts; a user
message is its observation text split at each `<image>` with the picture in its place, as
`{"type": "image_url", "image_url": {"url": "data:image/png;base64,…"}}`, and text parts that are only
whitespace dropped; the system and assistant messages are one text part each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentrepro.environments.images import IMAGE_PLACEHOLDER, data_url

MODES = ("concat", "non_concat")


@dataclass
class Conversation:
    """One episode's dialogue; `messages()` is what the next request sends."""

    system: str
    mode: str
    parts: bool = False  # contents as lists of parts (image observations), else plain strings
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def opening(cls, system: str, mode: str, observation: str, images: Sequence[np.ndarray] = ()) -> Conversation:
        """The dialogue of an episode just reset: its system prompt and first observation (with pictures,
        every content becomes a list of parts)."""
        chat = cls(system, mode, parts=bool(images))
        chat.observe(observation, images)
        return chat

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    def observe(self, observation: str, images: Sequence[np.ndarray] = ()) -> None:
        """A user message: the environment's observation (and its pictures, one per `<image>`)."""
        if images and not self.parts:
            raise ValueError("pictures need a conversation with parts=True")
        content = content_parts(observation, images) if self.parts else observation
        self.history.append({"role": "user", "content": content})

    def respond(self, response: str) -> None:
        """An assistant message: the model's response of this turn."""
        self.history.append({"role": "assistant", "content": self._text(response)})

    def _text(self, text: str) -> str | list[dict[str, Any]]:
        return [{"type": "text", "text": text}] if self.parts else text

    def messages(self) -> list[dict[str, Any]]:
        if not self.history or self.history[-1]["role"] != "user":
            raise RuntimeError("messages() needs an observation after the last response")
        turns = self.history if self.mode == "concat" else self.history[-1:]
        return [{"role": "system", "content": self._text(self.system)}, *(dict(m) for m in turns)]


def content_parts(text: str, images: Sequence[np.ndarray]) -> list[dict[str, Any]]:
    """`text` split at each `<image>`, the i-th picture (PNG data URL) in place of the i-th placeholder,
    whitespace-only text dropped (VAGEN's `compile_text_images_for_order` + its OpenAI adapter)."""
    pieces = text.split(IMAGE_PLACEHOLDER)
    if len(pieces) - 1 != len(images):
        raise ValueError(f"{len(pieces) - 1} {IMAGE_PLACEHOLDER} placeholder(s) but {len(images)} picture(s)")
    content: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        if piece.strip():
            content.append({"type": "text", "text": piece})
        if i < len(images):
            content.append({"type": "image_url", "image_url": {"url": data_url(images[i])}})
    return content
