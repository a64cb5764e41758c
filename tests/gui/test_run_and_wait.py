"""The GUI tests' ``run_and_wait`` helper must see a job that finishes inside its own trigger.

A job cancelled while still queued (the age page's ``test_cancel_stores_nothing`` on a loaded machine, where the
worker had not yet taken the job) emits ``finished`` synchronously inside ``trigger()``, before the helper knows
the job's id; the helper then waited its whole timeout for a signal that had already come (300 s, then failed)."""
from __future__ import annotations

import threading

from fairdesk.jobs.engine import JobState


def test_a_job_cancelled_while_queued_is_seen_at_once(window, run_and_wait):
    release = threading.Event()
    blocker = window.runner.submit("hold the worker", lambda *a, **k: release.wait(30))
    try:
        def queue_then_cancel():
            job = window.runner.submit("queued then cancelled", lambda *a, **k: None)
            assert window.runner.cancel(job.id)  # still queued behind the blocker: finished is emitted here
            return job

        job = run_and_wait(window, queue_then_cancel, timeout=5000)
        assert job.state is JobState.CANCELLED
        assert "before it started" in job.error
    finally:
        release.set()
        window.runner.wait_idle(10000)
    assert blocker.state is JobState.DONE
