"""The tool-use environment kit: the one parser of the tool-call format (:mod:`.calls`), the
JSON-schema subset arguments are checked against (:mod:`.schema`), how results and answers read
(:mod:`.render`), a tool's declaration completed from its method (:mod:`.declare`), and the
``ToolEnv`` base class (:mod:`.base`). Standard library only.

The sandbox loads this package as the top-level package ``toolenv`` (generated and archived
environments write ``from toolenv import ToolEnv, ...``), so it imports nothing from spadework and
its modules import each other relatively; :data:`MODULES` is the order they load in. The host
imports it as ``spadework.env.toolenv``, and ``spadework.env.actions`` uses its parser, so exactly
one parser of the format exists.
"""

from .base import Instruction, ToolEnv, ToolError
from .calls import (
    ToolCall,
    ToolCallFormatError,
    format_tool_call,
    parse_answer,
    parse_bare_call,
    parse_tool_calls,
)
from .declare import tool_signature
from .render import answers_match, render_record, render_records
from .schema import schema_error

#: The package's modules in the order they import each other (the sandbox loads them so).
MODULES = ("calls", "schema", "render", "declare", "base")

__all__ = [
    "Instruction",
    "ToolCall",
    "ToolCallFormatError",
    "ToolEnv",
    "ToolError",
    "answers_match",
    "format_tool_call",
    "parse_answer",
    "parse_bare_call",
    "parse_tool_calls",
    "render_record",
    "render_records",
    "schema_error",
    "tool_signature",
]
