"""Headless Chromium driven through the DevTools protocol over a pipe (`--remote-debugging-pipe`).

No extra dependency and no open port: Chromium reads commands from fd 3 and writes answers and events
to fd 4, each a JSON message ended by a NUL byte. `Chromium.open(path)` loads a local page and
records what a reviewer's browser would see: console errors, uncaught exceptions, JavaScript dialogs
and every request the page made. The page can then be printed to PDF, screenshotted or queried.

    with Chromium() as browser:
        page = browser.open("reports/s/report.html")
        pdf = page.print_pdf(); png = page.screenshot(); n = page.evaluate("document.images.length")
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agentrepro.errors import Failure

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "install Debian's chromium (`make system-deps`, or `apt-get install -y chromium` as root) "
    "or set AGENTREPRO_CHROMIUM to a Chromium or Chrome executable"
)


def find_chromium(explicit: str | None = None) -> str:
    """The Chromium executable: `explicit`, else $AGENTREPRO_CHROMIUM, else the first of CANDIDATES on PATH."""
    wanted = explicit or os.environ.get("AGENTREPRO_CHROMIUM")
    if wanted:
        path = shutil.which(wanted)
        if path is None:
            raise Failure(f"Chromium executable {wanted!r} not found or not executable; {INSTALL_HINT}")
        return path
    for name in CANDIDATES:
        if path := shutil.which(name):
            return path
    raise Failure(f"no Chromium found on PATH (tried {', '.join(CANDIDATES)}); {INSTALL_HINT}")


class Page:
    """One tab, attached with a flat session; `events` holds every event it received, in order."""

    def __init__(self, browser: Chromium, session: str):
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    @property
    def events(self) -> list[dict]:
        return [e for e in self.browser.events if e.get("sessionId") == self.session]

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions, error log entries (failed loads, CSP) and dialogs."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(
                    "console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                )
            elif e["method"] == "Runtime.exceptionThrown":
                out.append("exception: " + p.get("exceptionDetails", {}).get("text", ""))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
            elif e["method"] == "Page.javascriptDialogOpening":
                out.append(f"dialog ({p.get('type')}): {p.get('message')}")
        return out

    def requests(self) -> list[str]:
        """URL of every request the page made (the page itself included)."""
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def evaluate(self, expression: str) -> Any:
        """Value of a JavaScript expression in the page (returned by value); a thrown error is a Failure."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in r:
            raise Failure(f"evaluating {expression!r} in Chromium failed: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def print_pdf(self) -> bytes:
        """The page printed as the print stylesheet lays it out (A4 from @page), backgrounds included."""
        r = self.send(
            "Page.printToPDF",
            {"printBackground": True, "preferCSSPageSize": True, "displayHeaderFooter": False},
            timeout=180,
        )
        return base64.b64decode(r["data"])

    def screenshot(self, width: int = 1280, height: int = 900, full_page: bool = False) -> bytes:
        """PNG of the first screen (`full_page`: the whole page)."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            h = self.evaluate("document.documentElement.scrollHeight")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": h, "scale": 1})
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])


class Chromium:
    """A headless Chromium with a fresh profile, controlled over the DevTools pipe; use as a context manager."""

    def __init__(self, executable: str | None = None, *, timeout: float = 60):
        self.executable = find_chromium(executable)
        self.timeout = timeout
        self.events: list[dict] = []
        self._answers: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._next_id = 0
        self._closed = False
        self.profile = tempfile.mkdtemp(prefix="agentrepro-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds():  # in the child, before exec: the pipe ends become fds 3 (commands) and 4 (answers)
            # Copies above 10 first, so that neither dup2 is a no-op that would keep close-on-exec set.
            a, b = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.close(a)
            os.close(b)

        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                [self.executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.stderr,
                preexec_fn=wire_fds,
                close_fds=False,
            )  # other fds are non-inheritable (PEP 446)
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- protocol ---------------------------------------------------------------------------------
    def _read(self) -> None:
        buf = b""
        with os.fdopen(self._from_child, "rb", buffering=0) as fh:
            while chunk := fh.read(1 << 16):
                buf += chunk
                *messages, buf = buf.split(b"\0")
                with self._cond:
                    for raw in messages:
                        msg = json.loads(raw)
                        if "id" in msg:
                            self._answers[msg["id"]] = msg
                        else:
                            self.events.append(msg)
                            if msg.get("method") == "Page.javascriptDialogOpening":
                                threading.Thread(
                                    target=self._dismiss, args=(msg.get("sessionId"),), daemon=True
                                ).start()
                    self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _dismiss(self, session: str | None) -> None:
        try:
            self.send("Page.handleJavaScriptDialog", {"accept": True}, session=session, timeout=10)
        except Failure:
            pass

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-800:]

    def send(
        self, method: str, params: dict | None = None, *, session: str | None = None, timeout: float | None = None
    ) -> dict:
        """Send one command and wait for its answer; a protocol error or a silent browser is a Failure."""
        with self._cond:
            self._next_id += 1
            mid = self._next_id
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        except OSError as exc:
            raise Failure(
                f"Chromium ({self.executable}) is not running: {exc}; its stderr: {self._stderr_tail()}"
            ) from None
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while mid not in self._answers:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    why = "exited" if self._closed else f"did not answer within {timeout or self.timeout:.0f} s"
                    raise Failure(f"Chromium {why} during {method}; its stderr: {self._stderr_tail()}")
                self._cond.wait(left)
            answer = self._answers.pop(mid)
        if "error" in answer:
            raise Failure(f"Chromium refused {method}: {answer['error'].get('message')}")
        return answer.get("result", {})

    def wait_event(self, method: str, session: str, timeout: float | None = None, start: int = 0) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while True:
                for e in self.events[start:]:
                    if e.get("method") == method and e.get("sessionId") == session:
                        return e
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise Failure(
                        f"Chromium: no {method} within {timeout or self.timeout:.0f} s; its stderr: {self._stderr_tail()}"
                    )
                self._cond.wait(left)

    # -- pages ------------------------------------------------------------------------------------
    def open(self, path: str | os.PathLike, timeout: float | None = None) -> Page:
        """Load a local file in a new tab with logging and network events on; returns once it has loaded."""
        url = Path(path).resolve().as_uri()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        mark = len(self.events)
        result = page.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise Failure(f"Chromium could not load {url}: {result['errorText']}")
        self.wait_event("Page.loadEventFired", session, timeout, start=mark)
        return page

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("Browser.close", timeout=10)
            except Failure:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.close(self._to_child)
        self.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
