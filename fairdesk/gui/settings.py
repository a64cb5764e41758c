"""Typed settings over ``QSettings`` in an INI file (never pickled, readable by a human).

The file lives in the user data folder (``paths.data_dir()``, which ``FAIRDESK_HOME`` overrides), so tests that
point ``FAIRDESK_HOME`` at a temporary folder never touch the user's settings. ``FAIRDESK_SETTINGS`` may name the
INI file directly.
"""
from __future__ import annotations

import atexit
import os
import queue
import threading
from pathlib import Path

from PySide6.QtCore import QByteArray, QCoreApplication, QEvent, QSettings

from fairdesk import paths

MAX_RECENT = 8


def settings_path() -> Path:
    explicit = os.environ.get("FAIRDESK_SETTINGS")
    return Path(explicit) if explicit else paths.data_dir() / "fairdesk-settings.ini"


class _WrittenByTheWriter(QSettings):
    """The Qt thread's ``QSettings``: a value set through it is seen at once by every ``QSettings`` of the file in
    the process, but its deferred write is left to :func:`write_soon`'s thread. Qt writes a changed INI file when
    the object's event loop handles its ``UpdateRequest``: on the Qt thread, a temporary file and two
    ``fdatasync`` calls, 10–20 ms on an idle disk and up to 0.4 s measured on this shared one, in the same turn of
    the event loop as the slot that set the value (every project opened sets its recent list and folder)."""

    def event(self, event) -> bool:  # noqa: D401 - Qt override
        if event.type() == QEvent.Type.UpdateRequest:
            return True
        return super().event(event)


_TO_WRITE: queue.SimpleQueue = queue.SimpleQueue()  # paths to write; a threading.Event: "set me when done"
_WRITER: list[threading.Thread] = []
_WRITER_LOCK = threading.Lock()
_AT_EXIT: list[bool] = []  # set once the interpreter's exit has flushed the writer: later writes are made at once


def write_soon(path: Path) -> None:
    """Have the settings file ``path`` written, with every value set in the process, by the settings writer thread
    (started on first use): a new ``QSettings`` of the file there writes what the others set (Qt shares the values
    of a file between the ``QSettings`` of a process, and releases the interpreter lock while it writes).

    Nothing set is lost when the process ends: the writer is a daemon thread (it never holds the process up), so
    :func:`flush` waits for it to write everything asked of it, at the interpreter's exit (``atexit``: a normal
    end, ``sys.exit``, an uncaught exception) and when the Qt application is about to quit (``aboutToQuit``: the
    first thing of a quit, before ``exec`` returns). A value set after the exit's flush is written at once."""
    if _AT_EXIT:
        _write(str(path))
        return
    with _WRITER_LOCK:
        if not _WRITER or not _WRITER[0].is_alive():
            _WRITER[:] = [threading.Thread(target=_write_loop, name="fairdesk-settings-writer", daemon=True)]
            _WRITER[0].start()
        _flush_on_quit()
    _TO_WRITE.put(str(path))


def flush() -> None:
    """Return once every write asked of the writer thread so far is made (made here when there is no writer)."""
    done = threading.Event()
    _TO_WRITE.put(done)
    with _WRITER_LOCK:
        writer = _WRITER[0] if _WRITER else None
    while not done.is_set():
        if writer is None or not writer.is_alive():  # (no writer, or it ended): write what is left here
            _write_queued()
        done.wait(0.05)


def _flush_at_exit() -> None:
    _AT_EXIT.append(True)
    flush()


atexit.register(_flush_at_exit)  # runs before daemon threads are frozen: the writer can still finish


def _flush_on_quit() -> None:
    """Connect :func:`flush` to the running Qt application's ``aboutToQuit`` (once per application)."""
    if threading.current_thread() is not threading.main_thread():
        return  # (the application's thread connects it: FairDesk's Qt thread is the main thread)
    app = QCoreApplication.instance()
    if app is not None and not app.property(_FLUSH_CONNECTED):
        app.aboutToQuit.connect(flush)
        app.setProperty(_FLUSH_CONNECTED, True)


_FLUSH_CONNECTED = "fairdesk-settings-flush-on-quit"


def _write_loop() -> None:
    while True:
        _write_queued(block=True)


def _write_queued(block: bool = False) -> None:
    """Write every file queued, each once however often it was asked for (one write holds every value set
    before it), then set the events queued with them."""
    paths: dict[str, None] = {}
    events: list[threading.Event] = []
    try:
        item = _TO_WRITE.get(block=block)
        while True:
            if isinstance(item, threading.Event):
                events.append(item)
            else:
                paths[item] = None
            item = _TO_WRITE.get_nowait()
    except queue.Empty:
        pass
    try:
        for path in paths:
            _write(path)
    finally:
        for event in events:
            event.set()


def _write(path: str) -> None:
    # a new QSettings of the file writes the values set since the last write as it opens (Qt's initial sync)
    QSettings(path, QSettings.Format.IniFormat).sync()


class Settings:
    """The user's preferences. Each property reads and writes through at once (see :meth:`_set`)."""

    DEFAULTS = {"threads": 1, "n_boot": 1000, "suppress_k": 11, "seed": 0, "min_group_size": 30}

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else settings_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._qs = _WrittenByTheWriter(str(self.path), QSettings.Format.IniFormat)

    # ---- typed access ----------------------------------------------------------------------------------------
    def _int(self, key: str, lo: int, hi: int) -> int:
        value = self._qs.value(key, self.DEFAULTS[key])
        try:
            value = int(value)
        except (TypeError, ValueError):
            value = self.DEFAULTS[key]
        return min(max(value, lo), hi)

    def _set(self, key: str, value) -> None:
        """Every ``QSettings`` of this file in the process sees the value at once; the settings writer thread
        writes the file soon after (:func:`write_soon`: before the process ends, unless it is killed or ends by
        ``os._exit``), and closing the window writes it too. An explicit ``sync()`` here wrote and fsynced the file
        on the Qt thread holding the interpreter lock, 10–16 ms each, twice in every project opened (its recent
        list and folder); Qt's own deferred write did the same in the event loop's next turn."""
        self._qs.setValue(key, value)
        write_soon(self.path)

    @property
    def threads(self) -> int:
        """Threads for torch / scikit-learn / BLAS in training jobs (default 1)."""
        return self._int("threads", 1, max(1, os.cpu_count() or 1) * 2)

    @threads.setter
    def threads(self, value: int) -> None:
        self._set("threads", int(value))

    @property
    def n_boot(self) -> int:
        """Default number of bootstrap replicates of a new audit."""
        return self._int("n_boot", 100, 100000)

    @n_boot.setter
    def n_boot(self, value: int) -> None:
        self._set("n_boot", int(value))

    @property
    def suppress_k(self) -> int:
        """Small-cell threshold of reports: counts below k are shown as '<k'."""
        return self._int("suppress_k", 1, 1000)

    @suppress_k.setter
    def suppress_k(self, value: int) -> None:
        self._set("suppress_k", int(value))

    @property
    def seed(self) -> int:
        return self._int("seed", 0, 2**31 - 1)

    @seed.setter
    def seed(self, value: int) -> None:
        self._set("seed", int(value))

    @property
    def min_group_size(self) -> int:
        return self._int("min_group_size", 1, 10**9)

    @min_group_size.setter
    def min_group_size(self, value: int) -> None:
        self._set("min_group_size", int(value))

    @property
    def executor(self) -> str:
        """Where audits run their tasks: "local" (this process, the default) or "dask" (Settings › Executor)."""
        value = str(self._qs.value("executor/kind", "local"))
        return value if value in ("local", "dask") else "local"

    @executor.setter
    def executor(self, value: str) -> None:
        self._set("executor/kind", str(value))

    @property
    def scheduler(self) -> str:
        """The Dask scheduler's address (tcp://HOST:PORT) or local:N."""
        return str(self._qs.value("executor/scheduler", "") or "")

    @scheduler.setter
    def scheduler(self, value: str) -> None:
        self._set("executor/scheduler", str(value).strip())

    def executor_spec(self):
        """The :class:`~fairdesk.core.executor.ExecutorSpec` the jobs take (the CLI's --executor / --scheduler)."""
        from fairdesk.core.executor import ExecutorSpec

        return ExecutorSpec(self.executor, self.scheduler if self.executor == "dask" else None)

    # ---- recent projects, folders, geometry ----------------------------------------------------------------
    def recent_projects(self) -> list[str]:
        value = self._qs.value("recent_projects", [])
        if isinstance(value, str):
            value = [value] if value else []
        return [str(v) for v in (value or [])][:MAX_RECENT]

    def add_recent_project(self, path: str | Path) -> None:
        path = str(Path(path).resolve())
        recent = [p for p in self.recent_projects() if p != path]
        self._set("recent_projects", [path, *recent][:MAX_RECENT])

    def clear_recent_projects(self) -> None:
        self._set("recent_projects", [])

    def last_dir(self) -> str:
        value = self._qs.value("last_dir", "")
        return str(value) if value and Path(str(value)).is_dir() else str(Path.home())

    def set_last_dir(self, path: str | Path) -> None:
        path = Path(path)
        self._set("last_dir", str(path if path.is_dir() else path.parent))

    def geometry(self) -> QByteArray | None:
        value = self._qs.value("window/geometry")
        return value if isinstance(value, QByteArray) else None

    def set_geometry(self, geometry: QByteArray, state: QByteArray) -> None:
        self._qs.setValue("window/geometry", geometry)
        self._qs.setValue("window/state", state)
        self._qs.sync()

    def window_state(self) -> QByteArray | None:
        value = self._qs.value("window/state")
        return value if isinstance(value, QByteArray) else None
