"""The engine's record of its sequences' cells, without a model: which sequence a prompt takes,
and the moves that put a decode step's rows on consecutive sequences (``SequenceCells``)."""

from __future__ import annotations

from spadework.policy.llamacpp_cells import SequenceCells
from spadework.policy.llamacpp_lib import by_sequence


class FakeLlama:
    """The two llama.cpp calls ``SequenceCells`` makes, applied to streams of token lists in
    the order llama.cpp runs them (a copy replaces the destination stream whole)."""

    def __init__(self, streams: dict[int, list[int]]) -> None:
        self.streams = {q: list(v) for q, v in streams.items()}
        self.calls: list[tuple] = []

    def llama_memory_seq_cp(self, mem, src, dst, p0, p1):
        self.calls.append(("cp", src, dst))
        self.streams[dst] = list(self.streams.get(src, []))

    def llama_memory_seq_rm(self, mem, seq, p0, p1):
        self.calls.append(("rm", seq, p0))
        self.streams[seq] = self.streams.get(seq, [])[:max(p0, 0)] if p0 >= 0 else []


def _cells(held: dict[int, list[int]], owners: dict[int, str]) -> tuple[SequenceCells, FakeLlama]:
    ll = FakeLlama(held)
    cells = SequenceCells(ll)
    cells.kv = {q: list(v) for q, v in held.items()}
    cells.owner = dict(owners)
    return cells, ll


def test_rows_on_scattered_sequences_move_into_one_run_keeping_every_cached_prefix():
    # rows decode on 1, 2 and 6; 0, 3, 4 and 5 are free, 0 and 3 holding waiting
    # conversations' prefixes; 7 is the scratch stream
    held = {1: [1, 1], 2: [2, 2], 6: [6, 6, 6], 0: [0], 3: [3, 3, 3, 3]}
    cells, ll = _cells(held, {1: "a", 2: "b", 6: "c", 0: "w0", 3: "w3"})
    free = [0, 3, 4, 5]
    moves = cells.compact(None, [1, 2, 6], free, n_seq=7, scratch=7)
    assert moves == {6: 0}  # windows 0..2 and 1..3 hold two rows each: the lowest
    assert free == [6, 3, 4, 5]
    # the row's cells moved to 0 and the waiting conversation's to 6, through the scratch
    assert ll.calls[:3] == [("cp", 0, 7), ("cp", 6, 0), ("cp", 7, 6)]
    assert ll.streams[0] == [6, 6, 6] and ll.streams[6] == [0]
    assert cells.kv[0] == [6, 6, 6] and cells.owner[0] == "c"
    assert cells.kv[6] == [0] and cells.owner[6] == "w0"
    assert ll.streams[7] == []  # the scratch is left empty


def test_of_two_windows_the_one_that_needs_no_swap_is_taken():
    held = {1: [1], 2: [2], 6: [6], 0: [0, 0]}
    cells, ll = _cells(held, {1: "a", 2: "b", 6: "c", 0: "waiting"})
    free = [0, 3, 4, 5]
    assert cells.compact(None, [1, 2, 6], free, n_seq=7, scratch=7) == {6: 3}
    assert ll.calls == [("cp", 6, 3)] and ll.streams[0] == [0, 0]


def test_a_free_sequence_with_nothing_cached_takes_a_row_by_one_copy():
    cells, ll = _cells({0: [0], 5: [5, 5]}, {0: "a", 5: "b"})
    free = [1, 2, 3, 4]
    assert cells.compact(None, [0, 5], free, n_seq=6, scratch=6) == {5: 1}
    assert ll.calls == [("cp", 5, 1)]
    assert cells.kv[1] == [5, 5] and cells.owner[1] == "b" and cells.owner[5] is None
    assert free == [5, 2, 3, 4]


def test_without_a_scratch_stream_no_cached_prefix_is_swapped_out():
    held = {1: [1], 2: [2], 6: [6], 0: [0, 0], 3: [3, 3]}
    cells, ll = _cells(held, {1: "a", 2: "b", 6: "c", 0: "w0", 3: "w3"})
    free = [0, 3, 4, 5]
    assert cells.compact(None, [1, 2, 6], free, n_seq=7, scratch=None) == {}
    assert ll.calls == [] and free == [0, 3, 4, 5]


def test_rows_already_consecutive_or_alone_do_not_move():
    cells, ll = _cells({2: [1], 3: [2], 4: [3]}, {})
    assert cells.compact(None, [4, 2, 3], [0, 1, 5], n_seq=6, scratch=6) == {}
    assert cells.compact(None, [5], [0, 1, 2, 3, 4], n_seq=6, scratch=6) == {}
    assert ll.calls == []


def test_many_scattered_rows_end_on_one_run():
    held = {q: [q] * 3 for q in range(12)}
    cells, ll = _cells(held, {q: f"c{q}" for q in range(12)})
    busy = [0, 3, 5, 6, 9, 11]
    free = [q for q in range(12) if q not in busy]
    moves = cells.compact(None, busy, free, n_seq=12, scratch=12)
    now = sorted(moves.get(q, q) for q in busy)
    assert now == list(range(now[0], now[0] + len(busy)))
    assert sorted(free + now) == list(range(12))
    for q in busy:  # every row's cells, and every waiting conversation's, are where the
        assert ll.streams[moves.get(q, q)] == [q] * 3  # records say
    for q in free:
        assert ll.streams[q] == cells.kv[q] and cells.owner[q] == f"c{cells.kv[q][0]}"


def test_a_batch_is_ordered_by_sequence_and_its_logit_rows_follow():
    entries = [(7, 0, 5, True), (8, 0, 2, False), (9, 1, 2, True), (4, 3, 3, True)]
    ordered, at = by_sequence(entries, [0, 2, 3])
    assert [e[2] for e in ordered] == [2, 2, 3, 5]
    assert [ordered[i] for i in at] == [entries[0], entries[2], entries[3]]
