"""Page 1 of every report: what a governance board reads in two minutes, built the same way for every audit kind.

Each kind's report module turns its stored document into a :class:`Board` — a verdict grid (rows × columns, each
cell the verdict that matters most there), the findings that differ as plain sentences, what could not be tested
and why, what to check next — and :func:`board_section` lays it out as the report's first section (key
``"board"``), which the PDF prints on page 1, the HTML report first, and the GUI's Findings panel shows. Method,
families, verified region and definitions follow from page 2 in each kind's own sections.

The section is kept within :data:`WORD_BUDGET` words: findings that do not fit are counted ("… and 3 more
findings") and left to the later sections, never cut mid-sentence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from fairdesk.core.reports.document import Paragraph, Section, Table, plural, suppress_text

#: the words of the board section at most (page 1 also carries the title, subtitle, header and footer: ≤ 350 in all)
WORD_BUDGET = 320
#: page 1 makes room (fewer grid rows and notes) for at least this many differences in words
MIN_FINDINGS = 3
MAX_GRID_ROWS = 8
MAX_GRID_COLUMNS = 6

#: the verdicts in order of importance: the cell of the grid shows the first one present
VERDICT_ORDER = ("differs", "inconclusive", "equivalent", "untested")
#: each verdict's mark: a symbol and a word, so the grid reads without colour (greyscale, colour-blind readers)
VERDICT_MARK = {"differs": "≠ differs", "inconclusive": "? inconclusive", "equivalent": "= equivalent",
                "untested": "– not tested"}
#: background tints (blue–orange, distinguishable with every common colour-vision deficiency, and in grey by
#: lightness: differs darkest)
VERDICT_FILL = {"differs": "#F4B183", "inconclusive": "#E6E6E6", "equivalent": "#BDD7EE", "untested": "#FFFFFF"}
GRID_LEGEND = ("≠ differs: unlikely to be chance, after correcting for the many tests; = equivalent within the "
               "margin; ? inconclusive: cannot tell, not evidence of fairness; – not tested.")


def verdict_key(value) -> str | None:
    """"differs" / "equivalent" / "inconclusive" for a stored verdict word (the image audit's "dependent" is
    "differs", its "invariant …" and "equivalent within margin" are "equivalent"); None when there is none."""
    text = str(value or "").strip().lower()
    if text in ("dependent", "not age-independent") or text.startswith("differs"):
        return "differs"
    if text.startswith("equivalent") or text.startswith("invariant") or text == "age-independent":
        return "equivalent"
    if text.startswith("inconclusive"):
        return "inconclusive"
    return None


def cell_of(value) -> str:
    """The grid's mark of a verdict (:data:`VERDICT_MARK`)."""
    return VERDICT_MARK[verdict_key(value) or "untested"]


def verdict_of_cell(text: str) -> str | None:
    """The verdict a grid cell shows (the inverse of :func:`cell_of`), for the renderers' colours."""
    for key, mark in VERDICT_MARK.items():
        if str(text).startswith(mark):
            return key
    return None


@dataclass
class Board:
    """What page 1 says. ``entries``: (row, column, verdict) triples, any number per cell."""

    question: str
    entries: list[tuple[str, str, str | None]] = field(default_factory=list)
    row_title: str = "Task"
    findings: list[str] = field(default_factory=list)
    no_findings: str = "Nothing was found to differ. That is not proof of fairness: see what could not be tested."
    untested: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    plan: str = ""
    details: str = "Method, definitions and every number follow after this summary."
    more_where: str = "the later sections"


def are(n: int, noun: str, nouns: str | None = None) -> str:
    """"1 comparison is" / "3 comparisons are": a count, its noun and its verb agreeing."""
    return f"{plural(n, noun, nouns)} {'is' if n == 1 else 'are'}"


def word_count(text: str) -> int:
    """Words as a reader counts them: whitespace-separated tokens holding a letter or a digit (a lone "–" or "≠"
    is not a word)."""
    return sum(1 for t in text.split() if re.search(r"\w", t))


def grid(entries: list[tuple[str, str, str | None]]) -> tuple[list[str], list[str], dict[tuple[str, str], str]]:
    """Rows and columns in order of first appearance, and each cell's most important verdict."""
    rows: dict[str, None] = {}
    cols: dict[str, None] = {}
    cells: dict[tuple[str, str], str] = {}
    for row, col, verdict in entries:
        row, col = str(row), str(col)
        rows.setdefault(row)
        cols.setdefault(col)
        key = verdict_key(verdict) or "untested"
        old = cells.get((row, col))
        if old is None or VERDICT_ORDER.index(key) < VERDICT_ORDER.index(old):
            cells[(row, col)] = key
    return list(rows), list(cols), cells


def grid_table(board: Board, max_rows: int = MAX_GRID_ROWS) -> Table | None:
    rows, cols, cells = grid(board.entries)
    if not rows or not cols:
        return None
    if len(rows) > max_rows:  # the rows with a difference first, then in order
        rows = sorted(rows, key=lambda r: not any(cells.get((r, c)) == "differs" for c in cols))
    more: list[str] = []
    if len(rows) > max_rows:
        more.append(f"{len(rows) - max_rows} more {board.row_title.lower()} rows")
    if len(cols) > MAX_GRID_COLUMNS:
        more.append(f"{len(cols) - MAX_GRID_COLUMNS} more columns")
    shown_rows, shown_cols = rows[:max_rows], cols[:MAX_GRID_COLUMNS]
    body = [[r] + [VERDICT_MARK[cells.get((r, c), "untested")] for c in shown_cols] for r in shown_rows]
    note = GRID_LEGEND + (f" Not shown here: {' and '.join(more)} (see {board.more_where})." if more else "")
    return Table(header=[board.row_title] + shown_cols, rows=body, title="Verdicts at a glance", note=note,
                 grid=True)


def board_section(board: Board, k: int, title: str = "For the board: what this audit found",
                  budget: int = WORD_BUDGET) -> Section:
    """Page 1 (key ``"board"``) from ``board``: counts below ``k`` suppressed in every sentence; at most ``budget``
    words. The differences come first: when fewer than three (or all, if fewer) fit, the grid shows fewer rows (those
    with a difference first) and fewer notes; findings that still do not fit are counted, not printed."""
    wanted = min(MIN_FINDINGS, len(board.findings))
    for max_rows, max_items in ((MAX_GRID_ROWS, 3), (5, 2), (3, 2), (2, 1)):
        section, shown = _board_section(board, k, title, budget, max_rows, max_items)
        if shown >= wanted:
            break
    return section


def _board_section(board: Board, k: int, title: str, budget: int, max_rows: int,
                   max_items: int) -> tuple[Section, int]:
    def para(text: str, style: str = "body") -> Paragraph:
        return Paragraph(" ".join(suppress_text(text, k).split()), style)

    head: list = [para(board.question, "lead")]
    if board.plan:
        head.append(para(f"Testing plan: {board.plan}"))
    table = grid_table(board, max_rows)
    if table is not None:
        head.append(table)
    tail: list = []
    if board.untested:
        tail.append(Paragraph("What could not be tested", "subheading"))
        tail += [para(t, "bullet") for t in board.untested[:max_items]]
    if board.next_steps:
        tail.append(Paragraph("What to check next", "subheading"))
        tail += [para(t, "bullet") for t in board.next_steps[:max_items]]
    tail.append(para(board.details, "note"))

    def words(blocks: list) -> int:
        n = 0
        for b in blocks:
            if isinstance(b, Paragraph):
                n += word_count(b.text)
            else:  # the grid: its cells and its legend
                n += word_count(" ".join([b.title, " ".join(b.header), b.note] + [" ".join(r) for r in b.rows]))
        return n

    used = words(head) + words(tail) + word_count(title) + 3  # "What differs" and a little slack
    found: list = [Paragraph("What differs", "subheading")]
    if not board.findings:
        found.append(para(board.no_findings, "finding"))
    shown = 0
    for i, text in enumerate(board.findings):
        p = para(text, "finding")
        rest = len(board.findings) - i - 1
        reserve = 12 if rest or shown < i else 0  # room for the "… and N more" line
        if used + word_count(p.text) + reserve > budget:
            continue  # a long finding is counted below; a shorter one after it may still fit
        found.append(p)
        used += word_count(p.text)
        shown += 1
    if shown < len(board.findings):
        found.append(para(f"… and {plural(len(board.findings) - shown, 'more finding')} in "
                          f"{board.more_where}."))
    return Section("board", title, head + found + tail, new_page=False, one_page=True), shown


def section_words(section: Section) -> int:
    """The words of a section as :func:`board_section` counts them (its title, paragraphs and tables)."""
    n = word_count(section.title)
    for b in section.blocks:
        if isinstance(b, Paragraph):
            n += word_count(b.text)
        elif isinstance(b, Table):
            n += word_count(" ".join([b.title, " ".join(b.header), b.note] + [" ".join(r) for r in b.rows]))
    return n
