"""A text diff viewer for counterfactual pairs : the original text and its counterfactual side by
side with the substituted words highlighted, both scores and the change; browse by the largest |change| first;
filter by term pair and by label.

It shows the example pairs a stored CTF document holds (``doc["examples"]``: the pairs with the largest changes,
see :func:`fairdesk.core.audits.ctf.ctf_statistics`); nothing is recomputed here. Texts are HTML-escaped, so a note
containing markup shows it literally.
"""
from __future__ import annotations

import difflib
import math
import re

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QGridLayout, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QSplitter,
                               QTextBrowser, QVBoxLayout, QWidget)

from fairdesk.core.escape import html_text

ALL = "All"
HIGHLIGHT_OLD = "background-color: #FFE1A8; font-weight: bold;"
HIGHLIGHT_NEW = "background-color: #BFE6C8; font-weight: bold;"
SPLIT_TITLE = {"train": "train terms", "held_out": "held-out terms"}
_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")


def _num(value) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def tokens(text: str) -> list[str]:
    """Words, runs of white space and single other characters; joined, they give ``text`` back."""
    return _TOKENS.findall(text)


def highlight_html(original: str, counterfactual: str) -> tuple[str, str]:
    """Both texts as HTML with the words that differ between them in highlighted spans; every piece of text is
    escaped (difflib matches the word tokens, so only the substituted words are marked)."""
    a, b = tokens(original), tokens(counterfactual)
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        pa, pb = html_text("".join(a[i1:i2])), html_text("".join(b[j1:j2]))
        if op == "equal":
            left.append(pa)
            right.append(pb)
            continue
        if pa:
            left.append(f'<span class="changed" style="{HIGHLIGHT_OLD}">{pa}</span>')
        if pb:
            right.append(f'<span class="changed" style="{HIGHLIGHT_NEW}">{pb}</span>')
    wrap = '<div style="white-space: pre-wrap; font-size: 11pt;">{}</div>'
    return wrap.format("".join(left)), wrap.format("".join(right))


def change_of(example: dict) -> float:
    """f(x′) − f(x) of a stored example (0 when a score is missing)."""
    return (_num(example.get("counterfactual_score")) or 0.0) - (_num(example.get("score")) or 0.0)


def pair_name(example: dict) -> str:
    return f"{example.get('term', '')} → {example.get('counterfactual_term', '')}"


class TextDiffViewer(QWidget):
    """The stored example pairs, largest |change| first, with filters by term pair and label; the chosen pair is
    shown side by side with the substituted words highlighted."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._examples: list[dict] = []
        self._shown: list[dict] = []
        v = QVBoxLayout(self)
        v.setContentsMargins(4, 4, 4, 4)
        top = QHBoxLayout()
        top.addWidget(QLabel("Term pair", self))
        self.pair_combo = QComboBox(self)
        self.pair_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.pair_combo.currentIndexChanged.connect(self._refilter)
        top.addWidget(self.pair_combo)
        top.addSpacing(12)
        top.addWidget(QLabel("Label", self))
        self.label_combo = QComboBox(self)
        self.label_combo.currentIndexChanged.connect(self._refilter)
        top.addWidget(self.label_combo)
        top.addSpacing(12)
        self.count_label = QLabel("", self)
        self.count_label.setWordWrap(True)
        self.count_label.setTextFormat(Qt.TextFormat.PlainText)
        top.addWidget(self.count_label, 1)
        v.addLayout(top)

        split = QSplitter(Qt.Orientation.Horizontal, self)
        self.list = QListWidget(split)
        self.list.setToolTip("The stored pairs, largest |change| first.")
        widest = "Δ −0.000   transgender → heterosexual"
        self.list.setMinimumWidth(self.list.fontMetrics().horizontalAdvance(widest))
        self.list.currentRowChanged.connect(self._show_row)
        split.addWidget(self.list)
        pane = QWidget(split)
        grid = QGridLayout(pane)
        grid.setContentsMargins(4, 0, 0, 0)
        self.left_title = QLabel("Original", pane)
        self.right_title = QLabel("Counterfactual", pane)
        self.left = QTextBrowser(pane)
        self.right = QTextBrowser(pane)
        for browser in (self.left, self.right):
            browser.setOpenLinks(False)
        grid.addWidget(self.left_title, 0, 0)
        grid.addWidget(self.right_title, 0, 1)
        grid.addWidget(self.left, 1, 0)
        grid.addWidget(self.right, 1, 1)
        self.change_label = QLabel("", pane)
        self.change_label.setWordWrap(True)
        self.change_label.setTextFormat(Qt.TextFormat.PlainText)  # terms come from user files: never markup
        grid.addWidget(self.change_label, 2, 0, 1, 2)
        split.addWidget(pane)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([300, 600])
        v.addWidget(split, 1)
        self.set_examples([])

    # ---- data ----------------------------------------------------------------------------------------------
    def set_examples(self, examples: list[dict] | None, note: str = "") -> None:
        """Show the stored ``examples`` (each: text, counterfactual, term, counterfactual_term, terms, score,
        counterfactual_score, label); ``note`` is added after the count (e.g. how many the audit stores)."""
        self._examples = sorted(examples or [], key=lambda e: -abs(change_of(e)))
        self._note = note
        pairs = sorted({pair_name(e) for e in self._examples})
        labels = sorted({int(e["label"]) for e in self._examples if e.get("label") is not None})
        for combo, items in ((self.pair_combo, pairs), (self.label_combo, [str(x) for x in labels])):
            combo.blockSignals(True)
            combo.clear()
            combo.addItem(ALL)
            combo.addItems(items)
            combo.blockSignals(False)
        self.label_combo.setEnabled(bool(labels))
        self._refilter()

    def examples(self) -> list[dict]:
        """The stored examples, largest |change| first."""
        return list(self._examples)

    def shown(self) -> list[dict]:
        """The examples the filters let through, in the list's order."""
        return list(self._shown)

    def set_filter(self, pair: str | None = None, label: int | None = None) -> None:
        """Choose a term pair (``"a → b"``) and a label (None: all)."""
        self.pair_combo.setCurrentIndex(max(0, self.pair_combo.findText(pair)) if pair else 0)
        self.label_combo.setCurrentIndex(max(0, self.label_combo.findText(str(label))) if label is not None else 0)

    def _refilter(self, *args) -> None:
        pair = self.pair_combo.currentText()
        label = self.label_combo.currentText()
        self._shown = [e for e in self._examples
                       if (pair in ("", ALL) or pair_name(e) == pair)
                       and (label in ("", ALL) or str(e.get("label")) == label)]
        self.list.blockSignals(True)
        self.list.clear()
        for e in self._shown:
            lab = "" if e.get("label") is None else f"  · label {e['label']}"
            item = QListWidgetItem(f"Δ {change_of(e):+.3f}   {pair_name(e)}{lab}", self.list)
            item.setToolTip(e.get("text", ""))
        self.list.blockSignals(False)
        total = len(self._examples)
        if total:
            self.count_label.setText(f"{len(self._shown)} of {total} stored pairs shown. {self._note}".strip())
        else:
            self.count_label.setText(self._note or "No example pairs stored.")
        if self._shown:
            self.list.setCurrentRow(0)
        else:
            self._show_row(-1)

    def _show_row(self, row: int) -> None:
        if not (0 <= row < len(self._shown)):
            self.left.clear()
            self.right.clear()
            self.left_title.setText("Original")
            self.right_title.setText("Counterfactual")
            self.change_label.setText("")
            return
        e = self._shown[row]
        left, right = highlight_html(str(e.get("text", "")), str(e.get("counterfactual", "")))
        self.left.setHtml(left)
        self.right.setHtml(right)
        s, cs = _num(e.get("score")), _num(e.get("counterfactual_score"))
        self.left_title.setText(f"<b>Original</b> · f(x) = {s:.3f}" if s is not None else "<b>Original</b>")
        self.right_title.setText(f"<b>Counterfactual</b> · f(x′) = {cs:.3f}" if cs is not None
                                 else "<b>Counterfactual</b>")
        split = SPLIT_TITLE.get(e.get("terms"), e.get("terms") or "")
        lab = "no label" if e.get("label") is None else f"label {e['label']}"
        self.change_label.setText(f"Change f(x′) − f(x) = {change_of(e):+.3f} · '{e.get('term')}' "
                                  f"→ '{e.get('counterfactual_term')}' ({split}) · {lab}")
