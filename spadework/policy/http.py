"""One JSON-over-HTTP exchange with an inference server (stdlib ``urllib``): what the
OpenAI-compatible client, the vLLM/SGLang weight syncs and the Ray engines each wrote before.

A failure is a :class:`HTTPFailure` (a ``PolicyError``) whose message names the URL and what came
back, with ``status`` the HTTP status or None when the server could not be reached (refused,
reset, DNS, socket timeout), so that each caller decides what to retry and what to add.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from spadework.errors import PolicyError


class HTTPFailure(PolicyError):
    """An exchange that failed: ``status`` is the HTTP status, or None when nothing answered."""

    def __init__(self, reason: str, status: int | None) -> None:
        super().__init__(reason)
        self.status = status


def exchange(method: str, url: str, body: dict[str, Any] | None = None, *,
             api_key: str | None = None, timeout_s: float = 600.0) -> bytes:
    """Send ``body`` as JSON (none for a GET) and return the reply's bytes.

    Raises :class:`HTTPFailure`: ``HTTP 404 from URL: <first 500 bytes of the reply>``, or
    ``cannot reach URL: <reason>``.
    """
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.read()
    except urllib.error.HTTPError as e:
        detail = e.read()[:500].decode("utf-8", "replace")
        raise HTTPFailure(f"HTTP {e.code} from {url}: {detail}", e.code) from e
    except (urllib.error.URLError, OSError) as e:
        raise HTTPFailure(f"cannot reach {url}: {getattr(e, 'reason', e)}", None) from e


__all__ = ["HTTPFailure", "exchange"]
