"""PDF rendering of a :class:`~fairdesk.core.reports.document.Report` with reportlab (platypus) and matplotlib (Agg).

* A4, a header with the audit title on every page, "page X of Y" in the footer.
* Tables split across pages with their header row repeated; long tables in a small font; long cells wrap.
* Figures are PNGs drawn by :mod:`fairdesk.core.reports.figures` from the same data the GUI plots.
* Deterministic: reportlab's invariant mode (fixed creation date and document id), no wall-clock time anywhere —
  the date printed is the audit's own date. The same report gives byte-identical PDF bytes.
* Atomic: the PDF is rendered in memory, written to a temporary file in the target folder and moved over the target
  with :func:`os.replace`, so a failure never leaves a half-written file over an earlier report.
* Text is set in DejaVu Sans (shipped with matplotlib) so that symbols such as −, Δ, Σ and ≤ print; if that font
  cannot be found the standard Helvetica is used and such symbols are spelled out.
* Names come from the user's data and are printed as data, never as layout: markup such as ``<b>`` or
  ``&`` is escaped; bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C) and other invisible
  control characters are printed as visible marks such as ⟨RLO⟩, so a name cannot reorder or hide what is printed
  around it (no bidi reordering is applied to any text: right-to-left letters print in the order they are stored);
  a long name in a name column of a table (Group, Task, Attribute, …) is shortened to its beginning and end with a
  numbered mark, and the table note gives it in full; any other long cell wraps between words, else after an
  underscore or slash inside a name (:func:`wrap_lines`; only a single part wider than its column is split, in one
  pass), so no name can make a page impossible to lay out.
* A table row cannot break across pages: a cell holds at most ``MAX_CELL_LINES`` lines (a header cell
  ``MAX_HEAD_LINES``); a longer stored text keeps its beginning and ends with "… (shortened; full text in the JSON)".
  Text beyond what such a cell could show is cut before it is measured or wrapped, so the time to lay out a cell
  does not grow with the text. Paragraphs split long words at the page width (reportlab's ``splitLongWords``); on
  a page that must fit one page a paragraph is shortened the same way, and the running header and footer are cut
  to their line.
"""
from __future__ import annotations

import io
import os
import re
import sys
import types
from pathlib import Path
from xml.sax.saxutils import escape

from fairdesk.core import atomic
from fairdesk.core.escape import SHORTENED_MARK
from fairdesk.core.escape import shortened as _shortened
from fairdesk.core.reports.board import VERDICT_FILL, verdict_of_cell
from fairdesk.core.reports.document import FigureSpec, Paragraph, Report, Table

# reportlab, when first imported, runs ``~/.reportlab_mods`` and ``~/.reportlab_settings`` from the user's home folder
# if they exist (or modules of those names on the path): code from a file FairDesk never chose. Empty stand-ins
# registered before any reportlab import make both imports find nothing to run.
for _name in ("reportlab_mods", "reportlab_settings"):
    sys.modules.setdefault(_name, types.ModuleType(_name))

PAGE_MARGIN_MM = 17
_FONTS: dict[str, str] | None = None
_ASCII = {"⟨": "[", "⟩": "]", "…": "...", "\u2212": "-", "Δ": "Delta ", "Σ": "sum ", "≤": "<=", "≥": ">=", "α": "alpha", "τ": "tau", "◀": "<",
          "▶": ">", "→": "->", "←": "<-", "¬": "not ", "≠": "!="}

HEADER_BG = "#2F4858"
ZEBRA = "#F3F5F8"
ACCENT = "#C03A00"


# --------------------------------------------------------------------------------------------------------------
# Public API

def write_pdf(report: Report, path: str | os.PathLike) -> Path:
    """Render ``report`` to ``path`` atomically and return the path."""
    path = Path(path)
    data = _render(report)
    atomic.write_bytes(path, data)
    return path


def render_bytes(report: Report) -> bytes:
    """The PDF bytes of ``report`` (what :func:`write_pdf` writes)."""
    return _render(report)


# --------------------------------------------------------------------------------------------------------------

def _fonts() -> dict[str, str]:
    """Register DejaVu Sans from matplotlib's data folder once; fall back to Helvetica."""
    global _FONTS
    if _FONTS is not None:
        return _FONTS
    from reportlab.lib.fonts import addMapping
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    try:
        import matplotlib

        base = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
        files = {"FDSans": "DejaVuSans.ttf", "FDSans-Bold": "DejaVuSans-Bold.ttf",
                 "FDSans-Oblique": "DejaVuSans-Oblique.ttf", "FDSans-BoldOblique": "DejaVuSans-BoldOblique.ttf"}
        for name, file in files.items():
            pdfmetrics.registerFont(TTFont(name, str(base / file)))
        addMapping("FDSans", 0, 0, "FDSans")
        addMapping("FDSans", 1, 0, "FDSans-Bold")
        addMapping("FDSans", 0, 1, "FDSans-Oblique")
        addMapping("FDSans", 1, 1, "FDSans-BoldOblique")
        _FONTS = {"regular": "FDSans", "bold": "FDSans-Bold", "italic": "FDSans-Oblique", "unicode": "1"}
    except Exception:  # noqa: BLE001 - any problem with the font means: use the built-in one
        _FONTS = {"regular": "Helvetica", "bold": "Helvetica-Bold", "italic": "Helvetica-Oblique", "unicode": ""}
    return _FONTS


#: Unicode bidirectional formatting characters and the names they are printed as.
BIDI_CONTROLS = {"\u202a": "LRE", "\u202b": "RLE", "\u202c": "PDF", "\u202d": "LRO", "\u202e": "RLO",
                 "\u2066": "LRI", "\u2067": "RLI", "\u2068": "FSI", "\u2069": "PDI", "\u200e": "LRM",
                 "\u200f": "RLM", "\u061c": "ALM"}
#: other characters that print as nothing: zero-width space, word joiner, byte-order mark, C0/C1 controls (but tab
#: and newline, which lay out as space)
_INVISIBLE = re.compile("[\u200b\u2060\ufeff\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BIDI = re.compile("[" + "".join(BIDI_CONTROLS) + "]")

#: table columns that hold names from the data; a cell longer than NAME_LIMIT characters in them is shortened
NAME_COLUMNS = {"task", "group", "compared with", "favours", "favouring group", "attribute", "encoder", "output",
                "negative control", "category", "pair", "direction"}
NAME_LIMIT = 48
#: the most characters of a shortened name the table note gives "in full"
NAME_NOTE_LIMIT = 2000
#: the most characters of one paragraph on a page that must fit one page (the board)
ONE_PAGE_PARAGRAPH = 1500


def visible(text: str) -> str:
    """``text`` with every bidi control and invisible control character shown as a visible mark (⟨RLO⟩, ⟨U+200B⟩)."""
    text = _BIDI.sub(lambda m: f"⟨{BIDI_CONTROLS[m.group()]}⟩", text)
    return _INVISIBLE.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", text)


def shorten(text: str, limit: int = NAME_LIMIT) -> str:
    """The beginning and the end of a text longer than ``limit`` characters, joined by "…" (shown text)."""
    if len(text) <= limit:
        return text
    tail = max(8, limit // 4)
    return text[:limit - tail - 1] + "…" + text[-tail:]


def _t(text: str) -> str:
    """Text for the canvas: control characters made visible; ASCII stand-ins when the fallback font lacks a
    symbol."""
    text = visible(text)
    if _fonts()["unicode"]:
        return text
    for a, b in _ASCII.items():
        text = text.replace(a, b)
    return text


def _fit(text: str, font: str, size: float, width: float) -> str:
    """``text`` on one line of ``width``: as it is when it fits, else its beginning and "…"."""
    char = _char_widths(font, size)
    if sum(map(char, text[:char_budget(width, size, 0) + 1])) <= width and len(text) <= char_budget(width, size, 0):
        return text
    room, used = width - char("…"), 0.0
    for i, ch in enumerate(text):
        used += char(ch)
        if used > room:
            return text[:i] + "…"
    return text


def _x(text: str) -> str:
    """Text for a platypus Paragraph (escaped markup)."""
    return escape(_t(text))


def _styles():
    from reportlab.lib import colors
    from reportlab.lib.styles import ParagraphStyle

    f = _fonts()
    base = ParagraphStyle("body", fontName=f["regular"], fontSize=9, leading=12.2, spaceAfter=4)
    return {
        "title": ParagraphStyle("title", parent=base, fontName=f["bold"], fontSize=17, leading=21, spaceAfter=2),
        "subtitle": ParagraphStyle("subtitle", parent=base, fontSize=9, textColor=colors.HexColor("#555555"),
                                   spaceAfter=8),
        "h1": ParagraphStyle("h1", parent=base, fontName=f["bold"], fontSize=13.5, leading=17, spaceBefore=2,
                             spaceAfter=6, textColor=colors.HexColor(HEADER_BG), keepWithNext=1),
        "subheading": ParagraphStyle("subheading", parent=base, fontName=f["bold"], fontSize=10.2, leading=13,
                                     spaceBefore=6, spaceAfter=3, keepWithNext=1),
        "body": base,
        "lead": ParagraphStyle("lead", parent=base, fontName=f["bold"], spaceAfter=4),
        "bullet": ParagraphStyle("bullet", parent=base, leftIndent=11, bulletIndent=2, spaceAfter=2.5),
        "finding": ParagraphStyle("finding", parent=base, leftIndent=11, bulletIndent=1, spaceAfter=3.5,
                                  bulletColor=colors.HexColor(ACCENT), bulletFontName=f["bold"]),
        "note": ParagraphStyle("note", parent=base, fontSize=7.6, leading=9.6, textColor=colors.HexColor("#444444"),
                               keepWithNext=1),
        "table_note": ParagraphStyle("table_note", parent=base, fontSize=7.6, leading=9.6,
                                     textColor=colors.HexColor("#444444")),
        "caption": ParagraphStyle("caption", parent=base, fontName=f["italic"], fontSize=7.6, leading=9.6,
                                  textColor=colors.HexColor("#444444"), spaceAfter=10),
        "table_title": ParagraphStyle("table_title", parent=base, fontName=f["bold"], fontSize=8.6, leading=11,
                                      spaceBefore=6, spaceAfter=3),
        "cell": ParagraphStyle("cell", parent=base, fontSize=8, leading=9.6, spaceAfter=0),
        "cell_small": ParagraphStyle("cell_small", parent=base, fontSize=6.6, leading=7.9, spaceAfter=0),
        "head": ParagraphStyle("head", parent=base, fontName=f["bold"], fontSize=8, leading=9.6, spaceAfter=0,
                               textColor=colors.white),
        "head_small": ParagraphStyle("head_small", parent=base, fontName=f["bold"], fontSize=6.6, leading=7.9,
                                     spaceAfter=0, textColor=colors.white),
    }


def _paragraph(block: Paragraph, st):
    from reportlab.platypus import Paragraph as RLParagraph

    if block.style == "bullet":
        return RLParagraph(_x(block.text), st["bullet"], bulletText="•")
    if block.style == "finding":
        return RLParagraph(_x(block.text), st["finding"], bulletText="■" if _fonts()["unicode"] else "*")
    return RLParagraph(_x(block.text), st.get(block.style, st["body"]))


def _table(block: Table, st, frame_width: float) -> list:
    from reportlab.lib import colors
    from reportlab.pdfbase.pdfmetrics import stringWidth
    from reportlab.lib.enums import TA_RIGHT
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import CondPageBreak, LongTable
    from reportlab.platypus import Paragraph as RLParagraph
    from reportlab.platypus import Table as RLTable
    from reportlab.platypus import TableStyle

    f = _fonts()
    small = block.small
    size = 6.6 if small else 8
    cell_style = st["cell_small" if small else "cell"]
    head_style = st["head_small" if small else "head"]
    ncol = len(block.header)
    pad = 3.0 if small else 4.0
    # no cell can show more than a column as wide as the frame holds: longer text is cut here, before anything
    # measures it (the cell then says it was shortened)
    most = char_budget(frame_width, size) + 1
    header = [_t(str(h)[:most]) for h in block.header]
    texts = [[_t(str(c)[:most]) for c in row] for row in block.rows]
    texts, name_notes = _shorten_names(header, texts)
    if block.widths:
        total = float(sum(block.widths))
        widths = [frame_width * w / total for w in block.widths]
    else:
        widths = _auto_widths(header, texts, f, size, pad, frame_width)
    align = block.align or ["L"] * ncol

    def cell(text: str, j: int):
        room = widths[j] - 2 * pad
        if ("\n" not in text and len(text) <= char_budget(room, size)
                and stringWidth(text, f["regular"], size) <= room):
            return text
        lines = cell_lines(text, room, f["regular"], size)
        return RLParagraph("<br/>".join(escape(line) for line in lines), cell_style)

    def head(text: str, j: int):
        style = head_right if align[j] == "R" else head_style
        if len(text) <= 2 * NAME_LIMIT:
            return RLParagraph(escape(text), style)
        lines = cell_lines(text, widths[j] - 2 * pad, f["bold"], size, MAX_HEAD_LINES)
        return RLParagraph("<br/>".join(escape(line) for line in lines), style)

    head_right = ParagraphStyle(head_style.name + "_r", parent=head_style, alignment=TA_RIGHT)
    data = [[head(h, j) for j, h in enumerate(header)]]
    data += [[cell(c, j) for j, c in enumerate(row)] for row in texts]
    cls = LongTable if len(block.rows) > 80 else RLTable
    table = cls(data, colWidths=widths, repeatRows=1, hAlign="LEFT")
    cmds = [
        ("FONT", (0, 0), (-1, -1), f["regular"], size),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor(HEADER_BG)),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LEFTPADDING", (0, 0), (-1, -1), pad),
        ("RIGHTPADDING", (0, 0), (-1, -1), pad),
        ("TOPPADDING", (0, 0), (-1, -1), 1.6 if small else 2.2),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 1.8 if small else 2.4),
        ("LINEBELOW", (0, 0), (-1, 0), 0.6, colors.HexColor(HEADER_BG)),
        ("LINEBELOW", (0, -1), (-1, -1), 0.6, colors.HexColor("#999999")),
    ]
    for j, a in enumerate(align):
        if a == "R":
            cmds.append(("ALIGN", (j, 1), (j, -1), "RIGHT"))
    for i in range(2, len(data), 2):
        cmds.append(("BACKGROUND", (0, i), (-1, i), colors.HexColor(ZEBRA)))
    for i, row in enumerate(block.rows, start=1):  # mark significant results
        if any(c == "yes (BH)" for c in row):
            cmds.append(("TEXTCOLOR", (0, i), (-1, i), colors.HexColor(ACCENT)))
    if block.grid:  # the verdict grid: each cell tinted by its verdict (the mark says it in words too)
        for i, row in enumerate(block.rows, start=1):
            for j, text in enumerate(row):
                verdict = verdict_of_cell(text) if j else None
                if verdict:
                    cmds.append(("BACKGROUND", (j, i), (j, i), colors.HexColor(VERDICT_FILL[verdict])))
        cmds.append(("GRID", (0, 1), (-1, -1), 0.4, colors.white))
    table.setStyle(TableStyle(cmds))
    out = [CondPageBreak(70)]  # a title with its header and a few rows, or a new page (a long table still splits)
    if block.title:
        out.append(RLParagraph(_x(_shortened(block.title, NAME_NOTE_LIMIT)), st["table_title"]))
    out.append(table)
    if block.note:
        out.append(RLParagraph(_x(block.note), st["table_note"]))
    for mark, full in name_notes:
        out.append(RLParagraph(escape(f"{mark} in full: {_shortened(full, NAME_NOTE_LIMIT)}"), st["table_note"]))
    return out


_PIECE = re.compile(r"[^_/]*[_/]+|[^_/]+")


def break_pieces(text: str) -> list[str]:
    """The pieces a cell may be broken into: words, and the parts of a word after each underscore or slash
    ("reads_" "whole_" "image"), so a name breaks where it joins its parts and never inside a part."""
    return [p for word in text.split() for p in _PIECE.findall(word)] or [""]


def _char_widths(font: str, size: float):
    """A function giving the width of one character in ``font`` at ``size``, remembered per character: a string's
    width is the sum of its characters' widths (reportlab applies no kerning), so a line is measured once."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    cache = _WIDTHS.setdefault((font, size), {})

    def width(ch: str) -> float:
        w = cache.get(ch)
        if w is None:
            w = cache[ch] = stringWidth(ch, font, size)
        return w

    return width


_WIDTHS: dict[tuple[str, float], dict[str, float]] = {}


def wrap_lines(text: str, width: float, font: str, size: float) -> list[str]:
    """``text`` in lines no wider than ``width``: broken between words, else after an underscore or a slash inside
    a name; a single part wider than the line (a long unbroken word) is the one case split inside. One pass over
    the characters: the time grows with the length of the text, not with its square."""
    char = _char_widths(font, size)
    limit = width - 0.01  # widths are summed per character: a hair of room for rounding
    space = char(" ")
    lines: list[str] = []
    line: list[str] = []
    line_w = 0.0

    def flush() -> None:
        nonlocal line, line_w
        if line:
            lines.append("".join(line))
        line, line_w = [], 0.0

    for word in text.split():
        word_w = sum(map(char, word))
        if line and line_w + space + word_w <= limit:
            line += [" ", word]
            line_w += space + word_w
            continue
        if not line and word_w <= limit:
            line, line_w = [word], word_w
            continue
        flush()
        for piece in _PIECE.findall(word):
            piece_w = sum(map(char, piece)) if len(piece) < len(word) else word_w
            if line_w + piece_w <= limit:
                line.append(piece)
                line_w += piece_w
                continue
            flush()
            if piece_w > limit:  # a part longer than the line: the last resort, split by letters
                start, acc = 0, 0.0
                for i, ch in enumerate(piece):
                    w = char(ch)
                    if i > start and acc + w > limit:
                        lines.append(piece[start:i])
                        start, acc = i, 0.0
                    acc += w
                piece, piece_w = piece[start:], acc
            line, line_w = [piece], piece_w
    flush()
    return lines or [""]


#: the most lines a table cell (a header cell) may take: a table row cannot break across pages, so a stored text of
#: thousands of words is shortened to what fills these lines, and says so
MAX_CELL_LINES = 40
MAX_HEAD_LINES = 6
#: no character of either font (DejaVu Sans, Helvetica) that prints is narrower than this share of the font size
#: (the narrowest, Helvetica's quote, is 0.19): a line holds at most width / (share × size) of them
NARROWEST_GLYPH = 0.15


def char_budget(width: float, size: float, max_lines: int = MAX_CELL_LINES) -> int:
    """More characters than ``max_lines`` lines of ``width`` can hold at ``size``: text beyond this is cut before
    it is wrapped (wrapping it could only end in lines that are dropped)."""
    return (int(width / (NARROWEST_GLYPH * size)) + 1) * (max_lines + 1)


def cell_lines(text: str, width: float, font: str, size: float, max_lines: int = MAX_CELL_LINES) -> list[str]:
    """``text`` wrapped to ``width`` in at most ``max_lines`` lines; a longer text keeps its first lines and ends
    with :data:`~fairdesk.core.escape.SHORTENED_MARK` (the stored document holds it whole)."""
    budget = char_budget(width, size, max_lines)
    cut = len(text) > budget
    lines = wrap_lines(text[:budget] if cut else text, width, font, size)
    if not cut and len(lines) <= max_lines:
        return lines
    mark = wrap_lines(_t(SHORTENED_MARK), width, font, size)
    if len(mark) >= max_lines:  # a column too narrow for the sentence
        mark = [_t("…")]
    return lines[:max(1, max_lines - len(mark))] + mark


def _shorten_names(header: list[str], texts: list[list[str]]) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """Shorten long names in the name columns to "begin…end [n]"; return the rows and the (mark, full name) notes
    (one per distinct name, numbered in order of appearance). ``texts`` are already display text (:func:`_t`)."""
    cols = [j for j, h in enumerate(header) if str(h).strip().lower() in NAME_COLUMNS]
    marks: dict[str, str] = {}
    if not cols:
        return texts, []
    out = []
    for row in texts:
        row = list(row)
        for j in cols:
            if j < len(row) and len(row[j]) > NAME_LIMIT:
                full = row[j]
                mark = marks.setdefault(full, f"[{len(marks) + 1}]")
                row[j] = f"{shorten(full)} {mark}"
        out.append(row)
    return out, [(m, full) for full, m in marks.items()]


def _auto_widths(header: list[str], rows: list[list[str]], fonts: dict, size: float, pad: float,
                 frame_width: float) -> list[float]:
    """Column widths that fill the frame: narrow columns get their natural width, wide ones share the rest.

    Natural width = the widest cell; minimum = the widest word (cells wrap only between words; header cells wrap
    freely). If the natural widths do not fit, a water level L is found so that columns keep
    ``min(natural, max(minimum, L))``; any slack is spread in proportion to the natural widths.
    """
    from reportlab.pdfbase.pdfmetrics import stringWidth

    ncol = len(header)
    natural = [0.0] * ncol
    minimum = [0.0] * ncol
    for j, h in enumerate(header):
        words = h.split() or [""]
        minimum[j] = max(stringWidth(w, fonts["bold"], size) for w in words)
        natural[j] = minimum[j]
    for row in rows:
        for j, text in enumerate(row):
            w = stringWidth(text, fonts["regular"], size)
            if w > natural[j]:
                natural[j] = w
                if w > minimum[j]:
                    minimum[j] = max(minimum[j], max(stringWidth(t, fonts["regular"], size)
                                                     for t in break_pieces(text)))
    natural = [n + 2 * pad + 0.5 for n in natural]
    # a long unbroken word (a name, a path) must not claim the page: its column may shrink to a share of the
    # frame, and the word is split inside its cell
    cap = max(frame_width / max(ncol, 1), 0.3 * frame_width)
    minimum = [min(m + 2 * pad + 0.5, cap) for m in minimum]
    if sum(natural) <= frame_width:
        slack = frame_width - sum(natural)
        total = sum(natural)
        return [n + slack * n / total for n in natural]
    if sum(minimum) >= frame_width:
        # the widest minimums give way first (narrow columns keep room for their padding and a few letters)
        lo, hi = 0.0, max(minimum)
        for _ in range(40):
            level = (lo + hi) / 2
            lo, hi = (level, hi) if sum(min(m, level) for m in minimum) < frame_width else (lo, level)
        widths = [min(m, lo) for m in minimum]
        floor = 2 * pad + 6
        if min(widths) < floor:  # too many columns for the page: equal shares
            return [frame_width / ncol] * ncol
        return widths
    lo, hi = 0.0, max(natural)
    for _ in range(40):
        level = (lo + hi) / 2
        used = sum(min(n, max(m, level)) for n, m in zip(natural, minimum))
        lo, hi = (level, hi) if used < frame_width else (lo, level)
    widths = [min(n, max(m, lo)) for n, m in zip(natural, minimum)]
    slack = frame_width - sum(widths)
    grow = [n - w for n, w in zip(natural, widths)]
    if slack > 0 and sum(grow) > 0:
        widths = [w + slack * g / sum(grow) for w, g in zip(widths, grow)]
    return widths


#: figure kind -> (render(data, buf, title, **kw) writing a PNG, size(data) -> (width, height) in inches)
_FIGURE_KINDS: dict[str, tuple] = {}


def register_figure_kind(kind: str, render, size) -> None:
    """Teach the renderer a figure kind: ``render(data, buf, title)`` draws a PNG into ``buf``, ``size(data)``
    gives its (width, height) in inches. Report modules register their kinds when they build a report."""
    _FIGURE_KINDS[kind] = (render, size)


def figure_png(block: FigureSpec) -> tuple[bytes, float, float]:
    """The PNG of a figure block with its natural (width, height) in inches: what the PDF places and the HTML
    report embeds. Names in its labels are shown as the tables show them."""
    from fairdesk.core.reports import calibration_figures as CF
    from fairdesk.core.reports import figures as F

    kinds = {"forest": (F.render_forest_png, F.forest_size), "delta": (F.render_delta_png, F.delta_size),
             "bins": (F.render_bins_png, F.bins_size),
             "calibration": (CF.render_calibration_png, CF.calibration_size), **_FIGURE_KINDS}
    if block.kind not in kinds:
        raise KeyError(f"unknown figure kind {block.kind!r}")
    render, size = kinds[block.kind]
    buf = io.BytesIO()
    kwargs = {"xlabel": block.xlabel} if block.kind == "bins" and block.xlabel else {}
    data = block.data
    if "label" in getattr(data, "columns", ()):  # names as the tables show them
        data = data.assign(label=[shorten(visible(str(v)), NAME_LIMIT + 8) for v in data["label"]])
    render(data, buf, shorten(visible(block.title), 160), **kwargs)
    w_in, h_in = size(data)
    return buf.getvalue(), w_in, h_in


def _figure(block: FigureSpec, st, frame_width: float, frame_height: float) -> list:
    from reportlab.platypus import Image, KeepTogether
    from reportlab.platypus import Paragraph as RLParagraph

    png, w_in, h_in = figure_png(block)
    w, h = w_in * 72.0, h_in * 72.0
    scale = min(1.0, frame_width / w, (frame_height - 30) / h)
    img = Image(io.BytesIO(png), width=w * scale, height=h * scale)
    img.hAlign = "CENTER"
    parts = [img]
    if block.caption:
        parts.append(RLParagraph(_x(block.caption), st["caption"]))
    return [KeepTogether(parts)]


def _render(report: Report) -> bytes:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4, landscape
    from reportlab.lib.units import mm
    from reportlab.pdfgen.canvas import Canvas
    from reportlab.platypus import (BaseDocTemplate, CondPageBreak, Frame, KeepInFrame, NextPageTemplate,
                                    PageBreak, PageTemplate, Spacer)
    from reportlab.platypus import Paragraph as RLParagraph

    fonts = _fonts()
    st = _styles()
    page_w, page_h = A4
    margin = PAGE_MARGIN_MM * mm
    top, bottom = 19 * mm, 16 * mm
    frame_w, frame_h = page_w - 2 * margin, page_h - top - bottom
    land_w, land_h = page_h - 2 * margin, page_w - top - bottom  # the frame of a landscape page
    # the running header and footer are one line each: a long title or footer is cut to its share of the line
    header_right = _fit(_t(report.date), fonts["regular"], 7.8, 0.3 * land_w)
    footer_left = _t(report.footer)
    header_title = _t(report.title)

    class NumberedCanvas(Canvas):
        """Defers page output so that every page can say "page X of Y"."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._saved: list[dict] = []

        def showPage(self):  # noqa: N802 - reportlab API
            self._saved.append(dict(self.__dict__))
            self._startPage()

        def save(self):
            total = len(self._saved)
            for state in self._saved:
                self.__dict__.update(state)
                self._decorate(total)
                super().showPage()
            super().save()

        def _decorate(self, total: int) -> None:
            page_w, page_h = self._pagesize
            self.saveState()
            self.setStrokeColor(colors.HexColor("#B8C2CC"))
            self.setLineWidth(0.5)
            self.line(margin, page_h - 13 * mm, page_w - margin, page_h - 13 * mm)
            self.line(margin, 11.5 * mm, page_w - margin, 11.5 * mm)
            self.setFillColor(colors.HexColor("#444444"))
            self.setFont(fonts["bold"], 7.8)
            line = page_w - 2 * margin
            right = self.stringWidth(header_right, fonts["regular"], 7.8)
            self.drawString(margin, page_h - 11.5 * mm, _fit(header_title, fonts["bold"], 7.8, line - right - 12))
            self.setFont(fonts["regular"], 7.8)
            self.drawRightString(page_w - margin, page_h - 11.5 * mm, header_right)
            self.drawString(margin, 8 * mm, _fit(footer_left, fonts["regular"], 7.8, line - 60))
            self.drawRightString(page_w - margin, 8 * mm, f"page {self._pageNumber} of {total}")
            self.restoreState()

    story: list = []
    orientation = "portrait"
    for i, section in enumerate(report.sections):
        wanted = "landscape" if section.landscape else "portrait"
        if wanted != orientation:
            story.append(NextPageTemplate(wanted))
            orientation = wanted
        if i > 0 and (section.new_page or story and isinstance(story[-1], NextPageTemplate)):
            story.append(PageBreak())
        width, height = (land_w, land_h) if section.landscape else (frame_w, frame_h)
        part: list = []
        if i == 0:
            part.append(RLParagraph(_x(report.title), st["title"]))
            if report.subtitle:
                part.append(RLParagraph(_x(report.subtitle), st["subtitle"]))
        part.append(RLParagraph(_x(section.title), st["h1"]))
        for block in section.blocks:
            if isinstance(block, Paragraph):
                if block.style == "subheading" and not section.one_page:
                    part.append(CondPageBreak(90))  # no heading alone at the foot of a page
                if section.one_page and len(block.text) > ONE_PAGE_PARAGRAPH:
                    # a page shrunk to fit would print a stored text of thousands of words too small to read
                    block = Paragraph(_shortened(block.text, ONE_PAGE_PARAGRAPH), block.style)
                part.append(_paragraph(block, st))
            elif isinstance(block, Table):
                part += _table(block, st, width)
                part.append(Spacer(1, 5))
            elif isinstance(block, FigureSpec):
                part += _figure(block, st, width, height)
            else:  # pragma: no cover - the model only holds these three
                raise TypeError(f"unknown report block {type(block).__name__}")
        if section.one_page:
            # the governance summary must stay on one page: shrink it (rarely needed) rather than spill over
            story.append(KeepInFrame(width, height - 2, part, mode="shrink"))
        else:
            story += part

    buf = io.BytesIO()
    meta = report.metadata
    doc = BaseDocTemplate(buf, pagesize=A4, leftMargin=margin, rightMargin=margin, topMargin=top,
                          bottomMargin=bottom, invariant=1, pageCompression=1,
                          title=_t(meta.get("title", report.title)), author=_t(meta.get("author", "FairDesk")),
                          subject=_t(meta.get("subject", "")), creator=_t(meta.get("creator", "FairDesk")),
                          producer="FairDesk (reportlab)", keywords=[_t(meta.get("keywords", ""))],
                          displayDocTitle=1, lang="en")
    def frame(w, h):
        return Frame(margin, bottom, w, h, id="body", leftPadding=0, rightPadding=0, topPadding=0, bottomPadding=0)

    doc.addPageTemplates([PageTemplate(id="portrait", frames=[frame(frame_w, frame_h)], pagesize=A4),
                          PageTemplate(id="landscape", frames=[frame(land_w, land_h)], pagesize=landscape(A4))])
    doc.build(story, canvasmaker=NumberedCanvas)
    return buf.getvalue()

