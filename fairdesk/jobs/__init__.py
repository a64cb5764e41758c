"""The job engine: plain functions ``f(..., progress, cancel)`` run with states, progress and cancel.

``engine`` has no Qt; ``qt_bridge`` adapts it to a QThread for the GUI; the CLI calls the same job functions
(``tasks``) directly with a terminal progress bar.
"""
