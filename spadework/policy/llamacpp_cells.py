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
