"""Help › User guide: the guide shipped with FairDesk (``docs/guide/*.md``; in a wheel and the frozen bundle
``fairdesk/resources/guide``), shown offline in a text browser that follows the links between its pages. Links to
anything outside the guide are not followed (nothing reaches the network)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout


def guide_dir() -> Path:
    """Where the guide is: the installed resources, or the checkout's ``docs/guide``."""
    from fairdesk import paths

    shipped = paths.resources_dir() / "guide"
    if (shipped / "index.md").is_file():
        return shipped
    return Path(__file__).resolve().parents[3] / "docs" / "guide"


class GuideDialog(QDialog):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("FairDesk user guide")
        self.browser = QTextBrowser(self)
        self.browser.setOpenLinks(False)  # decided here: a guide page, or nothing
        self.browser.anchorClicked.connect(self.follow)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser, 1)
        layout.addWidget(buttons)
        self.folder = guide_dir()
        self.resize(820, 640)
        self.show_page("index.md")

    def show_page(self, name: str) -> bool:
        path = (self.folder / name).resolve()
        if path.parent != self.folder.resolve() or not path.is_file():
            self.browser.setMarkdown(f"The guide page *{name}* is not in this installation ({self.folder}).")
            return False
        self.browser.setMarkdown(path.read_text(encoding="utf-8"))
        self.page = path.name
        return True

    def follow(self, url: QUrl) -> None:
        if url.scheme() in ("", "file") and url.path().endswith(".md"):
            self.show_page(Path(url.path()).name)
        # other links (web pages) are not opened: FairDesk opens no network connection
