"""A small OpenAI-compatible server over ``HFPolicy`` (stdlib ``http.server``; ``spadework serve``).

Why our own: ``transformers serve`` needs FastAPI/uvicorn and loads models by hub id or
``repo:file.gguf``, and it does not return token ids. This server loads any folder the registry
resolves, offline, and speaks the vLLM dialect the client reads: ``logprobs``,
``return_tokens_as_token_ids`` (``token_id:N`` tokens), ``return_token_ids`` (``prompt_token_ids``
and per-choice ``token_ids``), ``top_k``, ``seed``, ``stop``, ``tools`` and
``chat_template_kwargs.enable_thinking``.

Scheduling. With the transformers backend every request joins one continuously filled batch of
up to ``max_batch`` rows (:class:`~spadework.policy.continuous.ContinuousBatcher`): a row that
ends leaves it at once and a waiting request takes its place at the next decoding step, so a
short request sent behind a long generation is answered after about its own length. Each
request is sampled from its own seed (``SamplingParams.row_seeds``), so a seeded request gets the
same tokens alone or beside others, up to the float rounding of the padded batch. Other backends
generate one request at a time (or, with ``max_batch > 1``, those that arrive within
``batch_wait_s`` of each other with the same sampling settings, as one batch).

Rules that keep it fair: ``max_tokens`` is cut to what the context leaves and to
``max_tokens_limit`` (the cut is reported in ``usage.max_tokens_capped_to``); a request decoding
past ``request_timeout_s`` ends where it is (``finish_reason: "length"``,
``usage.deadline_exceeded: true``); with ``max_queue`` requests in the server a new one is
answered 503 at once; a request naming a model the server does not serve is answered 404; a
client that goes away (a short body, a closed connection while its reply is generated) is
dropped without a traceback and its rows leave the batch. It is for tests, demos, a few users
and the CPU ``--ray`` run, not for throughput on GPUs (use vLLM or SGLang there).

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``,
``POST /v1/completions`` (``prompt``: a string or a list of token ids).

``stream: true`` is answered with server-sent events in OpenAI's chunk format (``data: {...}``
lines, then ``data: [DONE]``; with ``stream_options.include_usage`` a last chunk carries the
usage). The policy generates whole completions, so each choice arrives as one content chunk
(with its logprobs and token ids when asked) followed by a chunk with its finish reason: a
streaming client gets the complete reply, not token-by-token progress.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import select
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from spadework.errors import ConfigError, PolicyError
from spadework.policy.base import Completion, Conversation, SamplingParams
from spadework.policy.continuous import ContinuousBatcher
from spadework.policy.hf import HFPolicy

_MAX_BODY = 16 << 20


def params_from_body(body: dict[str, Any]) -> SamplingParams:
    """Sampling parameters from an OpenAI request body (OpenAI defaults where absent)."""
    stop = body.get("stop") or ()
    try:
        return SamplingParams(
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            top_k=max(0, int(body.get("top_k") or 0)),
            max_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 16),
            n=int(body.get("n", 1)),
            stop=(stop,) if isinstance(stop, str) else tuple(stop),
            seed=None if body.get("seed") is None else int(body["seed"]),
        )
    except (TypeError, ValueError) as e:
        raise ConfigError(f"bad sampling parameter: {e}") from e


class _Refused(Exception):
    """A request answered with an error status (``code``) rather than 400."""

    def __init__(self, code: int, message: str, kind: str, code_name: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.code_name = code, kind, code_name


class _Gone(Exception):
    """The client went away: nothing is answered."""


class _Handler(BaseHTTPRequestHandler):
    server: PolicyServer
    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a client may take to send its request (a stalled body is dropped)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read stdout
        pass

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{
                "id": name, "object": "model", "owned_by": "spadework",
                "max_model_len": self.server.policy.context_length}
                for name in self.server.served_names]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                raise ConfigError(f"request body over {_MAX_BODY} bytes")
            data = self.rfile.read(length)
            if len(data) < length:  # the client closed before sending its whole body
                raise _Gone
            body = json.loads(data)
            if not isinstance(body, dict):
                raise ConfigError("the request body must be a JSON object")
            if self.path == "/v1/chat/completions":
                reply = self.server.chat_completion(body, self._client_gone)
            elif self.path == "/v1/completions":
                reply = self.server.text_completion(body, self._client_gone)
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
        except _Gone:
            self.close_connection = True
            return
        except _Refused as e:
            error = {"message": str(e), "type": e.kind}
            if e.code_name:
                error["code"] = e.code_name
            self._send(e.status, {"error": error}, {"Retry-After": "1"} if e.status == 503 else {})
            return
        except (json.JSONDecodeError, UnicodeDecodeError, ConfigError, PolicyError, KeyError) as e:
            self._send(400, {"error": {"message": str(e), "type": type(e).__name__}})
            return
        if body.get("stream"):
            self._send_events(stream_chunks(reply, body))
        else:
            self._send(200, reply)

    def _client_gone(self) -> bool:
        """Whether the client closed its connection (readable with nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
        except (OSError, ValueError):
            return True

    def _send_events(self, chunks: list[dict[str, Any]]) -> None:
        """Server-sent events: one ``data:`` line per chunk, then ``[DONE]``; the connection
        closes after it (no Content-Length on an event stream)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _send(self, code: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def stream_chunks(reply: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished reply as OpenAI streaming chunks: per choice one chunk with the content (chat:
    ``delta``; completions: ``text``) and one with the finish reason; usage last when
    ``stream_options.include_usage`` is set.

    >>> r = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "usage": {},
    ...      "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
    ...                   "finish_reason": "stop"}]}
    >>> [c["choices"][0].get("delta") for c in stream_chunks(r, {})]
    [{'role': 'assistant', 'content': 'hi'}, {}]
    >>> stream_chunks(r, {})[-1]["choices"][0]["finish_reason"]
    'stop'
    """
    chat = reply["object"] == "chat.completion"
    head = {"id": reply["id"], "object": "chat.completion.chunk" if chat else "text_completion",
            "created": reply["created"], "model": reply["model"]}
    chunks = []
    for choice in reply["choices"]:
        first = {k: v for k, v in choice.items() if k not in ("message", "finish_reason")}
        if chat:
            first["delta"] = dict(choice["message"])
        first["finish_reason"] = None
        last = {"index": choice["index"], "finish_reason": choice["finish_reason"]}
        last.update({"delta": {}} if chat else {"text": ""})
        chunks += [{**head, "choices": [first]}, {**head, "choices": [last]}]
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**head, "choices": [], "usage": reply["usage"]})
    return chunks


def own_seed(params: SamplingParams) -> SamplingParams:
    """One request's parameters with its seed as its row's own (a random one when it has
    none), so that it samples alike alone or as one row of a batch."""
    seed = params.seed if params.seed is not None else secrets.randbits(63)
    return dataclasses.replace(params, seed=None, row_seeds=(seed,))


@dataclasses.dataclass
class _Pending:
    prompt: list[int]
    params: SamplingParams
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: list[Completion] | None = None
    error: BaseException | None = None


class _Batcher:
    """Generates the requests waiting together as one batch (see the module docstring)."""

    def __init__(self, server: PolicyServer, max_batch: int, wait_s: float) -> None:
        self.server, self.max_batch, self.wait_s = server, max_batch, wait_s
        self.queue: list[_Pending] = []
        self.cv = threading.Condition()
        threading.Thread(target=self._loop, daemon=True, name="spadework-batcher").start()

    def generate(self, prompt: list[int], params: SamplingParams) -> list[Completion]:
        pending = _Pending(prompt, own_seed(params))
        with self.cv:
            self.queue.append(pending)
            self.cv.notify()
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def _loop(self) -> None:
        while True:
            with self.cv:
                while not self.queue:
                    self.cv.wait()
            time.sleep(self.wait_s)  # let the requests sent together arrive
            with self.cv:
                key = _settings(self.queue[0].params)
                batch = [p for p in self.queue if _settings(p.params) == key][: self.max_batch]
                self.queue = [p for p in self.queue if p not in batch]
            self._run(batch)

    def _run(self, batch: Sequence[_Pending]) -> None:
        params = dataclasses.replace(batch[0].params, row_seeds=tuple(p.params.row_seeds[0] for p in batch))
        try:
            with self.server._lock:
                out = self.server.policy.generate_ids([p.prompt for p in batch], params)
            n = params.n
            for k, p in enumerate(batch):
                p.result = out[k * n:(k + 1) * n]
        except Exception as e:  # noqa: BLE001 (each waiting request answers with the error)
            for p in batch:
                p.error = e
        finally:
            for p in batch:
                p.done.set()


def _settings(params: SamplingParams) -> tuple[Any, ...]:
    """What requests must share to be generated in one batch (everything but the seed)."""
    return (params.temperature, params.top_p, params.top_k, params.max_tokens, params.n, params.stop)


#: ``spadework serve``'s defaults for its fairness rules (see the module docstring).
MAX_TOKENS_LIMIT = 4096
REQUEST_TIMEOUT_S = 600.0
MAX_QUEUE = 64
MAX_BATCH = 8


class PolicyServer(ThreadingHTTPServer):
    """An HTTP server answering OpenAI requests with one policy; see the module docstring.

    ``served_names``: the model names requests may give (``model_name`` first, the name
    ``/v1/models`` lists first); ``max_tokens_limit``, ``request_timeout_s`` and ``max_queue``
    (each None for no limit): the fairness rules."""

    daemon_threads = True

    def __init__(self, policy: Any, model_name: str, host: str = "127.0.0.1",
                 port: int = 0, *, max_batch: int = 1, batch_wait_s: float = 0.02,
                 served_names: Sequence[str] = (), max_tokens_limit: int | None = None,
                 request_timeout_s: float | None = None, max_queue: int | None = None) -> None:
        for name, value in (("max_batch", max_batch), ("max_tokens_limit", max_tokens_limit),
                            ("max_queue", max_queue)):
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1, got {value}")
        if request_timeout_s is not None and request_timeout_s <= 0:
            raise ConfigError(f"request_timeout_s must be > 0, got {request_timeout_s}")
        super().__init__((host, port), _Handler)
        self.policy, self.model_name = policy, model_name
        self.served_names = tuple(dict.fromkeys([model_name, *served_names]))
        self.max_tokens_limit, self.request_timeout_s = max_tokens_limit, request_timeout_s
        self.max_queue = max_queue
        self._lock = threading.Lock()
        self._inflight = 0
        self._count = threading.Lock()
        self._continuous = (ContinuousBatcher(policy, max_batch, self._lock)
                            if isinstance(policy, HFPolicy) else None)
        self._batcher = (_Batcher(self, max_batch, batch_wait_s)
                         if max_batch > 1 and self._continuous is None else None)

    @contextlib.contextmanager
    def between_requests(self) -> Iterator[None]:
        """Inside the block no request is being generated (new ones wait): for a weight load."""
        if self._continuous is not None:
            with self._continuous.drained():
                yield
        else:
            with self._lock:
                yield

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is dropped in silence; anything else is one line on stderr
        (not a traceback): the server goes on."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        print(f"spadework serve: error answering {client_address[0]}: "
              f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)

    def server_close(self) -> None:
        super().server_close()
        if self._continuous is not None:
            self._continuous.close()

    def generate(self, prompt: list[int], params: SamplingParams,
                 gone: Callable[[], bool] = lambda: False) -> tuple[list[Completion], bool]:
        """The completions of one request and whether its deadline cut them; ``gone`` says
        whether its client went away (polled while it waits; :class:`_Gone` then)."""
        with self._count:
            if self.max_queue is not None and self._inflight >= self.max_queue:
                raise _Refused(503, f"the server has {self._inflight} requests in hand "
                               f"(--max-queue {self.max_queue}); retry later", "ServiceUnavailable",
                               "queue_full")
            self._inflight += 1
        try:
            if self._continuous is None:
                return self._generate_whole(prompt, params), False
            deadline = (None if self.request_timeout_s is None
                        else time.monotonic() + self.request_timeout_s)
            req = self._continuous.submit(prompt, own_seed(params), deadline)
            while not req.done.wait(0.25):
                if gone():
                    self._continuous.cancel(req)
                    raise _Gone
            return self._continuous.result(req), req.timed_out
        finally:
            with self._count:
                self._inflight -= 1

    def _generate_whole(self, prompt: list[int], params: SamplingParams) -> list[Completion]:
        if self._batcher is not None:
            return self._batcher.generate(prompt, params)
        with self._lock:
            return self.policy.generate_ids([prompt], own_seed(params))

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _checked(self, body: dict[str, Any], prompt: list[int]) -> tuple[SamplingParams, int | None]:
        """The request's sampling parameters with ``max_tokens`` cut (and the cut, if any);
        404 for a model this server does not serve."""
        model = body.get("model")
        if model is not None and model not in self.served_names:
            raise _Refused(404, f"the model {model!r} does not exist here; this server serves "
                           f"{', '.join(map(repr, self.served_names))}", "NotFoundError",
                           "model_not_found")
        params = params_from_body(body)
        cap = self.policy.context_length - len(prompt)
        if self.max_tokens_limit is not None:
            cap = min(cap, self.max_tokens_limit)
        if cap >= 1 and params.max_tokens > cap:
            return dataclasses.replace(params, max_tokens=cap), cap
        return params, None

    def chat_completion(self, body: dict[str, Any],
                        gone: Callable[[], bool] = lambda: False) -> dict[str, Any]:
        kwargs = body.get("chat_template_kwargs") or {}
        messages = body["messages"]
        if not isinstance(messages, list):
            raise ConfigError("messages must be a list of {role, content} objects")
        conv = Conversation(messages=tuple(messages), tools=tuple(body.get("tools") or ()),
                            thinking=kwargs.get("enable_thinking"))
        prompt = self.policy.prompt_ids(conv)
        params, cap = self._checked(body, prompt)
        done, late = self.generate(prompt, params, gone)
        choices = [{"index": k, "message": {"role": "assistant", "content": c.text},
                    "finish_reason": c.finish_reason, **self._extras(body, c, chat=True)}
                   for k, c in enumerate(done)]
        return self._envelope("chat.completion", body, prompt, done, choices, cap, late)

    def text_completion(self, body: dict[str, Any],
                        gone: Callable[[], bool] = lambda: False) -> dict[str, Any]:
        prompt = body["prompt"]
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            prompt = list(self.policy.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        if not (isinstance(prompt, list) and all(isinstance(i, int) for i in prompt)):
            raise ConfigError("prompt must be a string or a list of token ids")
        params, cap = self._checked(body, prompt)
        done, late = self.generate(prompt, params, gone)
        choices = [{"index": k, "text": c.text, "finish_reason": c.finish_reason,
                    **self._extras(body, c, chat=False)} for k, c in enumerate(done)]
        return self._envelope("text_completion", body, prompt, done, choices, cap, late)

    def _extras(self, body: dict[str, Any], c: Completion, chat: bool) -> dict[str, Any]:
        extras: dict[str, Any] = {}
        if body.get("return_token_ids"):
            extras["token_ids"] = list(c.output_ids)
        if body.get("logprobs"):
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            toks = [f"token_id:{i}" if as_ids else self.policy.tokenizer.decode([i])
                    for i in c.output_ids]
            if chat:
                extras["logprobs"] = {"content": [{"token": t, "logprob": lp, "top_logprobs": []}
                                                  for t, lp in zip(toks, c.logprobs)]}
            else:
                extras["logprobs"] = {"tokens": toks, "token_logprobs": list(c.logprobs)}
        return extras

    def _envelope(self, kind: str, body: dict[str, Any], prompt: list[int],
                  done: list[Completion], choices: list[dict[str, Any]], cap: int | None = None,
                  late: bool = False) -> dict[str, Any]:
        out = sum(len(c.output_ids) for c in done)
        usage: dict[str, Any] = {"prompt_tokens": len(prompt), "completion_tokens": out,
                                 "total_tokens": len(prompt) + out}
        if cap is not None:
            usage["max_tokens_capped_to"] = cap
        if late:
            usage["deadline_exceeded"] = True
        reply: dict[str, Any] = {
            "id": f"spadework-{uuid.uuid4().hex[:16]}", "object": kind, "created": int(time.time()),
            "model": self.model_name, "choices": choices, "usage": usage,
        }
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = list(prompt)
        return reply


def serve(policy: Any, model_name: str, host: str = "127.0.0.1", port: int = 8000,
          ready: Any = print, max_batch: int = MAX_BATCH, **rules: Any) -> None:
    """Serve until interrupted; ``ready`` is called once with the base URL (after binding);
    ``rules``: :class:`PolicyServer`'s ``served_names``, ``max_tokens_limit``,
    ``request_timeout_s`` and ``max_queue``."""
    server = PolicyServer(policy, model_name, host, port, max_batch=max_batch, **rules)
    ready(server.url)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
