"""Continuous batching over an ``HFPolicy``: rows join and leave the batch one decode step at a time.

A request that arrives while others are decoding does not wait for them to finish: at the next
step its prompt is prefilled, its key/value cache is left-padded to the running cache's length
and stacked onto it, and from then on its rows decode beside the others; a row that ends leaves
the batch at once (its cache rows dropped), and leftmost cache columns that no remaining row
attends to are cut. A short request sent behind a long generation is thus answered after about
its own number of steps, not after the long one ends.

Each row keeps its own sampling settings, stop strings, token budget and random generator
(seeded from the request's row seed as in ``HFPolicy.generate_ids``), so a seeded request draws
the same tokens alone or beside others, up to the float rounding of the padded batch. A request
may also carry a deadline (its rows then end where they are, ``finish_reason == "length"``) and
be cancelled (its client went away: its rows leave at the next step).

Used by ``spadework serve`` (:mod:`spadework.policy.serve`) for the transformers backend.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

from spadework.errors import PolicyError
from spadework.policy.base import Completion, SamplingParams
from spadework.policy.decode import DecodeRow, checked_prompts, sample_tokens
from spadework.policy.hf import HFPolicy, cache_kwargs, output_cache


@dataclasses.dataclass(eq=False)
class Request:
    """One request in the batcher: its prompt, parameters (one row seed), optional deadline
    (``time.monotonic()``), and, once ``done`` is set, its completions or its error."""

    prompt: list[int]
    params: SamplingParams
    deadline: float | None = None
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: list[Completion] | None = None
    error: BaseException | None = None
    cancelled: bool = False
    timed_out: bool = False
    rows: list[DecodeRow] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class _Row:
    request: Request
    decode: DecodeRow
    generator: Any


def _plain_cache(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a plain growing layer (keys and values of shape
    ``[batch, heads, seq, dim]``), the only kind rows can be stacked into."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def _left_pad(t: Any, width: int) -> Any:
    """``t`` (``[batch, ..., seq, dim]`` or ``[batch, seq]``) left-padded with zeros to ``width``
    along its sequence axis."""
    import torch

    seq_dim = -2 if t.dim() == 4 else -1
    missing = width - t.shape[seq_dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[seq_dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=seq_dim)


class ContinuousBatcher:
    """Decodes every submitted request in one batch that rows join and leave step by step.

    ``max_rows`` bounds the rows decoding together (a request of ``n`` samples is ``n`` rows; one
    with more rows than that still runs, alone). ``lock`` is held around each step, so that a
    caller holding it (a weight load) runs between steps; :meth:`drained` waits until no row is
    decoding and keeps new ones out, for changes that must fall between requests.
    """

    def __init__(self, policy: HFPolicy, max_rows: int = 8,
                 lock: threading.Lock | None = None) -> None:
        if max_rows < 1:
            raise PolicyError(f"max_rows must be >= 1, got {max_rows}")
        self.policy, self.max_rows = policy, max_rows
        self.lock = lock or threading.Lock()
        self._cv = threading.Condition()
        self._waiting: list[Request] = []
        self._rows: list[_Row] = []
        self._starting: list[Request] = []  # admitted, being prefilled
        self._paused = 0
        self._closed = False
        self._state: dict[str, Any] = {}
        self.steps = 0  # decoding steps run
        self.most_rows = 0  # the most rows that decoded together
        self._thread = threading.Thread(target=self._loop, daemon=True, name="spadework-decoder")
        self._thread.start()

    # ---- callers ------------------------------------------------------------------------------

    def submit(self, prompt: list[int], params: SamplingParams,
               deadline: float | None = None) -> Request:
        """Queue one request (``params.row_seeds`` holds its one row seed); returns at once."""
        prompt = checked_prompts([prompt], self.policy.context_length)[0]
        if len(params.row_seeds) != 1:
            raise PolicyError("a batcher request needs exactly one row seed (params.row_seeds)")
        req = Request(prompt, params, deadline)
        with self._cv:
            if self._closed:
                raise PolicyError("the batcher is closed")
            self._waiting.append(req)
            self._cv.notify_all()
        return req

    def generate(self, prompt: list[int], params: SamplingParams,
                 deadline: float | None = None) -> list[Completion]:
        """Submit and wait: the request's ``params.n`` completions, or its error raised."""
        req = self.submit(prompt, params, deadline)
        req.done.wait()
        return self.result(req)

    @staticmethod
    def result(req: Request) -> list[Completion]:
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def cancel(self, req: Request) -> None:
        """Drop a request: waiting, it never starts; decoding, its rows leave at the next step."""
        with self._cv:
            req.cancelled = True
            if req in self._waiting:
                self._waiting.remove(req)
                req.error = PolicyError("cancelled")
                req.done.set()

    @property
    def load(self) -> tuple[int, int]:
        """(requests waiting, rows decoding)."""
        with self._cv:
            return len(self._waiting), len(self._rows)

    @contextlib.contextmanager
    def drained(self, timeout: float | None = None) -> Iterator[None]:
        """Inside the block no row decodes: new requests wait, and the block starts once the
        rows decoding have ended (or after ``timeout`` seconds, PolicyError)."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            self._paused += 1
            try:
                while self._rows or self._starting:
                    left = None if end is None else end - time.monotonic()
                    if left is not None and left <= 0:
                        raise PolicyError(f"rows still decoding after {timeout:g} s")
                    self._cv.wait(left)
            except BaseException:
                self._paused -= 1
                self._cv.notify_all()
                raise
        try:
            with self.lock:
                yield
        finally:
            with self._cv:
                self._paused -= 1
                self._cv.notify_all()

    def close(self) -> None:
        """Stop after the current step; requests still waiting or decoding get PolicyError."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout=30)

    # ---- the decoding thread ------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._closed and (self._paused or not self._waiting) and not self._rows:
                    self._cv.wait()
                if self._closed:
                    self._fail_all(PolicyError("the server is shutting down"))
                    return
                admit = self._starting = [] if self._paused else self._admit()
            try:
                with self.lock:
                    self._step(admit)
            except Exception as e:  # noqa: BLE001 (every request in the batch answers with it)
                with self._cv:
                    for req in admit:
                        if not req.done.is_set():
                            self._finish(req, e)
                    self._fail_rows(e)
            finally:
                with self._cv:
                    self._starting = []
                    self._cv.notify_all()

    def _admit(self) -> list[Request]:
        """Requests that start this step: in arrival order while their rows fit (one request
        always, when nothing decodes)."""
        room = self.max_rows - len(self._rows)
        admit: list[Request] = []
        while self._waiting:
            n = self._waiting[0].params.n
            if n > room and (admit or self._rows):
                break
            admit.append(self._waiting.pop(0))
            room -= n
        return admit

    def _step(self, admit: list[Request]) -> None:
        import torch

        with torch.inference_mode():
            was_training = self.policy.model.training
            self.policy.model.eval()
            try:
                if admit:
                    self._prefill(admit)
                if self._rows:
                    self._sample_and_advance()
            finally:
                self.policy.model.train(was_training)

    def _prefill(self, admit: list[Request]) -> None:
        import torch

        policy, dev = self.policy, self.policy.device
        rows: list[_Row] = []
        for req in admit:
            budget = min(req.params.max_tokens, policy.context_length - len(req.prompt))
            for j in range(req.params.n):
                row = _Row(req, DecodeRow(budget, req.params.stop_at_repeat),
                           torch.Generator().manual_seed(req.params.sample_seed(0, 0, j)))
                req.rows.append(row.decode)
                rows.append(row)
        prompts = [r.request.prompt for r in rows]
        b, width = len(prompts), max(len(p) for p in prompts)
        ids = torch.full((b, width), policy.pad_token_id, dtype=torch.long)
        mask = torch.zeros((b, width), dtype=torch.long)
        for k, p in enumerate(prompts):
            ids[k, width - len(p):] = torch.tensor(p)
            mask[k, width - len(p):] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = policy.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                           logits_to_keep=1)
        if not _plain_cache(output_cache(out)):
            raise PolicyError("this model's key/value cache cannot be batched continuously "
                              "(sliding-window or quantised layers); serve with --max-batch 1")
        logits, next_pos = out.logits[:, -1, :], pos[:, -1:] + 1
        state = self._state
        if self._rows:
            width = max(state["mask"].shape[1], mask.shape[1])
            for old, new in zip(state["cache"].layers, output_cache(out).layers):
                old.keys = torch.cat([_left_pad(old.keys, width), _left_pad(new.keys, width)])
                old.values = torch.cat([_left_pad(old.values, width),
                                        _left_pad(new.values, width)])
            state["mask"] = torch.cat([_left_pad(state["mask"], width), _left_pad(mask, width)])
            state["logits"] = torch.cat([state["logits"], logits])
            state["next_pos"] = torch.cat([state["next_pos"], next_pos])
        else:
            self._state = {"cache": output_cache(out), "mask": mask, "logits": logits,
                           "next_pos": next_pos}
        with self._cv:
            self._rows.extend(rows)
            self.most_rows = max(self.most_rows, len(self._rows))

    def _sample_and_advance(self) -> None:
        import torch

        state, policy, dev = self._state, self.policy, self.policy.device
        logits = state["logits"]
        groups: dict[tuple[Any, ...], list[int]] = {}
        for k, row in enumerate(self._rows):
            p = row.request.params
            groups.setdefault((p.temperature, p.top_p, p.top_k), []).append(k)
        tokens: list[int] = [0] * len(self._rows)
        lps: list[float] = [0.0] * len(self._rows)
        for idx in groups.values():
            params = self._rows[idx[0]].request.params
            toks, lp = sample_tokens(logits[idx], params, [self._rows[k].generator for k in idx])
            for k, t, v in zip(idx, toks.tolist(), lp.tolist()):
                tokens[k], lps[k] = t, v
        now = time.monotonic()
        for k, row in enumerate(self._rows):
            req = row.request
            row.decode.push(tokens[k], lps[k], policy, req.params.stop, req.params.stop_at_move)
            if req.deadline is not None and now > req.deadline and not row.decode.finished:
                req.timed_out = row.decode.finished = True  # reason stays "length"
            if req.cancelled:
                row.decode.finished = True
        self.steps += 1
        keep = [k for k, row in enumerate(self._rows) if not row.decode.finished]
        ended = [row for row in self._rows if row.decode.finished]
        with self._cv:
            self._rows = [self._rows[k] for k in keep]
            for req in {row.request for row in ended}:
                if all(r.finished for r in req.rows) and not req.done.is_set():
                    if req.cancelled:
                        self._finish(req, PolicyError("cancelled"))
                    else:
                        req.result = [r.completion(req.prompt, policy, req.params.stop)
                                      for r in req.rows]
                        req.done.set()
            self._cv.notify_all()
        if not keep:
            self._state = {}
            return
        cache, mask, next_pos = state["cache"], state["mask"], state["next_pos"]
        if len(keep) < len(tokens):
            index = torch.tensor(keep, device=dev)
            cache.batch_select_indices(index)
            mask, next_pos = mask[index], next_pos[index]
            tokens = [tokens[k] for k in keep]
            start = int(mask.any(0).nonzero()[0])  # columns no remaining row attends to
            if start:
                for layer in cache.layers:
                    layer.keys, layer.values = layer.keys[:, :, start:], layer.values[:, :, start:]
                mask = mask[:, start:]
        feed = torch.tensor(tokens, device=dev).unsqueeze(-1)
        mask = torch.cat([mask, mask.new_ones((len(tokens), 1))], dim=-1)
        out = policy.model(input_ids=feed, attention_mask=mask, position_ids=next_pos,
                           use_cache=True, **cache_kwargs(policy.model, cache))
        self._state = {"cache": output_cache(out), "mask": mask, "logits": out.logits[:, -1, :],
                       "next_pos": next_pos + 1}

    def _finish(self, req: Request, error: BaseException) -> None:
        req.error = error
        req.done.set()

    def _fail_rows(self, error: BaseException) -> None:
        for req in {row.request for row in self._rows}:
            if not req.done.is_set():
                self._finish(req, error)
        self._rows, self._state = [], {}
        self._cv.notify_all()

    def _fail_all(self, error: BaseException) -> None:
        for req in self._waiting:
            self._finish(req, error)
        self._waiting = []
        self._fail_rows(error)


__all__ = ["ContinuousBatcher", "Request"]
