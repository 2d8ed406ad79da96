"""One call of the designer: slots, batched attempts, judging, repair turns and archiving.

:func:`spadework.design.design_environments` is the public entry point; this module holds its
working state (one :class:`DesignRun` per call, nothing module-level). The order of work:

1. plan each slot: its skill, and a parent when the slot mutates (:mod:`spadework.mutation`);
2. round ``r`` (``r < attempts_per_slot``): one batched ``policy.chat`` for every slot still
   open, each with a fresh document ``corpus.sample(run_seed, iteration, slot, r)``; judge each
   reply (screen, extract, check); archive the round in one transaction;
3. then up to ``repair_turns`` batched follow-ups for the round's failures, each archived in its
   own transaction, before the next round.

One :class:`NoveltyIndex` over the archive's accepted code is built per call and each accepted
environment is added to it at once, so two slots can never accept the same environment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spadework.archive.records import ACCEPTED, DesignAttempt, EnvRecord
from spadework.corpus import truncate_words
from spadework.design import (
    REPLY_STAGE,
    DesignConfig,
    DesignResult,
    MemoryExample,
    _task_parts,
    build_design_prompt,
    repair_messages,
    screen_reply,
)
from spadework.errors import ExtractError
from spadework.mutation import Parent, build_mutation_prompt, choose_parent, wants_mutation
from spadework.seeding import derive_seed
from spadework.skills import Skill
from spadework.types import CheckReport, CheckResult, EnvSource, Sampling

#: Characters per prompt token assumed when fitting memory into the context (conservative for
#: code, where tokens are short), so a prompt never overflows the model's window.
CHARS_PER_TOKEN = 3


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


@dataclass(frozen=True)
class Judgement:
    """What became of one reply: ``outcome`` is ACCEPTED or the failing stage."""

    outcome: str
    reason: str
    code: str | None = None
    report: CheckReport | None = None


def judge_reply(text: str, finish_reason: str, *, sandbox: Any, cfg: DesignConfig,
                check_config: Any, index: Any) -> Judgement:
    """Screen, extract and check one reply. The extract stage is recorded in the report, so an
    archived environment's report shows every stage it went through."""
    from spadework.env.checker import check
    from spadework.env.extract import extract_env_module

    why = screen_reply(text, finish_reason, cfg.max_tokens)
    if why is not None:
        return Judgement(REPLY_STAGE, why)
    try:
        module = extract_env_module(text)
    except ExtractError as e:
        return Judgement("extract", e.reason)
    repairs = f"; repairs: {', '.join(module.repairs)}" if module.repairs else ""
    extracted = CheckResult("extract", True, f"a module of {len(module.code.splitlines())} lines{repairs}")
    report = check(module.code, sandbox=sandbox, seeds=cfg.check_seeds, config=check_config,
                   existing=index, module=True)
    report = replace(report, results=(extracted, *report.results))
    if report.ok:
        return Judgement(ACCEPTED, "", module.code, report)
    return Judgement(report.failed_stage or "static", report.reason, module.code, report)


class DesignRun:
    """The state of one :func:`spadework.design.design_environments` call."""

    def __init__(self, policy: Any, sandbox: Any, archive: Any, corpus: Any, *, iteration: int,
                 run_seed: int, cfg: DesignConfig, check_config: Any,
                 progress: Callable[[str], None] | None = None) -> None:
        from spadework.env.novelty import NoveltyIndex

        self.policy, self.sandbox, self.archive, self.corpus = policy, sandbox, archive, corpus
        self.iteration, self.run_seed, self.cfg = iteration, run_seed, cfg
        self.check_config = check_config
        self.progress = progress or (lambda _msg: None)
        self.index = NoveltyIndex(archive.env_codes("accepted"), k=self.check_config.shingle_size)
        self._memory: dict[str, tuple[list[MemoryExample], list, tuple[str, ...]]] = {}

    def run(self, slot_skills: Sequence[Skill]) -> list[DesignResult]:
        slots = [self._plan(i, skill) for i, skill in enumerate(slot_skills)]
        for r in range(self.cfg.attempts_per_slot):
            open_slots = [s for s in slots if s.env is None]
            if not open_slots:
                break
            done = self._call([self._fresh_request(s, r) for s in open_slots], (r, 0))
            for turn in range(1, self.cfg.repair_turns + 1):
                failed = [(req, text, j) for req, text, j in done if j.outcome != ACCEPTED]
                if not failed:
                    break
                reqs = [_Request(req.slot, tuple(repair_messages(req.messages, text, j.outcome, j.reason)),
                                 req.doc_id, req.doc_excerpt, req.memory_ids) for req, text, j in failed]
                done = self._call(reqs, (r, turn))
        return [s.result() for s in slots]

    def _plan(self, slot: int, skill: Skill) -> _Slot:
        parent = None
        if wants_mutation(self.cfg.mutation_ratio, self.run_seed, self.iteration, slot):
            parent = choose_parent(self.archive, skill, run_seed=self.run_seed,
                                   iteration=self.iteration, slot=slot)
        return _Slot(slot, skill, parent)

    def _memory_for(self, skill: Skill) -> tuple[list[MemoryExample], list, tuple[str, ...]]:
        if skill.name not in self._memory:
            pos = self.archive.memory_examples(skill.name, k=self.cfg.memory_positives, setting=skill.setting)
            neg = self.archive.memory_negatives(skill.name, k=self.cfg.memory_negatives, setting=skill.setting)
            self._memory[skill.name] = ([MemoryExample(p.code, p.note) for p in pos], neg,
                                        tuple(p.env_id for p in pos))
        return self._memory[skill.name]

    def _fresh_request(self, s: _Slot, r: int) -> _Request:
        cfg = self.cfg
        if s.parent is not None:
            msgs = build_mutation_prompt(s.parent, s.skill, difficulty=cfg.difficulty,
                                         task_parts=_task_parts(s.skill, cfg.difficulty))
            return _Request(s, tuple(msgs), None, None, (s.parent.env_id,))
        doc = self.corpus.sample(self.run_seed, self.iteration, s.slot, r)
        text = truncate_words(doc.text, cfg.corpus_words)
        positives, negatives, pos_ids = self._memory_for(s.skill)
        budget = (self.policy.context_length - cfg.max_tokens) * CHARS_PER_TOKEN
        while True:  # drop positives (the longest part) until the prompt fits the context
            msgs = build_design_prompt(text, s.skill, difficulty=cfg.difficulty,
                                       memory=positives, negatives=negatives)
            if not positives or sum(len(m["content"]) for m in msgs) <= budget:
                break
            positives, pos_ids = positives[:-1], pos_ids[:-1]
        ids = pos_ids + tuple(ng.env_id for ng in negatives)
        return _Request(s, tuple(msgs), doc.doc_id, text[:200], ids)

    def _call(self, reqs: list[_Request], key: tuple[int, int]) -> list[tuple[_Request, str, Judgement]]:
        """One batched chat call, its judgements, and one transaction archiving them."""
        from spadework.policy.base import Conversation, SamplingParams

        cfg = self.cfg
        params = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                                max_tokens=cfg.max_tokens,
                                seed=derive_seed(self.run_seed, self.iteration, "design", *key))
        completions = self.policy.chat([Conversation(messages=r.messages) for r in reqs], params)
        done, envs, attempts = [], [], []
        for req, c in zip(reqs, completions):
            j = judge_reply(c.text, c.finish_reason, sandbox=self.sandbox, cfg=cfg,
                            check_config=self.check_config, index=self.index)
            if j.outcome == ACCEPTED:
                self.index.add(j.code)
                req.slot.env = EnvSource(j.code, j.report.class_name or "", req.slot.skill.setting,
                                         req.slot.skill.name)
            if j.code is not None:
                envs.append(EnvRecord.from_check(
                    j.code, j.report, iteration=self.iteration, setting=req.slot.skill.setting,
                    skill=req.slot.skill.name, doc_id=req.doc_id, doc_excerpt=req.doc_excerpt,
                    parent_id=req.slot.parent.env_id if req.slot.parent else None))
            attempts.append(self._attempt(req, c, j, params.record))
            req.slot.attempts.append(attempts[-1])
            done.append((req, c.text, j))
            self.progress(f"slot {req.slot.slot} attempt {attempts[-1].attempt}: {j.outcome}")
        self._store(envs, attempts)
        return done

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

    def _store(self, envs: list[EnvRecord], attempts: list[DesignAttempt]) -> None:
        """Archive one call's environments and attempts together; repairs (and, with
        ``rejected_first_attempts="none"``, rejected attempts) are marked so the learner skips them."""
        from spadework.design import is_repair

        skip = [a.key for a in attempts if is_repair(a) or not a.output_ids or (
            a.outcome != ACCEPTED and self.cfg.rejected_first_attempts == "none")]
        with self.archive.transaction():
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


def design_into_run_dir(run_dir: Any, *, n: int, cfg: DesignConfig, max_turns: int,
                        model: str | None = None, seed: int = 0, device: str = "cpu",
                        progress: Callable[[str], None] | None = None) -> DesignSummary:
    """``spadework design``: load the model, the default corpus and a sandbox, design ``n``
    slots into ``run_dir/archive.sqlite`` as the iteration after the last one designed there,
    checked under the turn limit ``max_turns`` they are meant to be played with, and summarise."""
    import time
    from pathlib import Path

    from spadework.archive import Archive, archive_path
    from spadework.default_corpus import load_default_corpus
    from spadework.design import design_environments
    from spadework.env.checker import CheckConfig
    from spadework.policy.hf import load_hf_policy
    from spadework.sandbox import Limits, Sandbox
    from spadework.skills import skills_for

    corpus = load_default_corpus()
    policy = load_hf_policy(model, device=device)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    with Archive.open(archive_path(run_dir)) as archive, Sandbox(Limits()) as sandbox:
        last = archive.query("SELECT MAX(iteration) AS m FROM attempts")[0]["m"]
        iteration = 0 if last is None else int(last) + 1
        start = time.monotonic()
        results = design_environments(policy, sandbox, archive, corpus, n=n, iteration=iteration,
                                      run_seed=seed, skills=skills_for(cfg.setting), cfg=cfg,
                                      check_config=CheckConfig(max_turns=max_turns),
                                      progress=progress)
        return summarize(results, time.monotonic() - start, iteration)
