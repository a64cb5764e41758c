"""The generic report document: a plain tree of sections holding paragraphs, tables (header + rows of strings) and
figure specs. Every audit kind's report builder (``fairdesk.core.reports.<kind>``) produces one; the renderer
(:mod:`fairdesk.core.reports.pdf`) only lays it out, so everything a report claims is decided, worded and
small-cell-suppressed before rendering, where tests can read it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union

import pandas as pd


@dataclass
class Paragraph:
    """Plain text (no markup). ``style``: body | lead | bullet | note | subheading | finding."""

    text: str
    style: str = "body"


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    title: str = ""
    widths: list[float] | None = None  # relative column widths
    align: list[str] | None = None  # "L" or "R" per column
    small: bool = False  # long tables are set in a smaller font
    note: str = ""
    grid: bool = False  # a verdict grid (page 1): renderers tint each cell by the verdict its mark names


@dataclass
class FigureSpec:
    kind: str  # "forest" | "delta" | "bins" | "calibration" | kinds registered by report modules
    title: str
    data: pd.DataFrame
    caption: str = ""
    xlabel: str = ""


Block = Union[Paragraph, Table, FigureSpec]


@dataclass
class Section:
    key: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    new_page: bool = True
    one_page: bool = False  # the renderer shrinks the section to fit one page (the governance summary)
    landscape: bool = False  # wide tables: set on landscape pages


@dataclass
class Report:
    title: str
    subtitle: str
    date: str  # the audit's date (from its provenance), never the time of rendering
    suppress_k: int
    sections: list[Section]
    footer: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def section(self, key: str) -> Section:
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)

    def tables(self) -> list[Table]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Table)]

    def figures(self) -> list[FigureSpec]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, FigureSpec)]

    def text(self, include_tooltips: bool = True) -> str:
        """Every word of the report as plain text (for tests, search and a text export)."""
        out = [self.title, self.subtitle, self.date]
        for s in self.sections:
            out.append(s.title)
            for b in s.blocks:
                if isinstance(b, Paragraph):
                    out.append(b.text)
                elif isinstance(b, Table):
                    out += [b.title, " | ".join(b.header)] + [" | ".join(r) for r in b.rows] + [b.note]
                else:
                    out += [b.title, b.caption]
                    if include_tooltips and "tooltip" in b.data:
                        out += list(b.data["tooltip"])
        return "\n".join(t for t in out if t)


#: the units whose counts are suppressed in free text ("7 rows", "3 notes", "2 units"); a number directly after
#: a decimal point, a letter or a sign is not a count
COUNT_UNITS = ("rows", "row", "patients", "patient", "cases", "case", "samples", "sample", "stays", "stay", "people",
               "notes", "note", "images", "image", "scans", "scan", "units", "unit", "windows", "window",
               "word pieces", "word piece", "sentences", "sentence", "templates", "template", "tpl.",
               "word pairs", "word pair", "pairs", "pair", "positives", "negatives", "files", "file",
               "positive cases", "negative cases")
_UNITS = "|".join(re.escape(u) for u in sorted(COUNT_UNITS, key=len, reverse=True))
_NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+)"  # 1,234 or 1234 (a comma after a number is punctuation)
_COUNT_IN_TEXT = re.compile(r"(?<![\w.,<\u2212+-])" + _NUMBER + r"(\s+(?:" + _UNITS + r"))(?![\w])")
_N_EQUALS = re.compile(r"(\bn\s*=\s*)" + _NUMBER + r"(?!\d|[.,]\d)")


#: a number after these words is a threshold (a setting such as "fewer than 30 rows"), not a count
_THRESHOLD_BEFORE = re.compile(r"(?:at least|at most|fewer than|more than|less than|smaller than|larger than|"
                               r"minimum of|maximum of|cap of)\s*$")


def suppress_text(text: str, k: int) -> str:
    """Replace counts such as "7 rows" or "n = 7" in free text by "<k rows", "n = <k" when below k. Thresholds
    ("fewer than 5 rows": a setting, not a count) are left as they are."""
    def repl(m: re.Match) -> str:
        value = int(m.group(1).replace(",", ""))
        if value >= k or _THRESHOLD_BEFORE.search(m.string, 0, m.start()):
            return m.group(0)
        return f"<{k}" + m.group(2)

    def repl_n(m: re.Match) -> str:
        value = int(m.group(2).replace(",", ""))
        return m.group(1) + (f"<{k}" if value < k else m.group(2))

    return _N_EQUALS.sub(repl_n, _COUNT_IN_TEXT.sub(repl, text))


def suppression_note(k: int) -> str:
    """The sentence every report prints about its small-cell setting."""
    if k <= 1:
        return "Small-cell suppression: off (k = 1): every count is shown."
    return (f"Small-cell suppression: every count below {k} is shown as “<{k}” or withheld (“–”), and so is any "
            "count that would give one back by arithmetic.")


def with_disclosure(report: Report, doc: dict) -> Report:
    """``report`` with the disclosure rules of a releasable document (``doc["disclosure"]``,
    :func:`fairdesk.core.disclosure.release`) as a note at the end of its last section; a working document's
    report says that it is not for release."""
    info = doc.get("disclosure") if isinstance(doc, dict) else None
    if not report.sections:
        return report
    ignored = doc.get("ignored_keys") if isinstance(doc, dict) else None
    if ignored:  # keys of a newer version's document, left out when it was read (fairdesk.core.kinds)
        from fairdesk.core.kinds import newer_keys_note

        from fairdesk.core.kinds import newer_version

        report.sections[-1].blocks.append(Paragraph(newer_keys_note(ignored, "The stored audit", newer_version(doc)),
                                                    "note"))
    if isinstance(info, dict) and info.get("for_release"):
        text = "Disclosure control: " + " ".join(str(r) for r in info.get("rules") or [])
    else:
        text = (f"Disclosure control: built from the working document (counts below {report.suppress_k} are "
                "printed as “<k”, but no complementary suppression was applied): not for release.")
    report.sections[-1].blocks.append(Paragraph(text, "note"))
    return report


def cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def join_words(items: list[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def report_date(prov: dict) -> str:
    stamp = str(prov.get("created_utc") or "")
    m = re.match(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})", stamp)
    return f"{m.group(1)} {m.group(2)} UTC" if m else (stamp or "date not recorded")


CORRECTION_WORDS = {"bh": "Benjamini–Hochberg", "holm": "Holm"}  # the corrections' names, by their stored code


def correction_words(code: str = "bh", alpha: float = 0.05) -> str:
    """The multiple-testing correction named AND said in words, for the sentence that first uses it (a
    board reads "Benjamini–Hochberg" only with what it does)."""
    if code == "holm":
        return (f"Holm correction for making many tests: the chance of even one false alarm among the verdicts "
                f"stays below {alpha:.0%}")
    return (f"Benjamini–Hochberg correction for making many tests: it keeps the expected share of false alarms "
            f"among the findings called 'differs' at {alpha:.0%}")
