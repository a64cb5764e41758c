"""The CTF audit page named by the registry (audit kind ``ctf``): a placeholder until the GUI base page lands."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel

from fairdesk.core.kinds import AUDIT_KINDS, resolve


def test_registry_page_builds_and_points_to_the_cli(qtbot):
    page_class = resolve(AUDIT_KINDS["ctf"].page)
    page = page_class(None)
    qtbot.addWidget(page)
    texts = [w.text() for w in page.findChildren(QLabel)]
    assert texts == ["Counterfactual token fairness: run from fairdesk-cli audit ctf for now"]
