"""Records to SQL rows and back: the one place that knows both the dataclasses and the columns."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from spadework.archive.records import (
    DesignAttempt,
    EnvRecord,
    EnvStats,
    pack_floats,
    pack_ints,
    report_from_json,
    report_to_json,
    to_json,
    unpack_floats,
    unpack_ints,
)
from spadework.errors import ArchiveError
from spadework.types import ARMS, EPISODE_STATUSES, Episode, Sampling, Turn

ENV_COLUMNS = ("env_id", "code", "class_name", "setting", "skill", "name", "origin", "doc_id",
               "doc_excerpt", "parent_id", "iteration", "status", "failed_stage", "reason",
               "report", "hint", "created_at", "benchmarks", "levels")

ATTEMPT_COLUMNS = ("iteration", "slot", "attempt", "skill", "setting", "doc_id", "messages",
                   "reply", "prompt_ids", "output_ids", "logprobs", "finish_reason", "outcome",
                   "reason", "env_id", "memory_ids", "reward", "trained_iteration", "created_at",
                   "temperature", "top_p", "top_k")

EPISODE_COLUMNS = ("iteration", "env_id", "arm", "play_index", "seed", "rewards", "terminated",
                   "truncated", "status", "error", "seconds", "n_turns", "opening", "level")

TURN_COLUMNS = ("iteration", "env_id", "arm", "play_index", "turn_index", "prompt_shared", "prompt_ids",
                "output_ids", "logprobs", "text", "action", "observation", "reward",
                "finish_reason", "temperature", "top_p", "top_k", "parsed")


def sampling_columns(s: Sampling | None) -> tuple:
    """(temperature, top_p, top_k), or NULLs when how it was drawn is not known."""
    return (None, None, None) if s is None else (float(s.temperature), float(s.top_p), int(s.top_k))


def sampling_from(row: sqlite3.Row) -> Sampling | None:
    if row["temperature"] is None:
        return None
    return Sampling(row["temperature"], row["top_p"], row["top_k"])


def env_row(rec: EnvRecord, now: float) -> tuple:
    created = now if rec.created_at is None else rec.created_at
    return (rec.env_id, rec.code, rec.class_name, rec.setting, rec.skill, rec.name, rec.origin,
            rec.doc_id, rec.doc_excerpt, rec.parent_id, rec.iteration, rec.status,
            rec.failed_stage, rec.reason, report_to_json(rec.report), rec.hint, created,
            ",".join(rec.benchmarks), rec.levels)


def env_from_row(row: sqlite3.Row) -> EnvRecord:
    rec = EnvRecord(
        code=row["code"], class_name=row["class_name"], setting=row["setting"],
        skill=row["skill"], status=row["status"], iteration=row["iteration"], name=row["name"],
        origin=row["origin"], doc_id=row["doc_id"], doc_excerpt=row["doc_excerpt"],
        parent_id=row["parent_id"], failed_stage=row["failed_stage"], reason=row["reason"],
        report=report_from_json(row["report"]), hint=row["hint"], created_at=row["created_at"],
        benchmarks=tuple(b for b in row["benchmarks"].split(",") if b),
    )
    if rec.env_id != row["env_id"]:
        raise ArchiveError(f"environment {row['env_id'][:12]} is corrupt: its code hashes to "
                           f"{rec.env_id[:12]}")
    return rec


def stats_from_row(row: sqlite3.Row) -> EnvStats:
    return EnvStats(row["env_id"], row["plays"], row["wins"], row["win_rate"], row["regret"],
                    row["last_played_iteration"])


def attempt_row(a: DesignAttempt, now: float) -> tuple:
    created = now if a.created_at is None else a.created_at
    return (a.iteration, a.slot, a.attempt, a.skill, a.setting, a.doc_id,
            to_json(list(a.messages), "attempt messages"), a.reply, pack_ints(a.prompt_ids),
            pack_ints(a.output_ids), pack_floats(a.logprobs), a.finish_reason, a.outcome,
            a.reason, a.env_id, to_json(list(a.memory_ids), "memory ids"), a.reward,
            a.trained_iteration, created, *sampling_columns(a.sampling))


def attempt_from_row(row: sqlite3.Row) -> DesignAttempt:
    return DesignAttempt(
        iteration=row["iteration"], slot=row["slot"], attempt=row["attempt"], skill=row["skill"],
        setting=row["setting"], doc_id=row["doc_id"],
        messages=tuple(json.loads(row["messages"])), reply=row["reply"],
        prompt_ids=unpack_ints(row["prompt_ids"]), output_ids=unpack_ints(row["output_ids"]),
        logprobs=unpack_floats(row["logprobs"]), outcome=row["outcome"], reason=row["reason"],
        env_id=row["env_id"], finish_reason=row["finish_reason"],
        memory_ids=tuple(json.loads(row["memory_ids"])), reward=row["reward"],
        trained_iteration=row["trained_iteration"], created_at=row["created_at"],
        sampling=sampling_from(row),
    )


def check_episode(ep: Episode) -> None:
    """Refuse an episode the schema cannot represent faithfully, naming what is wrong."""
    if ep.arm not in ARMS:
        raise ArchiveError(f"episode arm {ep.arm!r} is not one of {ARMS}")
    if ep.status not in EPISODE_STATUSES:
        raise ArchiveError(f"episode status {ep.status!r} is not one of {EPISODE_STATUSES}")
    for i, t in enumerate(ep.turns):
        if len(t.output_ids) != len(t.logprobs):
            raise ArchiveError(f"episode {ep.env_id[:12]}/{ep.arm}/{ep.play_index} turn {i}: "
                               f"{len(t.output_ids)} output ids but {len(t.logprobs)} logprobs")


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading items ``a`` and ``b`` have in common.

    >>> shared_prefix((1, 2, 3, 4), (1, 2, 9)), shared_prefix((), (1,)), shared_prefix((5,), (5,))
    (2, 0, 1)
    """
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def episode_rows(iteration: int, ep: Episode) -> tuple[tuple, list[tuple]]:
    """The episode's row and its turns' rows; each turn's prompt is stored as the number of ids
    it shares with the previous turn's prompt plus the ids after those."""
    key = (iteration, ep.env_id, ep.arm, ep.play_index)
    head = (*key, ep.seed, pack_floats(ep.rewards), int(bool(ep.terminated)),
            int(bool(ep.truncated)), ep.status, ep.error, float(ep.seconds), len(ep.turns),
            ep.opening, int(ep.level))
    turns, prev = [], ()
    for i, t in enumerate(ep.turns):
        k = shared_prefix(prev, t.prompt_ids)
        turns.append((*key, i, k, pack_ints(t.prompt_ids[k:]), pack_ints(t.output_ids),
                      pack_floats(t.logprobs), t.text, t.action, t.observation, float(t.reward),
                      t.finish_reason, *sampling_columns(t.sampling), int(t.parsed)))
        prev = t.prompt_ids
    return head, turns


def turn_from_row(row: sqlite3.Row, prev_prompt: tuple[int, ...]) -> Turn:
    k = row["prompt_shared"]
    if k > len(prev_prompt):
        raise ArchiveError(f"turn {row['turn_index']} of episode {row['env_id'][:12]}/{row['arm']}/"
                           f"{row['play_index']} shares {k} ids with a {len(prev_prompt)}-id prompt: "
                           "the archive is corrupt")
    return Turn(prompt_ids=prev_prompt[:k] + unpack_ints(row["prompt_ids"]),
                output_ids=unpack_ints(row["output_ids"]), logprobs=unpack_floats(row["logprobs"]),
                text=row["text"], action=row["action"], observation=row["observation"],
                reward=row["reward"], finish_reason=row["finish_reason"],
                sampling=sampling_from(row), parsed=bool(row["parsed"]))


def episode_from_rows(head: sqlite3.Row, turns: Sequence[sqlite3.Row]) -> Episode:
    """An episode from its row and its turns' rows in turn order."""
    if [t["turn_index"] for t in turns] != list(range(head["n_turns"])):
        raise ArchiveError(f"episode {head['env_id'][:12]}/{head['arm']}/{head['play_index']} "
                           f"of iteration {head['iteration']} has {len(turns)} of its "
                           f"{head['n_turns']} turns: the archive is corrupt")
    ts: list[Turn] = []
    for row in turns:
        ts.append(turn_from_row(row, ts[-1].prompt_ids if ts else ()))
    return Episode(env_id=head["env_id"], arm=head["arm"], play_index=head["play_index"],
                   seed=head["seed"], turns=tuple(ts), rewards=unpack_floats(head["rewards"]),
                   terminated=bool(head["terminated"]), truncated=bool(head["truncated"]),
                   status=head["status"], error=head["error"], seconds=head["seconds"],
                   opening=head["opening"], level=head["level"])


def placeholders(columns: tuple[str, ...]) -> str:
    """``"(a, b) VALUES (?, ?)"`` for an INSERT."""
    return f"({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def env_filter(columns: str, status: str | None, skill: str | None, setting: str | None,
               limit: int | None) -> tuple[str, list[object]]:
    """The SELECT of ``columns`` from envs matching the filters that are set, ordered by
    iteration, creation time and id, at most ``limit`` rows; with its parameters."""
    where: list[str] = []
    params: list[object] = []
    for col, val in (("status", status), ("skill", skill), ("setting", setting)):
        if val is not None:
            where.append(f"{col} = ?")
            params.append(val)
    sql = f"SELECT {columns} FROM envs" + (f" WHERE {' AND '.join(where)}" if where else "")
    sql += " ORDER BY iteration, created_at, env_id"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return sql, params
