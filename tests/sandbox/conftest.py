"""Shared sandboxes for the sandbox tests (starting one costs a few hundred milliseconds)."""

from __future__ import annotations

import textwrap
import time

import pytest

from spadework.sandbox import Limits, Sandbox


def env_code(step_body: str, *, reset_body: str = "return 'start', {}", extra: str = "",
             init_body: str = "self.max_turns = max_turns") -> str:
    """A minimal environment whose step() runs ``step_body`` (indented for you)."""
    def block(body: str) -> str:
        return textwrap.indent(textwrap.dedent(body).strip(), " " * 8)

    return (
        "import os, sys, random\n"
        f"{textwrap.dedent(extra).strip()}\n"
        "class AttackEnv:\n"
        "    def __init__(self, max_turns=10, **kwargs):\n"
        f"{block(init_body)}\n"
        "    def reset(self, seed=None):\n"
        f"{block(reset_body)}\n"
        "    def step(self, action):\n"
        f"{block(step_body)}\n"
        "    def solution(self):\n"
        "        return 'x'\n"
    )


@pytest.fixture(scope="session")
def sb():
    with Sandbox(Limits(step_seconds=3.0, load_seconds=5.0, episode_seconds=30.0)) as box:
        yield box


@pytest.fixture(scope="session")
def quick_sb():
    """Short deadlines, for the tests that run into them."""
    limits = Limits(step_seconds=0.5, load_seconds=2.0, episode_seconds=5.0, cpu_seconds=1)
    with Sandbox(limits) as box:
        yield box


@pytest.fixture(scope="session")
def small_sb():
    """Small size caps with generous deadlines (a loaded machine must not turn a cap into a
    timeout)."""
    limits = Limits(step_seconds=20.0, load_seconds=20.0, memory_bytes=256 << 20, file_bytes=1 << 20,
                    scratch_bytes=2 << 20, max_message_bytes=1 << 20)
    with Sandbox(limits) as box:
        yield box


@pytest.fixture(scope="session")
def make_env():
    """The :func:`env_code` builder, as a fixture (test modules here are not a package)."""
    return env_code


def spares(box: Sandbox) -> list:
    """The pre-forked, hardened children waiting for a module (``Sandbox(prefork=...)``)."""
    with box._wake:
        return list(box._spares)


def settled_pool(box: Sandbox, timeout: float = 5.0) -> None:
    """Wait until the pre-fork pool is full and no used scratch dir awaits deletion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with box._wake:
            if len(box._spares) >= box.prefork and not box._trash:
                return
        time.sleep(0.01)


def settled_children(box: Sandbox, timeout: float = 2.0) -> list[str]:
    """The zygote's child pids, other than the pool's spares, once released children have been
    swept (or after ``timeout``)."""
    path = f"/proc/{box.zygote_pid}/task/{box.zygote_pid}/children"
    deadline = time.monotonic() + timeout
    while True:
        settled_pool(box, timeout)
        with open(path) as f:
            pids = set(f.read().split()) - {str(h.pid) for h in spares(box)}
        if not pids or time.monotonic() > deadline:
            return sorted(pids)
        time.sleep(0.01)


@pytest.fixture(scope="session")
def zygote_children():
    """:func:`settled_children`, as a fixture."""
    return settled_children
