"""A ``Policy`` over an OpenAI-compatible server (vLLM, SGLang, llama.cpp, ``spadework serve``).

Two modes:

- ``"chat"``: ``/v1/chat/completions``; the server applies its chat template. Token ids come from
  the server where it reports them (vLLM: ``return_token_ids`` gives ``prompt_token_ids`` and
  per-choice ``token_ids``; ``return_tokens_as_token_ids`` turns logprob tokens into
  ``token_id:N``). Otherwise, with a local ``tokenizer``, ids are re-tokenised from text and the
  completion says ``ids_from="retokenized"`` (they may differ from what the server sampled, and
  logprobs are dropped when the counts disagree).
- ``"completions"``: ``/v1/completions`` with the prompt sent as token ids rendered by the local
  tokenizer's chat template: token-in, token-out, the mode to train from.

Requests run on a thread pool (``concurrency``), each with a socket timeout; connection errors,
HTTP 429 and 5xx are retried with exponential backoff; the whole ``chat`` call also has a deadline.
Every failure is a ``PolicyError`` naming the cause: a down server or a garbage reply never hangs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from spadework.errors import PolicyError
from spadework.policy.base import Completion, ConversationLike, SamplingParams, as_conversation
from spadework.policy.decode import chat_prompt_ids
from spadework.policy.http import HTTPFailure, exchange

_RETRY_STATUS = {429, 500, 502, 503, 504}


class OpenAIPolicy:
    """Client of one OpenAI-compatible endpoint; see the module docstring for the modes."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        mode: str = "chat",
        tokenizer: Any = None,
        api_key: str | None = None,
        context_length: int | None = None,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        if mode not in ("chat", "completions"):
            raise PolicyError(f"mode must be 'chat' or 'completions', got {mode!r}")
        if mode == "completions" and tokenizer is None:
            raise PolicyError("completions mode renders prompts locally: pass tokenizer=")
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model, self.mode, self.tokenizer = model, mode, tokenizer
        self.api_key = api_key
        self.concurrency, self.timeout_s = concurrency, timeout_s
        self.retries, self.backoff_s = retries, backoff_s
        self.extra_body = dict(extra_body or {})
        self._context = context_length

    @property
    def context_length(self) -> int:
        """From the constructor, else the server's ``max_model_len``, else the tokenizer's."""
        if self._context is None:
            listing = self._request("GET", "/models", None)
            lens = [m.get("max_model_len") for m in listing.get("data", []) if isinstance(m, dict)]
            lens = [n for n in lens if isinstance(n, int)]
            if lens:
                self._context = lens[0]
            elif self.tokenizer is not None:
                self._context = int(self.tokenizer.model_max_length)
            else:
                raise PolicyError("the server does not report max_model_len; pass context_length=")
        return self._context

    def chat(
        self, conversations: Sequence[ConversationLike], params: SamplingParams
    ) -> list[Completion]:
        """One request per conversation (``n`` samples each), run concurrently; see ``Policy``."""
        convs = [as_conversation(c) for c in conversations]
        seed = params.seed
        bodies = [self._body(c, params, None if seed is None and not params.row_seeds
                             else params.sample_seed(seed or 0, i, 0) % 2**31)
                  for i, c in enumerate(convs)]
        path = "/chat/completions" if self.mode == "chat" else "/completions"
        deadline = (self.retries + 1) * (self.timeout_s + self.backoff_s * 2**self.retries)
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(bodies))))
        try:
            futures = [pool.submit(self._request, "POST", path, b) for b in bodies]
            _, pending = wait(futures, timeout=deadline)
            if pending:
                raise PolicyError(
                    f"{len(pending)} requests to {self.base_url} passed {deadline:.0f} s"
                )
            replies = [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        out: list[Completion] = []
        for conv, body, reply in zip(convs, bodies, replies):
            out += self._parse(conv, body, reply, params)
        return out

    def _body(self, conv: Any, params: SamplingParams, seed: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "n": params.n,
            "logprobs": True if self.mode == "chat" else 1,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
        }
        if params.top_k:
            body["top_k"] = params.top_k
        if params.stop:
            body["stop"] = list(params.stop)
        if seed is not None:
            body["seed"] = seed
        if self.mode == "chat":
            body["messages"] = [dict(m) for m in conv.messages]
            if conv.tools:
                body["tools"] = [dict(t) for t in conv.tools]
            if conv.thinking is not None:
                body["chat_template_kwargs"] = {"enable_thinking": conv.thinking}
        else:
            body["prompt"] = chat_prompt_ids(self.tokenizer, conv)
        body.update(self.extra_body)
        return body

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        """One HTTP exchange with retries; returns the decoded JSON object or raises PolicyError."""
        url = self.base_url + path
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                raw = exchange(method, url, body, api_key=self.api_key, timeout_s=self.timeout_s)
            except HTTPFailure as e:  # nothing answered (refused, reset, DNS, timeout), or a status
                last = str(e)
                if e.status is None or e.status in _RETRY_STATUS:
                    continue
                raise
            return _decode_json(raw, url)
        raise PolicyError(f"{last} (gave up after {self.retries + 1} attempts)")

    def _parse(self, conv: Any, body: dict[str, Any], reply: dict[str, Any],
               params: SamplingParams) -> list[Completion]:
        choices = reply.get("choices")
        if not isinstance(choices, list) or len(choices) != params.n:
            raise PolicyError(f"the server returned {_short(choices)} choices, want {params.n}: "
                              f"{_short(reply)}")
        prompt_ids, prompt_from = self._prompt_ids(conv, body, reply)
        return [self._completion(c, prompt_ids, prompt_from) for c in
                sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)]

    def _prompt_ids(
        self, conv: Any, body: dict[str, Any], reply: dict[str, Any]
    ) -> tuple[tuple[int, ...], str]:
        if self.mode == "completions":
            return tuple(body["prompt"]), "model"
        ids = reply.get("prompt_token_ids")
        if isinstance(ids, list) and all(isinstance(i, int) for i in ids):
            return tuple(ids), "server"
        if self.tokenizer is not None:
            return tuple(chat_prompt_ids(self.tokenizer, conv)), "retokenized"
        return (), "none"

    def _completion(self, choice: Any, prompt_ids: tuple[int, ...], prompt_from: str) -> Completion:
        if not isinstance(choice, dict):
            raise PolicyError(f"a choice is not an object: {_short(choice)}")
        if self.mode == "chat":
            text = (choice.get("message") or {}).get("content") or ""
            entries = ((choice.get("logprobs") or {}).get("content")) or []
            tokens = [e.get("token") for e in entries if isinstance(e, dict)]
            lps = [e.get("logprob") for e in entries if isinstance(e, dict)]
        else:
            text = choice.get("text") or ""
            lp = choice.get("logprobs") or {}
            tokens, lps = lp.get("tokens") or [], lp.get("token_logprobs") or []
        if not isinstance(text, str):
            raise PolicyError(f"the server's completion text is not a string: {_short(text)}")
        ids, ids_from = self._output_ids(choice, tokens, text)
        logprobs = tuple(float(x) for x in lps) if len(lps) == len(ids) and ids else ()
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        if "retokenized" in (ids_from, prompt_from):
            ids_from = "retokenized"
        return Completion(text=text, prompt_ids=prompt_ids, output_ids=ids, logprobs=logprobs,
                          finish_reason=finish, ids_from=ids_from)

    def _output_ids(self, choice: dict, tokens: list, text: str) -> tuple[tuple[int, ...], str]:
        ids = choice.get("token_ids")
        if isinstance(ids, list) and all(isinstance(i, int) for i in ids):
            return tuple(ids), "server"
        if tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
            try:
                return tuple(int(t.split(":", 1)[1]) for t in tokens), "server"
            except ValueError as e:
                raise PolicyError(f"malformed token id in the server's logprobs: {e}") from e
        if self.tokenizer is not None:
            return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"]), "retokenized"
        return (), "none"


def _decode_json(raw: bytes, url: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PolicyError(f"{url} replied with something that is not JSON: {raw[:200]!r}") from e
    if not isinstance(obj, dict):
        raise PolicyError(f"{url} replied with JSON that is not an object: {_short(obj)}")
    if "error" in obj and "choices" not in obj and "data" not in obj:
        raise PolicyError(f"{url} reported an error: {_short(obj['error'])}")
    return obj


def _short(x: Any, limit: int = 200) -> str:
    s = repr(x)
    return s if len(s) <= limit else s[:limit] + "..."
