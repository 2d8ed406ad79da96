"""The verifiers taskset ``spadework-verifiers`` (verifiers imports a taskset id as a top-level
module); everything lives in :mod:`spadework.integrations.verifiers`."""

from spadework.integrations.verifiers import ChatHarness, SpadeworkEnv, SpadeworkTaskset

__all__ = ["ChatHarness", "SpadeworkEnv", "SpadeworkTaskset"]
