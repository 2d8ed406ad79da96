"""pytest, for the whole checkout: the modules of optional extras that are not installed here are
left out of doctest collection (their tests skip with the reason)."""

from __future__ import annotations

import importlib.util

_EXTRAS = {"spadework/integrations/mcp_server.py": "mcp",
           "spadework/integrations/openenv_server.py": "openenv",
           "spadework/integrations/verifiers.py": "verifiers"}

collect_ignore = [path for path, package in _EXTRAS.items()
                  if importlib.util.find_spec(package) is None]
