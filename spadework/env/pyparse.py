"""Parse and compile code that a model wrote, the same way whatever the warning filters say.

Python warns while it parses: ``'\\d'`` in a string is an invalid escape sequence
(``DeprecationWarning`` up to 3.11, ``SyntaxWarning`` from 3.12), ``x is 1`` compares with
``is``, ``assert (a, b)`` is always true. For a designer's module or an agent's call those
warnings are not the user's concern, and they are worse than noise in two ways:

* from 3.12 they reach the terminal (``<unknown>:12: SyntaxWarning: ...``), once per
  generated module;
* under ``-W error`` or ``PYTHONWARNINGS=error`` (common in CI), each becomes a
  ``SyntaxError``, so the same reply would load on one machine and be rejected on another.

Every parse of generated code goes through :func:`parse` and every compile through
:func:`compile_code`, which run with syntax warnings ignored. ``warnings.catch_warnings`` swaps
the process's filter list and is not thread-safe, so the swap is done under one lock: two of our
own threads cannot interleave and leave the filter installed for good. (A warning another thread
raises while a parse runs may be missed; nothing else changes.)
"""

from __future__ import annotations

import ast
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType

_LOCK = threading.Lock()
_QUIET = (SyntaxWarning, DeprecationWarning)


@contextmanager
def _quiet() -> Iterator[None]:
    """The parser's and compiler's warnings ignored, one thread at a time."""
    with _LOCK, warnings.catch_warnings():
        for category in _QUIET:
            warnings.simplefilter("ignore", category)
        yield


def parse(code: str, mode: str = "exec") -> ast.AST:
    """``ast.parse`` without the parser's warnings: errors are raised as ``ast.parse`` raises them.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")
    ...     type(parse("pattern = '\\\\d+'")).__name__
    'Module'
    """
    with _quiet():
        return ast.parse(code, mode=mode)


def compile_code(code: str, filename: str) -> CodeType:
    """``compile(code, filename, "exec", dont_inherit=True)`` without the compiler's warnings."""
    with _quiet():
        return compile(code, filename, "exec", dont_inherit=True)
