"""Page 1 for a board, one text path and one number format, the HTML report.

Every kind's report starts with the board's page (section "board", built by ``reports.board``): at most 350 words
with the title, a verdict grid, the differences in words, what could not be tested, what to check next. Every
sentence of every report — and so of the GUI's Findings panel and the HTML report, which render the same tree — is
checked over generated documents (the stored documents of every kind with their numbers drawn again, tiny p-values
and zeros included) for code and placeholder artefacts: braces, None, nan, Python expressions, doubled spaces and
scientific notation.
"""
from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fairdesk.core import numbers
from fairdesk.core.kinds import AUDIT_KINDS, ReportSettings, build_html, build_report, report_tree
from fairdesk.core.reports.board import VERDICT_MARK, Board, board_section, section_words, word_count
from fairdesk.core.reports.document import FigureSpec, Paragraph, Report, Section, Table

DATA = Path(__file__).resolve().parents[1] / "data"
KINDS = sorted(AUDIT_KINDS)
PAGE_ONE_WORDS = 350


def _doc(kind: str) -> dict:
    return json.loads((DATA / "documents" / f"{kind}.json").read_text(encoding="utf-8"))


def _cohorts() -> list[tuple[str, dict]]:
    """The stored document of every kind, and the group audits of other cohorts (every gap rule, small groups)."""
    out = [(k, _doc(k)) for k in KINDS]
    for path in sorted((DATA / "read_view").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and "plan" in doc and "records" in doc:
            out.append(("groups", doc))
    return out


def _page_one_words(report: Report) -> int:
    return word_count(report.title) + word_count(report.subtitle) + word_count(report.date) + \
        word_count(report.footer) + 4 + section_words(report.sections[0])  # + "page 1 of N"


# ---- artefacts -------------------------------------------------------------------------------------------------

ARTEFACTS = {
    "a brace": re.compile(r"[{}]"),
    "None": re.compile(r"\bNone\b"),
    "nan": re.compile(r"\b(?:nan|NaN|inf)\b"),
    "a Python expression": re.compile(r"\b(?:if len\(|else '|lambda\b|\.get\(|\bdef |\bself\.)|\[['\"]|%[sdf]\b"),
    "an unfilled placeholder": re.compile(r"\$\{|\{\w*\}|<<|>>|\bTODO\b|\bXXX\b"),
    "a doubled space": re.compile(r"\S  +\S"),
    "scientific notation": re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][-+\u2212]?\d+(?!\w)"),
}


def artefacts(text: str) -> list[str]:
    """What in ``text`` reads as code or an unfilled template rather than words."""
    text = re.sub(r"^\d+(?:\.\d+)*  ", "", text)  # "2  Methods": a section's number is set off by two spaces
    return [f"{name}: …{text[max(0, m.start() - 40):m.end() + 40]}…" for name, rx in ARTEFACTS.items()
            for m in [rx.search(text)] if m]


def _texts(report: Report) -> list[str]:
    """Every sentence and cell of the report (paragraphs, table titles, headers, cells and notes, captions)."""
    out = [report.title, report.subtitle]
    for s in report.sections:
        out.append(s.title)
        for b in s.blocks:
            if isinstance(b, Paragraph):
                out.append(b.text)
            elif isinstance(b, Table):
                out += [b.title, b.note, *b.header, *(str(c) for r in b.rows for c in r)]
            else:
                out += [b.title, b.caption]
    return [t for t in out if t]


MODES = ("same", "zero", "tiny", "huge", "one")
SETTINGS = {"plan", "settings", "method", "spec", "provenance", "learner"}


def redraw(doc, seed: int, share: float) -> object:
    """The document with its numbers drawn again (sign and type kept): a ``share`` of its floats replaced by a tiny
    p-value-like number (5.33e-170), zero, one or a large value, and the three verdicts shuffled where they are the
    words used (``seed``: which)."""
    import random

    rng = random.Random(seed)

    def walk(x):
        if isinstance(x, dict):
            out = {}
            for key, v in x.items():
                if key in SETTINGS:  # the audit's settings are checked when read: a wrong one is refused
                    out[key] = v
                elif key == "verdict" and v in ("differs", "equivalent", "inconclusive") and rng.random() < share:
                    out[key] = rng.choice(["differs", "equivalent", "inconclusive"])
                else:
                    out[key] = walk(v)
            return out
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, float) and x == x and rng.random() < share:
            sign = -1.0 if x < 0 else 1.0
            return {"same": x, "zero": 0.0, "tiny": sign * 5.33e-170, "huge": x * 1e4,
                    "one": sign * 1.0 if abs(x) <= 1 else x}[rng.choice(MODES)]
        return x
    return walk(copy.deepcopy(doc))


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 2**16), share=st.sampled_from([0.1, 0.5, 1.0]),
       k=st.sampled_from([1, 5, 11]))
def test_no_artefact_in_any_sentence_of_a_generated_report(kind, seed, share, k):
    doc = redraw(_doc(kind), seed, share)
    try:
        report = report_tree(kind, doc, ReportSettings(k))
    except (ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError) as err:  # pragma: no cover
        pytest.fail(f"{kind}: a generated document could not be reported: {err!r}")
    assert report.sections[0].key == "board"
    texts = _texts(report)
    if kind == "slices":  # the sentences the CLI prints come from the same functions
        from fairdesk.core.reports.slices import slice_sentences

        texts += slice_sentences(doc, k)
    elif kind == "ctf":
        from fairdesk.core.reports.ctf import term_sentences

        texts += term_sentences(doc, k)
    found = [a for t in texts for a in artefacts(t)]
    assert not found, found[:5]
    assert _page_one_words(report) <= PAGE_ONE_WORDS


@pytest.mark.parametrize("kind,doc", _cohorts(), ids=lambda v: v if isinstance(v, str) else "")
def test_page_one_is_the_board_within_350_words(kind, doc):
    report = report_tree(kind, doc, ReportSettings(11))
    board = report.sections[0]
    assert board.key == "board" and board.one_page and not board.new_page
    assert report.sections[1].new_page  # the method, families and definitions start on page 2
    heads = [b.text for b in board.blocks if isinstance(b, Paragraph) and b.style == "subheading"]
    assert heads[0] == "What differs" and "What to check next" in heads
    grid = next(b for b in board.blocks if isinstance(b, Table))
    assert grid.grid and all(c in VERDICT_MARK.values() for r in grid.rows for c in r[1:])
    assert _page_one_words(report) <= PAGE_ONE_WORDS


def test_page_one_prints_the_testing_plan_when_the_document_names_it():
    from fairdesk.core.audits.groups import GroupAuditResult
    from fairdesk.core.reports.groups import board_summary, plan_description

    text = "Each group is compared with all other groups together, with one correction per task."
    doc = _doc("groups")
    assert plan_description({"plan": {"description": text}}) == text and plan_description(doc) is None
    for section in (board_summary(GroupAuditResult.from_dict(doc), 11, text),
                    report_tree("slices", dict(_doc("slices"), plan=dict(_doc("slices")["plan"], description=text)))
                    .sections[0]):
        assert f"Testing plan: {text}" in [b.text for b in section.blocks if isinstance(b, Paragraph)]


def test_the_board_names_what_differs_with_its_interval_and_counts_the_rest():
    """A finding that differs is a sentence with its interval; what does not fit is counted, never cut."""
    findings = [f"Recall for sex = F is 0.{i:02d} lower than for M (95% CI 0.01 to 0.2{i % 10}) in task T{i}."
                for i in range(40)]
    board = Board(question="Does the model perform equally well?", entries=[("T", "sex", "differs")],
                  findings=findings, untested=["3 groups were too small."], next_steps=["Check the data."])
    section = board_section(board, 11)
    paragraphs = [b for b in section.blocks if isinstance(b, Paragraph)]
    shown = [b.text for b in paragraphs if b.style == "finding"]
    assert shown and all(t in findings for t in shown) and len(shown) < len(findings)
    more = next(b.text for b in paragraphs if b.text.startswith("… and"))
    assert f"{len(findings) - len(shown)} more findings" in more
    assert section_words(section) <= 320
    # the cell shows the most important verdict of those in it, by symbol and by word
    section = board_section(Board("Q?", entries=[("T", "a", "equivalent"), ("T", "a", "inconclusive"),
                                                  ("T", "a", "differs"), ("U", "a", None)]), 11)
    grid = next(b for b in section.blocks if isinstance(b, Table))
    assert grid.rows == [["T", "≠ differs"], ["U", "– not tested"]]


def test_a_large_grid_gives_way_to_the_differences():
    """The demo's page 1 once printed a 7 × 6 grid and no finding ("… and 2 more findings"): the differences come
    first, the grid shows fewer rows when needed (those with a difference first)."""
    entries = [(f"task {t}", f"attribute {a}", "differs" if (t, a) == (6, 2) else "inconclusive")
               for t in range(7) for a in range(6)]
    findings = [f"Recall for attribute 2 = group {i} is 0.30 lower than for group Z (0.60 vs 0.90; 95% CI 0.10 to "
                f"0.50) and also lower than for 1 other group in task 6. Meaning: the model misses more true cases "
                f"in this group. Caution: a score that ranks at random has an AUPRC equal to the prevalence, so part "
                f"of an AUPRC gap can come from a difference in prevalence alone (prevalence 0.12 and 0.15)."
                for i in range(2)]
    board = Board("Does the model perform equally well for the patient groups of six attributes, over 7 tasks? Of "
                  "951 comparisons, 2 differ, 2 are equivalent within ±0.05 and 947 are inconclusive.",
                  entries=entries, findings=findings, untested=["28 groups were too small."] * 3,
                  next_steps=["Check the data behind each difference before reading it as unfair treatment."] * 3)
    section = board_section(board, 11)
    shown = [b.text for b in section.blocks if isinstance(b, Paragraph) and b.style == "finding"]
    assert shown == findings and section_words(section) <= 320
    grid = next(b for b in section.blocks if isinstance(b, Table))
    assert len(grid.rows) < 7 and grid.rows[0][0] == "task 6" and "≠ differs" in grid.rows[0]
    assert f"{7 - len(grid.rows)} more task rows" in grid.note


def test_no_string_outside_an_f_string_holds_an_expression_in_braces():
    """The class of the verified-region note's defect (a sentence written as an f-string without its "f", so it
    printed "{'its verdict' if len(out) == 1 else 'their verdicts'}"): no string literal outside an f-string —
    docstrings and ``.format`` templates aside — holds a Python expression in braces."""
    import ast

    root = Path(__file__).resolve().parents[2] / "fairdesk"
    expression = re.compile(r"\{[^{}\s:][^{}]*?(?:\bif\b[^{}]*\belse\b|\w\(|\w\[['\"\w])[^{}]*\}")
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                    and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
                skip.add(id(node.body[0].value))  # a docstring
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
                skip.update(id(n) for n in ast.walk(node.func.value))  # a template filled by .format
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                    and "\n" not in node.value and expression.search(node.value):  # (a style sheet or script)
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {node.value[:60]!r}")
    assert not found, found


# ---- one number format -----------------------------------------------------------------------------------------

@given(p=st.floats(min_value=0, max_value=1) | st.sampled_from([5.33e-170, 0.0, 1e-300, 0.00099999, 0.001]))
def test_a_p_value_is_three_decimals_or_below_one_thousandth(p):
    text = numbers.p_value(p)
    assert text == "< 0.001" if p < 0.001 else re.fullmatch(r"[01]\.\d{3}", text)
    assert "e" not in numbers.p_equals(p) and "= <" not in numbers.p_equals(p)


@given(x=st.floats(allow_nan=True, allow_infinity=True) | st.none() | st.text(max_size=3),
       digits=st.integers(0, 4))
def test_numbers_never_print_code_or_scientific_notation(x, digits):
    for text in (numbers.fixed(x, digits), numbers.signed(x, digits), numbers.interval(x, x, digits),
                 numbers.p_value(x), numbers.count(x, 11), numbers.cell(x, "gap"), numbers.cell(x, "q_value")):
        assert not artefacts(text), text
    if numbers.num(x) is None:
        assert numbers.fixed(x) == "–"


def test_the_screen_the_reports_and_the_cli_print_a_number_the_same_way():
    """GUI tables (``numbers.cell``), the PDF and HTML (the report tree's cells, ``figures.fmt_*``) and the CLI's
    sentences all print a p-value as "< 0.001" and a gap with a true minus sign."""
    from fairdesk.core.reports import figures as F

    assert numbers.cell(5.33e-170, "p_value") == F.fmt_p(5.33e-170) == "< 0.001"
    assert numbers.cell(0.0, "TOST p 0 → 1") == "< 0.001" and numbers.cell(0.0123, "q") == "0.012"
    assert numbers.cell(2e-71, "mean |shift|") == "0.000"
    assert F.fmt_signed(-0.125) == numbers.signed(-0.125) == "−0.125"
    assert F.fmt_ci(-0.2, 0.1) == numbers.interval(-0.2, 0.1) == "−0.200 to +0.100"
    doc = _doc("groups")
    html = _html(doc)
    pdf_cells = {str(c) for t in report_tree("groups", doc).tables() for r in t.rows for c in r}
    assert "< 0.001" in pdf_cells or any("0." in c for c in pdf_cells)
    for cell in pdf_cells:  # every cell the PDF prints is in the HTML, character for character
        assert _escape(cell) in html


# ---- table wrapping --------------------------------------------------------------------------------------------

def test_a_table_cell_breaks_between_words_or_after_an_underscore_never_inside_a_part():
    from fairdesk.core.reports.pdf import break_pieces, wrap_lines

    lines = wrap_lines("reads_whole_image and counts_positive_cases", 45, "Helvetica", 8)
    parts = set(break_pieces("reads_whole_image and counts_positive_cases"))
    assert "".join(lines).replace(" ", "") == "reads_whole_imageandcounts_positive_cases"
    for line in lines:  # each line is made of whole parts
        assert all(p in parts for p in re.findall(r"[^_\s]*_|[^_\s]+", line))
    assert wrap_lines("short", 100, "Helvetica", 8) == ["short"]


# ---- HTML ------------------------------------------------------------------------------------------------------

def _escape(text: str) -> str:
    import html

    from fairdesk.core.reports.pdf import visible

    return html.escape(visible(text), quote=True)


def _html(doc: dict, kind: str = "groups", k: int = 11, figures: bool = False) -> str:
    from fairdesk.core.reports.html import render_html

    report = report_tree(kind, doc, ReportSettings(k))
    if not figures:  # figures are drawn by the PDF's own code: checked once, below
        for s in report.sections:
            s.blocks = [b for b in s.blocks if not isinstance(b, FigureSpec)]
    return render_html(report)


def no_network_reference(html: str) -> list[str]:
    """Anything in an HTML file that could reach beyond it."""
    body = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "DATA", html)
    bad = [m.group() for m in re.finditer(r"https?://|//|\b(?:src|href|action|poster)\s*=\s*[\"'](?!DATA)[^\"']*"
                                          r"|url\(|@import|<link\b|<iframe\b|<object\b|<embed\b", body)]
    return bad


@pytest.mark.parametrize("kind", KINDS)
def test_the_html_report_is_the_pdfs_tree_offline_and_navigable(kind, tmp_path):
    doc = _doc(kind)
    path = build_html(kind, doc, tmp_path / "r.html", ReportSettings(11))
    html = path.read_text(encoding="utf-8")
    assert not no_network_reference(html), no_network_reference(html)[:3]
    report = report_tree(kind, doc, ReportSettings(11))
    assert html.count("<h2 ") == len(report.sections) and html.count("<img ") == len(report.figures())
    assert html.count("<caption>") == sum(bool(t.title) for t in report.tables())
    assert html.count('<th scope="col">') == sum(len(t.header) for t in report.tables())
    assert '<html lang="en">' in html and "aria-sort" in html
    for text in _texts(report):  # the same words and numbers as the PDF
        assert _escape(" ".join(text.split())) in " ".join(html.split()), text
    assert build_html(kind, doc, tmp_path / "again.html", ReportSettings(11)).read_bytes() == path.read_bytes()


@settings(max_examples=8, deadline=None)
@given(name=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12),
       k=st.sampled_from([1, 11]))
def test_html_keeps_names_as_text_and_counts_suppressed(name, k):
    assume("<1" not in name)
    doc = _doc("groups")
    doc["provenance"] = dict(doc["provenance"], dataset=name + " https://example.org/x")
    html = _html(doc, k=k)
    assert "<script" not in html.replace("<script>", "", 1).replace("</script>", "")
    assert not no_network_reference(html.replace(_escape(name + " https://example.org/x"), "NAME"))
    pdf = report_tree("groups", doc, ReportSettings(k)).text(include_tooltips=False)
    assert ("<11" in pdf) == ("&lt;11" in html)


def test_cli_writes_the_html_report(tmp_path, capsys):
    from fairdesk.cli import main

    doc = tmp_path / "d.csv"
    rows = ["y,p,sex"] + [f"{i % 2},{(i * 37 % 100) / 100},{'FM'[i % 3 == 0]}" for i in range(120)]
    doc.write_text("\n".join(rows) + "\n")
    out = tmp_path / "r.html"
    assert main(["audit", "groups", str(doc), "--label", "y", "--score", "p", "--attribute", "sex", "--threshold",
                 "0.5", "--n-boot", "100", "--no-calibration", "--quiet", "--json", str(tmp_path / "a.json"),
                 "--html", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "For the board" in html and not no_network_reference(html)
    # an output over an input is refused before any work, in one sentence
    capsys.readouterr()
    assert main(["audit", "groups", str(doc), "--label", "y", "--score", "p", "--attribute", "sex", "--quiet",
                 "--threshold", "0.5", "--json", str(tmp_path / "b.json"), "--html", str(doc)]) == 2
    err = capsys.readouterr().err
    assert "--html" in err and err.count("\n") == 1 and not (tmp_path / "b.json").exists()


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
@pytest.mark.parametrize("kind", KINDS)
def test_pdf_page_one_is_at_most_350_words(kind, tmp_path):
    path = build_report(kind, _doc(kind), tmp_path / "r.pdf", ReportSettings(11))
    text = subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(path), "-"], check=True, capture_output=True,
                          text=True).stdout
    assert word_count(text) <= PAGE_ONE_WORDS
    assert "What differs" in text and "What to check next" in text
    assert not [a for a in artefacts(" ".join(text.split())) if not a.startswith("a doubled")]
