"""Chat-completion requests to an OpenAI-compatible server: explicit sampling, a seed, retries, a failure record.

Every request carries `model`, `messages`, `temperature`, `top_p`, `max_tokens` and `seed`, so nothing is
left to a server's defaults (`transformers serve` would generate up to 1024 tokens without `max_tokens`).
`n` and log-probabilities are never asked for (transformers serve ignores them). Transient errors
(connection refused or reset, HTTP 408/429/5xx) are retried with exponential backoff (`Retry`); anything
else, or a transient error outlasting the retries, raises `ServerError` with the URL, the status and the
server's message: the evaluation fails with that record instead of writing rows.
`is_alive` (optional) is asked before each retry, so a server process that died ends the evaluation at
once rather than after the last retry.

The server is not trusted. One request, connecting and sending included, may take at most `timeout_s`
(`eval.server.request_timeout_s`, `--request-timeout`): a server that accepts the connection and never
answers, or answers a byte at a time, fails the request at that time, and it is not retried (the server is
hung or overloaded; sending it more work would not help). The answer is read up to `reply_limit(max_tokens)`
bytes (a flood is refused before it fills memory), parsed as JSON, and checked against what the outcome rows
may hold (`check_reply`): a non-empty `choices` list whose first `message.content` is a string (or null), and
`usage.completion_tokens` an integer in [0, max_tokens] (a server that counts more tokens than it was
allowed to generate, or fractional or negative ones, is wrong). Every such answer is the server's fault:
`ServerError` (a `Failure`, exit 1) naming the URL and the field.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from agentrepro.errors import Failure, shown

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
REQUEST_TIMEOUT_S = 300.0  # one request (eval.server.request_timeout_s): a turn of a working server takes seconds
REPLY_BYTES_PER_TOKEN = 64  # an answer may hold this many bytes per allowed token ("\uXXXX" escapes are 6 a character)
MIN_REPLY_BYTES = 1 << 20  # ... and at least 1 MiB (the JSON around the text)


def reply_limit(max_tokens: int) -> int:
    """The most bytes an answer to a request allowing `max_tokens` tokens may have."""
    return max(MIN_REPLY_BYTES, REPLY_BYTES_PER_TOKEN * max_tokens)


class ServerError(Failure):
    """The server failed a request for good (or died): the evaluation's failure record."""


@dataclass(frozen=True)
class Retry:
    attempts: int = 6  # tries per request, the first included
    first_wait_s: float = 0.5  # doubled after each failed try
    max_wait_s: float = 10.0

    def wait(self, tries: int) -> float:
        return min(self.max_wait_s, self.first_wait_s * 2 ** (tries - 1))


@dataclass(frozen=True)
class Reply:
    text: str
    tokens: int  # completion tokens the server reports
    finish_reason: str | None


class ChatClient:
    """One server, one served model name; `await chat(messages, ...)` returns a `Reply`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
        retry: Retry = Retry(),
        is_alive: Callable[[], bool] | None = None,
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.retry = retry
        self.timeout_s = timeout_s
        self.is_alive = is_alive
        self._http = httpx.AsyncClient(
            timeout=timeout_s, limits=httpx.Limits(max_connections=max_connections), transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def chat(
        self, messages: list[dict[str, Any]], *, temperature: float, top_p: float, max_tokens: int, seed: int
    ) -> Reply:
        body = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "seed": seed,
            "stream": False,
        }
        url = f"{self.base_url}/v1/chat/completions"
        tries = 0
        while True:
            tries += 1
            try:
                status, data = await asyncio.wait_for(self._post(url, body, reply_limit(max_tokens)), self.timeout_s)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                raise ServerError(
                    f"{url}: no complete answer within the request timeout of {self.timeout_s:g} s "
                    "(eval.server.request_timeout_s, --request-timeout)"
                ) from None
            except httpx.TransportError as exc:
                problem, transient = f"{type(exc).__name__}: {exc}", True
            else:
                if status == 200:
                    return check_reply(data, url=url, max_tokens=max_tokens)
                problem = f"HTTP {status}: {data[:300].decode('utf-8', 'replace')}"
                transient = status in TRANSIENT_STATUS
            if self.is_alive is not None and not self.is_alive():
                raise ServerError(f"{url}: the server process has exited ({problem})")
            if not transient or tries >= self.retry.attempts:
                raise ServerError(f"{url}: request failed after {tries} tr{'y' if tries == 1 else 'ies'} ({problem})")
            await asyncio.sleep(self.retry.wait(tries))

    async def _post(self, url: str, body: dict[str, Any], limit: int) -> tuple[int, bytes]:
        async with self._http.stream("POST", url, json=body) as response:
            return response.status_code, await read_bounded(response.aiter_bytes(), limit, url)


def _grow(data: bytearray, chunk: bytes, limit: int, url: str) -> None:
    data += chunk
    if len(data) > limit:
        raise ServerError(f"{url}: the answer passed {limit:,} bytes (a flood); refused unread")


async def read_bounded(chunks: AsyncIterator[bytes], limit: int, url: str) -> bytes:
    """The bytes of an answer, refused (ServerError) as soon as they pass `limit`."""
    data = bytearray()
    async for chunk in chunks:
        _grow(data, chunk, limit, url)
    return bytes(data)


def read_bounded_sync(chunks: Iterator[bytes], limit: int, url: str) -> bytes:
    """`read_bounded` for a synchronous response."""
    data = bytearray()
    for chunk in chunks:
        _grow(data, chunk, limit, url)
    return bytes(data)


def parse_answer(data: bytes, url: str) -> Any:
    """The JSON of an answer; ServerError for anything that is not (NaN and Infinity included)."""

    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    try:
        return json.loads(data.decode("utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ServerError(
            f"{url}: the answer is not JSON ({type(exc).__name__}: {str(exc)[:120]}): "
            f"{data[:200].decode('utf-8', 'replace')!r}"
        ) from None


def check_reply(data: bytes, *, url: str, max_tokens: int) -> Reply:
    """The `Reply` in a chat completion's bytes, every field the outcome rows use checked; ServerError otherwise."""
    answer = parse_answer(data, url)

    def field(path: str, value: Any, ok: bool, expected: str) -> Any:
        if not ok:
            raise ServerError(f"{url}: not a chat completion: {path}: expected {expected}, got {shown(value)}")
        return value

    field("(answer)", answer, isinstance(answer, dict), "an object")
    choices = field(
        "choices",
        answer.get("choices"),
        isinstance(answer.get("choices"), list) and answer["choices"],
        "a non-empty list",
    )
    choice = field("choices[0]", choices[0], isinstance(choices[0], dict), "an object")
    message = field("choices[0].message", choice.get("message"), isinstance(choice.get("message"), dict), "an object")
    text = message.get("content")
    field("choices[0].message.content", text, text is None or isinstance(text, str), "a string")
    reason = choice.get("finish_reason")
    field("choices[0].finish_reason", reason, reason is None or isinstance(reason, str), "a string or null")
    usage = field("usage", answer.get("usage"), isinstance(answer.get("usage"), dict), "an object")
    tokens = usage.get("completion_tokens")  # the outcome rows' `tokens`: required, never guessed
    field(
        "usage.completion_tokens",
        tokens,
        type(tokens) is int and 0 <= tokens <= max_tokens,
        f"an integer in [0, {max_tokens}] (the max_tokens of the request)",
    )
    return Reply(text=text or "", tokens=tokens, finish_reason=reason)
