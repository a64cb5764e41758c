"""``fairdesk``: start the desktop app (gui-script entry point ``fairdesk.gui.app:main``).

    fairdesk [PROJECT.fairdesk] [--demo] [--headless]

``--demo`` builds the bundled demo project (once, in the user data folder) and opens it. Without a display, or with
``--headless``, the demo audit runs in the terminal and writes its PDF report instead (``fairdesk-cli demo``).
"""
from __future__ import annotations

import fairdesk._bootstrap  # noqa: F401  (offline environment first: before Qt, before anything heavy)

import argparse
import logging
import os
import sys
from pathlib import Path

from fairdesk.console import say


def _parser() -> argparse.ArgumentParser:
    from fairdesk import version

    p = argparse.ArgumentParser(prog="fairdesk", description="FairDesk: offline fairness audits (desktop app).")
    p.add_argument("--version", action="version", version=f"fairdesk {version()}")
    p.add_argument("project", nargs="?", help="a .fairdesk project file to open")
    p.add_argument("--demo", action="store_true", help="build (once) and open the bundled demo project")
    p.add_argument("--headless", action="store_true",
                   help="no window: run the demo audit and write its PDF report (same as fairdesk-cli demo)")
    p.add_argument("--out", help="with --headless: folder for the demo project and report")
    return p


def _has_display() -> bool:
    if os.environ.get("QT_QPA_PLATFORM"):
        return True
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def _route_qt_messages() -> None:
    """Send Qt's own warnings to logging (and so to the Log dock) instead of stderr."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    qt_log = logging.getLogger("fairdesk.qt")
    levels = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
              QtMsgType.QtWarningMsg: logging.WARNING, QtMsgType.QtCriticalMsg: logging.ERROR,
              QtMsgType.QtFatalMsg: logging.CRITICAL}

    def handler(mode, context, message) -> None:
        if "propagateSizeHints" in message:  # harmless noise of some platform plugins
            return
        qt_log.log(levels.get(mode, logging.WARNING), "%s", message)

    qInstallMessageHandler(handler)


_terminated: list[int] = []


def _quit_on_termination() -> None:
    """SIGTERM and SIGHUP (logout, a scheduler) close the main window like the user quitting: jobs are cancelled and
    the scratch folder removed; the exit code is 128 + the signal's number. Installed before the window is built, so
    a signal during start-up counts too (the event loop then ends as soon as it starts)."""
    import signal

    def handler(signum, frame) -> None:
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication

        _terminated.append(signum)
        app = QApplication.instance()
        if app is not None:
            app.closeAllWindows()
            QTimer.singleShot(0, app.quit)  # also when the event loop has not started yet

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), handler)


def _wake_python(app) -> None:
    """Qt's event loop does not return to Python by itself: a timer lets the interpreter run signal handlers."""
    from PySide6.QtCore import QTimer

    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(200)
    app._fairdesk_signal_timer = timer  # kept alive with the app


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.headless or not _has_display():
        from fairdesk import paths

        if not args.headless:
            say("fairdesk: no display found; running the demo audit headless instead "
                "(set QT_QPA_PLATFORM=offscreen to force the window).", file=sys.stderr)
        out = args.out or str(paths.data_dir() / "demo-headless")
        # fairdesk-cli as its own program, so that the GUI and the CLI never import each other
        return paths.run_program("fairdesk-cli", ["demo", "--out", out])

    from fairdesk.gui import syslibs

    if syslibs.platform_is_xcb():  # Qt aborts (exit 134) without one of its xcb libraries: say which to install
        missing = syslibs.missing_libraries()
        if missing:
            say(syslibs.missing_sentence(missing), file=sys.stderr)
            return 3
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from PySide6.QtWidgets import QApplication

    from fairdesk.core import scratch

    _quit_on_termination()
    scratch.remove_leftovers()  # scratch folders of FairDesk runs that were killed (crash recovery)
    _route_qt_messages()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    _wake_python(app)
    app.setApplicationName("FairDesk")
    app.setOrganizationName("FairDesk")
    from fairdesk.gui.main_window import MainWindow

    window = MainWindow()
    window.show()
    if args.project:
        window.open_project(Path(args.project), create=not Path(args.project).exists())
    if args.demo:
        window.open_demo()
    code = app.exec() if not _terminated else 0
    if _terminated:  # SIGTERM/SIGHUP: the window was closed like a quit (running jobs cancelled)
        code = 128 + _terminated[0]
    scratch.cleanup()
    if not window.shutdown(5000):  # both workers (jobs and views): a signal during start-up skips closeEvent
        # a job ignored its cancel: stored results are safe (every write is one transaction); leave now
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
