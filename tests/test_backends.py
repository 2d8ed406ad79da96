"""The backend table (spadework.policy.backends): a backend defined here, in the tests alone,
is one module's worth of code plus one table entry, and every command that loads a model
reaches it through the table (``run --no-train``, ``generate``, ``eval``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted_policy import ScriptedPolicy, designing_script
from typer.testing import CliRunner

from spadework.cli import app
from spadework.errors import ConfigError
from spadework.policy import backends
from spadework.settings.run import BACKENDS

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOADED: list[tuple[str | None, backends.LoadOptions]] = []


def load_scripted(model: str | Path | None, options: backends.LoadOptions) -> ScriptedPolicy:
    """The test backend's loader: a scripted policy that designs a real module and guesses
    moves, whatever the model; it records what it was asked."""
    LOADED.append((model, options))
    return ScriptedPolicy(designing_script)


@pytest.fixture
def scripted():
    """The table with the test backend in it for one test, as it was afterwards."""
    table, names = dict(backends._TABLE), list(BACKENDS)
    LOADED.clear()
    yield backends.register(backends.Backend("scripted", load_scripted, about="tests only"))
    backends._TABLE.clear()
    backends._TABLE.update(table)
    BACKENDS[:] = names


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.mark.slow
def test_a_new_backend_is_one_table_entry_for_run_generate_and_eval(scripted, tmp_path):
    run_dir = tmp_path / "run"
    invoke("run", "--preset", "smoke", "--no-train", "--backend", "scripted", "--iterations", "1",
           "--config", str(FIXTURES / "smoke_whole_designs.toml"), "--run-dir", str(run_dir))
    (line,) = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert json.loads(line)["iteration"] == 0 and LOADED, "the run did not load the test backend"
    assert LOADED[-1][1].max_batch_size == 16  # the smoke preset's policy_batch reached it

    out = invoke("generate", "Name a colour.", "--backend", "scripted", "--n", "2").output
    assert out.count("--- completion") == 2

    invoke("eval", "--suite", "library-heldout", "--backend", "scripted", "--max-items", "1",
           "--preset", "smoke", "--out", str(tmp_path / "eval"))
    summary = json.loads((tmp_path / "eval" / "library-heldout" / "summary.json").read_text())
    assert summary["model"]["backend"] == "scripted"


def test_the_table_refuses_what_it_cannot_do(scripted, tmp_path):
    """A backend without a weight sync cannot be trained into, and without a checkpoint
    applier cannot evaluate a run's checkpoint: each says so; a bad name is refused."""
    from spadework.policy.backends import weight_sync_for

    class Learner:
        model = object()

    policy = backends.load("scripted")
    with pytest.raises(ConfigError, match="no weight sync"):
        weight_sync_for(policy, Learner())
    with pytest.raises(ConfigError, match="letters, digits"):
        backends.register(backends.Backend("no spaces", load_scripted))
    assert backends.backend("scripted").checkpoint is None
