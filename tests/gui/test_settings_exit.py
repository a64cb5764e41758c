"""A value set through ``Settings`` is in the INI file after the process ends, however it ends (issue class "nothing
lost, anywhere").

The Qt thread never writes the file: a writer thread does (``gui/settings.py``: the write costs 10–400 ms). A daemon
writer is frozen at interpreter exit, so a value set just before an exit other than closing the main window (a CLI
or test host that sets a value and returns, ``sys.exit`` from a slot, an uncaught exception, ``QApplication.quit``)
was lost whenever its ``Settings`` outlived the interpreter's teardown — here, as in the GUI, held by another
thread (a job's worker holding the window) — and the writer had not written it yet (the child's writer is held
0.2 s, a disk as busy as measured on this machine).

Over generated sequences of (key, value) sets and each way a Python process ends, run in a child process with
``FAIRDESK_HOME`` / ``FAIRDESK_SETTINGS`` in a temporary folder: the file holds the last value set of every key.
A value set by an exit handler that runs after the settings module's own is written at once. ``os._exit`` (and a
kill) end the process without running anything and are out of scope, except after the Qt event loop has quit:
``aboutToQuit`` has the file written before ``exec`` returns.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fairdesk

CHILD = r"""
import atexit, json, os, sys, threading, time

mode, sets = sys.argv[1], json.loads(sys.argv[2])
if mode == "late_atexit":  # registered first, so run last: after the settings module's own exit handler
    atexit.register(lambda: set_all())

import fairdesk.gui.settings as settings_module
from fairdesk.gui.settings import Settings

real_write = settings_module._write
settings_module._write = lambda path: (time.sleep(0.2), real_write(path))  # a busy disk: the write is slow
s = Settings()
held = threading.Event()
threading.Thread(target=lambda s=s: held.wait(), daemon=True).start()  # s outlives the interpreter's teardown
SETTERS = {"executor/kind": "executor", "executor/scheduler": "scheduler"}


def set_all():
    for key, value in sets:
        setattr(s, SETTERS.get(key, key), value)


if mode.startswith("quit") or mode == "slot_exit":
    from PySide6.QtCore import QCoreApplication, QTimer

    app = QCoreApplication([])

    def slot():
        set_all()
        if mode == "slot_exit":
            sys.exit(4)
        app.quit()

    QTimer.singleShot(0, slot)
    app.exec()
    if mode == "quit_os_exit":
        os._exit(0)
elif mode != "late_atexit":
    set_all()
    if mode == "sys_exit":
        sys.exit(3)
    if mode == "raise":
        raise RuntimeError("an uncaught error")
"""

#: each way a process ends, and its exit status
MODES = {"return": 0, "sys_exit": 3, "raise": 1, "quit": 0, "quit_os_exit": 0, "slot_exit": None, "late_atexit": 0}
INTS = ["threads", "n_boot", "suppress_k", "seed", "min_group_size"]
SETS = st.lists(st.one_of(
    st.tuples(st.sampled_from(INTS), st.integers(-2**31, 2**31 - 1)),
    st.tuples(st.just("executor/kind"), st.sampled_from(["local", "dask"])),
    # (a lone surrogate cannot be written to the UTF-8 file: QSettings writes an empty value; not typed in a field)
    st.tuples(st.just("executor/scheduler"), st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)),
), min_size=1, max_size=10)


def run_child(mode: str, sets: list, folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FAIRDESK_HOME": str(folder), "FAIRDESK_SETTINGS": str(folder / "settings.ini"),
           "QT_QPA_PLATFORM": "offscreen",
           "PYTHONPATH": os.pathsep.join([str(Path(fairdesk.__file__).resolve().parents[1]),
                                          os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", CHILD, mode, json.dumps(sets)], env=env, capture_output=True,
                          text=True, timeout=120)


def written(path: Path) -> dict:
    """The values in the INI file, read by a ``QSettings`` of this process (a file it has not opened before)."""
    from PySide6.QtCore import QSettings

    qs = QSettings(str(path), QSettings.Format.IniFormat)
    return {key: qs.value(key) for key in qs.allKeys()}


@pytest.mark.parametrize("mode", list(MODES))
@settings(max_examples=2, derandomize=True, deadline=None)
@given(sets=SETS)
def test_every_value_set_is_in_the_file_however_the_process_ends(mode, sets):
    with tempfile.TemporaryDirectory() as folder:
        done = run_child(mode, sets, Path(folder))
        if MODES[mode] is not None:
            assert done.returncode == MODES[mode], done.stderr
        expected = {}
        for key, value in sets:
            expected[key] = str(value).strip() if key == "executor/scheduler" else str(value)
        path = Path(folder) / "settings.ini"
        assert path.exists(), f"{mode}: the settings file was never written\n{done.stderr}"
        assert written(path) == expected, done.stderr
