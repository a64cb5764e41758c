"""Time left on long work (issue 24 item 5): one estimate from the measured rate, on the CLI's progress line and in
the GUI's job panel (a fake clock: no timed test)."""
import io

from hypothesis import given
from hypothesis import strategies as st

from fairdesk.core.progress import Eta, format_duration


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_eta_from_the_measured_rate_and_silent_when_nothing_honest_can_be_said():
    clock = Clock()
    eta = Eta(clock)
    clock.t += 1.0
    assert eta.text(0.5) == ""             # under 3 s: no guess
    clock.t += 29.0
    assert eta.seconds_left(0.25) == 90.0  # 30 s for a quarter: 90 s for the rest
    assert eta.text(0.25) == "about 2 min left"
    assert eta.text(0.01) == "" and eta.text(1.0) == ""


@given(st.floats(0, 10 ** 6, allow_nan=False))
def test_durations_read_as_a_person_says_them(seconds):
    text = format_duration(seconds)
    assert text.endswith((" s", " min")) and not text.startswith("0 min")
    number = int(text.split()[0])
    if text.endswith(" s"):
        assert 5 <= number <= 55 and number % 5 == 0
    elif " h " in text:
        assert abs(number * 3600 + int(text.split()[2]) * 60 - seconds) <= 30
    else:
        assert 1 <= number < 60 and abs(number * 60 - seconds) <= 30


def test_cli_progress_line_shows_time_left(monkeypatch):
    import fairdesk.cli.progress as cp

    clock = Clock()
    monkeypatch.setattr(cp, "Eta", lambda: Eta(clock))
    err = io.StringIO()
    monkeypatch.setattr(cp.sys, "stderr", err)
    bar = cp.TerminalProgress()
    bar(0.0, "start")
    clock.t += 60.0
    bar(0.5, "half way")
    assert "half way (about 1 min left)" in err.getvalue()
