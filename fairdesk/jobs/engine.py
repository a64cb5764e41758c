"""Job objects with states and cooperative cancel. No Qt here."""
from __future__ import annotations

import enum
import itertools
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fairdesk.core.errors import FairDeskError
from fairdesk.core.progress import CancelToken, Cancelled

log = logging.getLogger(__name__)
_ids = itertools.count(1)


class JobState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


@dataclass
class Job:
    """``fn(progress, cancel) -> result``; use functools.partial or a lambda to bind the inputs."""

    name: str
    fn: Callable[..., Any]
    id: int = field(default_factory=lambda: next(_ids))
    state: JobState = JobState.PENDING
    fraction: float = 0.0
    message: str = ""
    result: Any = None
    error: str | None = None
    details: str | None = None  # traceback for unexpected errors (shown on demand, logged)
    cancel_token: CancelToken = field(default_factory=CancelToken)

    def cancel(self) -> None:
        self.cancel_token.cancel()

    def run(self, on_progress: Callable[["Job"], None] | None = None) -> "Job":
        """Run in the calling thread; never raises. The state says how it ended."""

        def progress(fraction: float, message: str = "") -> None:
            self.fraction, self.message = fraction, message
            if on_progress is not None:
                on_progress(self)

        self.state = JobState.RUNNING
        try:
            self.cancel_token.check()
            self.result = self.fn(progress, self.cancel_token)
            self.state = JobState.DONE
            self.fraction = 1.0
        except Cancelled as err:
            self.state, self.error = JobState.CANCELLED, str(err)
        except FairDeskError as err:
            self.state, self.error = JobState.FAILED, str(err)
        except MemoryError:
            self.state = JobState.FAILED
            self.error = ("The computer ran out of memory. Close other programs, use fewer bootstrap replicates or "
                          "a smaller dataset, and try again. Earlier results are kept.")
        except Exception as err:  # noqa: BLE001 - a job must never take the app down
            self.state = JobState.FAILED
            self.error = f"Unexpected error in '{self.name}': {type(err).__name__}: {err}. Earlier results are kept."
            self.details = traceback.format_exc()
            log.error("job %s failed\n%s", self.name, self.details)
        return self
