"""Near-duplicate detection over normalised code."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from spadework.env.checker import CheckConfig
from spadework.env.novelty import NoveltyIndex, jaccard, normalise_code, shingles
from spadework.library import starter_envs
from spadework.types import env_id_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "envs"
GOOD = (FIXTURES / "good" / "arithmetic_chain.py").read_text()


def similarity(a: str, b: str, k: int = 5) -> float:
    return jaccard(shingles(normalise_code(a), k), shingles(normalise_code(b), k))


def test_renaming_reformatting_and_comments_do_not_make_code_new():
    renamed = (
        GOOD.replace("ArithmeticChainEnv", "ModularPuzzleEnv")
        .replace("self.target", "self.secret")
        .replace("guess", "g")
        .replace("def _task(self, lead):", "def _task(self, lead: str) -> str:  # render")
        .replace("        hint = ", "\n\n        hint  =  ")
    )
    renamed = '"""Another docstring entirely."""\n# a comment\n' + renamed.split('"""', 2)[2]
    assert renamed != GOOD
    assert normalise_code(renamed) == normalise_code(GOOD)
    assert similarity(renamed, GOOD) == 1.0


def test_literals_are_kept():
    a = "WORDS = ['apple', 'pear']\nN = 3\n"
    assert normalise_code(a) != normalise_code(a.replace("pear", "plum"))
    assert normalise_code(a) != normalise_code(a.replace("3", "4"))


#: Bad fixtures written from scratch, not as variants of the good arithmetic chain: the syntax
#: error; the cipher slip, a one-character variant of the former cipher_machine starter (since
#: rewritten on GameEnv with levels: no base is left to compare it to); and the fixtures of the
#: levels, visible and readable stages; and a designed game the example strategy rejects.
NOT_VARIANTS = {"syntax_error", "cipher_alphabet_slip", "hidden_answer", "level_unsolvable",
                "levels_inverted", "levels_not_an_int", "placeholder_format", "terse_feedback",
                "example_is_answer"}


def test_one_line_variants_are_near_duplicates():
    """Every other bad fixture is a small variant of the good arithmetic chain."""
    variants = [p for p in sorted((FIXTURES / "bad").glob("*.py")) if p.stem not in NOT_VARIANTS]
    assert len(variants) >= 15
    for path in variants:
        assert similarity(path.read_text(), GOOD) >= 0.9, path.stem


def test_starter_environments_are_not_near_duplicates_of_each_other():
    sets = [shingles(normalise_code(e.code), 5) for e in starter_envs()]
    worst = max(jaccard(a, b) for a, b in itertools.combinations(sets, 2))
    assert worst < CheckConfig().novelty_threshold, worst


def test_index_names_the_most_similar_environment():
    envs = starter_envs()
    index = NoveltyIndex([e.code for e in envs])
    assert len(index) == len(envs)
    for env in envs:
        match = index.most_similar(env.code)
        assert match.env_id == env.env_id and match.similarity == 1.0
    match = index.most_similar(GOOD)
    assert match.similarity < 0.5 and match.env_id in {e.env_id for e in envs}
    assert NoveltyIndex().most_similar(GOOD) is None


def test_index_is_incremental_and_validated():
    index = NoveltyIndex(k=3)
    index.add(GOOD)
    assert index.most_similar(GOOD).env_id == env_id_of(GOOD)
    with pytest.raises(ValueError, match="k must be"):
        NoveltyIndex(k=0)


def test_code_that_does_not_parse_is_compared_as_text():
    broken = (FIXTURES / "bad" / "syntax_error.py").read_text()
    assert normalise_code(broken)
    assert similarity(broken, broken) == 1.0
    assert 0.0 < similarity(broken, GOOD) < 1.0


def test_shingles_and_jaccard_edges():
    assert shingles([], 5) == frozenset()
    assert shingles(["a"], 5) == frozenset({("a",)})
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert jaccard(frozenset({1}), frozenset({1})) == 1.0


def test_novelty_stage_on_its_own():
    from spadework.env.checker import novelty_stage
    from spadework.errors import ContractError

    index = NoveltyIndex([e.code for e in starter_envs()])
    assert "most similar" in novelty_stage(GOOD, index, CheckConfig())
    copy = GOOD.replace("ArithmeticChainEnv", "OtherEnv")
    index.add(GOOD)
    with pytest.raises(ContractError, match=rf"near-duplicate of environment {env_id_of(GOOD)[:12]}"):
        novelty_stage(copy, index, CheckConfig())
    with pytest.raises(ContractError, match="similarity 1.00 >= 1.00"):
        novelty_stage(copy, index, CheckConfig(novelty_threshold=1.0))  # identical up to names
    slightly = copy.replace("Compute (", "Work out (")
    assert "most similar" in novelty_stage(slightly, index, CheckConfig(novelty_threshold=1.0))


def test_the_example_with_a_constant_changed_is_a_copy_and_a_new_game_on_its_skeleton_is_not():
    """What the 1.5B designer wrote at iteration 0 of every cpu-qwen run (0.88 to the prompt's
    example, accepted when examples had the archive's 0.9), and a design of its own on the same
    skeleton. The example is held to ``example_novelty_threshold``; the same code archived as
    an environment keeps ``novelty_threshold``, so an edit of it (a mutation) passes."""
    from spadework.designer.examples import GAMES_EXAMPLE
    from spadework.env.checker import novelty_stage
    from spadework.errors import ContractError

    index = NoveltyIndex()
    index.add(GAMES_EXAMPLE, threshold=CheckConfig().example_novelty_threshold)
    renamed = (GAMES_EXAMPLE.replace("CompoundInterestEnv", "MayaGlyphsEnv")
               .replace("rng.randint(1, 9)", "rng.randint(1, 99)").replace("LEVELS = 3", "LEVELS = 2"))
    with pytest.raises(ContractError, match="near-duplicate"):
        novelty_stage(renamed, index, CheckConfig())
    own = (GAMES_EXAMPLE.replace("CompoundInterestEnv", "GeometricSeriesEnv")
           .replace("self.deposit = rng.randint(1, 9) * 100", "self.first = rng.randint(1, 9)")
           .replace("self.rate = rng.choice([10, 20, 50])", "self.ratio = rng.choice([2, 3, 5])")
           .replace("""        self.answer = self.deposit
        for _ in range(self.years):
            self.answer += self.answer * self.rate // 100""",
                    "        self.answer = self.first * (self.ratio ** self.years - 1) // (self.ratio - 1)")
           .replace('''f"A deposit of {self.deposit} coins earns {self.rate}% interest a year, "
                f"added at the end of each year and rounded down. What is the balance "
                f"after {self.years} year(s)? Answer with a whole number."''',
                    '''f"A geometric series starts with {self.first} and has a common ratio of "
                f"{self.ratio}. What is the sum of its first {self.years} terms? Answer with a whole number."''')
           .replace("That is the balance.", "That is the sum.")
           .replace("Each year the balance grows by {self.rate}% of itself.",
                    "The sum is first * (ratio ** n - 1) / (ratio - 1)."))
    assert "most similar" in novelty_stage(own, index, CheckConfig())
    archived = NoveltyIndex([GAMES_EXAMPLE])
    assert "most similar" in novelty_stage(renamed, archived, CheckConfig())
