"""momoka.progress.Progress: terminal redraws, plain lines when redirected, silence."""

import io

import pytest

from momoka.progress import Progress


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("MOMOKA_PROGRESS", raising=False)
    monkeypatch.delenv("MOMOKA_PROGRESS_INTERVAL", raising=False)


def test_terminal_redraws_one_line():
    clock, out = Clock(), Tty()
    with Progress("embedding", total=100, unit="texts", stream=out, clock=clock, delay=0) as bar:
        for _ in range(10):
            clock.t += 1.0
            bar.update(10, loss=0.5)
    text = out.getvalue()
    assert text.count("\r") == 11  # ten updates and the final line
    assert text.endswith("\n") and text.count("\n") == 1
    first = text.split("\r")[1]
    assert first.startswith("embedding: 10/100 texts (10%), 10.0 texts/s")
    assert "eta 00:09" in first and "loss=0.5" in first
    last = text.split("\r")[-1]
    assert "100/100 texts (100%)" in last and "eta" not in last and "elapsed 00:10" in last


def test_terminal_redraw_is_throttled():
    clock, out = Clock(), Tty()
    bar = Progress("x", total=1000, stream=out, clock=clock, refresh=0.5, delay=0)
    for _ in range(100):
        clock.t += 0.01
        bar.update()
    bar.close()
    assert out.getvalue().count("\r") == 3  # the first update, one after 0.5 s, the final line


def test_redirected_output_prints_plain_lines_every_interval():
    clock, out = Clock(), io.StringIO()
    with Progress("chunking", total=60, unit="documents", stream=out, clock=clock, interval=5.0, delay=0) as bar:
        for _ in range(60):
            clock.t += 0.5
            bar.update()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    # the first update, then one line per 5 s of 30 s, then the final line
    assert len(lines) == 1 + 5 + 1
    assert lines[0].startswith("chunking: 1/60 documents")
    assert lines[1].startswith("chunking: 11/60 documents") and "eta 00:24" in lines[1]
    assert lines[-1].startswith("chunking: 60/60 documents (100%), 2.00 documents/s, elapsed 00:30")


def test_unknown_total_has_no_eta():
    clock, out = Clock(), io.StringIO()
    with Progress("mcts", unit="rewards", stream=out, clock=clock, delay=0) as bar:
        clock.t += 2
        bar.update(50)
    assert out.getvalue().splitlines()[-1] == "mcts: 50 rewards, 25.0 rewards/s, elapsed 00:02"


def test_delay_keeps_short_loops_silent():
    clock, out = Clock(), io.StringIO()
    with Progress("llm", total=5, stream=out, clock=clock, delay=2.0) as bar:
        clock.t += 1.0
        bar.update(5)
    assert out.getvalue() == ""
    with Progress("llm", total=5, stream=out, clock=clock, delay=2.0) as bar:
        clock.t += 3.0
        bar.update(5)
    assert out.getvalue().startswith("llm: 5/5")


def test_disabled_is_silent_and_still_counts():
    clock, out = Clock(), Tty()
    with Progress("x", total=3, enabled=False, stream=out, clock=clock, delay=0) as bar:
        bar.update(3)
    assert out.getvalue() == ""
    assert bar.n == 3


def test_environment_forces_off_and_on(monkeypatch):
    out = io.StringIO()
    monkeypatch.setenv("MOMOKA_PROGRESS", "0")
    with Progress("x", total=1, enabled=True, stream=out, delay=0) as bar:
        bar.update()
    assert out.getvalue() == ""
    monkeypatch.setenv("MOMOKA_PROGRESS", "1")
    with Progress("x", total=1, enabled=False, stream=out, delay=0) as bar:
        bar.update()
    assert out.getvalue().startswith("x: 1/1")


def test_close_is_idempotent():
    out = io.StringIO()
    bar = Progress("x", total=2, stream=out, delay=0)
    bar.update()
    bar.update()  # within the interval: not shown yet
    bar.close()
    bar.close()
    assert out.getvalue().count("x: 1/2") == 1 and out.getvalue().count("x: 2/2") == 1  # one final line


def test_defaults_keep_short_loops_silent_and_show_each_count_once():
    # tried: a loop shorter than the default 1 s delay (nothing at all), and a redirected stream whose
    # last plain line already shows the final count (no second, identical final line)
    clock = Clock()
    out = io.StringIO()
    with Progress("quick", total=3, stream=out, clock=clock) as bar:
        for _ in range(3):
            clock.t += 0.1
            bar.update()
    assert out.getvalue() == ""
    out = io.StringIO()
    with Progress("slow", total=2, stream=out, clock=clock, interval=5.0) as bar:
        clock.t += 2.0
        bar.update(2)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slow: 2/2")


def test_interval_from_the_environment_sets_the_line_rate_and_caps_the_delay(monkeypatch):
    # tried: MOMOKA_PROGRESS_INTERVAL=0 on a redirected stream: a line at every update even before the
    # caller's 1 s delay; =2: the first line after 2 s (not the caller's 10 s delay), then one per 2 s
    clock = Clock()
    monkeypatch.setenv("MOMOKA_PROGRESS_INTERVAL", "0")
    out = io.StringIO()
    with Progress("quick", total=3, stream=out, clock=clock, interval=5.0, delay=1.0) as bar:
        for _ in range(3):
            clock.t += 0.1
            bar.update()
    assert [ln.split(",")[0] for ln in out.getvalue().splitlines()] == [
        "quick: 1/3 (33%)", "quick: 2/3 (67%)", "quick: 3/3 (100%)"]
    monkeypatch.setenv("MOMOKA_PROGRESS_INTERVAL", "2")
    out = io.StringIO()
    with Progress("slow", total=10, stream=out, clock=clock, interval=5.0, delay=10.0) as bar:
        for _ in range(10):
            clock.t += 1.0
            bar.update()
    counts = [ln.split(",")[0] for ln in out.getvalue().splitlines()]
    assert counts == ["slow: 2/10 (20%)", "slow: 4/10 (40%)", "slow: 6/10 (60%)", "slow: 8/10 (80%)",
                      "slow: 10/10 (100%)"]


def test_bad_interval_in_the_environment_is_a_config_error(monkeypatch):
    from momoka.errors import ConfigError

    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("MOMOKA_PROGRESS_INTERVAL", bad)
        with pytest.raises(ConfigError, match="MOMOKA_PROGRESS_INTERVAL"):
            Progress("x", total=1, stream=io.StringIO())
    monkeypatch.setenv("MOMOKA_PROGRESS", "0")  # silenced: the interval is never read
    Progress("x", total=1, stream=io.StringIO()).close()


def test_step_reports_absolute_progress_with_its_message():
    # the convert_gguf callback shape: (step, total, message), steps absolute, the total known from the first call
    clock, out = Clock(), io.StringIO()
    with Progress("converting", unit="steps", stream=out, clock=clock, interval=0, delay=0) as bar:
        for step, msg in ((1, "layer 0"), (3, "layer 2"), (4, "done")):
            clock.t += 1.0
            bar.step(step, 4, msg)
    lines = out.getvalue().splitlines()
    assert [ln.split(",")[0] for ln in lines] == ["converting: 1/4 steps (25%)", "converting: 3/4 steps (75%)",
                                                  "converting: 4/4 steps (100%)"]
    assert lines[1].endswith("step=layer 2") and bar.n == 4
