"""How text goes in and out of the policy (`Codec`), and what it reads at each turn of an episode: one dialogue
per trajectory, made by `Codec.dialogue`.

* `WordDialogue` (the tiny word-level policy, and a local model without a chat template): the turn's
  prompt is `Codec.prompt` of the current observation (`<obs> ... <act>` for the tiny policy).
* `ChatDialogue` (a local model whose tokenizer has a chat template): the messages are the served
  evaluator's (serving/chat.py `Conversation`: the environment's system prompt, its observations as user
  messages, the decoded responses as assistant messages; concat sends the whole history, non_concat the
  current observation only), and the turn's prompt is the tokenizer's chat template applied to them with the
  generation prompt (`template_ids`): the tokens a chat server feeds the model for the same request. So the
  trainer trains on, and the builtin evaluator scores, exactly the prompts the served evaluation sends.
  Earlier assistant turns appear as the template renders them (re-tokenized text), so a chat rollout has
  one row per turn in both modes (rollout.py); only the generated tokens of a row are trained.

Rows start with `Codec.bos`; for a chat model that is the first token of the template's rendering, which
every prompt must begin with (checked), and `prompt()` returns the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jinja2 import TemplateError

from agentrepro.errors import BadInput
from agentrepro.serving.chat import Conversation
from agentrepro.trainer.tokenizer import ACT, OBS, encode_words

_PROBE = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def template_ids(tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of `messages` rendered by the tokenizer's chat template, with the generation prompt."""
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    return list(encoded["input_ids"])


def prompts(dialogues: list) -> list[list[int]]:
    """Each dialogue's `prompt()`; chat dialogues rendered and tokenized in one batch (one call of the chat template
    over every conversation: the tokenizer's batch encoding instead of one call per row, the same ids)."""
    if not dialogues or not all(isinstance(d, ChatDialogue) for d in dialogues):
        return [d.prompt() for d in dialogues]
    codec = dialogues[0].codec
    encoded = codec.tokenizer.apply_chat_template(
        [d.messages() for d in dialogues], add_generation_prompt=True, tokenize=True, return_dict=True
    )
    return [ChatDialogue.after_bos(codec, list(ids)) for ids in encoded["input_ids"]]


def first_template_token(tokenizer) -> int:
    """The token every rendering of the chat template starts with (the rows' first column)."""
    try:
        return template_ids(tokenizer, _PROBE)[0]
    except (TemplateError, IndexError) as exc:  # e.g. a template that refuses a system message
        raise BadInput(
            f"the tokenizer's chat template cannot render a system and a user message: {exc}", where="model.path"
        ) from None


def prompt_record(codec, mode: str) -> dict[str, Any]:
    """How the policy is prompted, for the provenance: the prompt kind, the chat template's sha256 and the rows."""
    template = codec.chat_template
    if template is not None:
        kind = "chat_template"
    else:
        kind = "observation_text" if codec.markers == [None, None] else "word_level"
    return {
        "kind": kind,
        "mode": mode,
        "chat_template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest() if template is not None else None,
        "rows": "one per turn" if template is not None or mode == "non_concat" else "one per trajectory",
    }


class WordDialogue:
    """Prompts of the current observation alone (`Codec.prompt`); the history lives in the row (concat)."""

    def __init__(self, codec, observation: str, info: dict):
        self.codec, self.observation, self.info = codec, observation, info

    def prompt(self) -> list[int]:
        return self.codec.prompt(self.observation, self.info)

    def step(self, response: str, observation: str, info: dict) -> None:
        self.observation, self.info = observation, info


class ChatDialogue:
    """The served evaluator's messages, rendered by the chat template (see the module docstring)."""

    def __init__(self, codec, system: str, mode: str, observation: str):
        self.codec = codec
        self.chat = Conversation.opening(system, mode, observation)

    def messages(self) -> list[dict[str, str]]:
        return self.chat.messages()

    def prompt(self) -> list[int]:
        """The template's tokens of this turn's messages after the row's first token (`Codec.bos`)."""
        return self.after_bos(self.codec, template_ids(self.codec.tokenizer, self.chat.messages()))

    @staticmethod
    def after_bos(codec, ids: list[int]) -> list[int]:
        """A rendering's ids after its first token, which must be the rows' first column (`Codec.bos`)."""
        if not ids or ids[0] != codec.bos:
            raise BadInput(
                f"the chat template does not start every prompt with the same token (expected id {codec.bos}, "
                f"got {ids[:1]})",
                where="model.path",
            )
        return ids[1:]

    def step(self, response: str, observation: str, info: dict) -> None:
        self.chat.respond(response)
        self.chat.observe(observation)


@dataclass
class Codec:
    """How text goes in and out of the policy."""

    tokenizer: Any
    view: Callable[[str, dict], str]  # (observation, info) -> text the policy reads
    render: Callable[[list[int]], str]  # generated ids (without <eos>) -> environment response
    demo: Callable[
        [list[str]], list[int]
    ]  # demonstrated action words -> the ids the policy should generate (with <eos>)
    chat_template: str | None = None  # set: prompts are the chat template's rendering of the served messages

    def __post_init__(self):
        tok = self.tokenizer
        self.bos, self.eos, self.pad = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
        self.obs, self.act = tok.convert_tokens_to_ids(OBS), tok.convert_tokens_to_ids(ACT)
        if self.chat_template is not None:
            self.bos = first_template_token(tok)
        if self.bos is None:
            self.bos = self.eos
        # a pretrained tokenizer has no <obs>/<act> markers: its prompts are the observation text alone
        unk = tok.unk_token_id
        self.markers = [m if m is not None and m != unk else None for m in (self.obs, self.act)]

    def prompt(self, observation: str, info: dict) -> list[int]:
        start, end = self.markers
        body = encode_words(self.tokenizer, self.view(observation, info))
        return [*([start] if start is not None else []), *body, *([end] if end is not None else [])]

    @property
    def chat(self) -> bool:
        return self.chat_template is not None

    def dialogue(self, env, mode: str, observation: str, info: dict):
        """The prompts of one episode just reset: a ChatDialogue with a chat template, else a WordDialogue."""
        if self.chat:
            return ChatDialogue(self, env.system_prompt(), mode, observation)
        return WordDialogue(self, observation, info)
