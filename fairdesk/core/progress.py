"""Progress reporting and cooperative cancellation: the only way long work talks to its caller.

Every long function has the shape ``f(inputs..., progress=None, cancel=None) -> result``:

* ``progress(fraction, message)`` is any callable; ``fraction`` is in [0, 1].
* ``cancel`` is a :class:`CancelToken`; the function calls ``cancel.check()`` at safe points, which raises
  :class:`Cancelled`. Nothing half-done is written when that happens.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

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


class Eta:
    """Time left of one job, from its measured rate: elapsed × (1 − f) / f. Said only once the job has run
    :attr:`MIN_SECONDS` and reached :attr:`MIN_FRACTION` (an early guess misleads more than none), and only for jobs
    that will take longer than a few seconds. The CLI's progress line and the GUI's job panel both use it."""

    MIN_SECONDS = 3.0
    MIN_FRACTION = 0.02

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()

    def seconds_left(self, fraction: float) -> float | None:
        elapsed = self._clock() - self._start
        if elapsed < self.MIN_SECONDS or not self.MIN_FRACTION <= fraction < 1.0:
            return None
        return elapsed * (1.0 - fraction) / fraction

    def text(self, fraction: float) -> str:
        """``"about 4 min left"`` (empty while nothing honest can be said)."""
        left = self.seconds_left(fraction)
        return "" if left is None else f"about {format_duration(left)} left"


def format_duration(seconds: float) -> str:
    """``"40 s"``, ``"4 min"``, ``"1 h 20 min"`` — rounded the way a person says it."""
    if seconds < 55:
        return f"{max(5, int(round(seconds / 5.0)) * 5)} s"
    minutes = int(round(seconds / 60.0))
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class Foreground:
    """Lets one thread's work go first over another's (the GUI's: the Qt thread's over the view thread's reads).

    While the foreground thread is inside :meth:`busy`, a background thread that calls :func:`yield_point` (with
    :meth:`wait` set as its hook by :func:`set_yield_hook`) waits there, up to ``max_wait`` seconds each time,
    holding no lock. Python threads share one interpreter lock: a background thread running Python while the
    foreground thread works makes the foreground wait for the lock at each of its returns from C code (CPython
    hands the lock over only after the switch interval), so a 14 ms slice of the Qt thread took 50 ms of wall time
    beside the view thread's reading (measured, ``benchmarks/bench_heartbeat.py --stalls``)."""

    def __init__(self, max_wait: float = 0.25) -> None:
        self.max_wait = max_wait
        self._depth = 0
        self._free = threading.Event()
        self._free.set()

    @contextmanager
    def busy(self):
        """The foreground thread's work inside this block goes first (nests)."""
        self._depth += 1
        self._free.clear()
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._free.set()

    def wait(self) -> None:
        """Wait (at most ``max_wait``) while the foreground thread is busy."""
        if not self._free.is_set():
            self._free.wait(self.max_wait)


_HOOKS = threading.local()


def set_yield_hook(hook: Callable[[], None] | None) -> None:
    """Make :func:`yield_point` call ``hook()`` in the calling thread (None: nothing)."""
    _HOOKS.hook = hook


def yield_point() -> None:
    """A point where long work lets more urgent work of the process go first (see :class:`Foreground`); nothing
    in a thread without a hook (the CLI, the job runner). Cheap enough to call every millisecond of work."""
    hook = getattr(_HOOKS, "hook", None)
    if hook is not None:
        hook()
