"""The placeholder Representation learners page (issue 13): it builds without a project and points to the CLI."""
from PySide6.QtWidgets import QLabel

from fairdesk.core.kinds import AUDIT_KINDS, resolve


def test_placeholder_page_points_to_the_cli(qtbot):
    page_class = resolve(AUDIT_KINDS["age_independence"].page)
    page = page_class(None)
    qtbot.addWidget(page)
    text = " ".join(label.text() for label in page.findChildren(QLabel))
    assert "fairdesk-cli train age-independent" in text
