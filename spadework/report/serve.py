"""``spadework report RUN_DIR --serve``: the report's pages on loopback, live.

The server binds 127.0.0.1 only and reads the archive read-only (a new connection per request,
so it never holds a lock the run needs; WAL lets it read while the run writes). Routes:

- ``/``: the report page, rebuilt when the archive's version changes (else served from memory);
  it embeds no environment pages: the browser asks for each one it opens;
- ``/api/env/<env_id>``: one environment page's data with *all* its episodes (JSON);
- ``/api/version``: ``{"version": ...}``, which changes when an iteration is recorded or an
  environment is archived; the page polls it every few seconds and reloads when it changes.
"""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from spadework.archive import views
from spadework.errors import ArchiveError
from spadework.report.collect import collect, env_detail, open_run
from spadework.report.page import render

HOST = "127.0.0.1"


def archive_version(run_dir: Path) -> str:
    """A token that changes when the run records an iteration or archives an environment."""
    with open_run(run_dir) as a:
        n, last = views.iteration_mark(a)
        envs = views.env_count(a)
    return f"{n}:{last}:{envs}"


class ReportServer(ThreadingHTTPServer):
    """The HTTP server of one run directory (see the module docstring)."""

    daemon_threads = True

    def __init__(self, run_dir: str | Path, port: int = 8765) -> None:
        self.run_dir = Path(run_dir)
        archive_version(self.run_dir)  # fail now, with the reason, when it is not a run
        self._lock = threading.Lock()
        self._page: tuple[str, bytes] | None = None
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    def page(self) -> bytes:
        version = archive_version(self.run_dir)
        with self._lock:
            if self._page is None or self._page[0] != version:
                with open_run(self.run_dir) as a:
                    data = collect(a, self.run_dir)
                self._page = (version, render(data, [], live=True, k=None).encode())
            return self._page[1]


class _Handler(BaseHTTPRequestHandler):
    server: ReportServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
        pass  # the terminal shows the run's progress, not one line per request

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, value: object, status: int = HTTPStatus.OK) -> None:
        self._send(status, json.dumps(value, allow_nan=False).encode(), "application/json")

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = unquote(urlsplit(self.path).path)
        try:
            if path in ("/", "/index.html"):
                self._send(HTTPStatus.OK, self.server.page(), "text/html; charset=utf-8")
            elif path == "/favicon.ico":
                self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")  # none, and no 404 logged
            elif path == "/api/version":
                self._json({"version": archive_version(self.server.run_dir)})
            elif path.startswith("/api/env/"):
                with open_run(self.server.run_dir) as a:
                    self._json(env_detail(a, path.removeprefix("/api/env/"), k=None))
            else:
                self._json({"error": f"no page {path}"}, HTTPStatus.NOT_FOUND)
        except ArchiveError as e:
            self._json({"error": e.reason}, HTTPStatus.NOT_FOUND if "no environment" in e.reason
                       else HTTPStatus.SERVICE_UNAVAILABLE)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away mid-answer
