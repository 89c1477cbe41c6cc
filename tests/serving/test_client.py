"""Chat requests: every sampling parameter and the seed sent, transient errors retried, failures recorded."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from agentrepro.serving.client import ChatClient, Retry, ServerError

FAST = Retry(attempts=3, first_wait_s=0.001, max_wait_s=0.002)
OK = {
    "choices": [{"message": {"role": "assistant", "content": "<answer>up</answer>"}, "finish_reason": "stop"}],
    "usage": {"completion_tokens": 7, "prompt_tokens": 3},
}


def client_with(responses, **kw):
    """A client whose server answers from `responses` in turn (a status and body, or an exception); and its requests."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        status, body = responses[min(len(seen), len(responses)) - 1]
        if isinstance(body, Exception):
            raise body
        return httpx.Response(status, json=body)

    return ChatClient("http://server:1", "/models/m", retry=FAST, transport=httpx.MockTransport(handler), **kw), seen


def chat(client):
    async def go():
        try:
            return await client.chat(
                [{"role": "user", "content": "x"}], temperature=0.7, top_p=0.9, max_tokens=32, seed=11
            )
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_request_carries_every_sampling_parameter_and_the_seed():
    """model, temperature, top_p, max_tokens and seed are always sent; n and logprobs never are."""
    client, seen = client_with([(200, OK)])
    reply = chat(client)
    assert reply.text == "<answer>up</answer>" and reply.tokens == 7
    assert {k: seen[0][k] for k in ("model", "temperature", "top_p", "max_tokens", "seed")} == {
        "model": "/models/m",
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 32,
        "seed": 11,
    }
    assert "n" not in seen[0] and "logprobs" not in seen[0]


def test_transient_errors_are_retried():
    """A 503 and a dropped connection are retried; the third try's answer is returned."""
    client, seen = client_with([(503, {"error": "busy"}), (0, httpx.ConnectError("refused")), (200, OK)])
    assert chat(client).tokens == 7 and len(seen) == 3


def test_lasting_transient_error_fails_with_a_record():
    """A server that stays at 503 fails after the configured tries, naming the URL and the status."""
    client, seen = client_with([(503, {"error": "busy"})])
    with pytest.raises(
        ServerError, match=r"http://server:1/v1/chat/completions: request failed after 3 tries \(HTTP 503"
    ):
        chat(client)
    assert len(seen) == 3


def test_client_error_is_not_retried():
    """A 400 (e.g. a model name the server is not pinned to) fails at once with the server's message."""
    client, seen = client_with([(400, {"detail": "Server is pinned to 'a'; requested 'b'."})])
    with pytest.raises(ServerError, match="pinned to"):
        chat(client)
    assert len(seen) == 1


def test_dead_server_ends_at_once():
    """When the server process has exited, the first failed request ends the evaluation without retrying."""
    client, seen = client_with([(0, httpx.ConnectError("refused"))], is_alive=lambda: False)
    with pytest.raises(ServerError, match="the server process has exited"):
        chat(client)
    assert len(seen) == 1


def test_reply_without_usage_is_refused():
    """Token counts are never guessed: a reply without usage.completion_tokens is a failure."""
    client, _ = client_with([(200, {"choices": OK["choices"]})])
    with pytest.raises(ServerError, match="not a chat completion"):
        chat(client)
