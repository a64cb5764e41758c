"""Representation learners page (issue 13): a placeholder until the GUI page is built on the new base page.

The job behind it is :func:`fairdesk.jobs.age.train_age_independent` (audit kind ``"age_independence"``); for now
the page points to the command line, which runs the same job and stores the same document.
"""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class AgeLearnersPage(QWidget):
    """Placeholder page: says how to run the comparison from the command line."""

    # where the window places it (the base pages' attributes; without them the window cannot be built)
    TAB, TITLE, ATTR, AFTER = "audit", "Representation learners", "age_page", None

    def __init__(self, window=None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.window_ = window
        label = QLabel("Age-independent representation learners are not on this page yet. Use\n"
                       "  fairdesk-cli train age-independent --data FILE.csv --label COL --attribute COL "
                       "--group-id COL --json OUT.json --project PROJECT.fairdesk\n"
                       "for now; the audit it stores opens here and exports as PDF like any other.")
        label.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addStretch(1)
