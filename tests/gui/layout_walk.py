"""Walk every tab, page and result tab of the main window and list what a user could not read: text wider than its
widget (elided or cut), tab bars whose tabs hide behind scroll arrows, visible widgets lying outside their parent,
a window that cannot shrink to the requested size. Used by ``test_layout_walk.py`` and to grab screenshots."""
from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractButton, QAbstractScrollArea, QApplication, QCheckBox, QComboBox, QLabel,
                               QLineEdit, QMainWindow, QPushButton, QRadioButton, QScrollArea, QStyle, QTabBar,
                               QTabWidget, QWidget)

SIZES = ((1366, 768), (1920, 1080))
SLACK = 2  # pixels of rounding allowed


def _plain(text: str) -> str:
    if "<" in text and ">" in text:
        from PySide6.QtGui import QTextDocument

        doc = QTextDocument()
        doc.setHtml(text)
        return doc.toPlainText()
    return text


def describe(w: QWidget) -> str:
    chain = []
    p = w
    while p is not None and len(chain) < 4:
        name = p.objectName() or type(p).__name__
        chain.append(name)
        p = p.parentWidget()
    text = ""
    for attr in ("text", "currentText", "placeholderText"):
        if hasattr(w, attr):
            try:
                text = str(getattr(w, attr)())
            except TypeError:
                continue
            if text:
                break
    return f"{' < '.join(chain)} {text[:70]!r}"


def _inside_scrolled(w: QWidget) -> bool:
    """True when ``w`` lies in the content of a scroll area (its clipping there is scrolling, not a fault)."""
    p = w.parentWidget()
    while p is not None:
        if isinstance(p, QAbstractScrollArea):
            return True
        p = p.parentWidget()
    return False


def _text_width(w: QWidget, text: str) -> int:
    fm = w.fontMetrics()
    return max((fm.horizontalAdvance(line) for line in text.replace("&&", "\0").replace("&", "")
                .replace("\0", "&").splitlines() or [""]), default=0)


def elided(w: QWidget) -> str | None:
    """Why ``w``'s text does not fit (None when it does)."""
    if isinstance(w, QLabel):
        if w.wordWrap() or not w.text() or w.pixmap() is not None and not w.pixmap().isNull():
            return None
        need = _text_width(w, _plain(w.text())) + 2 * w.margin() + max(0, w.indent())
        have = w.contentsRect().width()
        return f"label needs {need}px, has {have}px" if need > have + SLACK else None
    if isinstance(w, QCheckBox) or isinstance(w, QRadioButton):
        if not w.text():
            return None
        style = w.style()
        indicator = style.pixelMetric(QStyle.PixelMetric.PM_IndicatorWidth, None, w)
        spacing = style.pixelMetric(QStyle.PixelMetric.PM_CheckBoxLabelSpacing, None, w)
        need = _text_width(w, w.text()) + indicator + spacing
        return f"check box needs {need}px, has {w.width()}px" if need > w.width() + SLACK else None
    if isinstance(w, QPushButton):
        if not w.text():
            return None
        need = _text_width(w, w.text()) + (w.iconSize().width() + 4 if not w.icon().isNull() else 0) + 8
        return f"button needs {need}px, has {w.width()}px" if need > w.width() + SLACK else None
    if isinstance(w, QLineEdit):
        if w.text() or not w.placeholderText():
            return None
        need = _text_width(w, w.placeholderText()) + 8
        have = w.contentsRect().width()
        return f"placeholder needs {need}px, field has {have}px" if need > have + SLACK else None
    if isinstance(w, QComboBox):
        text = w.currentText() if w.currentIndex() >= 0 else w.placeholderText()
        if not text or w.isEditable():
            return None
        if (w.sizeAdjustPolicy() == QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
                and w.currentIndex() >= 0 and w.toolTip() == text):
            return None  # a name from the data, elided by design (panel_parts.size_combos) and read in full on hover
        need = _text_width(w, text) + 24  # the arrow
        what = "choice" if w.currentIndex() >= 0 else "placeholder"
        return f"{what} needs {need}px, combo has {w.width()}px" if need > w.width() + SLACK else None
    if isinstance(w, QTabBar):
        if w.count() == 0:
            return None
        total = sum(w.tabRect(i).width() for i in range(w.count()))
        if total > w.width() + SLACK:
            return f"tabs need {total}px, bar has {w.width()}px (tabs behind scroll arrows)"
        fm = w.fontMetrics()
        for i in range(w.count()):
            need = fm.horizontalAdvance(w.tabText(i).replace("&&", "&")) + 8
            if w.tabRect(i).width() < need:
                return f"tab {w.tabText(i)!r} elided"
    return None


def outside(w: QWidget) -> str | None:
    """Why a visible ``w`` lies (partly) outside its parent's area (None when inside, or inside a scroll area)."""
    parent = w.parentWidget()
    if parent is None or w.isWindow() or _inside_scrolled(w) or isinstance(parent, QMainWindow):
        return None  # the main window places its docks itself (a tabified dock waits off-screen)
    g, r = w.geometry(), parent.rect()
    if g.width() <= 0 or g.height() <= 0:
        return f"visible with an empty size {g.width()}×{g.height()}"
    if (g.left() < r.left() - SLACK or g.top() < r.top() - SLACK or g.right() > r.right() + SLACK
            or g.bottom() > r.bottom() + SLACK):
        return (f"geometry {g.x()},{g.y()} {g.width()}×{g.height()} outside its parent "
                f"({r.width()}×{r.height()})")
    return None


def cut_sideways(w: QWidget) -> str | None:
    """Why a scroll area that never scrolls sideways cuts its content on the right (None when it fits)."""
    if not isinstance(w, QScrollArea) or w.widget() is None:
        return None
    if w.horizontalScrollBarPolicy() != Qt.ScrollBarPolicy.ScrollBarAlwaysOff:
        return None
    need, have = w.widget().width(), w.viewport().width()
    return f"content {need}px wide in a {have}px view that cannot scroll sideways" if need > have + SLACK else None


def check(window, where: str) -> list[str]:
    """Every problem of the widgets now visible in ``window``."""
    problems = []
    for w in window.findChildren(QWidget):
        if not w.isVisible() or w.window() is not window:
            continue
        why = cut_sideways(w)
        if why:
            problems.append(f"{where}: {describe(w)}: {why}")
        if isinstance(w, (QLabel, QAbstractButton, QLineEdit, QComboBox, QTabBar)):
            why = elided(w)
            if why:
                problems.append(f"{where}: {describe(w)}: {why}")
        why = outside(w)
        if why:
            problems.append(f"{where}: {describe(w)}: {why}")
    return problems


def settle(app: QApplication | None = None) -> None:
    app = app or QApplication.instance()
    for _ in range(3):
        app.processEvents()


def wait_views(window, timeout: float = 60.0) -> None:
    """Let the event loop run until every audit page shows its chosen audit in full (read in the view thread,
    filled in slices)."""
    from fairdesk.gui.tabs.base import AuditPage

    for page in window.findChildren(AuditPage):  # the window's pages and any a test made on it
        page.wait_view(timeout)


def states(window):
    """Visit every main tab, page and result tab; yields a name for each state (the window shows it)."""
    for ti in range(window.tabs.count()):
        window.tabs.setCurrentIndex(ti)
        pages = window.tabs.widget(ti)
        subpages = [(pages.tabText(i), pages.widget(i)) for i in range(pages.count())] \
            if isinstance(pages, QTabWidget) else [(window.tabs.tabText(ti), pages)]
        for pi, (title, page) in enumerate(subpages):
            if isinstance(pages, QTabWidget):
                pages.setCurrentIndex(pi)
            settle()
            if hasattr(page, "wait_view"):
                page.wait_view()
                settle()
            base = f"{window.tabs.tabText(ti)} › {title}"
            yield base, page
            inner = [t for t in page.findChildren(QTabWidget) if t.isVisible()]
            for tabs in inner:
                for k in range(tabs.count()):
                    if not tabs.isTabEnabled(k):
                        continue
                    tabs.setCurrentIndex(k)
                    settle()
                    if hasattr(page, "wait_view"):  # a result tab built in slices when first shown
                        page.wait_view()
                        settle()
                    yield f"{base} › {tabs.tabText(k)}", page
                tabs.setCurrentIndex(0)


def walk(window, size: tuple[int, int], shots: Path | None = None) -> list[str]:
    """Resize ``window`` to ``size``, visit every state and return the problems found (PNG of each state into
    ``shots`` when given)."""
    w, h = size
    window.resize(w, h)
    settle()
    problems = []
    if window.width() > w or window.height() > h:
        problems.append(f"{w}×{h}: the window cannot shrink to this size (it is {window.width()}×"
                        f"{window.height()}: some page's minimum size is too large)")
    for name, _page in states(window):
        where = f"{w}×{h} {name}"
        problems += check(window, where)
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            file = re.sub(r"[^A-Za-z0-9]+", "_", f"{w}x{h}_{name}").strip("_") + ".png"
            window.grab().save(str(shots / file))
    return problems
