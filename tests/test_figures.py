"""The stage figures and the metrics line as records: what they store is what the dicts stored."""

from __future__ import annotations

import json

from spadework.figures import (
    RECORDS,
    DesignFigures,
    EvalFigures,
    IterationFigures,
    IterationMetrics,
    PlayFigures,
    TrainFigures,
)
from spadework.metrics import summarize

#: The keys of a metrics.jsonl line (unchanged since the figures travelled as dicts).
LINE_KEYS = {
    "iteration", "losses", "rewards", "agent_format_share", "preset", "regenerated",
    "validity_funnel", "pool", "hints", "episodes", "statuses", "agent_return",
    "win_rate_histogram", "band_share", "band_share_ci95", "learnable_share", "mean_level",
    "level_moves", "failed_plays", "mean_regret", "designer_reward", "per_env", "train", "tokens",
    "eval", "unwinnable_instances", "engine", "design_engine", "seconds", "peak_rss_mib"}


def test_optional_figures_are_left_out_until_set_and_seconds_comes_last():
    assert DesignFigures().to_dict() == {"regenerated": False, "funnel": {}, "tokens": 0}
    d = DesignFigures(regenerated=True, error="boom", seconds=1.5).to_dict()
    assert d["error"] == "boom" and list(d)[-1] == "seconds"
    assert "engine" not in PlayFigures().to_dict()
    assert PlayFigures(engine={"decoded": 3}).to_dict()["engine"] == {"decoded": 3}
    assert EvalFigures(seconds=0.0).to_dict() == {"due": False, "seconds": 0.0}
    measured = DesignFigures(error="boom", seconds=1.5, peak_rss_mib=6100).to_dict()
    assert list(measured)[-2:] == ["peak_rss_mib", "seconds"] and measured["peak_rss_mib"] == 6100


def test_train_figures_store_the_step_flat_and_read_it_back():
    t = TrainFigures(agent_samples=4, frozen=("designer",), note=None, seconds=2.0,
                     step={"loss_agent": 0.5, "seconds": 1.0, "importance_ratio": {"all": None}})
    d = t.to_dict()
    assert d == {"agent_samples": 4, "frozen": ["designer"], "loss_agent": 0.5,
                 "importance_ratio": {"all": None}, "seconds": 2.0}
    back = TrainFigures.from_dict(d)
    assert back.loss("agent") == 0.5 and back.loss("designer") is None
    assert back.agent_samples == 4 and back.to_dict() == d
    assert TrainFigures(note="training is off (--no-train)").to_dict() == {
        "note": "training is off (--no-train)"}
    peak = TrainFigures(agent_samples=4, seconds=2.0, peak_rss_mib=7000,
                        step={"loss_agent": 0.5, "seconds": 1.0}).to_dict()
    assert list(peak.items())[-2:] == [("peak_rss_mib", 7000), ("seconds", 2.0)]
    assert TrainFigures.from_dict(peak).step == {"loss_agent": 0.5}


def test_every_stage_record_round_trips_through_json():
    for name, record in RECORDS.items():
        d = record(seconds=0.25).to_dict()
        assert record.from_dict(json.loads(json.dumps(d))).to_dict() == d, name
    figs = IterationFigures(design=DesignFigures(regenerated=True, seconds=1.0),
                            play=PlayFigures(episodes=6, seconds=2.0, peak_rss_mib=512))
    back = IterationFigures.from_dict(json.loads(json.dumps(figs.to_dict())))
    assert back == figs and back.seconds()["play"] == 2.0 and back.seconds()["train"] is None
    assert back.peak_rss() == {"play": 512}  # only the stages that measured one


def test_a_metrics_line_keeps_its_keys_and_what_it_does_not_name():
    line = summarize(3, IterationFigures(), [], preset="cpu")
    assert set(line.to_dict()) == LINE_KEYS and line.values.keys() == LINE_KEYS - {"iteration"}
    stored = {**line.to_dict(), "band_share": 0.5, "later_figure": [1, 2]}
    back = IterationMetrics.from_dict(json.loads(json.dumps(stored)))
    assert back.band_share == 0.5 and back.iteration == 3 and back.to_dict() == stored
    old = IterationMetrics.from_dict({"iteration": 0, "band_share": None})  # an older, shorter line
    assert old.learnable_share is None and old.seconds == {}
    nulls = IterationMetrics.from_dict({"iteration": 1, "validity_funnel": None, "seconds": None})
    assert nulls.validity_funnel == {} and nulls.seconds == {} and nulls.extra == {}
