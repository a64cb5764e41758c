"""No exit path aborts the process or loses a job's result while a ``MainWindow`` is still open (issue class
"nothing lost, anywhere").

The window's job runners each own a worker ``QThread`` (``jobs/qt_bridge.py``). It was stopped only in
``closeEvent``: a process that ended with the window still open (a script or test host that builds it and returns,
``sys.exit`` — also from a slot —, an uncaught exception) aborted in the interpreter's teardown — "QThread: Destroyed while thread 'fairdesk-job-worker' is still running", exit status 134 — killing a
running job mid-step and skipping the exit handlers after it. Now every live runner is shut down (jobs cancelled,
worker waited for) on ``aboutToQuit`` and at ``atexit``. (``QApplication.quit`` then return did not abort: Qt 6's
quit closes the windows first, so ``closeEvent`` runs; it stays here as a control.) A window deleted without
closing (``deleteLater``) left its workers running, emitting to a deleted runner ("Signal source has been
deleted" from the worker): now a runner's ``destroyed`` cancels and waits for its worker.

Each way a Python process ends × (idle worker, a long job running): run in a child process with ``FAIRDESK_HOME``
in a temporary folder; the exit status is the expected one, nothing says "QThread: Destroyed", an exit handler
registered first (so run last) still runs, and a running job was cancelled and its cancel path ran to its end:
its last step's result file is whole and no temporary file of an atomic write is left. ``os._exit`` and kills run
nothing and are out of scope; so is a job that ignores its cancel for longer than ``EXIT_TIMEOUT_MS`` (see
docs/architecture.md).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fairdesk

CHILD = r"""
import atexit, os, sys, time
from pathlib import Path

mode, job = sys.argv[1], sys.argv[2]
out = Path(os.environ["FAIRDESK_HOME"])
atexit.register(lambda: (out / "last_exit_handler_ran").write_text("1"))  # registered first: runs last

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

app = QApplication([])
from fairdesk.core import atomic
from fairdesk.gui.main_window import MainWindow

window = MainWindow()
window.show()


def long_job(progress, cancel):
    (out / "started").write_text("1")
    try:
        for i in range(3000):  # 30 s unless cancelled
            cancel.check()
            atomic.write_text(out / "result.txt", f"step {i} " * 1000)
            time.sleep(0.01)
    except BaseException:
        (out / "cancelled").write_text("1")
        raise
    (out / "finished").write_text("1")


if job == "running":
    window.run_job("long", long_job)
    while not (out / "started").exists():
        time.sleep(0.01)
if mode == "deleted":  # the window deleted without closing, the application goes on
    from PySide6.QtCore import QCoreApplication, QEvent

    threads = [window.runner._thread, window.views._thread]
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    if not any(t.isRunning() for t in threads) and (job == "idle" or (out / "cancelled").exists()):
        (out / "stopped_on_delete").write_text("1")
elif mode == "sys_exit":
    sys.exit(3)
elif mode == "raise":
    raise RuntimeError("an uncaught error")
elif mode in ("quit", "slot_exit"):
    def slot():
        if mode == "slot_exit":
            sys.exit(4)
        app.quit()

    QTimer.singleShot(0, slot)
    app.exec()
"""

#: each way a process ends with the window open, and its exit status
MODES = {"return": 0, "sys_exit": 3, "raise": 1, "quit": 0, "slot_exit": 4, "deleted": 0}


def _run(tmp_path: Path, mode: str, job: str) -> tuple[subprocess.CompletedProcess, Path]:
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, FAIRDESK_HOME=str(home), FAIRDESK_SETTINGS=str(home / "settings.ini"),
               QT_QPA_PLATFORM="offscreen", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(Path(fairdesk.__file__).parent.parent),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, job], env=env, capture_output=True, text=True,
                          timeout=120)
    return proc, home


@pytest.mark.parametrize("job", ["idle", "running"])
@pytest.mark.parametrize("mode", list(MODES))
def test_exit_with_the_window_open(tmp_path, mode, job):
    proc, home = _run(tmp_path, mode, job)
    assert "QThread: Destroyed" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == MODES[mode], proc.stderr[-2000:]
    assert (home / "last_exit_handler_ran").exists(), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr or mode in ("raise", "slot_exit"), proc.stderr[-2000:]
    if mode == "deleted":
        assert (home / "stopped_on_delete").exists(), proc.stderr[-2000:]
    if job == "running":
        assert (home / "cancelled").exists() and not (home / "finished").exists(), proc.stderr[-2000:]
        text = (home / "result.txt").read_text()
        step = text.split()[1]
        assert text == f"step {step} " * 1000  # whole: the last write made before the cancel
        assert not list(home.glob(".result.txt.*.tmp"))  # no write was cut off
