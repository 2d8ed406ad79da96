"""The novelty stage: is a candidate a near-duplicate of an environment we already have?

Code is compared after normalisation, so that renaming, reformatting and re-commenting a known
environment does not make it new: comments and docstrings go, every identifier that is not a
builtin becomes ``_``, and whitespace collapses (the AST is unparsed, then tokenised). String and
number literals are kept: two games with the same skeleton but different word lists, rules text
or constants are different games. Similarity is the exact Jaccard index of the sets of
``k``-token shingles. Exact Jaccard (rather than a MinHash estimate) keeps the verdict
deterministic and costs microseconds per pair at archive sizes we reach (thousands); a MinHash
LSH index is the upgrade when archives grow to millions.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

from spadework.env import pyparse
from spadework.types import env_id_of

_KEEP = frozenset(dir(builtins)) | {"self", "cls"}


class _Normaliser(ast.NodeTransformer):
    """Drop docstrings; rename identifiers (names, arguments, attributes, defs) to ``_``."""

    def _strip_docstring(self, node: ast.AST) -> None:
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            self._strip_docstring(node)
        return super().generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(id=node.id if node.id in _KEEP else "_", ctx=node.ctx), node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = node.arg if node.arg in _KEEP else "_"
        node.annotation = None
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        node.attr = "_"
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.name = "_"
        node.returns = None
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self.generic_visit(node)
        node.name = "_"
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        self.generic_visit(node)
        node.arg = None if node.arg is None else "_"
        return node


def normalise_code(code: str) -> list[str]:
    """The token sequence of code with comments, docstrings, identifiers and layout normalised.

    Code that does not parse is tokenised as text (the static stage rejects it anyway).

    >>> a = normalise_code("def area(w, h):\\n    '''Area.'''\\n    return w * h  # product")
    >>> b = normalise_code("def mul(x,y): return x*y")
    >>> a == b, " ".join(a)
    (True, 'def _ ( _ , _ ) : return _ * _')
    """
    try:
        tree = _Normaliser().visit(pyparse.parse(code))
        return _tokens(ast.unparse(ast.fix_missing_locations(tree)), rename=False)
    except (SyntaxError, ValueError, RecursionError):
        return _tokens(code, rename=True)


def _tokens(text: str, rename: bool) -> list[str]:
    """Python tokens without layout or comments; with ``rename``, identifiers become ``_`` at
    the token level (the fallback for code the AST cannot take)."""
    out: list[str] = []
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in skip:
                continue
            name = tok.type == tokenize.NAME and not keyword.iskeyword(tok.string)
            out.append("_" if rename and name and tok.string not in _KEEP else tok.string)
    except (tokenize.TokenError, SyntaxError):
        pass  # unclosed bracket or bad indent: the tokens up to there are what we have
    return out


def shingles(tokens: list[str], k: int = 5) -> frozenset[tuple[str, ...]]:
    """The set of ``k``-token windows (the whole sequence when it is shorter than ``k``).

    >>> sorted(shingles(["a", "b", "c"], k=2))
    [('a', 'b'), ('b', 'c')]
    """
    if len(tokens) <= k:
        return frozenset({tuple(tokens)}) if tokens else frozenset()
    return frozenset(tuple(tokens[i : i + k]) for i in range(len(tokens) - k + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    """|a ∩ b| / |a ∪ b|; 0.0 for two empty sets.

    >>> jaccard(frozenset({1, 2, 3}), frozenset({2, 3, 4}))
    0.5
    """
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@dataclass(frozen=True)
class Match:
    """The most similar existing environment to a candidate."""

    env_id: str
    similarity: float
    threshold: float | None = None  # the entry's own near-duplicate threshold, if it has one


class NoveltyIndex:
    """Shingle sets of existing environments, built once and queried per candidate.

    >>> idx = NoveltyIndex(["def f(a):\\n    return a + 1\\n"], k=3)
    >>> idx.most_similar("def g(b):  # renamed\\n    return b + 1").similarity
    1.0
    >>> idx.most_similar("def g(b):\\n    return [b] * 7").similarity < 0.5
    True
    """

    def __init__(self, codes: Iterable[str] = (), k: int = 5) -> None:
        if k < 1:
            raise ValueError(f"shingle size k must be >= 1, got {k}")
        self.k = k
        self._entries: list[tuple[str, frozenset, float | None]] = []
        for code in codes:
            self.add(code)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, code: str, threshold: float | None = None) -> None:
        """Index one more environment's code; ``threshold``: its own near-duplicate threshold
        (a prompt's example module is held to a stricter one than an archived environment, which
        a mutation is meant to resemble), None for the checker's."""
        self._entries.append((env_id_of(code), shingles(normalise_code(code), self.k), threshold))

    def matches(self, code: str) -> list[Match]:
        """``code``'s similarity to every indexed environment, in index order (each with the
        entry's own threshold, None where it has none)."""
        probe = shingles(normalise_code(code), self.k)
        return [Match(env_id, jaccard(probe, sh), own) for env_id, sh, own in self._entries]

    def most_similar(self, code: str) -> Match | None:
        """The indexed environment most similar to ``code`` (ties: the first indexed), or None
        when the index is empty."""
        return most_similar(self.matches(code))


def most_similar(matches: Iterable[Match]) -> Match | None:
    """The most similar of ``matches`` (ties: the first), or None when there are none."""
    best: Match | None = None
    for match in matches:
        if best is None or match.similarity > best.similarity:
            best = match
    return best
