"""spadework environments where other projects train: each module serves or loads an environment
(a starter, a module file, or an archived one) for one ecosystem, its code running only in the
sandbox, the level and seed carried through.

- :mod:`~spadework.integrations.hosted`: :class:`~spadework.integrations.hosted.HostedEnv`, one
  sandboxed environment behind plain ``reset``/``step`` calls, which every integration (and
  :mod:`spadework.gym`) drives;
- :mod:`~spadework.integrations.mcp_server`: a tool-use environment's tools over MCP (the ``mcp``
  extra; ``spadework mcp``);
- :mod:`~spadework.integrations.openenv_server`: an OpenEnv server (the ``openenv`` extra;
  ``spadework openenv serve``);
- :mod:`~spadework.integrations.verifiers`: a verifiers environment over an archive's
  environments (the ``verifiers`` extra; ``load_environment``).

Harbor tasks are files, written and read by :mod:`spadework.archive.harbor`.

Nothing here imports an optional package on import; each module that needs one raises a
:class:`~spadework.errors.ConfigError` naming the extra to install.
"""
