"""Which tokens each sequence of a llama.cpp context holds in its KV cells, and which
conversation it last served: what :class:`~spadework.policy.llamacpp.LlamaCppPolicy` reuses,
copies from another sequence or drops when it gives a sequence to a prompt (docs/engine.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spadework.policy.decode import common_prefix

#: A prompt copies another sequence's cached prefix when that is at least this many tokens
#: longer than its own sequence's (a copy moves the whole stream: not worth a few tokens).
COPY_MIN = 64


class SequenceCells:
    """The engine's record of its sequences' cached cells (``ll``: the llama.cpp bindings)."""

    def __init__(self, ll: Any) -> None:
        self._ll = ll
        self.kv: dict[int, list[int]] = {}  # sequence -> the tokens its KV cells hold
        self.owner: dict[int, Any] = {}  # sequence -> the stream key it last served
        self.donors: set[int] = set()  # sequences copied from in the step being built

    def clear(self) -> None:
        """Forget every sequence's cells (the context was freed or cleared)."""
        self.kv, self.owner = {}, {}

    def shared(self, seq: int, prompt: Sequence[int], pending: dict[int, int]) -> int:
        """The leading tokens of ``prompt`` whose cells ``seq`` holds already computed (not its
        ``pending[seq]`` last, fed in the step being built), at most all but the prompt's last
        token (whose logits are needed)."""
        held = self.kv.get(seq, ())
        return common_prefix(held, prompt, min(len(held) - pending.get(seq, 0), len(prompt) - 1))

    def claim(self, mem: Any, free: list[int], prompt: list[int], key: Any = None,
              reserved: frozenset = frozenset(), pending: dict[int, int] | None = None
              ) -> tuple[int, int, int]:
        """Take a free sequence for ``prompt`` and drop its cells past the prefix it shares;
        returns (sequence, tokens reused, of those the tokens copied). The sequence last claimed
        for ``key`` when it is free (a conversation's next turn), else the one sharing the
        longest prefix among those not last claimed for a key in ``reserved`` (conversations
        waiting for their next turn keep theirs). When another sequence, busy or free, holds a
        prefix at least ``COPY_MIN`` tokens longer (the same opening of another episode: the
        system block and the task), its cells are copied in instead (``llama_memory_seq_cp``
        copies a sequence's whole stream; the cells past the prefix are then dropped).
        ``pending``: tokens each sequence is fed in the step being built, not yet computed (the
        prefill sets it for ``prompt``'s own)."""
        pending = {} if pending is None else pending
        shares = {q: self.shared(q, prompt, pending) for q in {*free, *self.kv}}
        own = [q for q in free if key is not None and self.owner.get(q) == key]
        pool = (own or [q for q in free
                        if self.owner.get(q) not in reserved and q not in self.donors]
                or [q for q in free if q not in self.donors] or free)
        best = max(pool, key=shares.__getitem__)
        free.remove(best)
        reused = shares[best]
        donor = max((q for q in self.kv if q != best), default=None, key=shares.__getitem__)
        copied = shares[donor] if donor is not None else 0
        copy = copied >= reused + COPY_MIN
        if copy:
            # the stream is copied when the step's decode starts: until then the donor is
            # not claimed, and the copy is no donor itself (its cells are not there yet)
            self._ll.llama_memory_seq_cp(mem, donor, best, -1, -1)
            self.donors.add(donor)
            reused = copied
        self._ll.llama_memory_seq_rm(mem, best, reused, -1)
        self.kv[best], self.owner[best] = list(prompt), key
        pending[best] = len(prompt) if copy else len(prompt) - reused
        return best, reused, copied if copy else 0

    def compact(self, mem: Any, busy: Sequence[int], free: list[int], n_seq: int,
                scratch: int | None) -> dict[int, int]:
        """Move the sequences in ``busy`` (those of the rows decoding this step) onto
        consecutive ids, and return the moves (old id -> new id).

        Why: with a KV stream per sequence, llama.cpp runs a batch as one forward pass per run
        of consecutive ids, each reading every weight, so a decode step over rows on sequences
        2, 5 and 9 costs three lone rows' steps (docs/engine.md). A move copies the row's whole
        stream (``llama_memory_seq_cp``; the copies run in order when the next decode starts):
        about 20 MB for the 0.5B agent's 1,792 cells, against 1 GB of weights a forward pass
        reads. The window of ``len(busy)`` ids that holds most of them already is kept (of
        those, the one with the fewest cached cells to swap, then the lowest); each row outside
        it moves into a free id inside it. A free id whose cells a waiting conversation may
        reuse swaps them with the mover through ``scratch`` (a stream no row ever claims), so no
        cached prefix is lost (with no scratch stream, ``None``, such ids are left as they are
        and the rows that would have gone there stay). ``free`` is updated in place (the
        mover's old id takes the target's place); ``n_seq``: the ids in use, ``busy`` and
        ``free`` together."""
        k = len(busy)
        if k < 2 or max(busy) - min(busy) + 1 == k:
            return {}
        on = [0] * n_seq
        for q in busy:
            on[q] = 1

        def cost(w: int) -> tuple[int, int]:  # rows to move, of their targets those to swap
            out = [q for q in range(w, w + k) if not on[q]]
            return len(out), sum(1 for q in out if self.kv.get(q))

        start = min(range(n_seq - k + 1), key=cost)
        targets = [q for q in range(start, start + k) if not on[q] and q in free
                   and (scratch is not None or not self.kv.get(q))]
        movers = sorted(q for q in busy if not start <= q < start + k)
        ll, moves = self._ll, {}
        for a, t in zip(movers, targets):
            if self.kv.get(t):
                ll.llama_memory_seq_cp(mem, t, scratch, -1, -1)
                ll.llama_memory_seq_cp(mem, a, t, -1, -1)
                ll.llama_memory_seq_cp(mem, scratch, a, -1, -1)
                ll.llama_memory_seq_rm(mem, scratch, -1, -1)
                self.kv[a], self.kv[t] = self.kv[t], self.kv[a]
                self.owner[a], self.owner[t] = self.owner.get(t), self.owner.get(a)
            else:
                ll.llama_memory_seq_cp(mem, a, t, -1, -1)
                self.kv[t], self.owner[t] = list(self.kv.get(a, ())), self.owner.get(a)
                self.owner[a] = None  # a keeps a copy of the cells, for no conversation
            free[free.index(t)] = a
            moves[a] = t
        return moves

    def defer(self, prompt: Sequence[int], pending: dict[int, int],
              prefilling: list[Sequence[int]]) -> bool:
        """Whether ``prompt`` should wait one step: a prompt prefilled in the step being built
        shares at least ``COPY_MIN`` more of its leading tokens than any computed cells do, so
        that next step it copies them instead of computing them again (the first turns of an
        environment's episodes, which all open with the same system block and task)."""
        if not prefilling:
            return False
        soon = max(common_prefix(p, prompt, len(prompt) - 1) for p in prefilling)
        if soon < COPY_MIN:
            return False
        now = max((self.shared(q, prompt, pending) for q in self.kv), default=0)
        return soon >= now + COPY_MIN
