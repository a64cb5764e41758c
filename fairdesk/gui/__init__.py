"""The FairDesk desktop GUI (PySide6 + pyqtgraph). The only package besides ``jobs/qt_bridge.py`` that imports Qt."""
