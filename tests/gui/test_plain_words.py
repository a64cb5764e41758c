"""Plain words first (issue 24, item 3): the first screen of every audit kind's GUI page and page 1 of every kind's
PDF speak to a governance board — verdicts before glossaries, no internal references (paper numbers, figure
numbers, FairDesk's own documents, identifiers from the code such as ``bins_requested``), and "Benjamini–Hochberg"
or "Δ_eo" only with their meaning in words in the sentence that first uses them.

A property over every registered kind: one stored audit of each kind (the documents of
``tests/core/test_report_small_cells.py``: small groups, continuous attributes, dropped groups, every kind's job), its
page in the main window (the findings header, the page's visible labels) and page 1 of its PDF (text from poppler's
``pdftotext``). Names that come from the data (column names, group values, file names: string values of the stored
document) are allowed; FairDesk's own identifiers never are.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))

from fairdesk.core.kinds import AUDIT_KINDS, ReportSettings, resolve  # noqa: E402

#: (pattern, what it is): never on a first screen or page 1
FORBIDDEN = (
    (re.compile(r"(?<![\d.,−-])00[0-4](?![\d.,])"), "a paper number (000–004)"),
    (re.compile(r"\bFig(?:ure)?s?\.?\s*\d"), "a figure number of a paper"),
    (re.compile(r"METHODS|§\s*\d|\bdocs/|\.md\b"), "a reference to FairDesk's own documents"),
    (re.compile(r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]\b"), "an identifier from the code"),
    (re.compile(r"\b(?:None|nan|NaN|True|False)\b"), "a raw value from the code"),
)
#: a term of statistics -> words that say what it means (one must be in the sentence that first uses it)
EXPLAINED = (
    (re.compile(r"Benjamini"), ("false", "chance", "many tests", "many comparisons")),
    (re.compile(r"Δ"), ("spread", "vary", "varies")),
)
#: FairDesk's own names that are string values of documents but never data (term sets, method codes)
OWN_NAMES = {"dixon", "dixon_train", "dixon_held_out", "gender", "race", "control", "age_indep_simple",
             "age_indep_ae", "age_indep_consensus", "age_indep_entropy", "clp_nontox", "null_reconstruction"}


def data_names(doc) -> set[str]:
    """String values of a stored document that name data (columns, groups, files, models): allowed in the text."""
    out: set[str] = set()
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and len(item) < 80:
            out.add(item)
            out.update(re.findall(r"[A-Za-z0-9_]+", item) if "/" in item or "." in item else ())
    return out - OWN_NAMES


def sentences(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n\s*\n", text):  # paragraphs (PDF) and separate labels (GUI) never run together
        flat = re.sub(r"\s+", " ", block)
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z■•(\"'“])|\s*[■•]\s*", flat) if s.strip()]
    return out


def jargon(text: str, allowed: set[str]) -> list[str]:
    """What a board member would stumble on in ``text`` (empty: plain words)."""
    hits = []
    for pattern, what in FORBIDDEN:
        for m in pattern.finditer(text):
            if m.group(0) in allowed or any(m.group(0) in name for name in allowed if "_" in m.group(0)):
                continue
            start = max(0, m.start() - 50)
            hits.append(f"{what}: '{m.group(0)}' in …{text[start:m.end() + 30]!r}…")
    parts = sentences(text)
    for pattern, words in EXPLAINED:
        first = next((s for s in parts if pattern.search(s)), None)
        if first is not None and not any(w in first.lower() for w in words):
            hits.append(f"'{pattern.pattern}' is not explained where first used: {first[:300]!r}")
    return hits


def test_the_checker_finds_what_it_must():
    """The checker itself: each kind of jargon found, plain words and data names passed."""
    allowed = {"patient_id", "z_0"}
    for bad in ("see 004 Fig. 2", "(001 Table D4)", "docs/methods.md", "bins_requested was 5", "p = None",
                "after Benjamini–Hochberg.", "Δ_eo^(2) 0.8 vs 0.4.", "METHODS §6",
                "the error spread is low.\n\nBins for Δ_eo"):
        assert jargon(bad, allowed), bad
    for good in ("q = 0.001 and p = 0.004 over 1,004 rows.", "grouped by patient_id and z_0.",
                 "Benjamini–Hochberg correction (it keeps the share of false alarms at 5%).",
                 "The error spread Δ_eo (how much error rates vary across age bands) is 0.1.",
                 "equivalent within ±0.05."):
        assert not jargon(good, allowed), (good, jargon(good, allowed))


@pytest.fixture(scope="module")
def documents():
    import test_report_small_cells as small
    from threadpoolctl import threadpool_limits

    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="label", score="score", task="task", attributes=("site",),
                        continuous_attributes=("age",))
    plan = GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, n_permutations=100, min_group_size=5, bins=(3,))
    with threadpool_limits(limits=1):
        group_result = run_group_audit(small._group_table(), plan)
        missing = sorted(set(AUDIT_KINDS) - set(small.DOCUMENTS))
        assert not missing, f"add a document of {missing} to tests/core/test_report_small_cells.DOCUMENTS"
        build = dict(small.DOCUMENTS, ctf=_ctf_doc)
        return {name: json.loads(json.dumps(build[name](group_result))) for name in AUDIT_KINDS}


def _ctf_doc(group_result) -> dict:  # noqa: ARG001
    """test_report_small_cells' CTF document without the synthetic template rows (the slow part; their sentences
    are the same as the data's)."""
    import tempfile

    import torch

    from fairdesk.core.export import write_table
    from fairdesk.core.project import Project
    from fairdesk.core.text.madlibs import clinical_notes_demo
    from fairdesk.jobs import ctf as ctf_jobs

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_table(clinical_notes_demo(60, seed=0), f"{tmp}/notes.csv")
        project = f"{tmp}/p.fairdesk"
        ctf_jobs.train_text_classifier_job(project, data, "text", "label", f"{tmp}/model", epochs=1, seed=0)
        audit_id = ctf_jobs.audit_ctf(project, f"{tmp}/model", data, "text", label_col="label", n_boot=100,
                                      synthetic=None)
        return json.loads(Project(project, create=False).audit_json(audit_id))


def test_page_one_of_every_kinds_pdf_is_in_plain_words(documents, tmp_path):
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    found = {}
    for name, doc in documents.items():
        pdf = resolve(AUDIT_KINDS[name].report)(doc, tmp_path / f"{name}.pdf", ReportSettings())
        text = subprocess.run(["pdftotext", "-f", "1", "-l", "1", "-layout", str(pdf), "-"], check=True,
                              capture_output=True, text=True).stdout
        assert len(text) > 500, name
        hits = jargon(text, data_names(doc))
        if hits:
            found[name] = hits
    assert not found, "\n".join(f"{k}: {h}" for k, hits in found.items() for h in hits)


def _visible_text(page) -> str:
    from PySide6.QtWidgets import QLabel

    texts = [page.findings.counts_label.text(), page.findings.text.toPlainText()]
    for label in page.findChildren(QLabel):
        if label.isVisibleTo(page) and label.text() and not label.text().startswith("#"):
            texts.append(label.text())
    from layout_walk import _plain

    return "\n\n".join(_plain(t) for t in texts)


def test_the_first_screen_of_every_kinds_page_is_in_plain_words(documents, make_window, tmp_path, qtbot):
    from fairdesk.core.project import Project
    from fairdesk.gui.tabs.base import AuditPage

    project_path = tmp_path / "kinds.fairdesk"
    project = Project(project_path)
    ids = {name: project.add_audit(f"{name} audit", name, json.dumps(doc)) for name, doc in documents.items()}
    window = make_window(project_path)
    pages = {p.kind().name: p for p in vars(window).values() if isinstance(p, AuditPage)}
    assert set(pages) == set(AUDIT_KINDS)
    found = {}
    for name, page in pages.items():
        page.show_audit(ids[name])
        page.wait_view()
        text = _visible_text(page)
        assert "Reading the findings" not in text and len(page.findings.text.toPlainText()) > 100, name
        hits = jargon(text, data_names(documents[name]))
        if hits:
            found[name] = hits
    assert not found, "\n".join(f"{k}: {h}" for k, hits in found.items() for h in hits)


def test_the_findings_header_opens_on_the_verdicts_not_a_glossary(documents):
    """The header moves "What was found" to the top, never "How to read the verdicts" (the image page opened on its
    glossary with the verdicts below the fold)."""
    from fairdesk.gui.tabs.base import report_tree_of
    from fairdesk.gui.widgets.findings import findings_first

    for name, doc in documents.items():
        section = report_tree_of(AUDIT_KINDS[name], doc, 11).sections[0]  # what the header shows: page 1
        blocks = findings_first(section.blocks)
        first = next((b for b in blocks if type(b).__name__ == "Paragraph" and b.style == "subheading"), None)
        before = blocks[:blocks.index(first)] if first is not None else blocks
        lead = " ".join(b.text for b in before if type(b).__name__ == "Paragraph")
        assert first is None or not first.text.lower().startswith("how") or re.search(
            r"differ|equivalent|inconclusive|dependent", lead), (name, first.text)
