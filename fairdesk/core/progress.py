"""Progress reporting and cooperative cancellation: the only way long work talks to its caller.

Every long function has the shape ``f(inputs..., progress=None, cancel=None) -> result``:

* ``progress(fraction, message)`` is any callable; ``fraction`` is in [0, 1].
* ``cancel`` is a :class:`CancelToken`; the function calls ``cancel.check()`` at safe points, which raises
  :class:`Cancelled`. Nothing half-done is written when that happens.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

ProgressFn = Callable[[float, str], None]


class Cancelled(Exception):
    """Raised at a checkpoint after the user asked to cancel."""

    def __init__(self, message: str = "Cancelled by the user; earlier results are kept.") -> None:
        super().__init__(message)


class CancelToken:
    """Thread-safe flag set by the caller (GUI button, Ctrl-C, app close) and polled by the work."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled()


def null_progress(fraction: float, message: str = "") -> None:  # noqa: ARG001
    """A progress callback that ignores everything."""


class Reporter:
    """Convenience wrapper combining a progress callback and a cancel token, with sub-ranges.

    ``rep.sub(0.2, 0.8)`` returns a reporter whose 0..1 maps onto 0.2..0.8 of the parent.
    ``rep(f, msg)`` reports and checks for cancellation.
    """

    def __init__(self, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                 start: float = 0.0, stop: float = 1.0) -> None:
        self.progress = progress or null_progress
        self.cancel = cancel or CancelToken()
        self.start, self.stop = start, stop

    def __call__(self, fraction: float, message: str = "") -> None:
        self.cancel.check()
        fraction = min(max(float(fraction), 0.0), 1.0)
        self.progress(self.start + (self.stop - self.start) * fraction, message)

    def check(self) -> None:
        self.cancel.check()

    def sub(self, start: float, stop: float) -> "Reporter":
        span = self.stop - self.start
        return Reporter(self.progress, self.cancel, self.start + span * start, self.start + span * stop)
