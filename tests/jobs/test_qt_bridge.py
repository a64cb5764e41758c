"""The Qt job runner alone: order, throttled progress, failure messages, cancel, shutdown."""
from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from fairdesk.core.errors import DataError  # noqa: E402
from fairdesk.jobs.engine import Job, JobState  # noqa: E402


@pytest.fixture
def runner(qapp):
    from fairdesk.jobs.qt_bridge import JobRunner

    r = JobRunner()
    yield r
    assert r.shutdown(10000)


class Recorder:
    def __init__(self, runner) -> None:
        self.started: list[int] = []
        self.finished: list[Job] = []
        self.progress: list[tuple[int, float, str, float]] = []
        self.threads: set[int] = set()
        runner.started.connect(lambda job: self.started.append(job.id))
        runner.finished.connect(self._finished)
        runner.progress.connect(lambda i, f, m: self.progress.append((i, f, m, time.monotonic())))

    def _finished(self, job) -> None:
        self.threads.add(threading.get_ident())
        self.finished.append(job)


def _sleeper(seconds: float, steps: int = 1):
    def fn(progress, cancel):
        for i in range(steps):
            cancel.check()
            time.sleep(seconds / steps)
            progress((i + 1) / steps, f"step {i + 1}")
        return seconds
    return fn


def test_jobs_run_in_order_in_one_worker_thread(qtbot, runner):
    rec = Recorder(runner)
    seen_threads: list[int] = []
    running_at_once: list[int] = []
    active = []

    def make(k):
        def fn(progress, cancel):
            active.append(k)
            running_at_once.append(len(active))
            seen_threads.append(threading.get_ident())
            time.sleep(0.02)
            active.remove(k)
            return k
        return fn

    jobs = [runner.submit(Job(f"job {k}", make(k))) for k in range(5)]
    qtbot.waitUntil(lambda: len(rec.finished) == 5, timeout=10000)
    assert [j.id for j in rec.finished] == [j.id for j in jobs]
    assert rec.started == [j.id for j in jobs]
    assert [j.result for j in rec.finished] == list(range(5))
    assert all(j.state == JobState.DONE for j in rec.finished)
    assert max(running_at_once) == 1  # one slot: never two jobs at a time
    assert len(set(seen_threads)) == 1 and seen_threads[0] != threading.get_ident()
    assert rec.threads == {threading.get_ident()}  # slots run in the GUI thread (queued signals)
    assert runner.idle


def test_progress_is_throttled_to_20_per_second(qtbot, runner):
    rec = Recorder(runner)

    def chatty(progress, cancel):
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < 0.5:
            i += 1
            progress(min(i / 50000, 1.0), f"update {i}")
        return i

    with qtbot.waitSignal(runner.finished, timeout=10000):
        job = runner.submit("chatty", chatty)
    assert job.result > 1000  # the job reported far more often than the GUI hears
    assert 1 <= len(rec.progress) <= 0.5 * 20 + 2
    times = [p[3] for p in rec.progress]
    assert all(p[0] == job.id for p in rec.progress)
    fractions = [p[1] for p in rec.progress]
    assert fractions == sorted(fractions)
    assert len(times) < 2 or (times[-1] - times[0]) / (len(times) - 1) > 0.02


def test_failure_carries_the_message_and_the_runner_goes_on(qtbot, runner):
    rec = Recorder(runner)

    def bad_input(progress, cancel):
        raise DataError("Score column 'p' must be a probability in [0, 1]. Convert logits with the sigmoid.")

    def bug(progress, cancel):
        return {}["missing"]

    runner.submit("bad input", bad_input)
    runner.submit("bug", bug)
    ok = runner.submit("fine", _sleeper(0.01))
    qtbot.waitUntil(lambda: len(rec.finished) == 3, timeout=10000)
    first, second, third = rec.finished
    assert first.state == JobState.FAILED and "probability in [0, 1]" in first.error and first.details is None
    assert second.state == JobState.FAILED and "KeyError" in second.error and "Traceback" in second.details
    assert third is ok and third.state == JobState.DONE


def test_cancel_running_and_pending_jobs(qtbot, runner):
    rec = Recorder(runner)
    started = threading.Event()

    def loop(progress, cancel):
        started.set()
        for i in range(10000):
            cancel.check()
            time.sleep(0.005)
            progress(i / 10000, "looping")
        return "not cancelled"

    running = runner.submit("loop", loop)
    pending = runner.submit("pending", _sleeper(0.01))
    assert started.wait(5)
    assert runner.cancel(pending.id)
    assert runner.cancel(running.id)
    qtbot.waitUntil(lambda: len(rec.finished) == 2, timeout=10000)
    assert pending.state == JobState.CANCELLED
    assert running.state == JobState.CANCELLED and "earlier results are kept" in running.error.lower()
    assert pending.id not in rec.started  # a cancelled pending job never starts
    assert not runner.cancel(running.id)  # already finished
    after = runner.submit("after", _sleeper(0.01))
    qtbot.waitUntil(lambda: after.state.finished, timeout=10000)
    assert after.state == JobState.DONE


def test_shutdown_cancels_everything_and_returns_promptly(qtbot, qapp):
    from fairdesk.jobs.qt_bridge import JobRunner

    runner = JobRunner()
    from tiny_jobs import until_cancelled

    started = threading.Event()
    job = runner.submit("forever", until_cancelled(started))
    queued = runner.submit("queued", _sleeper(0.01))
    assert started.wait(5)
    t0 = time.monotonic()
    assert runner.shutdown(5000)
    assert time.monotonic() - t0 < 2.0
    assert job.state == JobState.CANCELLED and queued.state == JobState.CANCELLED
    assert not runner.running
    assert runner.shutdown(100)  # idempotent
    with pytest.raises(RuntimeError):
        runner.submit("too late", _sleeper(0.01))
