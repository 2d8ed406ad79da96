"""The llama.cpp backend: fast CPU sampling from the quantised GGUF, LoRA applied on top.

Why llama.cpp (measured on the 2-core machines this project targets; the table and the
commands are in docs/engine.md and docs/results.md): its quantised CPU kernels sample the
default model many times faster than the transformers backend, it loads LoRA adapters at run
time on top of an unchanged quantised base (so weight sync is a few MB, see
:mod:`spadework.policy.gguf_lora`), and ``llama-cpp-python`` exposes its low-level API
(batches of several sequences, per-row logits).

How it keeps the Policy contract (token ids are the learner's, sampling and logprobs are
spadework's own, continuous batching across calls, a KV cache sized to the call, prefixes reused
across calls) and how close it stays to the learner (BF16 copy of the weights, F32 LoRA, F16
cache; measured in ``tests/policy/test_llamacpp.py``): docs/engine.md, "How the engine keeps the
Policy contract".
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import secrets
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from spadework.errors import ConfigError, PolicyError
from spadework.policy import gguf_copy
from spadework.policy.base import Completion, ConversationLike, SamplingParams, StreamRequest
from spadework.policy.decode import chat_prompt_ids, checked_prompts, sample_tokens, token_logprobs
from spadework.policy.llamacpp_cells import SequenceCells
from spadework.policy.llamacpp_lib import Row, by_sequence, context_params, default_threads, llama
from spadework.seeding import derive_seed

KV_TYPES = ("f32", "f16")


class LlamaCppPolicy:
    """A ``Policy`` over a GGUF model in llama.cpp; see the module docstring.

    ``gguf``: the quantised model file; ``tokenizer``: the HF tokenizer of its converted folder
    (``stop_token_ids`` adds ``eos_token_ids`` from its generation config); ``hf_dir``: that
    folder, where the learner's trainable copy loads from (``spadework.policy.load``).
    ``threads``: llama.cpp threads (default: half the cores this process may use, at least 1;
    its worker threads spin at every barrier, so a thread per core of a machine shared with
    anything else (the sandbox, the learner, other jobs) runs several times slower than fewer).
    ``context_length`` may lower the model's window. ``extra_buffers``: whether llama.cpp may
    use its extra buffer types (its repacking of quantised weights for AMX tiles or wider SIMD
    blocks); by default, unless the probe of this file found that this machine runs it only
    without them (:func:`spadework.policy.gguf_copy.extra_buffers`). Not
    thread-safe across calls of one instance (a lock serialises them). ``close()`` frees the
    model; it is also a context manager.
    """

    #: Its entry in the backend table (:mod:`spadework.policy.backends`).
    backend = "llamacpp"
    #: The counters of its work (attributes, cumulative): prompt tokens computed, served from
    #: cached cells (of which copied from another sequence), decode steps, rows sampled, rows
    #: moved to another sequence so that a step's rows sit on consecutive ones.
    COUNTERS = ("prefilled_tokens", "reused_tokens", "copied_tokens", "decode_steps",
                "sampled_rows", "moved_sequences")

    def __init__(
        self, gguf: str | Path, tokenizer: Any, *, max_batch_size: int = 16,
        context_length: int | None = None, threads: int | None = None, kv_type: str = "f16",
        flash_attn: bool = True, eos_token_ids: Sequence[int] = (), hf_dir: str | Path | None = None,
        extra_buffers: bool | None = None,
    ) -> None:
        self._ll = llama()
        most = int(self._ll.llama_max_parallel_sequences())
        if not 1 <= max_batch_size <= most:
            raise ConfigError(f"max_batch_size must be between 1 and {most} (the sequences "
                              f"llama.cpp runs in parallel), got {max_batch_size}")
        if kv_type not in KV_TYPES:
            raise ConfigError(f"kv_type must be one of {KV_TYPES}, got {kv_type!r}")
        if threads is not None and threads < 1:
            raise ConfigError(f"threads must be >= 1, got {threads}")
        self.gguf = Path(gguf)
        if not self.gguf.is_file():
            raise PolicyError(f"no GGUF file at {self.gguf}")
        self.tokenizer = tokenizer
        self.hf_dir = Path(hf_dir) if hf_dir else None
        self.max_batch_size = max_batch_size
        self.threads = threads or default_threads()
        self.kv_type = kv_type
        self.flash_attn = flash_attn
        self._lock = threading.Lock()
        mparams = self._ll.llama_model_default_params()
        if extra_buffers is None:
            extra_buffers = gguf_copy.extra_buffers(self.gguf)
        self.extra_buffers = mparams.use_extra_bufts = extra_buffers
        self._model = self._ll.llama_model_load_from_file(str(self.gguf).encode(), mparams)
        if not self._model:
            raise PolicyError(f"llama.cpp could not load {self.gguf} (not a GGUF model, or an "
                              "architecture this llama.cpp build does not know)")
        self._ctx: Any = None
        self._ctx_shape = (0, 0)  # (sequences, cells per sequence) of the live context
        self._scratch: int | None = None  # its scratch stream (SequenceCells.compact), if any
        self._cells = SequenceCells(self._ll)  # what each sequence's KV cells hold
        self.reused_tokens = 0  # prompt tokens served from cached prefixes, not recomputed
        self.copied_tokens = 0  # of those, the ones copied from another sequence's cells
        self.prefilled_tokens = 0  # prompt tokens computed (the rest of each prompt)
        self.decode_steps = 0  # llama_decode calls
        self.sampled_rows = 0  # rows that got a token, summed over steps (/ steps: occupancy)
        self.moved_sequences = 0  # decoding rows moved onto consecutive sequences
        self._adapter: Any = None
        self._adapter_off = False  # inside base_weights(): sample without the adapter
        vocab = self._ll.llama_model_get_vocab(self._model)
        self.n_vocab = int(self._ll.llama_vocab_n_tokens(vocab))
        if len(tokenizer) > self.n_vocab:
            self.close()
            raise PolicyError(f"the tokenizer has {len(tokenizer)} tokens but {self.gguf.name} "
                              f"has {self.n_vocab}: they are not the same model")
        native = int(self._ll.llama_model_n_ctx_train(self._model))
        self._context = min(context_length, native) if context_length else native
        eos = {tokenizer.eos_token_id, *eos_token_ids}
        self.stop_token_ids = frozenset(i for i in eos if i is not None)
        if not self.stop_token_ids:
            self.close()
            raise PolicyError("the tokenizer has no end-of-sequence token; set tokenizer.eos_token")

    @property
    def context_length(self) -> int:
        return self._context

    def prompt_ids(self, conversation: ConversationLike) -> list[int]:
        """Token ids of the conversation rendered by the chat template (as ``HFPolicy``)."""
        return chat_prompt_ids(self.tokenizer, conversation)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of output ids, without a trailing end-of-sequence token."""
        if ids and ids[-1] in self.stop_token_ids:
            ids = ids[:-1]
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def chat(
        self, conversations: Sequence[ConversationLike], params: SamplingParams
    ) -> list[Completion]:
        """Sample ``params.n`` completions per conversation; see ``Policy.chat``."""
        return self.generate_ids([self.prompt_ids(c) for c in conversations], params)

    def generate_ids(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> list[Completion]:
        """Continue raw token-id prompts (no template); same ordering and errors as ``chat``."""
        prompts = checked_prompts(prompts, self._context, self.n_vocab)
        if not prompts:
            return []
        base_seed = params.seed if params.seed is not None else secrets.randbits(63)
        pairs = [(i, j) for i in range(len(prompts)) for j in range(params.n)]
        rows = [Row(prompts[i], min(params.max_tokens, self._context - len(prompts[i])),
                     params.sample_seed(base_seed, i, j), params.stop_at_move, None, k,
                     repeat=params.stop_at_repeat)
                for k, (i, j) in enumerate(pairs)]
        done: list[Completion | None] = [None] * len(rows)

        def finish(row: Row) -> list[Row]:
            done[row.tag] = self._completion(row, params)
            return []

        with self._lock:
            if self._model is None:
                raise PolicyError("this LlamaCppPolicy was closed")
            # shortest prompts first: the rows that finish soonest free their sequences soonest
            self._run(sorted(rows, key=lambda r: len(r.prompt)), params, finish)
        return done  # type: ignore[return-value]

    def stream(
        self, requests: Iterable[StreamRequest], params: SamplingParams,
        on_done: Callable[[StreamRequest, Completion | PolicyError], Iterable[StreamRequest]],
        *, cells: int = 0,
    ) -> None:
        """Sample ``requests`` and every request ``on_done`` adds through one continuously
        filled batch, until none is left.

        ``on_done(request, result)`` is called as each reply finishes (``result`` a
        ``Completion``, or the ``PolicyError`` of a request the engine refuses, such as a prompt
        that leaves no room in the context) and returns the requests to add: the next turn of
        its episode, the first turn of a new one. They join the batch at the next step, beside
        rows still decoding, so no row waits for the slowest of its turn (the ``chat`` of a turn
        does). A request keeps the cached sequence of the last request with its ``key``.
        ``params`` gives the sampling settings and ``max_tokens`` of every reply (``n`` and the
        seeds are the requests'); the completion's ``metadata["seconds"]`` is its share of the
        engine's time (each step split by the tokens each row fed). ``cells``: the longest
        conversation (prompt and reply, in tokens) the caller expects, to size the KV cache
        once: a context grown mid-stream drops every cached prefix. ``on_done`` must not call
        this engine. A failing step raises ``PolicyError``; the replies still decoding are lost
        and the cached prefixes dropped.
        """
        def rows_of(reqs: Iterable[StreamRequest]) -> list[Row]:
            out, todo = [], deque(reqs)
            while todo:
                q = todo.popleft()
                try:
                    prompt = checked_prompts([q.prompt_ids], self._context, self.n_vocab)[0]
                except PolicyError as e:
                    todo.extend(on_done(q, e))
                    continue
                budget = params.max_tokens if q.max_tokens is None else q.max_tokens
                out.append(Row(prompt, min(budget, self._context - len(prompt)),
                                derive_seed(q.seed, 0), q.stop_at_move, q.key, q,
                                repeat=params.stop_at_repeat))
            return out  # derive_seed(seed, 0): the draw of chat's row j = 0 for row seed ``seed``

        def finish(row: Row) -> list[Row]:
            return rows_of(on_done(row.tag, self._completion(row, params)))

        with self._lock:
            if self._model is None:
                raise PolicyError("this LlamaCppPolicy was closed")
            first = rows_of(requests)
            if first:
                self._run(first, params, finish, min(cells, self._context))

    def score(self, prompt_ids: Sequence[int], output_ids: Sequence[int],
              temperature: float = 1.0) -> list[float]:
        """Teacher-forced logprobs of ``output_ids`` after ``prompt_ids`` under the engine's
        current weights (the counterpart of ``decode.teacher_forced_logprobs``; the sync probe)."""
        import numpy as np
        import torch

        seq = list(prompt_ids) + list(output_ids)
        if not prompt_ids or not output_ids or len(seq) > self._context:
            raise PolicyError(f"score needs a prompt and an output within {self._context} tokens")
        first = len(prompt_ids) - 1
        with self._lock:
            if self._model is None:
                raise PolicyError("this LlamaCppPolicy was closed")
            self._ensure_context(1, len(seq))
            self._forget()
            batch = self._ll.llama_batch_init(len(seq), 0, 1)
            try:
                self._submit(batch, [(t, k, 0, k >= first and k < len(seq) - 1)
                                     for k, t in enumerate(seq)])
            finally:
                self._ll.llama_batch_free(batch)
            logits = np.stack([self._logits_at(k) for k in range(first, len(seq) - 1)])
        return token_logprobs(torch.from_numpy(logits), torch.tensor(list(output_ids)),
                              temperature).tolist()

    def set_lora(self, path: str | Path | None) -> None:
        """Sample with the GGUF LoRA adapter at ``path`` from the next call on (``None``: none).

        The previous adapter is freed. The base weights are never touched.
        """
        with self._lock:
            new = None
            if path is not None:
                new = self._ll.llama_adapter_lora_init(self._model, str(path).encode())
                if not new:
                    raise PolicyError(f"llama.cpp could not load the LoRA adapter {path} (not a "
                                      "GGUF adapter, or one for another base model)")
            old, self._adapter = self._adapter, new
            if self._ctx is not None:
                self._apply_adapter()
            if old is not None:
                self._ll.llama_adapter_lora_free(old)

    @contextlib.contextmanager
    def base_weights(self) -> Iterator[LlamaCppPolicy]:
        """Sample with the base weights inside the block: the adapter is switched off, not
        freed, and switched back on at the end (each switch drops the cached prefixes, whose
        keys and values were computed with the other weights)."""
        self._switch_adapter(off=True)
        try:
            yield self
        finally:
            self._switch_adapter(off=False)

    def _switch_adapter(self, *, off: bool) -> None:
        with self._lock:
            changed = self._adapter_off != off and self._adapter is not None
            self._adapter_off = off
            if changed and self._ctx is not None:
                self._apply_adapter()

    def release(self) -> None:
        """Free the KV cache's memory now (the cached prefixes go with it). The next call makes
        a context of the size the last one had, so a stage that needed it grown once does not
        grow it again; a stream that declares its longest conversation (``cells``) gets the
        size it declares instead. The run calls this before the learner's step, its memory
        peak, after which the weight sync would drop the prefixes anyway."""
        with self._lock:
            if self._ctx is not None:
                self._ll.llama_free(self._ctx)
                self._ctx = None
            self._cells.clear()

    def set_threads(self, threads: int) -> None:
        """Compute with ``threads`` threads from the next call on (the run sets them per stage
        from the cores free then, :func:`spadework.cores.free_cores`, under ``threads =
        "auto"``); the cached prefixes stay."""
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ConfigError(f"threads must be an integer >= 1, got {threads!r}")
        with self._lock:
            self.threads = threads
            if self._ctx is not None:
                self._ll.llama_set_n_threads(self._ctx, threads, threads)

    def close(self) -> None:
        """Free the context, the adapter and the model (idempotent)."""
        ll = getattr(self, "_ll", None)
        if ll is None:
            return
        if getattr(self, "_ctx", None) is not None:
            ll.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_adapter", None) is not None:
            ll.llama_adapter_lora_free(self._adapter)
            self._adapter = None
        if getattr(self, "_model", None):
            ll.llama_model_free(self._model)
        self._model = None

    def __enter__(self) -> LlamaCppPolicy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not sys.is_finalizing():  # at exit the bindings may already be torn down
                self.close()
        except (AttributeError, TypeError):  # module globals already cleared at interpreter exit
            pass

    # -- internals -------------------------------------------------------------------------

    def _forget(self) -> None:
        """Drop every cached prefix (the weights changed, or a call failed half-way)."""
        if self._ctx is not None:
            self._ll.llama_memory_clear(self._ll.llama_get_memory(self._ctx), True)
        self._cells.clear()

    def _claim(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        """:meth:`SequenceCells.claim`, counting the tokens copied."""
        seq, reused, copied = self._cells.claim(*args, **kwargs)
        self.copied_tokens += copied
        return seq, reused

    def _apply_adapter(self) -> None:
        self._forget()  # cached keys and values were computed with the old weights
        ll = self._ll
        if self._adapter is None or self._adapter_off:
            rc = ll.llama_set_adapters_lora(self._ctx, None, 0, None)
        else:
            adapters = (ll.llama_adapter_lora_p_ctypes * 1)(self._adapter)
            scales = (ctypes.c_float * 1)(1.0)
            rc = ll.llama_set_adapters_lora(self._ctx, adapters, 1, scales)
        if rc != 0:
            raise PolicyError(f"llama.cpp refused to set the LoRA adapter (code {rc})")

    def _ensure_context(self, n_seq: int, cells: int, *, sized: bool = False) -> None:
        """A context for ``n_seq`` sequences of ``cells`` KV cells each (a context that fits is
        kept with its cached prefixes, see :meth:`SequenceCells.claim`). Otherwise grown,
        never shrunk, except where ``sized``: a stream that declared the longest conversation it
        holds gets cells for that, whatever an earlier stage needed (the KV cache is most of a
        play stage's memory: 40 sequences of 4,096 cells of the 0.5B take 1.9 GiB)."""
        have_seq, have_cells = self._ctx_shape
        if self._ctx is not None and have_seq >= n_seq and have_cells >= cells:
            return
        ll = self._ll
        if self._ctx is not None:
            ll.llama_free(self._ctx)
            self._ctx = None
        self._cells.clear()
        # twice what is asked when growing, so that conversations growing turn by turn
        # recreate the context (and lose the cached prefixes) a few times, not at every turn;
        # after release() the size it had
        n_seq = max(n_seq, have_seq)
        if not sized:
            cells = max(cells, 2 * have_cells) if cells > have_cells else have_cells
        cells = min(-(-cells // 256) * 256, self._context)
        # one more stream than sequences where rows can be scattered, if llama.cpp allows it:
        # the scratch stream that SequenceCells.compact swaps cached cells through (id n_seq,
        # never claimed)
        scratch = 2 < n_seq < ll.llama_max_parallel_sequences()
        p = context_params(ll, n_seq + scratch, cells, self.threads, self.kv_type,
                           self.flash_attn)
        ctx = ll.llama_init_from_model(self._model, p)
        if not ctx:
            raise PolicyError(f"llama.cpp could not create a context of {n_seq} x {cells} cells "
                              "(out of memory? lower max_batch_size or context_length)")
        self._ctx, self._ctx_shape = ctx, (n_seq, cells)
        self._scratch = n_seq if scratch else None
        self._apply_adapter()  # (and _forget: the new context holds nothing)

    def _completion(self, row: Row, params: SamplingParams) -> Completion:
        return dataclasses.replace(row.out.completion(row.prompt, self, params.stop),
                                   metadata={"backend": "llamacpp", "seconds": row.seconds})

    def _run(self, first: list[Row], params: SamplingParams,
             finish: Callable[[Row], list[Row]], cells: int = 0) -> None:
        """Decode ``first`` and every row ``finish`` adds, continuously: each step feeds every
        active row its last token and prefills waiting rows into the free sequences, in one
        ``llama_decode``. A waiting row that needs more cells than a sequence has grows the
        context (doubling), which drops every cached prefix: the rows still decoding are fed
        their prompt and reply so far again in the next step."""
        import numpy as np
        import torch

        ll = self._ll
        waiting = deque(first)
        self._ensure_context(min(self.max_batch_size, len(first)),
                             max(cells, *(r.cells for r in first)), sized=cells > 0)
        free = list(range(self._ctx_shape[0]))
        active: list[Row] = []  # rows with a sampled token not yet fed
        batch = ll.llama_batch_init(self._ctx_shape[0] * self._ctx_shape[1], 0, 1)
        ok = False
        try:
            while waiting or active:
                if waiting and waiting[0].cells > self._ctx_shape[1]:
                    # a longer conversation than the context was made for: grow it, and feed
                    # the rows still decoding their whole text again below (a new context
                    # holds nothing; waiting for them to finish instead idles the batch)
                    ll.llama_batch_free(batch)
                    batch = None
                    self._ensure_context(self._ctx_shape[0],
                                         max(r.cells for r in [waiting[0], *active]))
                    free = list(range(self._ctx_shape[0]))
                    batch = ll.llama_batch_init(self._ctx_shape[0] * self._ctx_shape[1], 0, 1)
                    for r in active:
                        r.seq = -1
                if len(active) > 1:  # their sequences onto consecutive ids: one pass for all
                    moves = self._cells.compact(ll.llama_get_memory(self._ctx),
                                                [r.seq for r in active if r.seq >= 0], free,
                                                self._ctx_shape[0], self._scratch)
                    for r in active:
                        r.seq = moves.get(r.seq, r.seq)
                    self.moved_sequences += len(moves)
                entries: list[tuple[int, int, int, bool]] = []  # token, pos, seq, wants logits
                outs: list[Row] = []  # rows that get a token this step
                at: list[int] = []  # the batch index of each one's logits
                fed: list[int] = []  # tokens each row feeds this step
                pending: dict[int, int] = {}  # sequence -> its tokens fed this step
                self._cells.donors = set()
                prefilling: list[list[int]] = []  # the prompts computed this step
                for r in active:
                    if r.seq < 0:  # dropped by the growth above
                        text = r.prompt + r.out.ids
                        r.seq, _ = self._claim(ll.llama_get_memory(self._ctx), free, text, r.key,
                                               pending=pending)
                        prefilling.append(text)
                        self.prefilled_tokens += len(text)
                        at.append(len(entries) + len(text) - 1)
                        entries += [(t, k, r.seq, k == len(text) - 1) for k, t in enumerate(text)]
                        fed.append(len(text))
                    else:
                        at.append(len(entries))
                        entries.append((r.out.ids[-1], len(r.prompt) + len(r.out.ids) - 1, r.seq, True))
                        self._cells.kv[r.seq].append(r.out.ids[-1])
                        pending[r.seq] = 1
                        fed.append(1)
                    outs.append(r)
                reserved = frozenset(r.key for r in waiting if r.key is not None)
                owner = self._cells.owner
                held = {owner[q]: q for q in free if owner.get(q) is not None}
                # conversations that continue go first, into the sequence holding their prefix;
                # then the others in order, into sequences no waiting conversation holds
                admit = [r for r in waiting if r.key in held and r.cells <= self._ctx_shape[1]]
                if admit:
                    waiting = deque(r for r in waiting if r not in admit)
                while waiting and len(admit) < len(free) and waiting[0].cells <= self._ctx_shape[1]:
                    admit.append(waiting.popleft())
                deferred = []
                for r in admit:
                    if self._cells.defer(r.prompt, pending, prefilling):
                        deferred.append(r)  # next step it copies what this one computes
                        continue
                    r.seq, reused = self._claim(ll.llama_get_memory(self._ctx), free, r.prompt,
                                                r.key, reserved, pending)
                    prefilling.append(r.prompt)
                    self.reused_tokens += reused
                    self.prefilled_tokens += len(r.prompt) - reused
                    last = len(r.prompt) - 1
                    at.append(len(entries) + last - reused)
                    entries += [(r.prompt[k], k, r.seq, k == last)
                                for k in range(reused, len(r.prompt))]
                    outs.append(r)
                    fed.append(len(r.prompt) - reused)
                waiting.extendleft(reversed(deferred))
                entries, at = by_sequence(entries, at)
                start = time.perf_counter()
                self._submit(batch, entries)
                self.decode_steps += 1
                self.sampled_rows += len(outs)
                logits = np.stack([self._logits_at(i) for i in at])
                tokens, lps = sample_tokens(torch.from_numpy(logits), params, [r.gen for r in outs])
                step = time.perf_counter() - start
                active, ended = [], []
                for r, n, tok, lp in zip(outs, fed, tokens.tolist(), lps.tolist()):
                    r.seconds += step * n / len(entries)
                    r.out.push(tok, lp, self, params.stop, r.move)
                    if r.out.finished:  # its cells stay: the next turn's prompt starts with them
                        free.append(r.seq)
                        ended.append(r)
                    else:
                        active.append(r)
                for r in ended:
                    waiting.extend(finish(r))
            ok = True
        finally:
            if batch is not None:
                ll.llama_batch_free(batch)
            if not ok:
                self._forget()

    def _logits_at(self, index: int) -> Any:
        """A copy of the logits of batch entry ``index`` of the last decode (float32 numpy)."""
        import numpy as np

        ptr = self._ll.llama_get_logits_ith(self._ctx, index)
        if not ptr:
            raise PolicyError(f"llama.cpp has no logits for batch entry {index}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def _submit(self, batch: Any, entries: list[tuple[int, int, int, bool]]) -> None:
        """Fill ``batch`` with ``entries`` and run ``llama_decode``; raise ``PolicyError`` on
        failure."""
        for k, (tok, pos, seq, want) in enumerate(entries):
            batch.token[k] = tok
            batch.pos[k] = pos
            batch.n_seq_id[k] = 1
            batch.seq_id[k][0] = seq
            batch.logits[k] = want
        batch.n_tokens = len(entries)
        rc = self._ll.llama_decode(self._ctx, batch)
        if rc != 0:
            raise PolicyError(f"llama_decode failed with code {rc} on a batch of {len(entries)} "
                              "tokens (1: no room in the KV cache; < 0: an internal error)")


