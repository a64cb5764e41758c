"""Counterfactual token fairness (issue 12): the Audit-tab page. A placeholder until the page is built on the GUI
base page; the audit runs from ``fairdesk-cli audit ctf`` (the same job, :func:`fairdesk.jobs.ctf.audit_ctf`)."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class CTFAuditPage(QWidget):
    """Shows where to run the CTF audit for now (the registry row of audit kind ``ctf`` names this class)."""

    def __init__(self, window=None) -> None:
        super().__init__()
        self.window_ = window
        layout = QVBoxLayout(self)
        label = QLabel("Counterfactual token fairness: run from fairdesk-cli audit ctf for now")
        label.setWordWrap(True)
        layout.addWidget(label)
        layout.addStretch(1)
