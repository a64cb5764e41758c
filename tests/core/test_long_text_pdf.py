"""Stored text of any length in a report: a slice description, a group value, a model name or a note of thousands of
words, or one unbroken word of thousands of letters, gives a PDF (a table row cannot break across pages, so a cell
is shortened to a bounded number of lines and says so), lines no wider than their column or page, and an HTML
report whose cells are bounded too. Wrapping is linear in the length of the text (counted, not timed)."""
from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fairdesk.core.escape import SHORTENED_MARK
from fairdesk.core.reports import pdf as P
from fairdesk.core.reports.document import Paragraph, Report, Section, Table

THREE_THOUSAND_WORDS = " ".join(f"word{i}" for i in range(3000))
LONG_WORD = "x" * 5000

# pieces a stored text is made of: words in several scripts, separators inside names, zero-width and combining
# characters, bidi controls, long unbroken runs
_PIECES = st.one_of(
    st.sampled_from(["age", "reads_whole_image", "a/b/c", "Ω", "женщина", "女性", "امرأة", "e\u0301", "\u200b",
                     "\u202e", "\u0301\u0301\u0301", "\t", "\n", " ", "‐", "Δ"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "W", "i", "女", "\u0301", "_"]),
              st.integers(1, 6000)),
)
TEXTS = st.lists(_PIECES, max_size=40).map("".join) | st.builds(
    lambda w, n: " ".join([w] * n), st.sampled_from(["word", "a_b", "女性", "mm"]), st.integers(1, 4000))


def _report(text: str, small: bool = False, landscape: bool = False) -> Report:
    """``text`` wherever a report may carry stored text: a table's name column, its free-text column, a header
    (the verdict grid's columns are group names), table title and note, body, lead, bullet and subheading."""
    table = Table(header=["Group", "Slice", text[:300] or "-", "n"], rows=[[text, text, "yes (BH)", "12"],
                                                                         ["b", "short", "0.1", "3"]],
                  title=text, note=text, small=small, align=["L", "L", "L", "R"])
    grid = Table(header=["Task", text], rows=[[text, "✔ differs"]], grid=True)
    blocks = [Paragraph(text, "lead"), Paragraph(text, "subheading"), Paragraph(text, "bullet"), table,
              Paragraph(text, "finding")]
    return Report(title="Audit " + text[:500], subtitle=text[:500], date="2026-01-01", suppress_k=5,
                  sections=[Section("board", "Board", [grid, Paragraph(text)], one_page=True),
                            Section("t", "Tables", blocks, landscape=landscape)],
                  footer=text[:2000])


def _line_widths_fit(flowable, width: float) -> bool:
    """Every line reportlab set in a Paragraph is within ``width`` (a negative free space is an overflow)."""
    flowable.wrap(width, 10_000)
    lines = flowable.blPara.lines
    if flowable.blPara.kind == 0:
        return all(extra >= -0.5 for extra, _ in lines)
    return all(line.extraSpace >= -0.5 for line in lines)


@settings(max_examples=8)
@given(text=TEXTS, small=st.booleans(), landscape=st.booleans())
@example(text=THREE_THOUSAND_WORDS, small=False, landscape=False)
@example(text=LONG_WORD, small=True, landscape=True)
@example(text="\n".join(["line"] * 3000), small=False, landscape=False)
def test_any_stored_text_gives_a_pdf_with_bounded_cells(text, small, landscape):
    data = P.render_bytes(_report(text, small, landscape))
    assert data.startswith(b"%PDF")


@settings(max_examples=25)
@given(text=TEXTS, width=st.floats(8, 500), size=st.sampled_from([6.6, 8.0]))
@example(text=THREE_THOUSAND_WORDS, width=120.0, size=8.0)
@example(text=LONG_WORD, width=60.0, size=6.6)
def test_cell_lines_fit_their_column_and_say_when_shortened(text, width, size):
    from reportlab.pdfbase.pdfmetrics import stringWidth

    font = P._fonts()["regular"]
    shown = P._t(text)
    lines = P.cell_lines(shown, width, font, size)
    assert 1 <= len(lines) <= P.MAX_CELL_LINES
    narrowest = min(stringWidth(c, font, size) for c in "xW女")  # a line too narrow for one letter holds one
    assert all(stringWidth(line, font, size) <= width + 0.05 or len(line) == 1 or width < narrowest
               for line in lines)
    flat = "".join("".join(lines).split())
    whole = "".join(shown.split())
    if flat == whole:  # nothing cut: every character kept, in order
        assert SHORTENED_MARK not in " ".join(lines) or SHORTENED_MARK in shown
    else:  # cut: what is kept is the text's beginning, and the cell says so
        assert flat.endswith("".join(P._t(SHORTENED_MARK).split())) or lines[-1] == P._t("…")
        kept = "".join("".join(lines[:-1]).split())
        assert whole.startswith(kept[:max(0, len(kept) - 60)])


def test_a_shortened_cell_keeps_forty_lines_and_the_pdf_says_so():
    report = Report("T", "", "2026-01-01", 5, [Section("s", "S", [
        Table(["Slice", "n"], [[THREE_THOUSAND_WORDS, "12"]])])])
    text = _pdf_text(P.render_bytes(report))
    assert "word0 word1" in text and "word2999" not in text
    assert "(shortened; full text in the JSON)" in re.sub(r"\s+", " ", text)


def _pdf_text(data: bytes) -> str:
    import shutil
    import subprocess

    if not shutil.which("pdftotext"):
        pytest.skip("pdftotext (poppler) is not installed")
    return subprocess.run(["pdftotext", "-", "-"], input=data, capture_output=True, check=True).stdout.decode()


@pytest.mark.parametrize("style", ["body", "lead", "bullet", "finding", "subheading", "note", "h1", "title"])
@pytest.mark.parametrize("text", [LONG_WORD, "short " + "女" * 3000 + " end", "a_b/" * 1500])
def test_a_paragraph_with_a_huge_word_stays_within_the_page(style, text):
    from reportlab.platypus import Paragraph as RLParagraph

    styles = P._styles()
    flow = P._paragraph(Paragraph(text, style), styles) if style not in ("h1", "title") else RLParagraph(
        P._x(text), styles[style])
    assert _line_widths_fit(flow, 480.0)


def test_wrapping_is_linear_in_the_text(monkeypatch):
    """Characters measured while wrapping: about one look-up per character, for words of any length (the wrap
    that searched for each cut measured the first i letters for every i: a 2,000-letter word took seconds)."""
    calls = 0
    measure = P._char_widths

    def counting(font, size):
        width = measure(font, size)

        def count(ch):
            nonlocal calls
            calls += 1
            return width(ch)
        return count

    import reportlab.pdfbase.pdfmetrics as metrics

    measured = 0
    string_width = metrics.stringWidth

    def measuring(text, font, size, *args, **kwargs):
        nonlocal measured
        measured += len(text)
        return string_width(text, font, size, *args, **kwargs)

    monkeypatch.setattr(P, "_char_widths", counting)
    monkeypatch.setattr(metrics, "stringWidth", measuring)
    for text in (LONG_WORD, "y" * 20_000, THREE_THOUSAND_WORDS, "a_" * 5000, ("女" * 700 + " ") * 20):
        for width in (30.0, 150.0, 480.0):
            calls = measured = 0
            P._WIDTHS.clear()
            lines = P.wrap_lines(text, width, "Helvetica", 8)
            assert "".join(lines).replace(" ", "") == text.replace(" ", "")
            assert calls <= 2 * len(text) + 2, (len(text), width, calls)
            assert measured <= 2 * len(text) + 2, (len(text), width, measured)


def test_html_cells_are_bounded_and_break_anywhere():
    from fairdesk.core.reports.html import CELL_LIMIT, render_html

    report = _report(THREE_THOUSAND_WORDS)
    for s in report.sections:
        s.blocks = [b for b in s.blocks if isinstance(b, (Paragraph, Table))]
    page = render_html(report)
    cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", page, flags=re.S)
    assert cells and max(len(c) for c in cells) <= CELL_LIMIT + len(SHORTENED_MARK) + 80
    assert any(SHORTENED_MARK in c for c in cells)
    assert "overflow-wrap: anywhere" in page
    assert "word2999" in page  # paragraphs keep the whole text: a browser wraps them
