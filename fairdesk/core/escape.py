"""Text from data (group, column, task and file names, user entries) escaped for the format it is written into: one
helper per target, so a name is always printed as the characters it holds and never as structure.

* :func:`plain_text` — a terminal, and the first step of every other target: terminal escape sequences (colours,
  cursor moves, window titles), C0 and C1 control characters (but tab and newline), bidi overrides and zero-width
  characters are removed, so a name can neither drive the terminal nor reorder or hide what is shown.
* :func:`markdown_text` — Markdown (the model card): the characters :func:`plain_text` removes are removed; only
  what Markdown would read as markup where it stands is backslash-escaped (``\\ ` * [ ] < # | ~`` anywhere, ``_``
  except between letters, ``&`` before an entity, "://", and at the start of a line "#", "-", "+", ">", "=", "1."
  and indentation), and every line break (CR, LF, VT, FF, NEL, U+2028/9) becomes a space, so a name can neither end
  a table row, nor start a heading, a list, a block quote or a link, and "0.1.0" prints as it is.
* :func:`html_text` — Qt rich text (labels, the findings header, the text diff viewer): ``& < > " '`` as entities and
  line breaks as ``<br>``.
* PDF (reportlab Paragraph markup): :func:`fairdesk.core.reports.pdf.visible` then ``xml.sax.saxutils.escape`` (in
  ``pdf._x``): markup characters escaped, bidi and other invisible controls shown as ⟨RLO⟩, ⟨U+200B⟩; a line break
  in a Paragraph is white space.
"""
from __future__ import annotations

import html
import re

LINE_BREAKS = re.compile("\r\n|[\r\n\x0b\x0c\x85\u2028\u2029]")
#: a terminal escape sequence: CSI (colours, cursor), OSC (window title, links; ended by BEL or ST, or unended)
#: and the two-character escapes
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -~]?)|\x9b[0-?]*[ -/]*[@-~]?")
#: C0 controls but tab and newline, DEL, C1 controls, bidi formatting (embeddings, overrides, isolates, marks),
#: zero-width characters, invisible operators and the byte-order mark
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                     "\u2066-\u2069\ufeff]")
#: characters that are markup wherever they stand: backslash, code, emphasis, links and images, raw HTML and
#: autolinks, headings' closing marks, table cells, strikethrough
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<#|~])")
#: "a_b": an underscore between letters or digits never starts emphasis, so it needs no escape
_INTRAWORD_UNDERSCORE = re.compile(r"(?<=[^\W_])\\_(?=[^\W_])")
#: "&amp;" / "&#35;": an entity reference (a lone "&" is text)
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")



def plain_text(text) -> str:
    """``text`` without terminal escape sequences, control characters (tab and newline kept), bidi formatting and
    zero-width characters: what a terminal or a Markdown reader shows is what the text says."""
    return _HIDDEN.sub("", _ESCAPES.sub("", str(text)))


def markdown_text(text, line_start: bool = False) -> str:
    """``text`` (None: "–") as literal Markdown inline text: one line, and a backslash before exactly the characters
    that would otherwise be markup where they stand (so "0.1.0" stays "0.1.0" and "reads_whole_image" stays as it
    is). ``line_start``: the text begins a line, where "#", "-", "+", ">", "=", "1." and indentation mean structure."""
    raw = "–" if text is None else str(text)
    text = plain_text(LINE_BREAKS.sub(" ", raw))
    if raw and not text.strip():
        return "(blank)"  # a name that shows nothing: an empty list item or paragraph would change the structure
    out = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    out = _INTRAWORD_UNDERSCORE.sub("_", out)
    out = _ENTITY.sub(r"\\&", out)
    out = out.replace("://", "\\://")  # no automatic link
    if line_start:
        m = re.match(r"[ \t]*", out)
        lead = m.group() if m else ""
        out = "&#32;" * len(lead.expandtabs(4)) + out[len(lead):]  # indentation would make a code block
        out = re.sub(r"^(\d{1,9})([.)])", r"\1\\\2", out)  # "1." / "1)": an ordered list
        out = re.sub(r"^([-+>=])", r"\\\1", out)  # a list, a quote, a heading underline, a rule
    return out


def html_text(text) -> str:
    """``text`` as literal Qt rich text (HTML): entities for markup characters, ``<br>`` for line breaks."""
    return LINE_BREAKS.sub("<br>", html.escape("" if text is None else str(text)))


#: what ends a text cut short for a table cell, a list entry or a tooltip (the stored document keeps it whole)
SHORTENED_MARK = "… (shortened; full text in the JSON)"


def shortened(text, limit: int) -> str:
    """``text`` cut to its first ``limit`` characters followed by :data:`SHORTENED_MARK` when longer, else as it is:
    a stored name or note of thousands of words stays readable in a cell, a list or a tooltip."""
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + " " + SHORTENED_MARK
