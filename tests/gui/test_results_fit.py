"""The results side of a page is laid out few times when the page is first shown (issue 24, round 14b).

Bringing the Audit tab to the front the first time laid the Group gaps results out four times in one turn of the
event loop: the wrapped labels still had the widths of an earlier layout (so the results seemed taller than the
view), the vertical scroll bar came and went, and each change resized the results again. Counted, never timed."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QLabel, QTabWidget, QVBoxLayout, QWidget

from fairdesk.gui.widgets.panel_parts import ResultsScrollArea, split_page, wrapped_label

WORDS = " ".join(f"word{i}" for i in range(120))


class Results(QWidget):
    """Counts the calls of its ``sizeHint`` (each walks the whole results: every tab, every wrapped label)."""

    hints = 0

    def sizeHint(self):  # noqa: N802 - Qt override
        Results.hints += 1
        return super().sizeHint()


class Resizes(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[tuple[int, int]] = []

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.Resize:
            self.sizes.append(event.size().toTuple())
        return False


def page_on_hidden_tab(qtbot, n_labels: int):
    """A window of two tabs whose second (not yet shown) page is a set-up column beside results holding
    ``n_labels`` long wrapped labels; returns ``(tabs, results scroll area)``."""
    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    tabs.addTab(QWidget(), "first")
    page = QWidget()
    left, right = QWidget(), Results()
    left.setMinimumWidth(300)
    column = QVBoxLayout(right)
    for i in range(n_labels):
        column.addWidget(wrapped_label(f"{i}: {WORDS}"))
    filler = QLabel("a plot")
    filler.setMinimumSize(500, 300)
    column.addWidget(filler, 1)
    split_page(page, left, right, [400, 900])
    pages = QTabWidget()  # as the Audit tab: a tab of pages
    pages.addTab(page, "results")
    tabs.addTab(pages, "pages")
    tabs.resize(1400, 800)
    tabs.show()
    qtbot.waitExposed(tabs)
    QApplication.processEvents()
    return tabs, page.findChild(ResultsScrollArea)


def test_first_show_lays_the_results_out_at_most_twice(qtbot):
    """Failed before round 14b: 3 layouts of the results (a narrow one while the page still had its first size, one
    under a vertical scroll bar, one without it) and 32 size hints of the results in the first show."""
    for n_labels in (2, 6, 14):  # results that fit the view, nearly fit and scroll
        tabs, area = page_on_hidden_tab(qtbot, n_labels)
        resizes = Resizes()
        inner = area.widget()
        inner.installEventFilter(resizes)
        Results.hints = 0
        tabs.setCurrentIndex(1)
        QApplication.processEvents()
        inner.removeEventFilter(resizes)
        assert len(resizes.sizes) <= 2, (n_labels, resizes.sizes)  # 3 before round 14b
        # the scroll area keeps the results' size hint until they ask to be laid out again (32 calls before, each
        # through every tab and wrapped label; Qt's scroll area asks too, on every resize of the results)
        assert Results.hints <= 16, (n_labels, Results.hints)
        # and the results have the size the view gives them: its width, at least its height, scroll bars only when
        # the results need them
        view = area.viewport().size()
        assert inner.width() == max(view.width(), inner.minimumSizeHint().width())
        assert inner.height() == max(view.height(), area.minimum_height(inner.width()))
        assert area.verticalScrollBar().isVisible() == (inner.height() > view.height())
        # nothing left to do: a further fit changes nothing
        area.fit()
        assert inner.size().toTuple() == resizes.sizes[-1]
        tabs.close()
