"""Qt adapter of the job engine: one worker ``QThread`` running queued :class:`~fairdesk.jobs.engine.Job` s.

The only Qt import under ``fairdesk/jobs``. The pattern follows superqt's thread workers and Orange's
``concurrent`` helpers: the work is a plain function ``fn(progress, cancel)`` that knows nothing about Qt; the
worker thread calls it and reports back through *queued* signals, so slots always run in the GUI thread.

* One worker thread runs the jobs one at a time, in the order they were submitted (so there is one GPU slot).
* ``progress(job_id, fraction, message)`` is throttled to at most :attr:`JobRunner.MAX_RATE` signals a second
  per runner (the last value is not lost: ``finished`` carries the job with its final state and message).
* ``cancel(job_id)`` sets the job's cancel token (a running job stops at its next checkpoint; a pending job is
  marked cancelled at once); ``cancel_all()`` does it for every job; ``shutdown(timeout_ms)`` cancels everything
  and waits for the worker (called from ``MainWindow.closeEvent`` and from test teardown).
* No exit leaves a worker running (which would abort the process: "QThread: Destroyed while thread … is still
  running", exit status 134, later exit handlers not run): every live runner is shut down — its jobs cancelled,
  its worker waited for up to :data:`EXIT_TIMEOUT_MS` — when the Qt application is about to quit
  (``aboutToQuit``) and at the interpreter's exit (``atexit``: a normal end, ``sys.exit``, an uncaught
  exception), also when the window that owns it was never closed; and when the runner's owner is deleted without
  closing (``destroyed``: cancelled and waited for the same way, without signals). A job that ignores its cancel token for longer
  is not waited for again: the process then still aborts in PySide's teardown (which deletes the QThread), killing
  the job mid-step — results are written atomically, so nothing is half-stored, but later exit handlers do not run.
  ``os._exit`` and kills run nothing and are out of scope.
"""
from __future__ import annotations

import atexit
import collections
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal

from fairdesk.jobs.engine import Job, JobState

log = logging.getLogger(__name__)

# Runners that could not be stopped within their timeout are kept alive here, so that Python's garbage collector
# never destroys a QThread that is still running (which would abort the process). At exit PySide's teardown deletes
# them anyway (see the module docstring: a job that ignores its cancel still aborts the exit).
_ZOMBIES: list["JobRunner"] = []
#: every runner not shut down yet (see shutdown_all)
_LIVE: "weakref.WeakSet[JobRunner]" = weakref.WeakSet()
#: how long an exit waits for each runner's running job to stop after its cancel
EXIT_TIMEOUT_MS = 10000
_QUIT_CONNECTED = "fairdesk-jobs-shutdown-on-quit"


def shutdown_all(timeout_ms: int | None = None) -> bool:
    """Shut down every live runner (cancel its jobs, wait for its worker up to ``timeout_ms`` each).

    Connected to ``aboutToQuit`` and registered with ``atexit``: no exit path that runs Python's exit leaves a
    running QThread for the interpreter's teardown to destroy. Each runner is waited for once (a runner whose job
    did not stop in time is not waited for again). Returns False if some job did not stop in time."""
    timeout = EXIT_TIMEOUT_MS if timeout_ms is None else int(timeout_ms)
    ok = True
    for runner in list(_LIVE):
        try:
            ok = runner.shutdown(timeout) and ok
        except RuntimeError:  # its Qt object is already deleted (the worker ended with it)
            continue
    return ok


atexit.register(shutdown_all)  # registered after PySide's own exit handlers, so run before them


def _shutdown_on_quit() -> None:
    """Connect :func:`shutdown_all` to the running Qt application's ``aboutToQuit`` (once per application)."""
    if threading.current_thread() is not threading.main_thread():
        return
    app = QCoreApplication.instance()
    if app is not None and not app.property(_QUIT_CONNECTED):
        app.aboutToQuit.connect(shutdown_all)
        app.setProperty(_QUIT_CONNECTED, True)


def _stop_unowned(runner: "JobRunner | None") -> None:
    if runner is not None:
        runner._stop_unowned()


class _WorkerThread(QThread):
    """Pops jobs from the runner's queue and runs them; emits the runner's signals from this thread."""

    def __init__(self, runner: "JobRunner") -> None:
        super().__init__()
        self._runner = runner
        self.setObjectName("fairdesk-job-worker")

    def run(self) -> None:  # noqa: D401 - Qt override
        runner = self._runner
        if runner._thread_init is not None:
            runner._thread_init()
        while True:
            job = runner._next_job()
            if job is None:
                return
            runner._run_one(job)


class JobRunner(QObject):
    """Runs :class:`Job` s one after another in a single worker thread; talks back through queued signals."""

    #: (job id, fraction in [0, 1], message) — throttled
    progress = Signal(int, float, str)
    #: the Job, state RUNNING
    started = Signal(object)
    #: the Job, state DONE / FAILED / CANCELLED (``job.error`` says why, ``job.details`` holds a traceback)
    finished = Signal(object)

    MAX_RATE = 10.0  # progress signals per second, at most (each repaints a bar, a line and the status bar)

    def __init__(self, parent: QObject | None = None, *, log_level: int = logging.INFO,
                 thread_init: Callable[[], None] | None = None) -> None:
        super().__init__(parent)
        self._log_level = log_level  # of the "job started / done" lines (a runner of many small jobs logs less)
        self._thread_init = thread_init  # called first in the worker thread (e.g. its yield hook)
        self._lock = threading.Condition()
        self._queue: collections.deque[Job] = collections.deque()
        self._jobs: dict[int, Job] = {}
        self._current: Job | None = None
        self._closing = False
        self._last_emit = 0.0
        self._last_shown: tuple | None = None
        self._min_interval = 1.0 / self.MAX_RATE
        self._thread = _WorkerThread(self)
        self._thread.start()
        _LIVE.add(self)
        _shutdown_on_quit()
        # the owner deleted without closing (``deleteLater``, a parent's end): stop the worker too; a plain function
        # of the runner's state, since the runner's Qt side is going
        # (a weak reference: no cycle keeps the runner alive; a running worker holds it anyway)
        self.destroyed.connect(lambda *_, ref=weakref.ref(self): _stop_unowned(ref()))

    # ---- public API (GUI thread) ---------------------------------------------------------------------------
    def submit(self, job_or_name: Job | str, fn: Callable[..., Any] | None = None) -> Job:
        """Queue a job (or ``submit(name, fn)``); returns the Job, whose ``id`` the signals carry."""
        job = job_or_name if isinstance(job_or_name, Job) else Job(str(job_or_name), fn)
        with self._lock:
            if self._closing:
                raise RuntimeError("The job runner has been shut down.")
            self._jobs[job.id] = job
            self._queue.append(job)
            self._lock.notify_all()
        return job

    def job(self, job_id: int) -> Job | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    @property
    def current(self) -> Job | None:
        return self._current

    @property
    def idle(self) -> bool:
        with self._lock:
            return self._current is None and not self._queue

    def pending(self) -> list[Job]:
        with self._lock:
            return list(self._queue)

    def cancel(self, job_id: int) -> bool:
        """Ask a job to stop. A pending job is cancelled at once; a running one at its next checkpoint."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.state.finished:
                return False
            job.cancel()
            dequeued = job in self._queue
            if dequeued:
                self._queue.remove(job)
                job.state, job.error = JobState.CANCELLED, "Cancelled before it started; earlier results are kept."
        if dequeued:
            self.finished.emit(job)
        return True

    def cancel_all(self) -> None:
        with self._lock:
            ids = [j.id for j in self._queue] + ([self._current.id] if self._current is not None else [])
        for job_id in ids:
            self.cancel(job_id)

    def wait_idle(self, timeout_ms: int = 30000) -> bool:
        """Block until no job is pending or running (tests; never from a slot that the jobs wait for)."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            while self._current is not None or self._queue:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.05))
        return True

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Cancel every job, stop the worker and wait for it. Returns False if it did not stop in time."""
        with self._lock:
            already = self._closing
            self._closing = True
        if not already:
            self.cancel_all()
            with self._lock:
                self._lock.notify_all()
        if not self._thread.isRunning():
            _LIVE.discard(self)
            return True
        stopped = bool(self._thread.wait(int(timeout_ms)))
        _LIVE.discard(self)  # (a runner that did not stop is kept in _ZOMBIES)
        if not stopped:
            log.warning("a job did not stop within %d ms of being cancelled", timeout_ms)
            if self not in _ZOMBIES:
                _ZOMBIES.append(self)
        return stopped

    def _stop_unowned(self, timeout_ms: int | None = None) -> None:
        """:meth:`shutdown` without signals, for when the runner's Qt object is being deleted."""
        if self not in _LIVE:  # already shut down (e.g. at exit, before PySide's teardown deletes everything)
            return
        with self._lock:
            self._closing = True
            for job in self._queue:
                job.cancel()
                job.state, job.error = JobState.CANCELLED, "Cancelled before it started; earlier results are kept."
            self._queue.clear()
            if self._current is not None:
                self._current.cancel()
            self._lock.notify_all()
        timeout = EXIT_TIMEOUT_MS if timeout_ms is None else int(timeout_ms)
        _LIVE.discard(self)
        try:
            stopped = self._thread.wait(timeout)
        except RuntimeError:  # the thread's Qt object is gone already (so it was not running)
            return
        if not stopped and self not in _ZOMBIES:
            log.warning("a job did not stop within %d ms of being cancelled", timeout)
            _ZOMBIES.append(self)

    def _emit(self, signal, *args) -> None:
        try:
            signal.emit(*args)
        except RuntimeError:  # the runner's Qt object is deleted (its owner went): no one is left to tell
            pass

    @property
    def closing(self) -> bool:
        """True once :meth:`shutdown` was called (``submit`` then refuses new jobs)."""
        return self._closing

    @property
    def running(self) -> bool:
        return self._thread.isRunning()

    # ---- worker thread -------------------------------------------------------------------------------------
    def _next_job(self) -> Job | None:
        with self._lock:
            while not self._queue and not self._closing:
                self._lock.wait(0.5)
            if self._closing and not self._queue:
                return None
            job = self._queue.popleft()
            self._current = job
            return job

    def _run_one(self, job: Job) -> None:
        self._last_emit, self._last_shown = 0.0, None
        job.state = JobState.RUNNING
        self._emit(self.started, job)
        t0 = time.monotonic()
        log.log(self._log_level, "job %d '%s' started", job.id, job.name)
        try:
            job.run(self._on_progress)
        finally:
            with self._lock:
                self._current = None
                self._lock.notify_all()
        log.log(logging.INFO if job.state == JobState.FAILED else self._log_level, "job %d '%s' %s in %.1f s%s",
                job.id, job.name, job.state.value, time.monotonic() - t0, f": {job.error}" if job.error else "")
        self._emit(self.finished, job)

    def _on_progress(self, job: Job) -> None:
        now = time.monotonic()
        if now - self._last_emit >= self._min_interval:
            shown = (job.id, round(float(job.fraction), 3), str(job.message))
            if shown == self._last_shown:  # nothing a user could see changed: no repaint
                return
            self._last_emit, self._last_shown = now, shown
            self._emit(self.progress, job.id, float(job.fraction), str(job.message))
