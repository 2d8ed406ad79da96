"""The text spaces of a sandboxed environment: a declared charset and a maximum length.

Gymnasium's ``Text`` space defaults to alphanumerics, so an observation holding a space or a
newline would lie outside it. spadework declares what its environments print instead:
:data:`DEFAULT_CHARSET` is printable ASCII, tab and newline, plus the Unicode blocks text games
draw with (Latin-1 letters, Greek, punctuation, arrows, mathematical operators, box drawing,
blocks, geometric shapes, symbols and dingbats), 1,469 characters in all. The starter library
prints only ASCII and newlines. A value outside its space raises :class:`SpaceError` naming the
first offending character and where it is; nothing is clipped, truncated or re-encoded.
"""

from __future__ import annotations

import string

from gymnasium.spaces import Text

from spadework.errors import SpaceError

#: Unicode blocks (first, last code point, inclusive) in the default charset besides ASCII.
_BLOCKS = (
    (0x00A1, 0x00FF),  # Latin-1 supplement (no no-break space)
    (0x0370, 0x03FF),  # Greek and Coptic
    (0x2010, 0x2027),  # dashes, quotes, bullets, ellipsis
    (0x2030, 0x205E),  # per mille, primes, more punctuation
    (0x2190, 0x21FF),  # arrows
    (0x2200, 0x22FF),  # mathematical operators
    (0x2500, 0x259F),  # box drawing and block elements
    (0x25A0, 0x25FF),  # geometric shapes
    (0x2600, 0x27BF),  # miscellaneous symbols and dingbats
)


def _default_charset() -> frozenset[str]:
    ascii_ = set(string.digits + string.ascii_letters + string.punctuation + " \t\n")
    extra = {chr(c) for lo, hi in _BLOCKS for c in range(lo, hi + 1) if chr(c).isprintable()}
    return frozenset(ascii_ | extra)


#: What a spadework environment may print and an agent may send, unless ``charset=`` says else.
DEFAULT_CHARSET: frozenset[str] = _default_charset()


def text_space(max_length: int, charset: str | frozenset[str] | set[str] | None = None) -> Text:
    """A ``Text`` space of 0 to ``max_length`` characters drawn from ``charset``.

    >>> space = text_space(16)
    >>> space.contains("Go \\\\boxed{up}\\n"), space.contains("\\x07")
    (True, False)
    >>> len(DEFAULT_CHARSET)
    1469
    """
    return Text(max_length, min_length=0, charset=DEFAULT_CHARSET if charset is None else charset)


def require_in(space: Text, value: object, what: str, fix: str) -> str:
    """``value`` if it lies in ``space``, else SpaceError saying why and how to fix it.

    >>> require_in(text_space(4), "hello", "the observation", "pass max_obs_chars=")
    Traceback (most recent call last):
    ...
    spadework.errors.SpaceError: the observation has 5 characters, more than the space's max_length 4; pass max_obs_chars=
    >>> require_in(text_space(9), "a\\x07b", "the action", "declare it in charset=")
    Traceback (most recent call last):
    ...
    spadework.errors.SpaceError: the action holds '\\x07' (U+0007) at position 1, outside the space's charset; declare it in charset=
    """
    if not isinstance(value, str):
        raise SpaceError(f"{what} is {type(value).__name__}, not str")
    if len(value) > space.max_length:
        raise SpaceError(f"{what} has {len(value):,} characters, more than the space's "
                         f"max_length {space.max_length:,}; {fix}")
    allowed = space.character_set
    for i, ch in enumerate(value):
        if ch not in allowed:
            raise SpaceError(f"{what} holds {ch!r} (U+{ord(ch):04X}) at position {i}, outside the "
                             f"space's charset; {fix}")
    return value
