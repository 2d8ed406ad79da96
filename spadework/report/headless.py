"""A headless Chromium driven over its DevTools protocol, to check that a report renders.

Used by the report's tests and ``benchmarks/report.py``; needs only the system browser
(Debian's ``chromium``) and the standard library: the protocol runs over a pair of pipes
(``--remote-debugging-pipe``: JSON messages, each ended by a NUL byte, on file descriptors 3
and 4), so no WebSocket client and no browser download are involved.

With ``offline`` (the default) the page runs with the network emulated off, a proxy that leads
nowhere and every host name unresolvable; every request the page makes is recorded
(:attr:`Browser.requests`), as are console errors and uncaught exceptions
(:attr:`Browser.errors`), so a test can show that a report fetches nothing and logs no error.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from spadework.errors import SpadeworkError

_NAMES = ("chromium", "chromium-browser", "chromium-headless-shell", "google-chrome", "chrome")


class BrowserError(SpadeworkError):
    """The browser could not be started, or did not answer in time."""


def find_chromium() -> str | None:
    """The path of a Chromium-family browser on PATH, or None."""
    return next((p for p in map(shutil.which, _NAMES) if p), None)


class Browser:
    """One headless browser with one page. Use as a context manager."""

    def __init__(self, executable: str | None = None, *, offline: bool = True, timeout: float = 60.0,
                 width: int = 1280, height: int = 900) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError(f"no Chromium on PATH (looked for {', '.join(_NAMES)})")
        self.timeout = timeout
        self.requests: list[str] = []
        self.errors: list[str] = []
        self._profile = tempfile.TemporaryDirectory(prefix="spadework-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        args = [exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
                "--disable-dev-shm-usage", f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}", "--hide-scrollbars"]
        if offline:
            args += ["--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"]

        def fds() -> None:  # the protocol's fixed descriptors in the child
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        try:
            self._proc = subprocess.Popen([*args, "about:blank"], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          preexec_fn=fds, pass_fds=(3, 4))
        except OSError as e:
            raise BrowserError(f"cannot start {exe}: {e}") from e
        finally:
            os.close(to_chrome_r)
            os.close(from_chrome_w)
        self._buf = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        if offline:
            self.call("Network.emulateNetworkConditions", offline=True, latency=0,
                      downloadThroughput=-1, uploadThroughput=-1)

    # -- protocol -----------------------------------------------------------------------------

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise BrowserError(f"the browser did not answer within {self.timeout:g} s")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its DevTools pipe (it exited)")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        data = json.loads(msg)
        if "method" in data:
            self._note(data)
        return data

    def _note(self, ev: dict[str, Any]) -> None:
        m, p = ev["method"], ev.get("params", {})
        if m == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])
        elif m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            self.errors.append(f"log: {p['entry']['text']} {p['entry'].get('url', '')}".strip())
        self._events.append(ev)

    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            data = self._read(deadline)
            if data.get("id") == self._next:
                if "error" in data:
                    raise BrowserError(f"{method}: {data['error'].get('message')}")
                return data.get("result", {})

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command on the page; its result."""
        return self._send(method, params, self._session)

    # -- page helpers -------------------------------------------------------------------------

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        r = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression[:60]!r} threw: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float | None = None) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            v = self.evaluate(expression)
            if v:
                return v
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression[:80]!r} stayed false for {timeout or self.timeout:g} s")
            time.sleep(0.02)

    def open(self, url: str, ready: str = "document.body && document.body.dataset.ready === '1'") -> float:
        """Navigate to ``url`` and wait until ``ready`` holds; the seconds that took."""
        start = time.monotonic()
        self.call("Page.navigate", url=url)
        self.wait_for(ready)
        return time.monotonic() - start

    def screenshot(self, path: str | Path) -> Path:
        """A PNG of the whole page (beyond the window), written to ``path``."""
        m = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": m["width"], "height": min(m["height"], 16000),
                               "scale": 1})
        path = Path(path)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            self._send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
