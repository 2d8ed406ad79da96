"""``[design]``: how the designer samples, what it is shown and how many tries it gets."""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError

#: The settings a designer writes for: games, or tool-use environments (their rules: designer/guides.py).
SETTINGS = ("games", "tool-use")


DIFFICULTIES = ("easy", "medium", "hard")


#: Characters per prompt token assumed when fitting memory into the context (conservative for
#: code, where tokens are short), so a prompt never overflows the model's window.
CHARS_PER_TOKEN = 3


#: How a repair turn asks (``DesignConfig.repair``).
REPAIRS = ("chat", "fresh")


@dataclass(frozen=True)
class DesignConfig:
    """How the designer samples and how many tries it gets.

    ``attempts_per_slot``: fresh tries per slot (each with a new document); ``repair_turns``:
    inference-only follow-ups per failed try, fed the checker's stage and reason; ``corpus_words``:
    the document's word budget; ``memory_positives`` / ``memory_negatives``: archive examples per
    prompt; ``mutation_ratio``: the share of slots that edit an archived parent (shown how it
    played); ``feedback``: show fresh designs how the recent designed environments played
    (:func:`spadework.designer.prompts.feedback_section`), and what the checker said of the
    latest ``rejections`` design attempts (:func:`~spadework.designer.prompts.rejection_section`:
    how many were rejected, the most frequent stages with a reason and the fix; 0: not shown),
    so a frozen designer adapts in context. Without the rejections, a run whose designs are all
    rejected shows the designer nothing: its prompts are the same with ``feedback`` on or off
    (runs s and no-feedback-8b, docs/results.md);
    ``example_share``: an archived environment is shown as a memory example, or mutated, only
    when its code fits in this share of the reply budget (``max_tokens`` x ``CHARS_PER_TOKEN``
    characters): the designer imitates what it is shown, and a module longer than it may write
    is cut before its end (in a cpu-qwen run, 9 of 15 attempts were cut at 1,024 tokens after
    starters of 6.5k-13.5k characters were shown);
    ``repair``: how a repair turn asks: "chat" continues the conversation with the rejected
    reply and the verdict (:func:`~spadework.designer.prompts.repair_messages`), "fresh" asks
    the attempt's prompt again with the verdict but without the reply, and without the example
    module after a novelty rejection (:func:`~spadework.designer.prompts.fresh_repair_messages`);
    ``rejected_first_attempts``: "reward" (rejected samples get the rejection reward) or "none"
    (no gradient); ``continuous``: where the policy has a stream (llama.cpp), a slot's next
    try (its repair turn, then its next fresh attempt) is asked as soon as its reply is judged,
    beside the other slots' replies still decoding, instead of after the whole round (and a
    repair's prompt, the attempt's conversation plus the verdict, is served from the slot's
    cached cells); ``plan``: a fresh games design is asked first, in a short turn of its own
    (at most ``PLAN_TOKENS``), for its game in three lines (the values drawn, the question, the
    answer as an expression; :func:`~spadework.designer.plan.plan_messages`), then for the
    module of that game in the same conversation (mutations are not planned; the plan turn is
    not an attempt and is not trained); ``examples``: how many complete example modules a fresh
    games design is shown when memory has no archived design to show: 1 is
    :data:`~spadework.designer.examples.GAMES_EXAMPLE`, more are drawn per slot from it and the
    short example games (:func:`~spadework.designer.examples.choose_examples`), all of which
    join the novelty index; 0 shows the guide and the contract only; ``stop_at_repeat``: a reply
    that has written one block of lines (1 to 16 lines, together at least 20 characters) this
    many times in a row, or one line of 400 characters and more whose end repeats a short
    pattern, is stopped there and rejected at the reply stage (``SamplingParams.
    stop_at_repeat``, :func:`spadework.policy.base.ends_in_loop`; 0: off). Of 80 archived
    replies of the 1.5B, every one cut at 1,024 tokens (or stopped by a first rule) was a loop:
    12 wrote a block of 1, 2, 4 or 8 lines 5 to 44 times in a row, 2 one long line of numbered
    names (what the long-line rule is for; those two replies were not kept to re-check); a later
    one cycled through six short list items (``"light brown",``: stopped at 181 tokens since
    blocks count their lines' characters together, not one line's). Of the replies that ended by
    themselves, one wrote a block 4 times in a row (a list of the same two tuples, then the rest
    of a game rejected as trivial: its task was its answer), none of the others more than twice;
    no starter or example module loops, and of 1,990 modules of the installed packages 6 would
    be stopped (data tables and one long index line; 5 under the rule without the short blocks
    and long lines). A loop run to ``max_tokens`` holds the whole design stage back. How many
    instances solution() must win is the checker's (``CheckConfig.solvable_seeds``), not a
    second setting here.
    """

    setting: str = "games"
    difficulty: str = "medium"
    attempts_per_slot: int = 3
    repair_turns: int = 0
    max_tokens: int = 1024
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20
    corpus_words: int = 400
    memory_positives: int = 2
    memory_negatives: int = 1
    mutation_ratio: float = 0.0
    rejected_first_attempts: str = "reward"
    feedback: bool = True
    rejections: int = 8
    example_share: float = 0.75
    repair: str = "chat"
    continuous: bool = True
    plan: bool = False
    examples: int = 1
    stop_at_repeat: int = 4

    @property
    def example_chars(self) -> int:
        """The longest archived code shown or mutated (see ``example_share``).

        >>> DesignConfig(max_tokens=1024).example_chars
        2304
        """
        return int(self.example_share * self.max_tokens * CHARS_PER_TOKEN)

    def __post_init__(self) -> None:
        if self.setting not in SETTINGS:
            raise ConfigError(f"DesignConfig.setting must be 'games' or 'tool-use', got {self.setting!r}")
        if self.difficulty not in DIFFICULTIES:
            raise ConfigError(f"DesignConfig.difficulty must be one of {DIFFICULTIES}, got {self.difficulty!r}")
        for name, low in (("attempts_per_slot", 1), ("repair_turns", 0), ("max_tokens", 1),
                          ("corpus_words", 1), ("memory_positives", 0), ("memory_negatives", 0),
                          ("top_k", 0), ("examples", 0), ("stop_at_repeat", 0),
                          ("rejections", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"DesignConfig.{name} must be an integer >= {low}, got {value!r}")
        if isinstance(self.example_share, bool) or not isinstance(self.example_share, (int, float)) \
                or not self.example_share > 0:
            raise ConfigError("DesignConfig.example_share must be a number > 0 (the share of the reply "
                              f"budget an archived example may fill), got {self.example_share!r}")
        if self.stop_at_repeat == 1:
            raise ConfigError("DesignConfig.stop_at_repeat must be 0 (off) or >= 2 (a block "
                              "written that many times in a row ends the reply), got 1")
        if self.repair not in REPAIRS:
            raise ConfigError(f"DesignConfig.repair must be one of {REPAIRS}, got {self.repair!r}")
        if not 0.0 <= self.mutation_ratio <= 1.0:
            raise ConfigError(f"DesignConfig.mutation_ratio must lie in [0, 1], got {self.mutation_ratio!r}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ConfigError("DesignConfig needs temperature >= 0 and top_p in (0, 1], got "
                              f"{self.temperature!r} and {self.top_p!r}")
        if self.rejected_first_attempts not in ("reward", "none"):
            raise ConfigError("DesignConfig.rejected_first_attempts must be 'reward' or 'none', "
                              f"got {self.rejected_first_attempts!r}")
