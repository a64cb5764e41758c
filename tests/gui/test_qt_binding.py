"""The Qt binding must not corrupt the interpreter. PySide6 6.12.0 releases one reference to None on every
``QCoreApplication.processEvents()`` and every ``QTimer.singleShot(ms, callable)`` (pyqtgraph and pytest-qt call
both all the time); after a few thousand calls None is deallocated and the app aborts ("none_dealloc") or crashes
elsewhere. pyproject.toml excludes that version; this test catches a binding that does it again."""
from __future__ import annotations

import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication


def test_event_processing_keeps_references_to_none(qapp):
    QApplication.processEvents()
    before = sys.getrefcount(None)
    for _ in range(200):
        QApplication.processEvents()
    for _ in range(200):
        QTimer.singleShot(0, lambda: None)
    QApplication.processEvents()
    # other code may create or drop a few references meanwhile; a leak shows as about 400 fewer
    assert sys.getrefcount(None) > before - 50, "the Qt binding releases references to None it does not own"
