"""The run's terminal display off a terminal (a log file, CI): a line per stage, per tenth of its
count, and a heartbeat line while a stage is quiet."""

import io
import time

from rich.console import Console

from spadework.progress import StageDisplay


def _log(heartbeat_s: float) -> tuple[StageDisplay, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    return StageDisplay(console, heartbeat_s=heartbeat_s), out


def _wait_for(out: io.StringIO, text: str, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while text not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_quiet_stage_prints_a_heartbeat_with_its_count():
    display, out = _log(heartbeat_s=0.1)
    with display:
        display.stage("design", "4 slots")
        display.advance("design", 1, 4)
        _wait_for(out, "still at work")
    lines = out.getvalue().splitlines()
    beats = [line for line in lines if "still at work" in line]
    assert beats, lines
    assert "design  1/4 so far, still at work" in beats[0]
    count_line = next(i for i, line in enumerate(lines) if line.endswith("design  1/4"))
    assert lines.index(beats[0]) > count_line


def test_no_heartbeat_once_the_stage_is_done_or_the_display_closed():
    display, out = _log(heartbeat_s=0.1)
    with display:
        display.stage("play", "2 episodes")
        display.advance("play", 2, 2)
        time.sleep(0.5)
    closed_with = out.getvalue()
    time.sleep(0.3)
    assert "still at work" not in closed_with
    assert out.getvalue() == closed_with  # the thread stopped with the display
    assert display._beat is None


def test_a_stage_that_prints_often_gets_no_heartbeat():
    display, out = _log(heartbeat_s=2.0)
    with display:
        display.stage("play", "20 episodes")
        for done in range(1, 21):
            display.advance("play", done, 20)
            time.sleep(0.01)
    text = out.getvalue()
    assert "still at work" not in text
    assert len(text.splitlines()) == 12  # the stage line, 1/20 (tenth 0), then one per tenth


def test_heartbeat_zero_starts_no_thread():
    display, out = _log(heartbeat_s=0)
    with display:
        assert display._beat is None
        display.stage("train", "8 samples")
