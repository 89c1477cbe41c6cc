"""Response parsing for the VAGEN-Lite text environments (formats `free_think`, `wm`, `free_wm`).

A response is one model turn (a string). Parsing never raises: a response that does not match the
format gives `format_correct = False`, empty contents and no actions, which the environment turns into
an invalid turn (reward 0). The semantics are those of VAGEN @ 2936322 `vagen/envs/{sokoban,frozenlake}/
utils/utils.py` as recorded in the reference fixture
`tests/fixtures/vagen/parse_cases.jsonl`:

* a regular-expression *search* (first match anywhere; `.` matches newlines; tag names case-sensitive;
  contents non-greedy and stripped);
* the answer is split on `action_sep`, each piece stripped and lower-cased, empty pieces dropped, and the
  list cut to `max_actions` (then `action_content` becomes the kept actions joined by `action_sep`);
* `llm_response` is the canonical re-assembly of the tagged contents, with no whitespace between tags.
"""

from __future__ import annotations

import re
from typing import Any

PROMPT_FORMATS = ("free_think", "wm", "free_wm")

# The reference's patterns. `parse_response` does not run them (their lazy groups backtrack in
# polynomial time on adversarial text such as "<think>" * 5000); `match_tags` computes the same match in
# linear time, and tests/environments/test_parsing.py checks that it agrees with these on random inputs.
REFERENCE_PATTERNS = {
    "free_think": re.compile(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", re.DOTALL),
    "wm": re.compile(
        r"<observation>(.*?)</observation>\s*<think>(.*?)</think>\s*<answer>(.*?)</answer>"
        r"\s*<prediction>(.*?)</prediction>",
        re.DOTALL,
    ),
    "free_wm": re.compile(
        r"<observation>(.*?)</observation>(.*?)<answer>(.*?)</answer>(.*?)<prediction>(.*?)</prediction>", re.DOTALL
    ),
}
_TAGS = {
    "free_think": ("think", "answer"),
    "wm": ("observation", "think", "answer", "prediction"),
    "free_wm": ("observation", "answer", "prediction"),
}
_WS_THEN = {tag: re.compile(r"\s*<" + tag + ">") for tag in ("think", "answer", "prediction")}


def match_tags(text: str, prompt_format: str) -> tuple[str, ...] | None:
    """The groups of REFERENCE_PATTERNS[prompt_format].search(text), unstripped, or None — in linear time.

    Why this is the same match: a lazy group followed by a literal closing tag takes the first closing
    tag after which the rest of the pattern can still match, and whether the rest can match only gets
    harder the later it starts. So the leftmost opening tag is the match's start if any match exists, and
    at each level the first closing tag that is followed by the required separator (only whitespace
    before the next opening tag in `free_think`/`wm`; any text in `free_wm`) is the one the regex takes;
    if the rest fails from there, it fails from every later choice too.
    """
    tags = _TAGS[prompt_format]
    start = text.find(f"<{tags[0]}>")
    if start < 0:
        return None
    pos = start + len(tags[0]) + 2
    groups: list[str] = []
    for level, tag in enumerate(tags):
        close = f"</{tag}>"
        if level == len(tags) - 1:
            end = text.find(close, pos)
            if end < 0:
                return None
            groups.append(text[pos:end])
            return tuple(groups)
        following = tags[level + 1]
        if prompt_format == "free_wm":
            end = text.find(close, pos)
            if end < 0:
                return None
            gap_end = text.find(f"<{following}>", end + len(close))
            if gap_end < 0:
                return None
            groups += [text[pos:end], text[end + len(close) : gap_end]]
            pos = gap_end + len(following) + 2
            continue
        end, sep = text.find(close, pos), None
        while end >= 0:
            sep = _WS_THEN[following].match(text, end + len(close))
            if sep:
                break
            end = text.find(close, end + 1)
        if sep is None:
            return None
        groups.append(text[pos:end])
        pos = sep.end()
    return None  # not reached


def split_actions(action_content: str, action_sep: str, max_actions: int) -> tuple[list[str], str]:
    """Split an answer into lower-case action words; returns (actions, action_content as reported).

    Pieces are stripped and lower-cased, empty ones dropped; more than `max_actions` are cut to the
    first `max_actions`, and then the reported content is those actions joined by `action_sep`.
    """
    actions = [piece.strip().lower() for piece in action_content.split(action_sep)]
    actions = [a for a in actions if a]
    if len(actions) > max_actions:
        actions = actions[:max_actions]
        action_content = action_sep.join(actions)
    return actions, action_content


def _free_think(response: str, action_sep: str, max_actions: int) -> dict[str, Any]:
    match = match_tags(response, "free_think")
    if match is None:
        actions: list[str] = []
        think, content, ok = "", "", False
    else:
        think, content = match[0].strip(), match[1].strip()
        actions, content = split_actions(content, action_sep, max_actions)
        ok = True
    return {
        "llm_raw_response": response,
        "llm_response": f"<think>{think}</think><answer>{content}</answer>",
        "think_content": think,
        "action_content": content,
        "actions": actions,
        "format_correct": ok,
    }


def _wm_result(
    response: str,
    observation: str,
    think: str,
    content: str,
    prediction: str,
    actions: list[str],
    ok: bool,
    *,
    free: bool,
) -> dict[str, Any]:
    if free:  # free_wm: the free text is not re-emitted in the canonical response
        canonical = (
            f"<observation>{observation}</observation><answer>{content}</answer><prediction>{prediction}</prediction>"
        )
    else:
        canonical = (
            f"<observation>{observation}</observation><think>{think}</think>"
            f"<answer>{content}</answer><prediction>{prediction}</prediction>"
        )
    return {
        "llm_raw_response": response,
        "llm_response": canonical,
        "observation_content": observation,
        "think_content": think,
        "reasoning_content": think,
        "prediction_content": prediction,
        "action_content": content,
        "actions": actions,
        "format_correct": ok,
    }


def _wm(response: str, action_sep: str, max_actions: int) -> dict[str, Any]:
    match = match_tags(response, "wm")
    if match is None:
        return _wm_result(response, "", "", "", "", [], False, free=False)
    observation, think, content, prediction = (g.strip() for g in match)
    actions, content = split_actions(content, action_sep, max_actions)
    return _wm_result(response, observation, think, content, prediction, actions, True, free=False)


def _free_wm(response: str, action_sep: str, max_actions: int) -> dict[str, Any]:
    match = match_tags(response, "free_wm")
    if match is None:
        return _wm_result(response, "", "", "", "", [], False, free=True)
    observation, before, content, after, prediction = (g.strip() for g in match)
    think = " ".join(part for part in (before, after) if part)
    actions, content = split_actions(content, action_sep, max_actions)
    return _wm_result(response, observation, think, content, prediction, actions, True, free=True)


_PARSERS = {"free_think": _free_think, "wm": _wm, "free_wm": _free_wm}


def parse_response(response: str, *, prompt_format: str, action_sep: str = ",", max_actions: int = 3) -> dict[str, Any]:
    """Parse one model response; returns the reference parser's dict (never raises on any string).

    Keys: `llm_raw_response`, `llm_response`, `think_content`, `action_content`, `actions` (list of
    lower-case words, at most `max_actions`), `format_correct`; for `wm`/`free_wm` also
    `observation_content`, `reasoning_content`, `prediction_content`.
    """
    if prompt_format not in _PARSERS:
        raise ValueError(f"unknown prompt_format {prompt_format!r}; expected one of {', '.join(PROMPT_FORMATS)}")
    if not isinstance(response, str):
        raise TypeError(f"a response is a string, got {type(response).__name__}")
    return _PARSERS[prompt_format](response, action_sep, max_actions)
