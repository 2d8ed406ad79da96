"""What the agent is shown while it plays: its first message (the task, the hint in the hinted
arm, the move format), the window of the conversation a reply is sampled from, and the role tool
results come back in (``tool`` where the chat template renders it, else ``user``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spadework.env.toolenv import tool_signature
from spadework.settings.play import PlayConfig


def first_message(setting: str, observation: str, hint: str | None,
                  tools: list[dict] | None = None) -> str:
    """The agent's first user message: the task, the hint (hinted arm only), the action format,
    and, when ``tools`` are given (``PlayConfig.template_tools`` off) and the observation does
    not already list each of them, the tools (:func:`tool_lines`)."""
    hint_block = f"A hint from the game's designer: {hint.strip()}\n\n" if hint else ""
    names = [t.get("function", t).get("name", "") for t in tools or ()]
    if tools and any(f"{n}(" not in observation for n in names):
        observation = f"{observation}\n\nTools:\n" + "\n".join(tool_lines(tools))
    if setting == "tool-use":
        how = (
            "Call tools with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call> (several "
            "per reply are fine) and give the final result as <answer>...</answer>."
        )
    else:
        how = "Reply with one short sentence, then your move in a box as the game shows, like \\boxed{...}."
    return f"You are playing a text game. Make valid moves to win.\n\n{hint_block}{observation}\n\n{how}"


def tool_lines(tools: list[dict]) -> list[str]:
    """Tools in the OpenAI function format as one compact line each: ``name(arg: type,
    opt?: type): description``, enums written as their values.

    >>> tool_lines([{"type": "function", "function": {"name": "find", "description": "Find it.",
    ...     "parameters": {"type": "object", "required": ["id"], "properties": {
    ...         "id": {"type": "string"}, "kind": {"enum": ["a", "b"]}}}}}])
    ['- find(id: string, kind?: "a"|"b"): Find it.']
    """
    functions = [tool.get("function", tool) for tool in tools]
    return [f"- {tool_signature(fn.get('name', '?'), fn.get('parameters'))}: "
            f"{fn.get('description', '')}" for fn in functions]


def windowed(messages: list[dict[str, str]], keep: int | None,
             opening: Callable[[str], str]) -> list[dict[str, str]]:
    """The messages a reply is sampled from (``PlayConfig.history_turns``): all of them
    (``keep`` None); the opening and the last ``keep`` exchanges; or (``keep`` 0) one user
    message, ``opening(latest observation)``.

    >>> m = [{"role": "user", "content": "o0"}, {"role": "assistant", "content": "a1"},
    ...      {"role": "user", "content": "o1"}, {"role": "assistant", "content": "a2"},
    ...      {"role": "user", "content": "o2"}]
    >>> [x["content"] for x in windowed(m, 1, str.upper)], windowed(m, 0, str.upper)
    (['o0', 'a2', 'o2'], [{'role': 'user', 'content': 'O2'}])
    >>> windowed(m, None, str.upper) == windowed(m, 2, str.upper) == m, windowed(m[:1], 0, str) == m[:1]
    (True, True)
    """
    if keep is None or len(messages) < 3:
        return list(messages)
    if keep == 0:
        return [{"role": "user", "content": opening(messages[-1]["content"])}]
    return [messages[0], *messages[max(1, len(messages) - 2 * keep):]]


_TOOL_ROLE = re.compile(r"""role\s*(?:==|is\s+eq(?:ualto)?)\s*["']tool["']|["']tool["']\s*==""")


def template_has_tool_role(template: str | None) -> bool:
    """Whether a chat template renders ``tool`` messages on purpose (not just any role).

    >>> template_has_tool_role("{% if message.role == 'tool' %}<tool_response>{% endif %}")
    True
    >>> template_has_tool_role("{{'<|im_start|>' + message['role'] + content}}")
    False
    """
    return bool(template) and _TOOL_ROLE.search(template) is not None


def tool_role_for(policy: Any, cfg: PlayConfig) -> str:
    """The role tool results are sent in for this policy: ``"tool"`` or ``"user"``."""
    if cfg.tool_messages != "auto":
        return cfg.tool_messages
    declared = getattr(policy, "supports_tool_role", None)
    if isinstance(declared, bool):
        return "tool" if declared else "user"
    template = getattr(getattr(policy, "tokenizer", None), "chat_template", None)
    return "tool" if template_has_tool_role(template if isinstance(template, str) else None) else "user"
