"""The complete example module a fresh games design is shown when memory has none to show.

Why: a design prompt states the contract as signatures and rules, and small models (0.5B-1.5B)
copy that skeleton and fill it with placeholders, dict observations and episodes that never
end (``benchmarks/designer_validity.py``: at iteration 0 of a run the archive holds no played
environment, so the memory shows nothing). One short module that passes the checker shows every
rule at work. It subclasses the games base class (``from gameenv import GameEnv``), which does
the turns, the parsing of the box, truncation and the readable feedback, so the designer writes
only the game: three levels drawn in ``setup()``, a task that shows every number its answer
depends on (the checker's ``visible`` stage) and the answer computed from the state as
``self.answer``, from which the base class makes the example move, the judge's "too high" or
"too low" and ``solution()`` (four of the six short games too; two write their own). It is short on
purpose: the model's module must fit in ``DesignConfig.max_tokens``, and an example sets the
length it imitates. It needs no ``re``: the 1.5B model, rewriting an earlier example, kept
``re.search`` and dropped ``import re`` (4 of the 7 design attempts of a cpu-qwen run's first
iteration, repairs included, raised ``NameError: name 're' is not defined``).

The example is also in the designer's novelty index (:func:`prompt_examples`, used by
:class:`spadework.designer.run.DesignRun`), so a copy of it is rejected as a near-duplicate
rather than accepted as a design. Tests check the example
against the checker under several turn limits (tests/test_design_prompts.py).
"""

from __future__ import annotations

import ast
import functools
import random
from collections.abc import Iterable
from pathlib import Path

from spadework.designer.guides import TOOL_EXAMPLE
from spadework.env.novelty import NoveltyIndex
from spadework.settings.check import CheckConfig

GAMES_EXAMPLE = '''\
import random
from gameenv import GameEnv


class CompoundInterestEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.deposit = rng.randint(1, 9) * 100
        self.rate = rng.choice([10, 20, 50])
        self.years = self.level
        self.answer = self.deposit
        for _ in range(self.years):
            self.answer += self.answer * self.rate // 100

    def task(self):
        return (f"A deposit of {self.deposit} coins earns {self.rate}% interest a year, "
                f"added at the end of each year and rounded down. What is the balance "
                f"after {self.years} year(s)? Answer with a whole number.")

    def hint(self):
        return f"Each year the balance grows by {self.rate}% of itself."
'''


#: The folder of the short example games (one per games skill, 1.3-1.9 KB, each passing the
#: checker), shown beside :data:`GAMES_EXAMPLE` when ``DesignConfig.examples`` > 1 and
#: archived as mutation parents by ``benchmarks/designer_validity.py --parents``.
EXAMPLE_GAMES = Path(__file__).resolve().parent / "example_games"

#: Module-level names of an example game file that say how a benchmark loads it, not part of
#: the module a designer is shown.
_METADATA = frozenset({"ENV_CLASS", "SETTING", "SKILL"})


def shown_module(source: str) -> str:
    """``source`` as a design prompt shows it: without its docstring and the loader's metadata
    (``ENV_CLASS``, ``SETTING``, ``SKILL``), its imports, then the rest two blank lines apart.

    >>> print(shown_module("'Doc.'\\n\\nimport random\\n\\nSKILL = 'x'\\n\\n\\nclass A:\\n    pass\\n"))
    import random
    <BLANKLINE>
    <BLANKLINE>
    class A:
        pass
    <BLANKLINE>
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    imports, rest = [], []
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and {getattr(t, "id", None) for t in node.targets} <= _METADATA:
            continue
        code = "\n".join(lines[node.lineno - 1:node.end_lineno])
        (imports if isinstance(node, (ast.Import, ast.ImportFrom)) else rest).append(code)
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(rest) + "\n"


@functools.cache
def games_examples() -> tuple[str, ...]:
    """Every games example module a prompt may show: :data:`GAMES_EXAMPLE` first, then the short
    games of :data:`EXAMPLE_GAMES` by file name, as the prompt shows them.

    >>> ex = games_examples()
    >>> ex[0] == GAMES_EXAMPLE, len(ex), all("class " in e and "SKILL =" not in e for e in ex)
    (True, 7, True)
    """
    files = sorted(EXAMPLE_GAMES.glob("*.py"))
    return (GAMES_EXAMPLE, *(shown_module(f.read_text()) for f in files))


def choose_examples(k: int, rng: random.Random) -> tuple[str, ...]:
    """The ``k`` example modules one fresh games design is shown: :data:`GAMES_EXAMPLE` alone
    for ``k`` = 1 (the prompt of every run before the pool), otherwise ``k`` distinct modules of
    :func:`games_examples` drawn with ``rng``, in the pool's order: two slots that drew the same
    first modules then open their prompts alike, and the engine computes that opening once.

    >>> choose_examples(1, random.Random(0)) == (GAMES_EXAMPLE,), choose_examples(0, random.Random(0))
    (True, ())
    >>> len(set(choose_examples(3, random.Random(0))))
    3
    """
    if k <= 1:
        return (GAMES_EXAMPLE,) * k
    pool = games_examples()
    return tuple(pool[i] for i in sorted(rng.sample(range(len(pool)), min(k, len(pool)))))


def prompt_examples(setting: str, k: int = 1) -> tuple[str, ...]:
    """The code of the example modules a prompt of ``setting`` may show when it shows ``k``
    (``DesignConfig.examples``), for the novelty index: a design that copies any of them is no
    design. Tool use: the ToolEnv guide's ``PantryEnv``, which every tool-use prompt shows.

    >>> [len(prompt_examples(s)) for s in ("games", "tool-use")], len(prompt_examples("games", 3))
    ([1, 1], 7)
    >>> "class PantryEnv(ToolEnv)" in prompt_examples("tool-use")[0]
    True
    """
    if setting == "tool-use":
        return (TOOL_EXAMPLE,)
    if k < 1:
        return ()
    return (GAMES_EXAMPLE,) if k == 1 else games_examples()


def design_novelty_index(codes: Iterable[str], setting: str, examples: int,
                         check: CheckConfig) -> NoveltyIndex:
    """The index a design stage judges novelty against: ``codes`` (the archive's accepted
    environments) at the checker's threshold, and the example modules its prompts may show
    (:func:`prompt_examples` of ``examples``) at ``check.example_novelty_threshold``.

    >>> len(design_novelty_index([], "games", 3, CheckConfig()))
    7
    """
    index = NoveltyIndex(codes, k=check.shingle_size)
    for example in prompt_examples(setting, examples):
        index.add(example, threshold=check.example_novelty_threshold)
    return index
