"""The program a sandbox child runs, and the wire format both sides share.

This module imports nothing from spadework (only the standard library and msgpack): the zygote
loads it by file path, so the child never has the spadework package in ``sys.modules``. The host
imports it as ``spadework.sandbox.child`` for the framing and value codec, which must be the same
code on both ends of the pipe.

Wire format: each message is a 4-byte big-endian length followed by that many bytes of msgpack.
Lengths over the agreed cap are a protocol violation, never allocated. Nothing is pickled.
Tuples travel as msgpack extension type 1 so that the host can tell a tuple from a list (the
checker judges ``reset``/``step`` return types); numpy scalars become the Python scalar they hold,
numpy arrays become lists, subclasses of ``str``/``int``/``float``/``list``/``dict`` become the
base type. Anything else cannot be sent and is reported, naming the method and the type.

Requests (host -> child) are ``[op, arg]``; replies are ``[status, payload]`` with status
:data:`OK`, :data:`RAISED` (``[exc_type, message, traceback]``), :data:`UNSENDABLE`
(``[type_name, detail]``) or :data:`LOAD_FAILED` (``[exc_type, traceback]``).
"""

from __future__ import annotations

import marshal
import os
import struct
import sys
import traceback
import types

import msgpack

HEADER = struct.Struct(">I")
TUPLE_EXT = 1

OK = 0
RAISED = 1
UNSENDABLE = 2
LOAD_FAILED = 3

#: Fixed descriptor numbers inside the child (set up by the zygote before hardening).
REQ_FD = 3
RESP_FD = 4

#: The module name generated code runs under inside the child.
ENV_MODULE = "env_module"

#: How much traceback text travels back (the tail is what explains a failure).
TRACEBACK_CHARS = 4000


class ProtocolError(Exception):
    """The peer broke the wire format (bad length, truncated frame, undecodable payload)."""


class Unsendable(Exception):
    """A value has a type the codec does not carry."""

    def __init__(self, type_name: str, detail: str) -> None:
        super().__init__(f"{type_name}: {detail}")
        self.type_name = type_name
        self.detail = detail


def _type_name(o: object) -> str:
    t = type(o)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _default(o: object) -> object:
    if isinstance(o, tuple):
        return msgpack.ExtType(TUPLE_EXT, _pack(list(o)))
    if type(o).__module__ == "numpy":
        item = getattr(o, "item", None)
        if type(o).__name__ == "ndarray":
            return o.tolist()  # type: ignore[attr-defined]
        if callable(item):
            return item()
    for base in (str, int, float, bytes, list, dict):
        if isinstance(o, base):
            return base(o) if base in (list, dict, bytes) else _exact(base, o)
    raise Unsendable(_type_name(o), "no msgpack form")


def _exact(base: type, o: object) -> object:
    """The plain ``base`` value of a subclass instance, without calling overridable dunders."""
    if base is str:
        return str.__add__("", o)  # type: ignore[arg-type]
    if base is float:
        return float.__float__(o)  # type: ignore[arg-type]
    return int.__index__(o)  # type: ignore[arg-type]


def _pack(obj: object) -> bytes:
    return msgpack.packb(obj, default=_default, strict_types=True, use_bin_type=True)


def encode(obj: object) -> bytes:
    """msgpack bytes for ``obj``, tuples kept as tuples; raises :class:`Unsendable`.

    >>> decode(encode(("a", 1.5, [True, None], {"k": (1, 2)})))
    ('a', 1.5, [True, None], {'k': (1, 2)})
    >>> encode({1, 2})
    Traceback (most recent call last):
    ...
    spadework.sandbox.child.Unsendable: set: no msgpack form
    """
    try:
        return _pack(obj)
    except Unsendable:
        raise
    except (TypeError, ValueError, OverflowError, RecursionError, UnicodeError) as e:
        raise Unsendable(_type_name(obj), f"{type(e).__name__}: {e}") from e


def _ext_hook(code: int, data: bytes) -> object:
    if code == TUPLE_EXT:
        return tuple(decode(data))
    raise ProtocolError(f"unknown msgpack extension type {code}")


def decode(data: bytes) -> object:
    """The value encoded by :func:`encode`; raises :class:`ProtocolError` on garbage.

    >>> decode(b"\\xc1")
    Traceback (most recent call last):
    ...
    spadework.sandbox.child.ProtocolError: undecodable message: ...
    """
    try:
        return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)
    except ProtocolError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as e:
        raise ProtocolError(f"undecodable message: {type(e).__name__}: {e}") from e


def frame(payload: bytes, cap: int) -> bytes:
    """Length-prefix ``payload``; raises :class:`ProtocolError` when it exceeds ``cap`` bytes.

    >>> frame(b"abc", 10)
    b'\\x00\\x00\\x00\\x03abc'
    """
    if len(payload) > cap:
        raise ProtocolError(f"message of {len(payload)} bytes exceeds the cap of {cap} bytes")
    return HEADER.pack(len(payload)) + payload


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exact(fd: int, n: int) -> bytes:
    """Blocking read of exactly ``n`` bytes; EOF midway is a :class:`ProtocolError`."""
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise ProtocolError("pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, cap: int) -> object:
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size))
    if size > cap:
        raise ProtocolError(f"incoming message of {size} bytes exceeds the cap of {cap} bytes")
    return decode(read_exact(fd, size))


# ---------------------------------------------------------------- the child's side of the pipe


def _tb_tail() -> str:
    return traceback.format_exc()[-TRACEBACK_CHARS:]


class _Child:
    """Holds the one environment instance of this child and answers requests."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.env: object = None

    def send(self, status: int, payload: object) -> None:
        write_all(RESP_FD, frame(encode([status, payload]), self.cap))

    def reply(self, op: str, value: object) -> None:
        try:
            data = frame(encode([OK, value]), self.cap)
        except Unsendable as e:
            self.send(UNSENDABLE, [e.type_name, f"{op}() returned a value containing a {e.type_name}, which cannot be sent ({e.detail})"])
            return
        except ProtocolError as e:
            self.send(UNSENDABLE, ["bytes", f"{op}() returned too much: {e}"])
            return
        write_all(RESP_FD, data)

    def load(self, spec: dict) -> None:
        # A real module in sys.modules: dataclasses and typing look classes' modules up there.
        module = types.ModuleType(ENV_MODULE)
        sys.modules[ENV_MODULE] = module
        try:
            # The host compiled and marshalled the code (data from the trusted side, cached there).
            exec(marshal.loads(spec["code"]), module.__dict__)  # noqa: S102 - sandboxed
            cls = module.__dict__[spec["class_name"]]
            self.env = cls(max_turns=spec["max_turns"], **spec["kwargs"])
        except BaseException as e:  # the one boundary inside the child: report, stay alive
            self.send(LOAD_FAILED, [type(e).__name__, _tb_tail()])
            return
        self.send(OK, None)

    def call(self, op: str, arg: object) -> None:
        env = self.env
        try:
            if op == "reset":
                value = env.reset(seed=arg)  # type: ignore[attr-defined]
            elif op == "step":
                value = env.step(arg)  # type: ignore[attr-defined]
            elif op == "solution":
                value = env.solution()  # type: ignore[attr-defined]
            elif op == "hint":
                value = env.hint() if callable(getattr(env, "hint", None)) else None
            elif op == "levels":
                value = getattr(env, "LEVELS", 1)
            elif op == "tools":
                value = env.tools() if callable(getattr(env, "tools", None)) else []
            else:
                raise ProtocolError(f"unknown op {op!r}")
        except ProtocolError:
            raise
        except BaseException as e:  # env code raised anything at all: report it as data
            self.send(RAISED, [type(e).__name__, str(e)[:TRACEBACK_CHARS], _tb_tail()])
            return
        self.reply(op, value)


def serve(cap: int) -> None:
    """Answer requests on :data:`REQ_FD` until the host closes the pipe or says ``close``."""
    child = _Child(cap)
    while True:
        try:
            op, arg = read_frame(REQ_FD, cap)  # type: ignore[misc]
        except ProtocolError:
            return
        if op == "close":
            return
        if op == "load":
            child.load(arg)  # type: ignore[arg-type]
        else:
            child.call(op, arg)
