"""One call of the designer: slots, batched attempts, judging, repair turns and archiving.

:func:`design_environments` fills ``n`` slots; slot ``i`` exercises ``skills[i % len(skills)]``.
The order of work (one :class:`DesignRun` per call, nothing module-level):

1. plan each slot: its skill, and a parent when the slot mutates
   (:mod:`spadework.designer.parents`);
2. round ``r`` (``r < attempts_per_slot``): one batched ``policy.chat`` for every slot still
   open, each with a fresh document ``corpus.sample(run_seed, iteration, slot, r)``; judge each
   reply (:mod:`spadework.designer.judge`); archive the round in one transaction;
3. then up to ``repair_turns`` batched follow-ups for the round's failures, each archived in its
   own transaction, before the next round.

With a policy that streams (``DesignConfig.continuous``) the same tries run per slot instead,
each asked as soon as the slot's previous reply is judged and archived in a transaction of its
own. Each try samples from its own seed (slot, round, turn) either way.

Every attempt is archived with its prompt, reply, token ids, logprobs, how it was sampled and its
outcome; extracted code is archived as an accepted or rejected environment. Which attempts may
ever train, and what they earn, is :mod:`spadework.designer.credit`'s.

One novelty index over the archive's accepted code
(:func:`spadework.designer.examples.design_novelty_index`) is built per call and each accepted
environment is added to it at once, so two slots can never accept the same environment. The
example modules (:func:`spadework.designer.examples.prompt_examples`, the ToolEnv guide's in tool use) are in
the index too, so a copy of it is rejected as a near-duplicate, never accepted.

A fresh games design is shown the archive's memory positives; when there are none (every run's
first designs) or none fit the context, it is shown the built-in example module instead, or
``DesignConfig.examples`` of them drawn per slot (:mod:`spadework.designer.examples` says
why). Every prompt states a line budget derived from ``max_tokens``, and a repair turn is told
what a passing module does at the failed stage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spadework.archive.records import ACCEPTED, DesignAttempt, EnvRecord, GroundingDocument
from spadework.corpus import truncate_words
from spadework.designer.credit import trained_at_birth
from spadework.designer.examples import choose_examples, design_novelty_index
from spadework.designer.judge import Judgement, judge_reply
from spadework.designer.parents import Parent, choose_parent, wants_mutation
from spadework.designer.plan import PLAN_TOKENS, after_plan, plan_messages
from spadework.designer.prompts import (
    MemoryExample,
    build_design_prompt,
    build_mutation_prompt,
    feedback_section,
    fresh_repair_messages,
    rejection_section,
    repair_messages,
)
from spadework.env.checker import CheckConfig
from spadework.env.hygiene import env_benchmark_matches
from spadework.errors import ConfigError, PolicyError
from spadework.policy.base import Conversation, SamplingParams, StreamRequest, streams
from spadework.seeding import derive_rng, derive_seed
from spadework.settings.design import CHARS_PER_TOKEN, DesignConfig
from spadework.skills import Skill
from spadework.types import EnvSource, Sampling

#: Tokens a repair turn's verdict is taken to add to its conversation, at most (the checker's
#: reason and the advice; sizing a stream's KV cache, ``DesignRun._stream``).
VERDICT_TOKENS = 320


@dataclass(frozen=True)
class DesignResult:
    """One slot: its skill, the accepted environment (None if every attempt failed), and every
    attempt as archived, in order (repairs included; see :func:`spadework.designer.credit.
    is_repair`)."""

    slot: int
    skill: str
    env: EnvSource | None
    attempts: tuple[DesignAttempt, ...] = field(default_factory=tuple)
    parent_id: str | None = None


def design_environments(
    policy: Any,
    sandbox: Any,
    archive: Any,
    corpus: Any,
    *,
    n: int,
    iteration: int,
    run_seed: int,
    skills: Sequence[Skill],
    cfg: DesignConfig,
    check_config: CheckConfig,
    progress: Callable[[int, int], None] | None = None,
    band: tuple[float, float] = (0.4, 0.6),
) -> list[DesignResult]:
    """Fill ``n`` design slots (see the module docstring). Returns one :class:`DesignResult` per
    slot, in slot order. ``progress(done, total)`` is called as attempts are judged (``total``:
    the most attempts the call may make; it reaches ``total`` when the call ends). ``band``: the
    run's win-rate band (``RewardConfig.lo``, ``.hi``), which the feedback groups by.

    ``check_config`` must carry the turn limit the environments will be played with
    (``RunConfig.check``): an environment that needs more turns than play allows cannot be won.
    ``policy`` implements :class:`spadework.policy.Policy`; ``sandbox`` is a started sandbox;
    ``archive`` an open :class:`spadework.archive.Archive`; ``corpus`` a
    :class:`spadework.corpus.Corpus`. Raises ConfigError for a bad request and lets PolicyError
    and ArchiveError through (the loop records them); a bad reply is a rejected attempt.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"n (design slots) must be an integer >= 0, got {n!r}")
    if not skills:
        raise ConfigError("no skills to design for: pass at least one (spadework.skills.skills_for)")
    wrong = [s.name for s in skills if s.setting != cfg.setting]
    if wrong:
        raise ConfigError(f"skills {wrong} are not of setting {cfg.setting!r}; set DesignConfig.setting "
                          "or pass skills_for(setting)")
    run = DesignRun(policy, sandbox, archive, corpus, iteration=iteration, run_seed=run_seed,
                    cfg=cfg, check_config=check_config, progress=progress, band=band)
    return run.run([skills[i % len(skills)] for i in range(n)])


@dataclass
class _Slot:
    """A slot's mutable state during one call (local to the call)."""

    slot: int
    skill: Skill
    parent: Parent | None
    attempts: list[DesignAttempt] = field(default_factory=list)
    env: EnvSource | None = None

    def result(self) -> DesignResult:
        return DesignResult(self.slot, self.skill.name, self.env, tuple(self.attempts),
                            self.parent.env_id if self.parent else None)


@dataclass(frozen=True)
class _Request:
    slot: _Slot
    messages: tuple[dict[str, str], ...]
    doc_id: str | None
    doc_excerpt: str | None
    memory_ids: tuple[str, ...]
    document: GroundingDocument | None = None
    design: tuple[dict[str, str], ...] | None = None
    """Set on a plan turn (``messages`` is the plan's conversation): the design prompt whose
    module turn follows the plan's reply (:func:`~spadework.designer.plan.after_plan`)."""

    def planned(self, plan: str) -> _Request:
        """The module turn of this plan turn, given the plan's reply."""
        assert self.design is not None
        return replace(self, messages=tuple(after_plan(self.messages, plan, self.design)),
                       design=None)


def design_feedback(archive: Any, cfg: DesignConfig,
                    band: tuple[float, float] = (0.4, 0.6)) -> str | None:
    """What fresh designs are shown of the designer's earlier work, with ``cfg.feedback`` on:
    how its recent environments played (:func:`feedback_section`), then what the checker said
    of its latest ``cfg.rejections`` attempts (:func:`rejection_section`); None when neither
    has anything to say."""
    if not cfg.feedback:
        return None
    parts = [feedback_section(archive.played_designs(setting=cfg.setting), *band)]
    if cfg.rejections:
        parts.append(rejection_section(archive.recent_attempts(setting=cfg.setting,
                                                               k=cfg.rejections), cfg.setting))
    return "\n\n".join(p for p in parts if p) or None


class DesignRun:
    """The state of one :func:`design_environments` call."""

    def __init__(self, policy: Any, sandbox: Any, archive: Any, corpus: Any, *, iteration: int,
                 run_seed: int, cfg: DesignConfig, check_config: CheckConfig,
                 progress: Callable[[int, int], None] | None = None,
                 band: tuple[float, float] = (0.4, 0.6)) -> None:
        self.policy, self.sandbox, self.archive, self.corpus = policy, sandbox, archive, corpus
        self.iteration, self.run_seed, self.cfg = iteration, run_seed, cfg
        self.check_config = check_config
        self.progress = progress or (lambda done, total: None)
        self.done, self.total = 0, 0
        self.index = design_novelty_index(archive.env_codes("accepted"), cfg.setting, cfg.examples,
                                          check_config)
        self._memory: dict[str, tuple[list[MemoryExample], list, tuple[str, ...]]] = {}
        self.feedback = design_feedback(archive, cfg, band)

    def run(self, slot_skills: Sequence[Skill]) -> list[DesignResult]:
        slots = [self._plan(i, skill) for i, skill in enumerate(slot_skills)]
        self.total = len(slots) * self.cfg.attempts_per_slot * (1 + self.cfg.repair_turns)
        self.progress(0, self.total)  # a bar with its clock from the start: a batch takes minutes
        if self.cfg.continuous and streams(self.policy):
            self._stream(slots)
            self.progress(self.total, self.total)
            return [s.result() for s in slots]
        for r in range(self.cfg.attempts_per_slot):
            open_slots = [s for s in slots if s.env is None]
            if not open_slots:
                break
            fresh = self._plans([self._fresh_request(s, r) for s in open_slots], (r, 0))
            done = self._call(fresh, (r, 0))
            for turn in range(1, self.cfg.repair_turns + 1):
                failed = [(req, c, j) for req, c, j in done if j.outcome != ACCEPTED]
                if not failed:
                    break
                reqs = [replace(req, messages=tuple(self._repair(req, c, j))) for req, c, j in failed]
                done = self._call(reqs, (r, turn))
        self.progress(self.total, self.total)
        return [s.result() for s in slots]

    def _plans(self, reqs: list[_Request], key: tuple[int, int]) -> list[_Request]:
        """``reqs`` with each plan turn asked (one batched call) and replaced by its module turn."""
        todo = [i for i, q in enumerate(reqs) if q.design is not None]
        if not todo:
            return reqs
        params = replace(self._params([self._plan_seed(reqs[i], key) for i in todo]),
                         max_tokens=PLAN_TOKENS)
        replies = self.policy.chat([Conversation(messages=reqs[i].messages) for i in todo], params)
        out = list(reqs)
        for i, c in zip(todo, replies):
            out[i] = reqs[i].planned(c.text)
        return out

    def _module_tokens(self, req: _Request) -> int:
        """The tokens a plan turn's module prompt adds to it, at most (0 for other turns)."""
        if req.design is None:
            return 0
        return PLAN_TOKENS + len(self.policy.prompt_ids(Conversation(messages=req.design)))

    def _plan_seed(self, req: _Request, key: tuple[int, int]) -> int:
        return derive_seed(self._seed(req, key), "plan")

    def _repair(self, req: _Request, c: Any, j: Judgement) -> list[dict[str, str]]:
        cut = c.finish_reason in ("length", "repeat")
        if self.cfg.repair == "fresh":
            return fresh_repair_messages(req.messages, j.outcome, j.reason, cut=cut,
                                         drop_example=j.outcome == "novelty",
                                         setting=req.slot.skill.setting)
        return repair_messages(req.messages, c.text, j.outcome, j.reason, cut=cut,
                               max_tokens=self.cfg.max_tokens, setting=req.slot.skill.setting)

    def _plan(self, slot: int, skill: Skill) -> _Slot:
        parent = None
        if wants_mutation(self.cfg.mutation_ratio, self.run_seed, self.iteration, slot):
            parent = choose_parent(self.archive, skill, run_seed=self.run_seed,
                                   iteration=self.iteration, slot=slot,
                                   max_chars=self.cfg.example_chars)
        return _Slot(slot, skill, parent)

    def _memory_for(self, skill: Skill) -> tuple[list[MemoryExample], list, tuple[str, ...]]:
        if skill.name not in self._memory:
            pos = self.archive.memory_examples(skill.name, k=self.cfg.memory_positives, setting=skill.setting,
                                               max_chars=self.cfg.example_chars)
            neg = self.archive.memory_negatives(skill.name, k=self.cfg.memory_negatives, setting=skill.setting)
            self._memory[skill.name] = ([MemoryExample(p.code, p.note) for p in pos], neg,
                                        tuple(p.env_id for p in pos))
        return self._memory[skill.name]

    def _fresh_request(self, s: _Slot, r: int) -> _Request:
        cfg = self.cfg
        if s.parent is not None:
            msgs = build_mutation_prompt(s.parent, s.skill, difficulty=cfg.difficulty,
                                         max_tokens=cfg.max_tokens)
            return _Request(s, tuple(msgs), None, None, (s.parent.env_id,))
        doc = self.corpus.sample(self.run_seed, self.iteration, s.slot, r)
        text = truncate_words(doc.text, cfg.corpus_words)
        positives, negatives, pos_ids = self._memory_for(s.skill)
        budget = (self.policy.context_length - cfg.max_tokens) * CHARS_PER_TOKEN
        fallback = choose_examples(cfg.examples, derive_rng(self.run_seed, self.iteration,
                                                             "examples", s.slot, r)) \
            if cfg.setting == "games" else ()
        while True:  # drop positives (the longest part), then examples, until the prompt fits
            examples = () if positives else fallback
            msgs = build_design_prompt(text, s.skill, difficulty=cfg.difficulty, memory=positives,
                                       negatives=negatives, examples=examples,
                                       max_tokens=cfg.max_tokens, feedback=self.feedback)
            if sum(len(m["content"]) for m in msgs) <= budget or not (positives or examples):
                break
            if positives:
                positives, pos_ids = positives[:-1], pos_ids[:-1]
            else:
                fallback = fallback[:-1]
        ids = pos_ids + tuple(ng.env_id for ng in negatives)
        req = _Request(s, tuple(msgs), doc.doc_id, text[:200], ids,
                       GroundingDocument(doc.doc_id, text, doc.title))
        if cfg.plan and cfg.setting == "games":
            return replace(req, messages=tuple(plan_messages(text, s.skill, cfg.difficulty)),
                           design=req.messages)
        return req

    def _params(self, seeds: Sequence[int] = ()) -> Any:
        cfg = self.cfg
        return SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                              max_tokens=cfg.max_tokens, row_seeds=tuple(seeds),
                              stop_at_repeat=cfg.stop_at_repeat or None)

    def _seed(self, req: _Request, key: tuple[int, int]) -> int:
        """The row seed of ``req``'s try in round ``key[0]``, turn ``key[1]`` (chat and stream)."""
        return derive_seed(self.run_seed, self.iteration, "design", *key, req.slot.slot)

    def _call(self, reqs: list[_Request],
              key: tuple[int, int]) -> list[tuple[_Request, Any, Judgement]]:
        """One batched chat call, its judgements (with each request and its completion), and
        one transaction archiving them."""
        params = self._params([self._seed(r, key) for r in reqs])
        completions = self.policy.chat([Conversation(messages=r.messages) for r in reqs], params)
        done, envs, attempts = [], [], []
        for req, c in zip(reqs, completions):
            j, env, attempt = self._judge(req, c, params.record)
            envs += [env] if env is not None else []
            attempts.append(attempt)
            done.append((req, c, j))
        self._store(envs, attempts, [r.document for r in reqs if r.document is not None])
        return done

    def _judge(self, req: _Request, c: Any,
               sampling: Sampling) -> tuple[Judgement, EnvRecord | None, DesignAttempt]:
        """Judge one reply: the slot's environment when accepted, the code's record, the attempt."""
        j = judge_reply(c.text, c.finish_reason, sandbox=self.sandbox, max_tokens=self.cfg.max_tokens,
                        seeds=None, check_config=self.check_config, index=self.index)
        if j.outcome == ACCEPTED:
            self.index.add(j.code)
            req.slot.env = EnvSource(j.code, j.report.class_name or "", req.slot.skill.setting,
                                     req.slot.skill.name)
        env = None
        if j.code is not None:
            env = EnvRecord.from_check(
                j.code, j.report, iteration=self.iteration, setting=req.slot.skill.setting,
                skill=req.slot.skill.name, doc_id=req.doc_id, doc_excerpt=req.doc_excerpt,
                parent_id=req.slot.parent.env_id if req.slot.parent else None,
                benchmarks=env_benchmark_matches(j.code))
        attempt = self._attempt(req, c, j, sampling)
        req.slot.attempts.append(attempt)
        self.done += 1
        self.progress(self.done, self.total)
        return j, env, attempt

    def _stream(self, slots: list[_Slot]) -> None:
        """Every slot's tries through ``policy.stream`` (``DesignConfig.continuous``): a reply
        is judged and archived as it finishes, and the slot's next try (a repair turn while
        any is left, then a fresh attempt) joins the batch at once. A PolicyError goes up, as
        from chat."""
        cfg = self.cfg
        params = self._params()
        asked: dict[int, tuple[_Request, int, int]] = {}  # slot -> its try in flight

        def ask(req: _Request, r: int, turn: int) -> StreamRequest:
            asked[req.slot.slot] = (req, r, turn)
            ids = self.policy.prompt_ids(Conversation(messages=req.messages))
            if req.design is not None:  # a plan turn: short, and seeded apart from its module
                return StreamRequest(req.slot.slot, ids, self._plan_seed(req, (r, turn)),
                                     max_tokens=PLAN_TOKENS)
            return StreamRequest(req.slot.slot, ids, self._seed(req, (r, turn)))

        def on_done(q: StreamRequest, c: Any) -> list[StreamRequest]:
            if isinstance(c, PolicyError):
                raise c
            req, r, turn = asked.pop(q.key)
            if req.design is not None:
                return [ask(req.planned(c.text), r, turn)]
            j, env, attempt = self._judge(req, c, params.record)
            self._store([env] if env is not None else [], [attempt],
                        [req.document] if req.document is not None else [])
            if j.outcome == ACCEPTED:
                return []
            if turn < cfg.repair_turns:
                return [ask(replace(req, messages=tuple(self._repair(req, c, j))), r, turn + 1)]
            if r + 1 < cfg.attempts_per_slot:
                return [ask(self._fresh_request(req.slot, r + 1), r + 1, 0)]
            return []

        first = [ask(self._fresh_request(s, 0), 0, 0) for s in slots]
        # room for a slot's whole conversation from the start (a KV cache grown mid-stream drops
        # every cached prompt): each repair turn adds a reply and a verdict to the longest prompt,
        # and a plan turn comes before its module's prompt
        longest = max(len(q.prompt_ids) + self._module_tokens(asked[q.key][0]) for q in first)
        turns = cfg.repair_turns if cfg.repair == "chat" else 0
        self.policy.stream(first, params, on_done, cells=min(
            self.policy.context_length,
            longest + turns * (cfg.max_tokens + VERDICT_TOKENS) + cfg.max_tokens))

    def _attempt(self, req: _Request, c: Any, j: Judgement, sampling: Sampling) -> DesignAttempt:
        ids, lps, reason = tuple(c.output_ids), tuple(c.logprobs), j.reason
        if len(ids) != len(lps):  # a backend without logprobs: keep the text, not a sample to train on
            ids, lps = (), ()
            reason = (reason + "; " if reason else "") + "no logprobs from the backend: not trainable"
        return DesignAttempt(
            iteration=self.iteration, slot=req.slot.slot, attempt=len(req.slot.attempts),
            skill=req.slot.skill.name, setting=req.slot.skill.setting, doc_id=req.doc_id,
            messages=req.messages, reply=c.text, prompt_ids=tuple(c.prompt_ids), output_ids=ids,
            logprobs=lps, outcome=j.outcome, reason=reason,
            env_id=j.report.env_id if j.code is not None else None,
            finish_reason=c.finish_reason, memory_ids=req.memory_ids, sampling=sampling)

    def _store(self, envs: list[EnvRecord], attempts: list[DesignAttempt],
               documents: list[GroundingDocument]) -> None:
        """Archive one call's environments, attempts and the documents they were grounded on
        together; attempts that may never train (:func:`spadework.designer.credit.trained_at_birth`)
        are marked so the learner skips them."""
        skip = [a.key for a in attempts if trained_at_birth(a, self.cfg.rejected_first_attempts)]
        with self.archive.transaction():
            for doc in documents:
                self.archive.add_document(doc)
            for rec in envs:
                self.archive.add_env(rec)
            for a in attempts:
                self.archive.add_attempt(a)
            if skip:
                self.archive.mark_trained(skip, self.iteration)


@dataclass(frozen=True)
class DesignSummary:
    """The closing figures of a design run (``spadework design``)."""

    slots: int
    attempts: int
    accepted: int
    rejected_by_stage: dict[str, int]
    output_tokens: int
    seconds: float
    iteration: int = 0

    @property
    def tokens_per_env(self) -> float | None:
        return self.output_tokens / self.accepted if self.accepted else None

    @property
    def seconds_per_env(self) -> float | None:
        return self.seconds / self.accepted if self.accepted else None


def summarize(results: Sequence[DesignResult], seconds: float, iteration: int = 0) -> DesignSummary:
    """Count attempts, acceptances and rejections by stage over every slot.

    >>> a = DesignAttempt(0, 0, 0, None, "games", None, (), "", (), (1, 2), (-0.1, -0.2), "static")
    >>> s = summarize([DesignResult(0, "optimization", None, (a, a))], 4.0)
    >>> s.attempts, s.accepted, s.rejected_by_stage, s.output_tokens, s.seconds_per_env
    (2, 0, {'static': 2}, 4, None)
    """
    attempts = [a for r in results for a in r.attempts]
    stages: dict[str, int] = {}
    for a in attempts:
        if a.outcome != ACCEPTED:
            stages[a.outcome] = stages.get(a.outcome, 0) + 1
    return DesignSummary(slots=len(results), attempts=len(attempts),
                         accepted=sum(r.env is not None for r in results),
                         rejected_by_stage=dict(sorted(stages.items())),
                         output_tokens=sum(len(a.output_ids) for a in attempts), seconds=seconds,
                         iteration=iteration)


