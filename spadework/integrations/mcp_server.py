"""A tool-use environment's tools over MCP (the ``mcp`` extra: ``pip install 'spadework[mcp]'``).

``spadework mcp ARCHIVE --env ID`` (or :func:`serve_stdio`) serves one episode per session over
stdio: the server starts, resets the environment at ``--seed`` and ``--level``, and lists the
environment's own tools (their JSON schemas as the input schemas) plus :data:`ANSWER_TOOL`, which
submits the final answer. The episode's first observation (the task, the first instruction) is
the server's ``instructions``, and the resource :data:`EPISODE_URI` reads back the episode's
state as JSON: seed, level, turns used and left, reward so far, whether it is over.

Each tool call is one turn of the environment, played exactly as the self-play loop plays a reply
with that one call (the call is written in the agent's format and stepped in the sandbox), so
the rewards are the environment's own: the result's text is the observation, its structured
content carries ``reward``, ``terminated``, ``truncated``, ``turn``, ``turns_left`` and
``episode_reward``, and a call the environment refused (an unknown tool, arguments that break
the schema, a tool's own error) comes back with ``isError``. Once the episode is over (the
answer judged, the turns used up, or the environment failed: hung, crashed, broke the
contract), every call says so and changes nothing. The environment's code never runs in this
process.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spadework.env.toolenv import ToolCall, format_tool_call
from spadework.errors import ConfigError, ContractError, EnvError
from spadework.integrations.hosted import HostedEnv

try:
    import anyio
    import mcp.types as mt
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ConfigError("spadework mcp needs the MCP SDK: pip install 'spadework[mcp]'") from e

#: The tool that submits the final answer (the agent's ``<answer>...</answer>``).
ANSWER_TOOL = "submit_answer"
#: The resource that reads back the episode's state.
EPISODE_URI = "spadework://episode"
#: How the reply-format paragraph of a first observation starts (ToolEnv's, then its older form).
_FORMAT_NOTE = ("Call a tool in a reply like this:", "Call tools with <tool_call>")


@dataclass
class Episode:
    """One MCP session's episode over a :class:`HostedEnv`: the tool calls become turns.

    Thread-safe: calls run one at a time, in the order they arrive.
    """

    env: HostedEnv
    seed: int
    first_obs: str = ""
    tools: list[dict] = field(default_factory=list)
    reward: float = 0.0
    over: bool = False
    ended_by: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def start(cls, env: HostedEnv, seed: int) -> Episode:
        if env.setting != "tool-use":
            raise ConfigError(f"{env.source.class_name} is a {env.setting} environment; MCP "
                              "serves the tools of tool-use environments (serve a games "
                              "environment with `spadework openenv serve`)")
        obs, _ = env.reset(seed)
        tools = [t["function"] for t in env.tools()]
        if any(t["name"] == ANSWER_TOOL for t in tools):
            raise ConfigError(f"{env.source.class_name} declares a tool named {ANSWER_TOOL!r}, "
                              "the name this server gives the final-answer tool")
        return cls(env, seed, _mcp_instructions(obs, env.max_turns), tools)

    def state(self) -> dict[str, Any]:
        return {"env_id": self.env.env_id, "class_name": self.env.source.class_name,
                "seed": self.seed, "level": self.env.level, "turns": self.env.turns,
                "turns_left": self.env.max_turns - self.env.turns, "reward": self.reward,
                "over": self.over, "ended_by": self.ended_by}

    def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[str, dict, bool]:
        """One tool call as one turn: (observation text, structured result, is an error)."""
        with self._lock:
            if self.over:
                over = (f"The episode is over ({self.ended_by}; reward {self.reward:g}). Start "
                        "a new session for another episode.")
                return over, self._result(), True
            action = self._action(name, arguments or {})
            if isinstance(action, tuple):  # refused before it reached the environment
                return action[0], self._result(), True
            try:
                turn = self.env.step(action)
            except (EnvError, ContractError) as e:
                self.over, self.ended_by = True, f"the environment failed: {e.reason}"
                return f"The episode ended: {e.reason}", self._result(), True
            self.reward += turn.reward
            if turn.done:
                self.over = True
                self.ended_by = ("turn limit" if turn.truncated else
                                 "answer judged" if name == ANSWER_TOOL else
                                 "the environment ended it")
            info = turn.info
            failed = bool(info.get("tool_errors")) and info.get("tool_errors") == info.get("tool_calls")
            refused = name != ANSWER_TOOL and not info.get("tool_calls")
            return turn.obs, self._result(turn), failed or refused

    def _action(self, name: str, arguments: dict[str, Any]) -> str | tuple[str]:
        if name == ANSWER_TOOL:
            answer = arguments.get("answer")
            if set(arguments) != {"answer"} or not isinstance(answer, (str, int, float)) \
                    or isinstance(answer, bool):
                return (f"Error: {ANSWER_TOOL} takes one argument, answer (a string).",)
            text = str(answer)
            if "<answer>" in text or "</answer>" in text:
                return ("Error: the answer may not contain <answer> tags.",)
            return f"<answer>{text}</answer>"
        try:
            return format_tool_call(ToolCall(name, arguments))
        except (TypeError, ValueError) as e:
            return (f"Error: the call cannot be written as a tool call ({e}).",)

    def _result(self, turn: Any = None) -> dict[str, Any]:
        base = {"reward": turn.reward if turn is not None else 0.0,
                "terminated": bool(turn and turn.terminated),
                "truncated": bool(turn and turn.truncated)}
        return {**base, "turn": self.env.turns, "turns_left": self.env.max_turns - self.env.turns,
                "episode_reward": self.reward, "over": self.over}


def _mcp_instructions(obs: str, max_turns: int) -> str:
    """The first observation with its reply-format paragraph (written for an agent that writes
    ``<tool_call>`` tags) replaced by how to play over MCP.

    >>> print(_mcp_instructions("Task.\\n\\nCall tools with <tool_call>{...}</tool_call>.", 5))
    Task.
    <BLANKLINE>
    Call the tools: each call is one of your 5 turns. Further instructions appear in the tools' results as steps are completed; when all are done, call submit_answer with the final answer.
    """
    parts = [p for p in obs.split("\n\n") if not p.startswith(_FORMAT_NOTE)]
    parts.append(f"Call the tools: each call is one of your {max_turns} turns. Further "
                 "instructions appear in the tools' results as steps are completed; when all "
                 f"are done, call {ANSWER_TOOL} with the final answer.")
    return "\n\n".join(parts)


def build_server(episode: Episode) -> Server:
    """The MCP server of one episode (serve it over any transport)."""
    answer = mt.Tool(name=ANSWER_TOOL, description="Submit the final answer; it is judged once "
                     "every instruction is done (ends the episode when right, or when no attempt "
                     "is left).", input_schema={"type": "object", "required": ["answer"],
                                                "properties": {"answer": {"type": "string"}}})
    tools = [mt.Tool(name=t["name"], description=t.get("description"),
                     input_schema=t.get("parameters") or {"type": "object", "properties": {}})
             for t in episode.tools] + [answer]

    async def list_tools(ctx: Any, params: Any) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> mt.CallToolResult:
        text, result, error = await anyio.to_thread.run_sync(
            episode.call, params.name, params.arguments)
        return mt.CallToolResult(content=[mt.TextContent(text=text)],
                                 structured_content=result, is_error=error)

    async def list_resources(ctx: Any, params: Any) -> mt.ListResourcesResult:
        return mt.ListResourcesResult(resources=[mt.Resource(
            uri=EPISODE_URI, name="episode", mime_type="application/json",
            description="This session's episode: seed, level, turns, reward, whether it is over.")])

    async def read_resource(ctx: Any, params: Any) -> mt.ReadResourceResult:
        if str(params.uri) != EPISODE_URI:
            raise ValueError(f"no resource {params.uri}; the one resource is {EPISODE_URI}")
        return mt.ReadResourceResult(contents=[mt.TextResourceContents(
            uri=EPISODE_URI, mime_type="application/json", text=json.dumps(episode.state()))])

    return Server(f"spadework-{episode.env.source.class_name}", instructions=episode.first_obs,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource)


def serve_stdio(source: str | Path, env_id: str | None = None, *, seed: int = 0, level: int = 1,
                max_turns: int | None = None, allow_rejected: bool = False) -> dict[str, Any]:
    """Serve one episode of the environment over stdio until the client disconnects; returns
    the episode's final state (what ``spadework mcp`` prints to stderr)."""
    with HostedEnv(source, env_id, level=level, max_turns=max_turns,
                   allow_rejected=allow_rejected) as env:
        episode = Episode.start(env, seed)
        server = build_server(episode)

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)
        return episode.state()
