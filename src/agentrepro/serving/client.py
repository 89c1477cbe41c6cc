"""Chat-completion requests to an OpenAI-compatible server: explicit sampling, a seed, retries, a failure record.

Every request carries `model`, `messages`, `temperature`, `top_p`, `max_tokens` and `seed`, so nothing is
left to a server's defaults (`transformers serve` would generate up to 1024 tokens without `max_tokens`).
`n` and log-probabilities are never asked for (transformers serve ignores them). Transient errors
(connection refused or reset, timeouts, HTTP 408/429/5xx) are retried with exponential backoff
(`Retry`); anything else, or a transient error outlasting the retries, raises `ServerError` with the
URL, the status and the server's message: the evaluation fails with that record instead of writing rows.
`is_alive` (optional) is asked before each retry, so a server process that died ends the evaluation at
once rather than after the last retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from agentrepro.errors import Failure

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class ServerError(Failure):
    """The server failed a request for good (or died): the evaluation's failure record."""


@dataclass(frozen=True)
class Retry:
    attempts: int = 6          # tries per request, the first included
    first_wait_s: float = 0.5  # doubled after each failed try
    max_wait_s: float = 10.0

    def wait(self, tries: int) -> float:
        return min(self.max_wait_s, self.first_wait_s * 2 ** (tries - 1))


@dataclass(frozen=True)
class Reply:
    text: str
    tokens: int          # completion tokens the server reports
    finish_reason: str | None


class ChatClient:
    """One server, one served model name; `await chat(messages, ...)` returns a `Reply`."""

    def __init__(self, base_url: str, model: str, *, timeout_s: float = 600.0, retry: Retry = Retry(),
                 is_alive: Callable[[], bool] | None = None, max_connections: int = 64,
                 transport: httpx.AsyncBaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.retry = retry
        self.is_alive = is_alive
        self._http = httpx.AsyncClient(timeout=timeout_s, limits=httpx.Limits(max_connections=max_connections), transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def chat(self, messages: list[dict[str, Any]], *, temperature: float, top_p: float, max_tokens: int,
                   seed: int) -> Reply:
        body = {"model": self.model, "messages": messages, "temperature": temperature, "top_p": top_p,
                "max_tokens": max_tokens, "seed": seed, "stream": False}
        url = f"{self.base_url}/v1/chat/completions"
        tries = 0
        while True:
            tries += 1
            try:
                response = await self._http.post(url, json=body)
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                problem, transient = f"{type(exc).__name__}: {exc}", True
            else:
                if response.status_code == 200:
                    return _reply(response, url)
                problem = f"HTTP {response.status_code}: {response.text[:300]}"
                transient = response.status_code in TRANSIENT_STATUS
            if self.is_alive is not None and not self.is_alive():
                raise ServerError(f"{url}: the server process has exited ({problem})")
            if not transient or tries >= self.retry.attempts:
                raise ServerError(f"{url}: request failed after {tries} tr{'y' if tries == 1 else 'ies'} ({problem})")
            await asyncio.sleep(self.retry.wait(tries))


def _reply(response: httpx.Response, url: str) -> Reply:
    try:
        data: Any = response.json()
        choice = data["choices"][0]
        text = choice["message"]["content"] or ""
        tokens = int(data["usage"]["completion_tokens"])  # the outcome rows' `tokens`: required, never guessed
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ServerError(f"{url}: not a chat completion ({type(exc).__name__}: {exc}): {response.text[:300]}") from None
    return Reply(text=text, tokens=tokens, finish_reason=choice.get("finish_reason"))
