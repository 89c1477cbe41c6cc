"""A real HTTP server on 127.0.0.1 that plays an OpenAI-compatible chat server badly, in one chosen way.

`FakeServer(behaviour, model=...)` listens on a free port in a thread (`with FakeServer(...) as server:`,
`server.url`). GET /v1/models lists `model` (unless the behaviour lies there too); POST /v1/chat/completions
answers according to `behaviour`:

* `ok`: a well-formed chat completion (`<think>...</think><answer>Up</answer>`, completion_tokens 3);
* `hang`: accepts the request and never answers; `drip`: sends the status and headers, then one byte a
  second forever; `slow`: a well-formed answer after `slow_s` seconds;
* `flood`: a 200 answer of endless bytes (chunked); `huge`: one well-formed JSON answer of 3 MiB;
* `tokens=<json>`: a well-formed answer whose `usage.completion_tokens` is that JSON text (1e30, 2.9, -7,
  "7", true, null, 99999);
* `body=<text>`: exactly that body with status 200 (not JSON, NaN, a list, missing fields, wrong types);
* `models=<text>`: GET /v1/models answers exactly that body.

Nothing here is a mock of the client: the harness talks HTTP to it as to any server.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD_TEXT = "<think>go up</think><answer>Up</answer>"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:  # a client that hung up on a bad answer is expected
        pass


def completion(tokens_json: str = "3", text: str = GOOD_TEXT) -> bytes:
    """A chat completion's bytes with `usage.completion_tokens` spelled as `tokens_json`."""
    body = {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": "@TOKENS@", "total_tokens": 8},
    }
    return json.dumps(body).replace('"@TOKENS@"', tokens_json).encode()


class FakeServer:
    def __init__(self, behaviour: str, *, model: str, slow_s: float = 1.5):
        self.behaviour, self.model, self.slow_s = behaviour, model, slow_s
        self.stop = threading.Event()
        self.requests = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _stream(self, **headers: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                for name, value in headers.items():
                    self.send_header(name.replace("_", "-"), value)
                self.end_headers()

            def do_GET(self):
                if fake.behaviour.startswith("models="):
                    return self._send(200, fake.behaviour.split("=", 1)[1].encode())
                self._send(
                    200, json.dumps({"object": "list", "data": [{"id": fake.model, "object": "model"}]}).encode()
                )

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.requests += 1
                kind, _, arg = fake.behaviour.partition("=")
                if kind == "hang":
                    fake.stop.wait(3600)
                    return
                if kind == "drip":
                    self._stream(Content_Length="1000000")
                    while not fake.stop.wait(1.0):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                    return
                if kind == "flood":
                    self._stream(Transfer_Encoding="chunked")
                    chunk = b"x" * 65536
                    while not fake.stop.is_set():
                        try:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        except OSError:  # the client hung up: the flood was refused
                            return
                    return
                if kind == "slow":
                    fake.stop.wait(fake.slow_s)
                    return self._send(200, completion())
                if kind == "huge":
                    return self._send(200, completion(text="a" * (3 << 20)))
                if kind == "tokens":
                    return self._send(200, completion(arg))
                if kind == "body":
                    return self._send(200, arg.encode())
                self._send(200, completion())

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        time.sleep(0.05)
        self.httpd.shutdown()
        self.httpd.server_close()
