"""Rollout: real starter environments in the real sandbox, driven by a scripted policy."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from scripted_policy import FakeClock, ScriptedPolicy, StreamingScriptedPolicy, solution_script

from spadework.env.toolenv import parse_answer, parse_tool_calls
from spadework.errors import SpadeworkError
from spadework.library import starter_env
from spadework.rollout import PlayConfig, PlayJob, play, regret_jobs, step_timed_out, tool_role_for
from spadework.sandbox import Limits, Sandbox
from spadework.types import EnvSource, Sampling

BAD = Path(__file__).parent / "fixtures" / "envs" / "bad"


@pytest.fixture(scope="module")
def sb():
    try:
        with Sandbox(Limits(step_seconds=1.0, load_seconds=5.0, episode_seconds=120.0)) as box:
            yield box
    except SpadeworkError as e:  # pragma: no cover - depends on the host
        pytest.skip(f"no sandbox here: {e.reason}")


def bad_env(name: str) -> EnvSource:
    from spadework.env.contract import find_env_class

    code = (BAD / f"{name}.py").read_text()
    return EnvSource(code=code, class_name=find_env_class(code))


def solutions_for(sb, env: EnvSource, seeds, max_turns: int, level: int | None = None) -> dict[str, list[str]]:
    """First observation -> the winning replies, computed by the environment itself."""
    out = {}
    for seed in seeds:
        with sb.load(env.code, max_turns=max_turns, class_name=env.class_name, level=level) as h:
            obs, _ = h.reset(seed=seed)
            sol = h.solution()
        out[obs] = [sol] if isinstance(sol, str) else list(sol)
    return out


def test_games_loop_wins_with_the_solution_in_both_arms(sb):
    env = starter_env("nim")
    jobs = regret_jobs(env, run_seed=3, plays=2)
    cfg = PlayConfig(max_turns=8, max_tokens=64)
    policy = ScriptedPolicy(solution_script(solutions_for(sb, env, {j.seed for j in jobs}, 8)))
    eps = play(policy, sb, jobs, cfg, seed=1)
    assert [(e.arm, e.play_index) for e in eps] == [(j.arm, j.play_index) for j in jobs]
    assert all(e.status == "completed" and e.rewards[-1] == 1.0 for e in eps), [e.error for e in eps]
    assert eps[0].seed == eps[2].seed and eps[1].seed == eps[3].seed
    hinted_first = [c[0].messages[0]["content"] for c in policy.calls[:1]][0]
    assert "hint from the game's designer" in hinted_first  # env's own hint() in the hinted arm
    turn = eps[0].turns[0]
    assert len(turn.output_ids) == len(turn.logprobs) > 0 and turn.prompt_ids


def test_thinking_is_stripped_before_parsing(sb):
    env = starter_env("mastermind")
    (obs, replies), = solutions_for(sb, env, [11], 8).items()
    wrong = "\\boxed{0 0 0 0}"
    # mastermind's solution guesses from the feedback: one reply per turn, the last one wins
    policy = ScriptedPolicy(lambda c, t: f"<think>maybe {wrong}</think> I answer {replies[t]}")
    ep, = play(policy, sb, [PlayJob(env, 11, "no_hint", 0)], PlayConfig(max_turns=3))
    assert ep.status == "completed" and ep.rewards == (0.0,) * (len(replies) - 1) + (1.0,)
    assert [t.action for t in ep.turns] == replies and all(t.parsed for t in ep.turns)


def test_each_turn_records_whether_its_reply_parsed_and_how_it_was_sampled(sb):
    env = starter_env("mastermind")
    replies = iter(["no move here", "\\boxed{1 2 3 4}", "<think>\\boxed{1}"])
    cfg = PlayConfig(max_turns=3, temperature=0.7, top_p=0.9, top_k=7)
    ep, = play(ScriptedPolicy(lambda c, t: next(replies)), sb, [PlayJob(env, 11, "no_hint", 0)], cfg)
    assert [t.parsed for t in ep.turns] == [False, True, False] and ep.format_share == 1 / 3
    assert {t.sampling for t in ep.turns} == {Sampling(0.7, 0.9, 7)}


def _multi_call_replies(replies: list[str]) -> list[str]:
    """All tool calls of a solution in one reply (the environment runs them in order), then the answer."""
    calls = [r for r in replies if parse_answer(r) is None]
    answers = [r for r in replies if parse_answer(r) is not None]
    assert sum(len(parse_tool_calls(r)) for r in calls) <= 8
    return ["\n".join(calls), *answers]


@pytest.mark.parametrize("role", ["tool", "user"])
def test_tool_loop_runs_several_calls_per_turn(sb, role):
    env = starter_env("tool_ledger")  # at its top level: every step, then the answer
    sols = {obs: _multi_call_replies(r) for obs, r in solutions_for(sb, env, [5], 10, level=3).items()}
    policy = ScriptedPolicy(solution_script(sols, fallback="<answer>?</answer>"))
    # several calls in one reply: with stop_at_move (the default) the reply would end at the first
    cfg = PlayConfig(max_turns=10, tool_messages=role, stop_at_move=False)
    ep, = play(policy, sb, [PlayJob(env, 5, "no_hint", 0, level=3)], cfg)
    assert ep.status == "completed" and ep.rewards[-1] == 1.0, ep.error
    assert len(ep.turns) == 2 and len(parse_tool_calls(ep.turns[0].text)) >= 2
    assert [t.parsed for t in ep.turns] == [True, True]  # the calls, then the answer
    last = policy.calls[-1][0]
    assert last.tools and last.tools[0]["type"] == "function"  # schemas go to the template
    assert [m["role"] for m in last.messages] == ["user", "assistant", role]
    first, = play(policy, sb, [PlayJob(env, 5, "no_hint", 0, level=3)], PlayConfig(max_turns=10, tool_messages=role))
    assert len(parse_tool_calls(first.turns[0].text)) == 1 and first.turns[0].finish_reason == "move"


@pytest.mark.parametrize("history", [None, 0])
def test_without_template_tools_the_opening_lists_the_tools_instead(sb, history):
    """PlayConfig.template_tools = False: no schemas go to the chat template, and every opening
    the agent sees (the first observation, or the one rebuilt around the latest observation)
    lists each tool once."""
    env = starter_env("tool_calendar")
    replies = iter(['{"name": "get_timezone", "arguments": {"person": "nobody"}}', "not a call",
                    "<answer>?</answer>"])
    policy = ScriptedPolicy(lambda c, t: next(replies))
    cfg = PlayConfig(max_turns=3, template_tools=False, history_turns=history)
    ep, = play(policy, sb, [PlayJob(env, 5, "no_hint", 0)], cfg)
    assert len(ep.turns) == 3
    for (conv,) in policy.calls:
        assert conv.tools == ()
        assert conv.messages[0]["content"].count("- list_events(person:") == 1
    default = ScriptedPolicy(lambda c, t: "<answer>?</answer>")
    play(default, sb, [PlayJob(env, 5, "no_hint", 0)], PlayConfig(max_turns=1))
    (conv,), = default.calls
    assert conv.tools and conv.messages[0]["content"].count("- list_events(person:") == 1


def test_tool_role_follows_the_chat_template():
    class Tok:
        chat_template = "{% if message.role == 'tool' %}<tool_response>{% endif %}"

    class Templated(ScriptedPolicy):
        tokenizer = Tok()

    auto = PlayConfig()
    assert tool_role_for(Templated(lambda c, t: ""), auto) == "tool"
    assert tool_role_for(ScriptedPolicy(lambda c, t: ""), auto) == "user"
    assert tool_role_for(ScriptedPolicy(lambda c, t: "", supports_tool_role=True), auto) == "tool"


def test_statuses_env_error_timeout_policy_error(sb):
    cfg = PlayConfig(max_turns=3)
    guess = ScriptedPolicy(lambda c, t: "")
    jobs = [PlayJob(bad_env("init_raises"), 1, "no_hint", 0),
            PlayJob(bad_env("raises_on_empty"), 1, "no_hint", 0),
            PlayJob(bad_env("infinite_loop_step"), 1, "no_hint", 0)]
    eps = play(guess, sb, jobs, cfg)
    assert [e.status for e in eps] == ["env_error", "env_error", "timeout"], [e.error for e in eps]
    assert eps[0].error.startswith("load/reset") and eps[1].error.startswith("step")
    assert step_timed_out(eps[2]) and not step_timed_out(eps[1])

    env = starter_env("nim")
    failing = ScriptedPolicy(lambda c, t: "\\boxed{1 1}",
                             fail_when=lambda c: "hint from" in c.messages[0]["content"])
    eps = play(failing, sb, regret_jobs(env, run_seed=0, plays=1), cfg)
    # one bad row fails alone; the other plays on (nim level 1 is one pile: 1 1 loses it at once)
    assert [e.status for e in eps] == ["policy_error", "completed"]
    assert eps[0].error == "scripted failure"


def test_truncated_by_turns_by_context_and_timeout_by_wall_clock(sb):
    env = starter_env("mastermind")
    nonsense = ScriptedPolicy(lambda c, t: "I am not sure.")
    ep, = play(nonsense, sb, [PlayJob(env, 2, "no_hint", 0)], PlayConfig(max_turns=2))
    assert ep.status == "truncated" and len(ep.turns) == 2 and ep.truncated

    long_talk = ScriptedPolicy(lambda c, t: "words " * 200)
    cfg = PlayConfig(max_turns=8, max_tokens=300, context_tokens=700)
    ep, = play(long_talk, sb, [PlayJob(env, 2, "no_hint", 0)], cfg)
    assert ep.status == "truncated" and "context budget" in ep.error and len(ep.turns) < 8

    clock = FakeClock()
    slow = ScriptedPolicy(lambda c, t: "\\boxed{1 2 3 4}", delay=0.3, clock=clock)
    ep, = play(slow, sb, [PlayJob(env, 2, "no_hint", 0)], PlayConfig(max_turns=8, episode_seconds=0.5),
               clock=clock)
    assert ep.status == "timeout" and "budget" in ep.error and not step_timed_out(ep)
    assert len(ep.turns) == 2  # 0.3 + 0.3 of policy time passed the 0.5 s budget


def test_the_episode_budget_charges_a_share_of_batched_policy_time_not_the_wall_clock(sb):
    """Ten episodes in one batch: each waits for the whole batch's calls (its wall clock passes
    the budget by the third turn) but is charged a tenth of each call, so none times out; alone,
    the same episode is charged every call and does."""
    env = starter_env("mastermind")
    clock = FakeClock()  # the policy's time on a clock of the test's own: no load can move it
    slow = ScriptedPolicy(lambda c, t: "\\boxed{1 2 3 4}", delay=0.25, clock=clock)
    cfg = PlayConfig(max_turns=4, episode_seconds=0.6)
    eps = play(slow, sb, [PlayJob(env, 2 + k, "no_hint", k) for k in range(10)], cfg, clock=clock)
    assert all(e.status != "timeout" for e in eps), [e.error for e in eps]
    assert clock.now > cfg.episode_seconds  # the wall clock would have timed them out
    ep, = play(slow, sb, [PlayJob(env, 2, "no_hint", 0)], cfg, clock=clock)
    assert ep.status == "timeout" and "share of the policy" in ep.error


def test_a_row_is_charged_for_its_own_tokens_not_for_a_longer_reply_beside_it(sb):
    """Two episodes share each 1 s call: one writes 100 tokens a turn, the other 1. The long
    one pays about 0.98 s a call and runs out of its 1.5 s budget at its second turn; the short
    one pays about 0.02 s and plays its four turns. Split evenly (0.5 s each), both ran out at
    the fourth."""
    env = starter_env("mastermind")
    clock = FakeClock()
    policy = ScriptedPolicy(lambda c, t: "x" * 400 if "long" in c.messages[0]["content"] else "\\boxed{1 2 3 4}",
                            delay=1.0, clock=clock)
    jobs = [PlayJob(env, 2, "hint", 0, hint="long"), PlayJob(env, 3, "hint", 1, hint="short")]
    eps = play(policy, sb, jobs,
               PlayConfig(max_turns=4, max_tokens=200, episode_seconds=1.5), clock=clock)
    assert [(e.status, len(e.turns)) for e in eps] == [("timeout", 2), ("truncated", 4)], [e.error for e in eps]


def test_batch_window_keeps_job_order_and_replays_identically(sb):
    """Moves are drawn from each row's seeded generator, as a model samples: the same play seed
    replays the same episodes, another seed plays others."""
    env = starter_env("mastermind")
    jobs = regret_jobs(env, run_seed=9, plays=3)

    def script(c, t, rng):
        return "\\boxed{" + " ".join(str(rng.randint(1, 6)) for _ in range(4)) + "}"

    def moves(episodes):
        return [(e.rewards, e.status, [t.action for t in e.turns]) for e in episodes]

    cfg = PlayConfig(max_turns=3, batch_size=2)
    a = play(ScriptedPolicy(script, seeded=True), sb, jobs, cfg, seed=4)
    b = play(ScriptedPolicy(script, seeded=True), sb, jobs, cfg, seed=4)
    c = play(ScriptedPolicy(script, seeded=True), sb, jobs, cfg, seed=5)
    assert [(e.arm, e.play_index, e.seed) for e in a] == [(j.arm, j.play_index, j.seed) for j in jobs]
    assert moves(a) == moves(b) and moves(a) != moves(c)


def test_progress_moves_every_turn_and_counts_an_early_end_as_done(sb):
    """Batched episodes mostly end together at the last turn, so progress counts turns: it
    rises after every turn, an episode won early counts its unplayed turns as done, and the
    last call reports every turn done."""
    env = starter_env("nim")  # its top level: level 1's few piles repeat across seeds
    jobs = [PlayJob(env, 2, "no_hint", 0, level=env.levels), PlayJob(env, 3, "no_hint", 1, level=env.levels)]
    wins = solutions_for(sb, env, {2}, 8, level=env.levels)

    # seed 2 follows its solution; seed 3 gets a reply that never parses, until truncated
    script = solution_script(wins, fallback="I am not sure.")
    calls = []
    eps = play(ScriptedPolicy(script), sb, jobs, PlayConfig(max_turns=8),
               progress=lambda d, t: calls.append((d, t)))
    won = len(eps[0].turns)
    assert eps[0].status == "completed" and won < 8 and len(eps[1].turns) == 8
    assert {t for _, t in calls} == {16}
    done = [d for d, _ in calls]
    assert done == [k + 1 + (k + 1 if k + 1 < won else 8) for k in range(8)]  # one per turn
    assert done[-1] == 16


LEVELLED = '''\
import random
from gameenv import GameEnv


class DigitsEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.n = rng.randint(10 ** (self.level - 1), 10 ** self.level - 1)

    def task(self):
        return f"Level {self.level}: write the number {self.n} backwards."

    def example(self):
        return "0"

    def judge(self, move):
        if move == str(self.n)[::-1]:
            return self.WIN, "Right."
        return self.CONTINUE, f"{move} is not {self.n} backwards."

    def solution(self):
        return self.box(str(self.n)[::-1])
'''


def test_jobs_play_at_their_level_and_episodes_record_it(sb):
    env = EnvSource(LEVELLED, "DigitsEnv", levels=3)
    jobs = regret_jobs(env, run_seed=3, plays=2, level=3) + regret_jobs(env, run_seed=3, plays=1, level=1)
    assert {j.level for j in jobs} == {1, 3}
    policy = ScriptedPolicy(lambda conv, turn: "\\boxed{0}")
    eps = play(policy, sb, jobs, PlayConfig(max_turns=2, max_tokens=16), seed=1)
    assert [e.level for e in eps] == [j.level for j in jobs]
    for e in eps:
        assert f"Level {e.level}: write the number" in e.opening
    with pytest.raises(SpadeworkError, match="PlayJob.level must be an integer from 1 to 3"):
        PlayJob(env, 1, "no_hint", 0, level=4)
    with pytest.raises(SpadeworkError, match="from 1 to 1"):
        PlayJob(EnvSource("x", "X"), 1, "no_hint", 0, level=2)


def test_rows_retried_alone_keep_their_own_seeds(sb):
    """A failing conversation makes its batch be retried row by row; each retried row samples
    from its own seed, so its episode is the one it would have been without the failure (with
    the batch's seeds every retry drew from the first row's: 6 episodes, 1 distinct reply)."""
    env = starter_env("mastermind")
    jobs = regret_jobs(env, run_seed=4, plays=3)
    broken = PlayJob(env, 99, "hint", 9, hint="this one fails")

    def script(c, t, rng):
        return "\\boxed{" + " ".join(str(rng.randint(1, 6)) for _ in range(4)) + "}"

    def replies(eps):
        return [tuple(t.text for t in e.turns) for e in eps]

    cfg = PlayConfig(max_turns=3)
    clean = play(ScriptedPolicy(script, seeded=True), sb, jobs, cfg, seed=5)
    failing = ScriptedPolicy(script, seeded=True, fail_when=lambda c: "this one fails" in c.messages[0]["content"])
    eps = play(failing, sb, [*jobs, broken], cfg, seed=5)
    assert eps[-1].status == "policy_error"
    assert replies(eps[:-1]) == replies(clean)
    assert len({r[0] for r in replies(eps[:-1])}) > 1


def test_the_same_jobs_in_batches_of_two_and_of_eight_play_the_same_episodes(sb):
    """Row seeds come from each episode's own (job, turn), not from its place in a batch."""
    env = starter_env("mastermind")
    jobs = regret_jobs(env, run_seed=6, plays=4)

    def script(c, t, rng):
        return "\\boxed{" + " ".join(str(rng.randint(1, 6)) for _ in range(4)) + "}"

    small = play(ScriptedPolicy(script, seeded=True), sb, jobs, PlayConfig(max_turns=3, batch_size=2), seed=5)
    large = play(ScriptedPolicy(script, seeded=True), sb, jobs, PlayConfig(max_turns=3, batch_size=8), seed=5)
    assert [tuple(t.text for t in e.turns) for e in small] == [tuple(t.text for t in e.turns) for e in large]
    assert len({e.turns[0].text for e in small}) > 1


def test_no_more_episodes_live_than_the_engine_has_rows(sb):
    """An engine that caches each conversation in one of its rows gets at most that many
    conversations per call (more would evict each other's caches every turn); the episodes are
    the ones an unbounded batch plays."""
    env = starter_env("mastermind")
    jobs = regret_jobs(env, run_seed=6, plays=3)  # 6 episodes

    def script(c, t, rng):
        return "\\boxed{" + " ".join(str(rng.randint(1, 6)) for _ in range(4)) + "}"

    rows = ScriptedPolicy(script, seeded=True)
    rows.max_batch_size = 4
    bounded = play(rows, sb, jobs, PlayConfig(max_turns=3, batch_size=64), seed=5)
    free = play(ScriptedPolicy(script, seeded=True), sb, jobs, PlayConfig(max_turns=3, batch_size=64), seed=5)
    assert max(len(call) for call in rows.calls) == 4
    assert [tuple(t.text for t in e.turns) for e in bounded] == [tuple(t.text for t in e.turns) for e in free]


def test_a_reply_ends_at_its_first_complete_move(sb):
    """With stop_at_move (the default) the sampler ends a reply at the token that closes its
    first box: the turn keeps that much text, says why it ended ("move"), and the move played
    is the first box, not a later one the model went on to write."""
    env = starter_env("mastermind")
    talky = ScriptedPolicy(lambda c, t: "I try \\boxed{red blue} first, or maybe \\boxed{blue blue} later.")
    ep, = play(talky, sb, [PlayJob(env, 2, "no_hint", 0)], PlayConfig(max_turns=1))
    (turn,) = ep.turns
    assert (turn.text, turn.finish_reason, turn.action) == ("I try \\boxed{red blue}", "move", "\\boxed{red blue}")
    ep, = play(talky, sb, [PlayJob(env, 2, "no_hint", 0)], PlayConfig(max_turns=1, stop_at_move=False))
    assert ep.turns[0].finish_reason == "stop" and ep.turns[0].action == "\\boxed{blue blue}"


def test_the_local_backends_stop_on_the_token_that_closes_the_move():
    from spadework.policy.decode import DecodeRow

    class Chars:  # a tokenizer of one character per id
        stop_token_ids = frozenset({0})

        def decode(self, ids):
            return "".join(chr(i) for i in ids if i)

    row = DecodeRow(budget=100)
    for ch in "so \\boxed{7} and then":
        row.push(ord(ch), -0.1, Chars(), (), "games")
        if row.finished:
            break
    assert (Chars().decode(row.ids), row.reason) == ("so \\boxed{7}", "move")
    assert row.completion([1], Chars(), ()).finish_reason == "move"


def _random_moves(c, t, rng):
    return "\\boxed{" + " ".join(str(rng.randint(1, 6)) for _ in range(4)) + "}"


def _replies(eps):
    return [(e.status, e.rewards, tuple(t.text for t in e.turns)) for e in eps]


def test_a_stream_plays_the_episodes_turn_by_turn_play_plays(sb):
    """Through a continuous stream each episode's turns are drawn from its own seeds whatever
    interleaves with them: the same episodes as one chat call per turn, with every reply asked
    for exactly once, at most as many episodes live as the engine has rows, and a reply's
    share of the engine's time charged to its episode."""
    env = starter_env("mastermind")
    jobs = regret_jobs(env, run_seed=6, plays=4)  # 8 episodes
    cfg = PlayConfig(max_turns=3)
    turned = play(ScriptedPolicy(_random_moves, seeded=True), sb, jobs, cfg, seed=5)
    streaming = StreamingScriptedPolicy(_random_moves, seeded=True)
    streaming.max_batch_size = 3
    calls = []
    streamed = play(streaming, sb, jobs, cfg, seed=5, progress=lambda d, t: calls.append(d))
    assert _replies(streamed) == _replies(turned)
    assert len({e.turns[0].text for e in streamed}) > 1
    assert streaming.streamed == sum(len(e.turns) for e in streamed) and calls[-1] == 8 * 3
    assert calls == sorted(calls) and len(calls) == streaming.streamed
    assert streaming.most_waiting == 3
    off = StreamingScriptedPolicy(_random_moves, seeded=True)
    assert _replies(play(off, sb, jobs, dataclasses.replace(cfg, continuous=False), seed=5)) == _replies(turned)
    assert off.streamed == 0 and len(off.calls) == 3

    clock = FakeClock()  # each reply charges its delay: past the budget at the third turn
    slow = StreamingScriptedPolicy(_random_moves, seeded=True, delay=0.25, clock=clock)
    ep, = play(slow, sb, jobs[:1], PlayConfig(max_turns=4, episode_seconds=0.6), seed=5, clock=clock)
    assert ep.status == "timeout" and len(ep.turns) == 3 and "share of the policy" in ep.error


def test_a_stream_that_fails_leaves_its_episodes_to_turn_by_turn_play(sb):
    """An engine step that fails ends the stream, not the episodes: those still live go on with
    one chat call per turn from where they were, and play what they would have played; a
    prompt the engine refuses fails only its own episode."""
    env = starter_env("mastermind")
    jobs = regret_jobs(env, run_seed=6, plays=3)
    cfg = PlayConfig(max_turns=3)
    clean = play(ScriptedPolicy(_random_moves, seeded=True), sb, jobs, cfg, seed=5)
    failing = StreamingScriptedPolicy(_random_moves, seeded=True, fail_stream_at=7)
    assert _replies(play(failing, sb, jobs, cfg, seed=5)) == _replies(clean)
    assert failing.streamed == 7 and len(failing.calls) > 7  # the rest came turn by turn

    long = PlayJob(env, 99, "hint", 9, hint="word " * 400)  # ~500 made-up tokens of 300
    short = StreamingScriptedPolicy(_random_moves, seeded=True, context_length=300)
    eps = play(short, sb, [*jobs, long], PlayConfig(max_turns=3, max_tokens=16, context_tokens=300), seed=5)
    assert eps[-1].status == "policy_error" and "context" in eps[-1].error
    assert all(e.status != "policy_error" for e in eps[:-1])


def test_history_turns_zero_samples_each_reply_from_the_latest_observation_alone(sb):
    """With ``history_turns=0`` every reply after the first is asked from one message: the
    opening rebuilt around the latest observation, with the hint in the hinted arm; the turns
    record the prompts as sampled, and the episode plays to the same end as with the whole
    conversation (a games observation restates the state)."""
    env = starter_env("mastermind")
    (_obs, solved), = solutions_for(sb, env, [11], 8).items()
    replies = ["I am not sure.", "Still thinking.", *solved]  # two turns without a move first
    jobs = [PlayJob(env, 11, "no_hint", 0), PlayJob(env, 11, "hint", 0)]

    def script(conv, _turn):  # the turn from the moves left: a windowed prompt holds no replies
        left = re.findall(r"You have (\d+) moves? left", conv.messages[-1]["content"])[-1]
        return replies[8 - int(left)]

    whole, latest = ScriptedPolicy(script), ScriptedPolicy(script)
    full_eps = play(whole, sb, jobs, PlayConfig(max_turns=8), seed=2)
    eps = play(latest, sb, jobs, PlayConfig(max_turns=8, history_turns=0), seed=2)
    assert [e.rewards for e in eps] == [e.rewards for e in full_eps] and eps[0].rewards[-1] == 1.0
    assert len(replies) > 1 and all(len(c.messages) == 1 for call in latest.calls for c in call)
    later = [c.messages[0]["content"] for call in latest.calls[1:] for c in call]
    assert all(m.startswith("You are playing a text game") for m in later)
    assert sum("hint from the game's designer" in m for m in later) == len(later) // 2
    assert eps[0].turns[1].observation not in later[0] and eps[0].turns[0].observation in later[0]
    assert len(eps[0].turns[1].prompt_ids) < len(full_eps[0].turns[1].prompt_ids)
    assert max(len(c.messages) for call in whole.calls for c in call) == 2 * len(replies) - 1
    keep_one = ScriptedPolicy(script)
    play(keep_one, sb, jobs[:1], PlayConfig(max_turns=8, history_turns=1), seed=2)
    assert max(len(c.messages) for call in keep_one.calls for c in call) == min(3, 2 * len(replies) - 1)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_a_bad_history_turns_is_refused_with_what_to_write(bad):
    from spadework.errors import ConfigError

    with pytest.raises(ConfigError, match="history_turns must be a whole number >= 0 or unset"):
        PlayConfig(history_turns=bad)


def test_a_hinted_play_shown_no_hint_adds_nothing_to_regret(sb):
    """An environment without ``hint()`` whose written hint leaked (or was never written) is
    played by the hinted arm without one: both arms open with the same message, and the gap
    between them is chance, so it is not scored as regret. With a hint shown, it is."""
    from spadework.metrics import score_env

    code = (Path(__file__).parent / "fixtures/envs/good/arithmetic_chain.py").read_text()
    env = EnvSource(code=code, class_name="ArithmeticChainEnv")
    cfg = PlayConfig(max_turns=1, max_tokens=64)

    for hint, regret in ((None, 0.0), ("Multiply first, then add, then reduce.", 1.0)):
        jobs = regret_jobs(env, hint, run_seed=5, plays=2)
        answers = solutions_for(sb, env, {j.seed for j in jobs}, 1)
        arms = iter([j.arm for j in jobs])

        def script(conv, turn):
            arm = next(arms)  # play() asks for the first turns in job order
            obs = next(o for o in answers if o in conv.messages[0]["content"])
            return answers[obs][0] if arm == "hint" else "\\boxed{-1}"

        eps = play(ScriptedPolicy(script), sb, jobs, cfg, seed=1)
        assert [e.arm for e in eps] == [j.arm for j in jobs]
        assert [e.rewards[-1] for e in eps] == [1.0 if e.arm == "hint" else 0.0 for e in eps]
        same = {e.play_index for e in eps if e.arm == "hint"
                and e.opening == next(x.opening for x in eps
                                      if x.arm == "no_hint" and x.play_index == e.play_index)}
        assert same == ({0, 1} if hint is None else set())
        o = score_env(env.env_id, eps)
        assert (o.plays, o.win_rate, o.regret) == (2, 0.0, regret)
