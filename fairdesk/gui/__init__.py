"""The FairDesk desktop GUI (PySide6 + pyqtgraph). The only package besides ``jobs/qt_bridge.py`` that imports Qt.

Importing it keeps Qt's raster fills on the thread that paints (``QT_NO_GUI_THREADPOOL``, Qt's own run-time switch,
read once, at the first large fill of the process): otherwise Qt splits every fill of 96 or more pixel rows (a
page's background, a tab frame, a scroll bar's groove) over its GUI thread pool and blocks the Qt thread until the
pool's threads have run — on two CPUs shared with a running audit or another program they wait for a CPU first, and
handing the pieces over cost the Qt thread more than the fills (measured: docs/architecture.md).
"""
import os as _os

_os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")
