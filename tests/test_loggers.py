"""`[log]`: a run's metrics also written as TensorBoard event files, read back here with
TensorBoard's own reader; a logger asked for but not installed stops the run before it starts."""

from __future__ import annotations

import json

import pytest
from scripted_policy import ScriptedPolicy, designing_script

from spadework.config import load_config, override, preset
from spadework.errors import ConfigError
from spadework.loggers import LogConfig, check_available, scalars
from spadework.loop import Models, run


@pytest.mark.slow
def test_tensorboard_events_read_back_equal_the_metrics_lines(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    cfg = override(preset("smoke"), {"iterations": 2, "design": {"max_tokens": 1024},
                                     "log": {"tensorboard": True}})
    run(cfg, tmp_path, Models(ScriptedPolicy(designing_script)))
    events = list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    want: dict[str, list[tuple[int, float]]] = {}
    for m in lines:
        for tag, v in scalars(m).items():
            if tag != "iteration":
                want.setdefault(tag, []).append((m["iteration"], v))
    assert {"agent_return/no_hint", "agent_return/hint", "band_share", "seconds/play"} <= set(want)
    assert set(acc.Tags()["scalars"]) == set(want)
    for tag, points in want.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert [s for s, _ in got] == [s for s, _ in points], tag
        assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-6), tag  # float32


def test_a_logger_that_is_asked_for_must_be_installed(monkeypatch, tmp_path):
    import spadework.loggers as L

    monkeypatch.setattr(L, "_installed", lambda module: False)
    with pytest.raises(ConfigError, match="pip install wandb"):
        check_available(LogConfig(wandb=True))
    with pytest.raises(ConfigError, match="pip install tensorboard"):
        check_available(LogConfig(tensorboard=True))
    check_available(LogConfig())  # nothing asked, nothing needed
    toml = tmp_path / "run.toml"
    toml.write_text('preset = "smoke"\n[log]\nwandb = true\nwandb_mode = "sometimes"\n')
    with pytest.raises(ConfigError, match="wandb_mode must be offline or online"):
        load_config(toml)
