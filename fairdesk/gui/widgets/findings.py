"""The findings header of an audit page: the plain-language summary the PDF's first page prints, above the
statistics.

:class:`FindingsPanel` shows the counts of the three verdicts in words and the first section (page 1 for the board) of
the kind's report tree (:class:`fairdesk.core.reports.document.Report`). It only lays out what the report module
decided and worded, so the screen and the PDF say the same thing. The page builds the tree in the window's view
thread (:meth:`fairdesk.gui.tabs.base.AuditPage.show_audit`): a large document takes a moment, and the Qt thread
must not wait for it.
"""
from __future__ import annotations

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QTextBrowser, QVBoxLayout

from fairdesk.core.escape import html_text

#: the verdicts, their colours (as the plots and the PDF use them) and how a count of them reads
VERDICT_WORDS = (("differs", "#C03A00", "differs", "differ"),
                 ("equivalent", "#1B7F3B", "is equivalent within the margin", "are equivalent within the margin"),
                 ("inconclusive", "#555555", "is inconclusive", "are inconclusive"))

def verdict_key(value) -> str | None:
    """"differs" / "equivalent" / "inconclusive" for a stored verdict ("equivalent within margin" included)."""
    text = str(value or "").strip().lower()
    if text == "dependent":  # the image audit's stored word for "differs"
        return "differs"
    for key, *_ in VERDICT_WORDS:
        if text.startswith(key):
            return key
    return None


def count_verdicts(doc) -> dict[str, int]:
    """Every ``"verdict"`` value in a stored document (nested dicts and lists), counted by the three verdicts: the
    generic count of a kind whose page does not count its own comparisons."""
    counts = {key: 0 for key, *_ in VERDICT_WORDS}
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            key = verdict_key(item.get("verdict")) if isinstance(item.get("verdict"), str) else None
            if key:
                counts[key] += 1
            stack.extend(v for k, v in item.items() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (dict, list)))
    return counts


def counts_html(counts: dict[str, int] | None) -> str:
    """The verdict counts in words: "Of 12 comparisons, 2 differ, 3 are equivalent within the margin and 7 are
    inconclusive." (coloured as in the plots)."""
    if not counts:
        return ""
    total = sum(int(counts.get(k, 0)) for k, *_ in VERDICT_WORDS)
    if total == 0:
        return "No comparison of this audit has a verdict (nothing could be tested)."
    parts = []
    for key, colour, one, many in VERDICT_WORDS:
        n = int(counts.get(key, 0))
        parts.append(f"<b style='color:{colour}'>{n}</b> {one if n == 1 else many}")
    head = "Of 1 comparison, " if total == 1 else f"Of {total:,} comparisons, "
    return head + ", ".join(parts[:-1]) + " and " + parts[-1] + "."


def findings_first(blocks: list) -> list:
    """The blocks with the part under a subheading about what was found (e.g. "What was found") moved to the top,
    so the screen opens with the findings and the description of what was audited follows."""
    groups: list[list] = [[]]
    for block in blocks:
        if type(block).__name__ == "Paragraph" and block.style == "subheading":
            groups.append([block])
        else:
            groups[-1].append(block)

    def found(group: list) -> bool:
        head = group[0] if group else None
        text = head.text.lower() if head is not None and type(head).__name__ == "Paragraph" else ""
        # a glossary ("How to read the verdicts", "How the verdicts are reached") never goes before the verdicts
        return (head.style == "subheading" and not text.startswith("how")
                and any(w in text for w in ("found", "finding", "result", "verdict"))) if text else False

    first = [g for g in groups if found(g)]
    return [b for g in first + [g for g in groups if not found(g)] for b in g]


def _cell(text, grid: bool) -> str:
    """A table cell; a verdict-grid cell tinted as in the PDF (its mark also says the verdict in a word)."""
    from fairdesk.core.reports.board import VERDICT_FILL, verdict_of_cell

    verdict = verdict_of_cell(str(text)) if grid else None
    colour = f" bgcolor='{VERDICT_FILL[verdict]}'" if verdict else ""
    return f"<td{colour}>{html_text(str(text))}</td>"


def section_html(section) -> str:
    """A report section (paragraphs, tables; figures are left to the tabs below) as simple HTML."""
    out: list[str] = []
    items: list[str] = []

    def flush() -> None:
        if items:
            out.append("<ul style='margin-top:0; margin-bottom:4px'>" + "".join(items) + "</ul>")
            items.clear()

    for block in findings_first(section.blocks):
        kind = type(block).__name__
        if kind == "Paragraph":
            text = html_text(block.text)
            if block.style in ("bullet", "finding"):
                items.append(f"<li>{'<b>' + text + '</b>' if block.style == 'finding' else text}</li>")
                continue
            flush()
            if block.style == "subheading":
                out.append(f"<p style='margin-top:6px; margin-bottom:2px'><b>{text}</b></p>")
            elif block.style == "lead":
                out.append(f"<p style='margin-top:2px; margin-bottom:2px'>{text}</p>")
            elif block.style == "note":
                out.append(f"<p style='color:#666666'><small>{text}</small></p>")
            else:
                out.append(f"<p style='margin-top:2px; margin-bottom:2px'>{text}</p>")
        elif kind == "Table":
            flush()
            head = "".join(f"<th align='left'>{html_text(str(h))}</th>" for h in block.header)
            rows = "".join("<tr>" + "".join(_cell(c, j > 0 and getattr(block, "grid", False)) for j, c in enumerate(row))
                           + "</tr>" for row in block.rows)
            title = f"<p><b>{html_text(block.title)}</b></p>" if block.title else ""
            note = f"<p style='color:#444444'><small>{html_text(block.note)}</small></p>" if block.note else ""
            out.append(f"{title}<table cellspacing='0' cellpadding='3' border='1'><tr>{head}</tr>{rows}</table>{note}")
    flush()
    return "".join(out)


class FindingsPanel(QFrame):
    """Counts of the three verdicts in words, then the report's board summary (scrolls); "Hide" folds the summary
    away so the statistics below get the room."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("findings_panel")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.counts_label = QLabel("", self)
        self.counts_label.setWordWrap(True)
        self.counts_label.setToolTip("Differs: the gap is unlikely to be chance after correcting for the number of "
                                     "tests. Equivalent: the data show the gap lies within the equivalence margin. "
                                     "Inconclusive: neither; the data cannot tell, which is not evidence of "
                                     "fairness.")
        self.toggle = QPushButton("Hide summary", self)
        self.toggle.setToolTip("Fold the plain-language summary away (the statistics are in the tabs below).")
        self.toggle.clicked.connect(lambda: self.set_expanded(not self.text.isVisible()))
        self.text = QTextBrowser(self)
        self.text.setOpenExternalLinks(False)
        self.text.setMinimumHeight(90)
        self.text.setMaximumHeight(230)
        self.text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.more = QLabel("<small>The statistics behind these findings (estimates, intervals, corrected p-values) "
                           "are in the tabs below.</small>", self)
        self.more.setWordWrap(True)
        self.more.setStyleSheet("color: palette(mid);")
        top = QHBoxLayout()
        top.addWidget(QLabel("<b>Findings</b>", self))
        top.addWidget(self.counts_label, 1)
        top.addWidget(self.toggle)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.text)
        layout.addWidget(self.more)
        self.clear()

    # ---- state -------------------------------------------------------------------------------------------------
    def set_expanded(self, on: bool) -> None:
        self.text.setVisible(on)
        self.more.setVisible(on)
        self.toggle.setText("Hide summary" if on else "Show summary")

    def clear(self, message: str = "Choose or run an audit: its findings appear here in plain words.") -> None:
        self.counts_label.setText(message)
        self.text.clear()
        self.text.setVisible(False)
        self.more.setVisible(False)
        self.toggle.setVisible(False)

    def show_summary(self, summary_html: str, counts: dict[str, int] | None) -> None:
        self.counts_label.setText(counts_html(counts) or "Summary of the findings:")
        self.text.setHtml(summary_html)
        self.toggle.setVisible(True)
        self.set_expanded(self.toggle.text() != "Show summary")

    def pending(self) -> None:
        """The summary of a newly chosen audit is being built."""
        self.counts_label.setText("Reading the findings…")
        self.text.clear()
