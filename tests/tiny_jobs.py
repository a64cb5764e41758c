"""Job functions for tests of the job engine and of pages that run jobs. Import inside tests
(``from tiny_jobs import ...``): ``tests/`` is on ``sys.path`` through its conftest."""
from __future__ import annotations

import threading
import time


def until_cancelled(started: threading.Event):
    """A job function that sets ``started`` and then runs until its cancel token fires."""
    def job(progress, cancel):
        started.set()
        while True:
            cancel.check()
            time.sleep(0.01)

    return job
