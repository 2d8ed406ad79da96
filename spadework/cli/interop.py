"""Commands that serve an environment to other ecosystems: ``spadework mcp`` (a tool-use
environment's tools over MCP) and ``spadework openenv serve`` (an OpenEnv server)."""

from __future__ import annotations

import typer

from spadework.cli._app import _reported, app
from spadework.errors import SpadeworkError

openenv_app = typer.Typer(help="OpenEnv: serve an environment to OpenEnv clients (TRL, "
                          "verifiers, any EnvClient).", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(openenv_app, name="openenv")

_SOURCE = typer.Argument(..., help="An archive file or run directory (with --env), a starter "
                         "environment's name, or a .py module file.")
_ENV = typer.Option(None, "--env", help="The archived environment's id, or its first 4 or more "
                    "hex characters as `archive ls` prints them.")
_LEVEL = typer.Option(1, "--level", min=1, help="The difficulty level played (1 to the "
                      "environment's LEVELS).")
_TURNS = typer.Option(None, "--max-turns", min=1, help="Turns per episode (default: the limit "
                      "an archived environment was checked under, else the checker's).")
_REJECTED = typer.Option(False, "--allow-rejected", help="Serve an environment the checker "
                         "rejected.")


@app.command("mcp")
def mcp_cmd(
    source: str = _SOURCE, env: str = _ENV, level: int = _LEVEL, max_turns: int = _TURNS,
    seed: int = typer.Option(0, "--seed", help="The instance the episode plays."),
    allow_rejected: bool = _REJECTED,
) -> None:
    """Serve one episode of a tool-use environment over MCP on stdio: its tools plus
    submit_answer; each call is one turn; the resource spadework://episode holds the reward."""
    with _reported(SpadeworkError):
        # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
        from spadework.integrations.mcp_server import serve_stdio

        final = serve_stdio(source, env, seed=seed, level=level, max_turns=max_turns,
                            allow_rejected=allow_rejected)
    typer.echo(f"episode over: {final['turns']} turn(s), reward {final['reward']:g}"
               f"{', ' + final['ended_by'] if final['ended_by'] else ' (not finished)'}", err=True)


@openenv_app.command("serve")
def openenv_serve(
    source: str = _SOURCE, env: str = _ENV, level: int = _LEVEL, max_turns: int = _TURNS,
    seed: int = typer.Option(0, "--seed", help="Seeds the instances of resets that name none."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by "
                             "default)."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    max_sessions: int = typer.Option(8, "--max-sessions", min=1, help="WebSocket sessions "
                                     "played side by side (each its own sandboxed child)."),
    allow_rejected: bool = _REJECTED,
) -> None:
    """Serve an environment with OpenEnv's server (WebSocket sessions at /ws, /reset, /step,
    /state, /schema, /health) until interrupted; its code runs only in the sandbox."""
    with _reported(SpadeworkError):
        # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
        from spadework.integrations.openenv_server import serve

        serve(source, env, host=host, port=port, level=level, seed=seed, max_turns=max_turns,
              max_sessions=max_sessions, allow_rejected=allow_rejected,
              ready=lambda url: typer.echo(f"OpenEnv server on {url} (Ctrl-C stops it)",
                                           err=True))
