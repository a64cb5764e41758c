"""Text from data (group, column, task and file names, user entries) escaped for the format it is written into: one
helper per target, so a name is always printed as the characters it holds and never as structure.

* :func:`markdown_text` — Markdown (the model card): every character Markdown gives a meaning (CommonMark's ASCII
  punctuation that can start or end markup: ``\\ ` * _ { } [ ] ( ) < > # + - . ! | ~ & = :`` and quotes) is
  backslash-escaped, and every line break (CR, LF, VT, FF, NEL, U+2028/9) becomes a space, so a name can neither end
  a table row, nor start a heading, a list, a block quote or a link.
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
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~&=:\"'$^])")


def markdown_text(text) -> str:
    """``text`` (None: "–") as literal Markdown inline text: one line, every markup character escaped."""
    text = "–" if text is None else str(text)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", LINE_BREAKS.sub(" ", text))


def html_text(text) -> str:
    """``text`` as literal Qt rich text (HTML): entities for markup characters, ``<br>`` for line breaks."""
    return LINE_BREAKS.sub("<br>", html.escape("" if text is None else str(text)))
