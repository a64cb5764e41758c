"""Scratch data never outlives the run.

Every temporary project or file FairDesk makes (the CLI's scratch project, a training job's temporary project)
lives in **one private folder per run**: ``<temp>/fairdesk-run-<pid>-<start>-<random>``, made by
:func:`tempfile.mkdtemp` (mode 0700: only this user can read the patient table copied into it). ``<pid>`` and
``<start>`` (the process's start time, from ``/proc`` on Linux) name the process that owns it, so a later start can
*prove* a folder is a leftover: :func:`remove_leftovers` deletes a run folder only when its process has ended (or the
pid now belongs to another process, started at another time). A folder whose owner still runs is never touched, nor
is anything not named like a run folder. Where the start time cannot be read (not Linux), a folder is removed only
when no process with its pid is alive.

:func:`run_folder` makes the folder on first use and registers :func:`cleanup` with :mod:`atexit`; the CLI and the
GUI also turn SIGTERM and SIGHUP into a clean exit (:func:`exit_on_termination`, raising :class:`Terminated`), so
``finally`` blocks and :func:`cleanup` run and the folder is gone after the signal. Only SIGKILL (or power loss)
leaves a folder behind; the next start of ``fairdesk-cli`` or ``fairdesk`` removes it.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PREFIX = "fairdesk-run-"
_NAME = re.compile(rf"^{re.escape(PREFIX)}(?P<pid>\d+)-(?P<start>\d+)-[A-Za-z0-9_]+$")
_lock = threading.Lock()
_folder: Path | None = None


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C: the run stops cleanly (``finally`` blocks run, scratch is deleted).
    A subclass of :class:`KeyboardInterrupt`, so every place that already handles Ctrl-C handles these too; the CLI
    exits with ``128 + signum`` (143 for SIGTERM, 129 for SIGHUP; Ctrl-C is 130 = 128 + SIGINT)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _start_time(pid: int) -> int:
    """The start time of process ``pid`` (clock ticks since boot, Linux), or 0 when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime (after the "(comm)" field)
    except (OSError, ValueError, IndexError):
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _base() -> Path:
    return Path(tempfile.gettempdir())


def run_folder() -> Path:
    """This run's private scratch folder (mode 0700), made on first use and removed when the process exits."""
    global _folder
    with _lock:
        if _folder is None or not _folder.is_dir():
            pid = os.getpid()
            _folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-{_start_time(pid)}-", dir=_base()))
            atexit.register(cleanup)
        return _folder


def cleanup() -> None:
    """Remove this run's scratch folder and everything in it (at exit, on SIGTERM/SIGHUP, on the GUI's quit)."""
    global _folder
    with _lock:
        folder, _folder = _folder, None
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def scratch_path(name: str) -> Iterator[Path]:
    """A path ``name`` inside a new subfolder of :func:`run_folder`; the subfolder is deleted on leaving."""
    sub = Path(tempfile.mkdtemp(dir=run_folder()))
    try:
        yield sub / name
    finally:
        shutil.rmtree(sub, ignore_errors=True)


def remove_leftovers() -> list[Path]:
    """Delete the run folders of FairDesk processes that have ended (a SIGKILLed run, a power loss); returns them.
    A folder is removed only when its name proves whose it was and that process is gone."""
    removed = []
    try:
        entries = list(_base().iterdir())
    except OSError:
        return removed
    me = os.getpid()
    for entry in entries:
        m = _NAME.match(entry.name)
        if not m or int(m["pid"]) == me:
            continue
        pid, start = int(m["pid"]), int(m["start"])
        try:
            if entry.is_symlink() or not entry.is_dir() or entry.stat().st_uid != os.getuid():
                continue
        except (OSError, AttributeError):  # os.getuid does not exist on Windows
            if not entry.is_dir():
                continue
        if _alive(pid) and (start == 0 or _start_time(pid) in (0, start)):
            continue  # its process (or, where start times cannot be read, some process with its pid) still runs
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


#: where a run is: "starting" (imports, nothing written yet: a signal ends the process at once), "running" (the
#: first signal raises :class:`Terminated`/KeyboardInterrupt, so ``finally`` blocks clean up), "ending" (a signal
#: was handled or the run is over: later ones are remembered, never raised into clean-up code)
_phase = "running"
_first_signal: int | None = None
_previous: dict[int, object] = {}


def _on_signal(signum, frame) -> None:
    global _phase, _first_signal
    if _first_signal is None:
        _first_signal = signum
    if _phase == "starting":
        os._exit(128 + signum)  # nothing written yet, nothing to clean up; no traceback from half-done imports
    if _phase == "running":
        _phase = "ending"
        raise Terminated(signum)


def _signal_numbers() -> list[int]:
    return [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]


def install_early() -> None:
    """At the first instruction of the ``fairdesk-cli`` program, before anything heavy is imported: Ctrl-C, SIGTERM
    and SIGHUP end the process at once with ``128 + signum`` until :func:`exit_on_termination` takes over."""
    global _phase
    if threading.current_thread() is not threading.main_thread():
        return
    _phase = "starting"
    for num in _signal_numbers():
        signal.signal(num, _on_signal)


def exit_on_termination() -> None:
    """Handle Ctrl-C, SIGTERM and SIGHUP for one run (the CLI's ``main``; the GUI uses its own handler that quits
    the event loop): the first raises :class:`Terminated` in the main thread, so ``finally`` blocks and
    :func:`cleanup` run; later ones, and any during clean-up after :func:`end_of_run`, are remembered only, so the
    run still ends with ``128 +`` the first signal's number and no traceback."""
    global _phase, _first_signal
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        return
    _first_signal = None
    _phase = "running"
    for num in _signal_numbers():
        previous = signal.signal(num, _on_signal)
        if previous is not _on_signal:
            _previous.setdefault(num, previous)


def end_of_run(restore: bool) -> None:
    """The run is over (finished, failed or cancelled): signals from now on are remembered, not raised. ``restore``
    (``main`` called from Python, not the program): give the signals back to the handlers they had before."""
    global _phase
    _phase = "ending"
    if restore and threading.current_thread() is threading.main_thread():
        for num, previous in list(_previous.items()):
            signal.signal(num, previous)
        _previous.clear()


def ignore_signals() -> None:
    """For the last instructions of a program whose exit code is decided: Ctrl-C, SIGTERM and SIGHUP are ignored
    (an ignored signal stays ignored while the interpreter shuts down; a Python handler does not)."""
    if threading.current_thread() is threading.main_thread():
        for num in _signal_numbers():
            signal.signal(num, signal.SIG_IGN)


def signal_during_run() -> int | None:
    """The number of the first signal this run received (None: none)."""
    return _first_signal


def exit_code(err: BaseException) -> int:
    """The exit code of a cancelled run: 128 + the signal number (SIGTERM 143, SIGHUP 129), 130 for Ctrl-C."""
    if _first_signal is not None:
        return 128 + _first_signal
    return 128 + err.signum if isinstance(err, Terminated) else 130


if sys.platform == "win32":  # no /proc: liveness only (see the module docstring)
    def _start_time(pid: int) -> int:  # noqa: F811
        return 0
