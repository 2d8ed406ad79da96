"""The one HTTP helper the server clients share: what comes back and how it fails."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from spadework.errors import PolicyError
from spadework.policy.http import HTTPFailure, exchange


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        code = 200 if self.path == "/ok" else 404
        data = json.dumps({"got": json.loads(body), "auth": self.headers.get("Authorization")})
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())


def test_exchange_sends_json_with_the_key_and_names_failures():
    server = HTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        reply = json.loads(exchange("POST", url + "/ok", {"a": 1}, api_key="k", timeout_s=10))
        assert reply == {"got": {"a": 1}, "auth": "Bearer k"}
        with pytest.raises(HTTPFailure, match=r"HTTP 404 from .*/missing: \{\"got\"") as e:
            exchange("POST", url + "/missing", {}, timeout_s=10)
        assert e.value.status == 404 and isinstance(e.value, PolicyError)
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(HTTPFailure, match=f"cannot reach http://127.0.0.1:{port}/x") as e:
        exchange("GET", f"http://127.0.0.1:{port}/x", timeout_s=5)
    assert e.value.status is None
