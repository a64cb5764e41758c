"""HTML rendering of a :class:`~fairdesk.core.reports.document.Report`: one self-contained file, for an intranet page,
an e-mail or a screen reader.

* The same report tree as the PDF (:mod:`fairdesk.core.reports.pdf`), so the same words, numbers and small-cell
  suppression: both only lay out what the report module decided.
* Self-contained and offline: the style sheet and the small sorting script are inline, figures are embedded as
  base64 PNG ``data:`` images drawn by the PDF's own figure code (:func:`fairdesk.core.reports.pdf.figure_png`), and
  nothing refers to any other file or address — no link, no external font, style sheet or script.
* Navigable by a screen reader: ``h1`` for the title, ``h2`` per section, ``h3`` per subheading; tables with a
  ``caption``, column headers ``th scope="col"`` and the first cell of each row ``th scope="row"``; the sort buttons
  are real buttons and the sorted column says so with ``aria-sort``; every figure has its title as ``alt`` text.
* The verdict grid of page 1 is tinted as in the PDF, and each cell says its verdict in a symbol and a word.
* Names from the user's data are text, never markup (escaped with :func:`html.escape`), and bidirectional or
  invisible control characters are shown as visible marks as in the PDF.
* Deterministic: the same report gives the same bytes; written atomically.
"""
from __future__ import annotations

import base64
import html
import os
from pathlib import Path

from fairdesk.core import atomic
from fairdesk.core.escape import shortened
from fairdesk.core.reports.board import VERDICT_FILL, verdict_of_cell
from fairdesk.core.reports.document import FigureSpec, Paragraph, Report, Table

_CSS = """
body { font-family: "DejaVu Sans", "Segoe UI", Arial, sans-serif; font-size: 15px; line-height: 1.45;
       color: #1a1a1a; max-width: 62em; margin: 1.5em auto; padding: 0 1em; }
header { border-bottom: 1px solid #b8c2cc; margin-bottom: 1em; }
h1 { font-size: 1.6em; margin: 0 0 0.2em 0; }
h2 { font-size: 1.3em; color: #2f4858; margin-top: 1.6em; border-bottom: 1px solid #dde3e8; }
h3 { font-size: 1.05em; margin: 1em 0 0.3em 0; }
.subtitle, .date { color: #555555; margin: 0.1em 0; }
.lead { font-weight: bold; }
.note, figcaption, .table-note { font-size: 0.85em; color: #444444; }
ul.findings li::marker { color: #c03a00; }
table { border-collapse: collapse; margin: 0.4em 0 0.2em 0; font-size: 0.85em; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
th, td { border: 1px solid #d0d7de; padding: 0.2em 0.45em; vertical-align: top; text-align: left;
         overflow-wrap: anywhere; }
p, li, caption, h1, h2, h3, figcaption { overflow-wrap: anywhere; }
thead th { background: #2f4858; color: #ffffff; }
thead th button { all: inherit; cursor: pointer; padding: 0; border: 0; }
thead th button:focus { outline: 2px solid #f4b183; }
tbody tr:nth-child(even) { background: #f3f5f8; }
td.num { text-align: right; white-space: nowrap; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; }
footer { margin-top: 2em; border-top: 1px solid #b8c2cc; color: #555555; font-size: 0.85em; }
"""

#: sorts a table by the column whose header button is pressed: numbers (with "−", "<", "," and "%" read) as numbers,
#: other text alphabetically; pressing again reverses. Written without any comment or address.
_SCRIPT = """
(function () {
  function key(text) {
    var t = text.replace(/\\u2212/g, "-").replace(/[<>,%+\\s]/g, "");
    var m = t.match(/^-?[0-9]*\\.?[0-9]+/);
    return m ? [0, parseFloat(m[0]), text] : [1, 0, text.toLowerCase()];
  }
  function compare(a, b) {
    if (a[0] !== b[0]) { return a[0] - b[0]; }
    if (a[0] === 0 && a[1] !== b[1]) { return a[1] - b[1]; }
    return a[2] < b[2] ? -1 : (a[2] > b[2] ? 1 : 0);
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      var button = th.querySelector("button");
      button.addEventListener("click", function () {
        var up = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var c = compare(key(a.cells[col].textContent), key(b.cells[col].textContent));
          return up ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
"""


def _t(text) -> str:
    """Text as HTML: control characters made visible (as in the PDF), markup escaped."""
    from fairdesk.core.reports.pdf import visible

    return html.escape(visible(str(text)), quote=True)


def _paragraphs(blocks: list, out: list[str]) -> None:
    """Paragraph blocks in order; consecutive bullets or findings become one list."""
    open_list: str | None = None
    for block in blocks:
        style = block.style
        kind = "findings" if style == "finding" else "bullets" if style == "bullet" else None
        if open_list and kind != open_list:
            out.append("</ul>")
            open_list = None
        if kind:
            if open_list is None:
                out.append(f'<ul class="{kind}">')
                open_list = kind
            out.append(f"<li>{_t(block.text)}</li>")
        elif style == "subheading":
            out.append(f"<h3>{_t(block.text)}</h3>")
        elif style in ("lead", "note"):
            out.append(f'<p class="{style}">{_t(block.text)}</p>')
        else:
            out.append(f"<p>{_t(block.text)}</p>")
    if open_list:
        out.append("</ul>")


def _looks_numeric(text: str) -> bool:
    t = text.replace("\u2212", "-").replace(",", "").replace("<", "").replace("%", "").strip()
    try:
        float(t.split()[0] if t else "x")
    except ValueError:
        return False
    return True


#: the most characters a table cell shows (a header cell: a quarter of it); a stored text of thousands of words
#: keeps its beginning and says it was shortened, as in the PDF
CELL_LIMIT = 2000


def _table(block: Table) -> str:
    align = block.align or []
    parts = ['<table class="sortable">']
    if block.title:
        parts.append(f"<caption>{_t(block.title)}</caption>")
    parts.append("<thead><tr>")
    for h in block.header:
        parts.append(f'<th scope="col"><button type="button">{_t(shortened(h, CELL_LIMIT // 4))}</button></th>')
    parts.append("</tr></thead><tbody>")
    for row in block.rows:
        parts.append("<tr>")
        for j, cell in enumerate(row):
            text = shortened(cell, CELL_LIMIT)
            if j == 0:
                parts.append(f'<th scope="row">{_t(text)}</th>')
                continue
            attrs = []
            verdict = verdict_of_cell(text) if block.grid else None
            if verdict:
                attrs.append(f'style="background:{VERDICT_FILL[verdict]}"')
            elif (align[j] if j < len(align) else "L") == "R" or _looks_numeric(text):
                attrs.append('class="num"')
            parts.append(f"<td{' ' + ' '.join(attrs) if attrs else ''}>{_t(text)}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    if block.note:
        parts.append(f'<p class="table-note">{_t(block.note)}</p>')
    return "".join(parts)


def _figure(block: FigureSpec) -> str:
    from fairdesk.core.reports.pdf import figure_png

    png, w_in, _ = figure_png(block)
    data = base64.b64encode(png).decode("ascii")
    width = int(round(w_in * 96))
    caption = f"<figcaption>{_t(block.caption)}</figcaption>" if block.caption else ""
    return (f'<figure><img src="data:image/png;base64,{data}" width="{width}" alt="{_t(block.title)}">'
            f"{caption}</figure>")


def render_html(report: Report) -> str:
    """The HTML text of ``report`` (what :func:`write_html` writes)."""
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_t(report.metadata.get('title', report.title))}</title>",
           '<meta name="generator" content="FairDesk">', f"<style>{_CSS}</style>", "</head>", "<body>",
           "<header>", f"<h1>{_t(report.title)}</h1>"]
    if report.subtitle:
        out.append(f'<p class="subtitle">{_t(report.subtitle)}</p>')
    out += [f'<p class="date">{_t(report.date)}</p>', "</header>", "<main>"]
    for i, section in enumerate(report.sections):
        sid = f"s{i + 1}-{''.join(c if c.isalnum() else '-' for c in section.key)}"
        out.append(f'<section aria-labelledby="{sid}">')
        out.append(f'<h2 id="{sid}">{_t(section.title)}</h2>')
        run: list = []
        for block in section.blocks + [None]:
            if isinstance(block, Paragraph):
                run.append(block)
                continue
            if run:
                _paragraphs(run, out)
                run = []
            if isinstance(block, Table):
                out.append(_table(block))
            elif isinstance(block, FigureSpec):
                out.append(_figure(block))
        out.append("</section>")
    out.append("</main>")
    if report.footer:
        out.append(f"<footer><p>{_t(report.footer)}</p></footer>")
    out += [f"<script>{_SCRIPT}</script>", "</body>", "</html>", ""]
    return "\n".join(out)


def write_html(report: Report, path: str | os.PathLike) -> Path:
    """Render ``report`` to ``path`` atomically (UTF-8) and return the path."""
    return atomic.write_text(Path(path), render_html(report))
