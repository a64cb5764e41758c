"""The counterfactual-token-fairness page (audit kind ``ctf``, issue 12): on the Audit tab, lists only ctf audits,
runs the job on a tiny model and shows the report's summary, the tables and the diff viewer; refuses a bad form in
place; exports the PDF with the user's k; export / import of pairs for models FairDesk cannot run."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

from fairdesk.core.kinds import AUDIT_KINDS, resolve
from fairdesk.gui.tabs.base import AuditPage
from fairdesk.gui.widgets.text_diff import HIGHLIGHT_NEW, HIGHLIGHT_OLD, TextDiffViewer, highlight_html

N_BOOT = 100


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A project holding one 1-epoch text CNN trained on clinical_notes_demo(80), and the notes as CSV."""
    import torch

    from fairdesk.core.text.madlibs import clinical_notes_demo
    from fairdesk.jobs.ctf import train_text_classifier_job

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("ctf")
    notes = root / "notes.csv"
    df = clinical_notes_demo(80, seed=0)
    df.to_csv(notes, index=False)
    project = root / "base.fairdesk"
    model_id = train_text_classifier_job(project, notes, "text", "label", root / "cnn", epochs=1, seed=0)
    return {"project": project, "notes": notes, "model_id": model_id, "frame": df}


@pytest.fixture
def ctf_window(window, trained, tmp_path):
    """The window with a copy of the trained project open; returns (window, page)."""
    path = tmp_path / "ctf.fairdesk"
    shutil.copy(trained["project"], path)
    window.settings.threads = 1
    window.open_project(path)
    return window, window.ctf_page


def _fill_form(page, trained, held_out: bool = True) -> None:
    page.add_data_file(trained["notes"])
    page.model_combo.setCurrentIndex(page.model_combo.findData(trained["model_id"]))
    if held_out:
        page.held_combo.setCurrentIndex(page.held_combo.findData("dixon_held_out"))
    page.nboot_spin.setValue(N_BOOT)


def test_registry_names_the_page_and_it_sits_on_the_audit_tab(window):
    cls = resolve(AUDIT_KINDS["ctf"].page)
    page = window.ctf_page
    assert type(page) is cls and issubclass(cls, AuditPage) and cls.kind().name == "ctf"
    tab = window.pages["audit"]
    assert tab.indexOf(page) >= 0 and tab.tabText(tab.indexOf(page)) == "Counterfactual text"


def test_a_run_stores_an_audit_and_shows_summary_tables_and_diff(ctf_window, trained, run_and_wait):
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.ctf import report_tree

    window, page = ctf_window
    _fill_form(page, trained)
    # the column guesses come from core/data/roles.py
    assert page.text_combo.currentData() == "text" and page.label_combo.currentData() == "label"
    # another kind's audit in the same project is not listed here
    other = window.project.add_audit("not ctf", "mlm_bias", "{}")
    job = run_and_wait(window, page.run_audit)
    assert job.state.value == "done", job.error
    assert page.audit_ids() == [job.result] and other not in page.audit_ids()
    assert page.audit_id == job.result and page.status.text() == f"Audit #{job.result} stored."
    doc = page.doc
    assert doc["settings"]["n_boot"] == N_BOOT and set(doc["settings"]["term_sets"]) == {"train", "held_out"}

    # the summary is the report's own summary section, word for word, with the user's k
    summary = page.summary.toPlainText()
    tree = report_tree(doc, ReportSettings(suppress_k=window.settings.suppress_k))
    paragraphs = [b.text for b in tree.section("summary").blocks if hasattr(b, "text")]
    assert paragraphs and all(" ".join(p.split()) in " ".join(summary.split()) for p in paragraphs)

    # CTF gaps: train / held-out × all / label 0 / label 1, each with a CI, the control band and a verdict
    gaps = page.gaps_view.frame()
    # train / held-out terms × all, label 0, label 1 and the synthetic templates
    assert len(gaps) == 8 and set(gaps["Terms"]) == {"train terms", "held-out terms"}
    assert set(gaps["Texts"]) == {"all texts", "label-0 texts", "label-1 texts", "synthetic"}
    assert gaps["Verdict"].str.match(r"^(differs|equivalent within ±0\.02|inconclusive)$").all()
    assert not gaps["95% CI"].eq("—").all() and gaps["Control band"].notna().any()
    assert page.pairs_view.row_count() == len(doc["pairs"]) > 0
    assert page.term_rates_view.row_count() == len(doc["group_rates"]["terms"]) > 0
    assert page.rate_gaps_view.row_count() == 2
    # unknown terms: the tab says how many, the sentence is shown
    n_unknown = sum(len(v) for v in doc["unknown_terms"].values())
    assert page.unknown_view.row_count() == n_unknown and page.unknown_label.text()
    assert page.gaps_warning.isVisibleTo(page) == bool(n_unknown)
    assert page.result_tabs.tabText(page.unknown_index) == (f"Unknown terms ({n_unknown})" if n_unknown
                                                            else "Unknown terms")
    # the diff viewer: the stored examples, largest |change| first, substituted words highlighted
    viewer = page.diff_viewer
    assert len(viewer.examples()) == len(doc["examples"]) > 0
    changes = [abs(e["counterfactual_score"] - e["score"]) for e in viewer.shown()]
    assert changes == sorted(changes, reverse=True)
    assert 'class="changed"' in viewer.left.document().toHtml() or "#ffe1a8" in viewer.left.toHtml().lower()
    first = viewer.shown()[0]
    assert viewer.left.toPlainText().strip() == first["text"] and viewer.right.toPlainText().strip() == \
        first["counterfactual"]
    assert f"{len(doc['examples'])} pairs with the largest changes" in viewer.count_label.text()
    pair = f"{first['term']} → {first['counterfactual_term']}"
    viewer.set_filter(pair=pair)
    assert viewer.shown() and all(f"{e['term']} → {e['counterfactual_term']}" == pair for e in viewer.shown())
    viewer.set_filter(label=0)
    assert all(e["label"] == 0 for e in viewer.shown())
    # the comparison across the project's stored CTF audits: one row, the model's method
    compare = page.compare_view.frame()
    assert len(compare) == 1 and compare.loc[0, "Method"] == "baseline" and compare["AUROC"].notna().all()


def test_a_bad_form_says_why_in_place_and_starts_nothing(ctf_window, trained, tmp_path):
    window, page = ctf_window
    bad = tmp_path / "no_text.csv"
    pd.DataFrame({"id": [1, 2, 3], "value": [0.1, 0.2, 0.3]}).to_csv(bad, index=False)
    page.add_data_file(bad)
    page.model_combo.setCurrentIndex(page.model_combo.findData(trained["model_id"]))
    assert page.text_combo.currentData() is None
    assert page.run_audit() is None and page.job is None
    assert "text column" in page.status.text() and "B00020" in page.status.styleSheet()
    assert window.runner.jobs() == []
    assert page.audit_ids() == [] and [a for a in window.project.audits() if a.kind == "ctf"] == []


def test_export_writes_the_pdf_with_the_users_k(ctf_window, trained, run_and_wait, monkeypatch, tmp_path):
    import fairdesk.jobs.reports as reports

    window, page = ctf_window
    _fill_form(page, trained, held_out=False)
    job = run_and_wait(window, page.run_audit)
    assert job.state.value == "done", job.error
    calls = []
    real = reports.export_report

    def spy(*args, **kwargs):
        calls.append(kwargs.get("suppress_k"))
        return real(*args, **kwargs)

    monkeypatch.setattr(reports, "export_report", spy)
    window.settings.suppress_k = 7
    export = run_and_wait(window, lambda: page.export_pdf(tmp_path / "ctf-report"))
    assert export.state.value == "done", export.error
    pdf = tmp_path / "ctf-report.pdf"
    assert calls == [7] and pdf.read_bytes()[:5] == b"%PDF-"
    # the same bytes as the one PDF route with k = 7, and not those with the default k
    assert pdf.read_bytes() == real(window.project.path, job.result, tmp_path / "k7.pdf", suppress_k=7).read_bytes()
    assert pdf.read_bytes() != real(window.project.path, job.result, tmp_path / "k11.pdf", suppress_k=11).read_bytes()


def test_pairs_export_and_scores_import_run_as_jobs(ctf_window, trained, run_and_wait, tmp_path):
    window, page = ctf_window
    _fill_form(page, trained, held_out=False)
    page.terms_combo.setCurrentIndex(page.terms_combo.findData("dixon_train"))
    out = tmp_path / "pairs.csv"
    job = run_and_wait(window, lambda: page.export_pairs(out))
    assert job.state.value == "done", job.error
    pairs = pd.read_csv(out)
    assert job.result["rows"] == len(pairs) > 0 and "pairs" in page.status.text()
    # score them "elsewhere": a model that reacts to one word
    pairs["score"] = [0.8 if "gay" in str(t).lower() else 0.3 for t in pairs["text"]]
    pairs["counterfactual_score"] = [0.8 if "gay" in str(t).lower() else 0.3 for t in pairs["counterfactual"]]
    scored = tmp_path / "scored.csv"
    pairs.to_csv(scored, index=False)
    imported = run_and_wait(window, lambda: page.import_scores(scored))
    assert imported.state.value == "done", imported.error
    assert page.audit_id == imported.result and page.doc["model"]["kind"] == "imported scores"
    assert page.gaps_view.row_count() > 0 and "Not checked" in page.unknown_label.text()


def test_the_diff_viewer_escapes_markup_and_highlights_only_the_swapped_word(qtbot):
    viewer = TextDiffViewer()
    qtbot.addWidget(viewer)
    ex = [{"text": "45 yo <b>gay</b> pt, chest pain", "counterfactual": "45 yo <b>straight</b> pt, chest pain",
           "term": "gay", "counterfactual_term": "straight", "terms": "train", "score": 0.9,
           "counterfactual_score": 0.2, "label": 1},
          {"text": "he is fine", "counterfactual": "she is fine", "term": "he", "counterfactual_term": "she",
           "terms": "train", "score": 0.5, "counterfactual_score": 0.55, "label": 0}]
    viewer.set_examples(ex, note="2 stored.")
    assert [e["term"] for e in viewer.shown()] == ["gay", "he"]  # |−0.7| before |+0.05|
    assert viewer.left.toPlainText() == ex[0]["text"] and viewer.right.toPlainText() == ex[0]["counterfactual"]
    left, right = highlight_html(ex[0]["text"], ex[0]["counterfactual"])
    assert "<b>" not in left and "&lt;b&gt;" in left
    assert f'<span class="changed" style="{HIGHLIGHT_OLD}">gay</span>' in left
    assert f'<span class="changed" style="{HIGHLIGHT_NEW}">straight</span>' in right
    assert left.count('class="changed"') == 1 and right.count('class="changed"') == 1
    assert "−0.700" in viewer.change_label.text() or "-0.700" in viewer.change_label.text()
    viewer.set_filter(label=0)
    assert [e["term"] for e in viewer.shown()] == ["he"] and viewer.left.toPlainText() == "he is fine"
    viewer.set_examples([])
    assert viewer.shown() == [] and viewer.left.toPlainText() == "" and "No example pairs" in \
        viewer.count_label.text()


def test_the_about_box_carries_the_madlibs_attribution(window):
    import html

    from fairdesk.core.text.madlibs import MADLIBS_ATTRIBUTION

    text = window.about_text()
    assert html.escape(MADLIBS_ATTRIBUTION) in text and "CC BY 4.0" in text


def test_terms_outside_the_vocabulary_are_shown_where_a_gap_of_zero_would_read_as_fair(window):
    doc = {"ctf_gap": [{"terms": "held_out", "subset": "all", "n": 50, "value": 0.0, "ci_low": 0.0, "ci_high": 0.0,
                        "verdict": "equivalent within margin"}],
           "settings": {"margin": 0.02, "term_sets": {"held_out": {"name": "dixon_held_out"}}},
           "unknown_terms": {"train": [], "held_out": ["latinx", "nonbinary"]}, "model": {"name": "m"},
           "examples": []}
    page = window.ctf_page
    page.show_results(doc)
    assert page.result_tabs.tabText(page.unknown_index) == "Unknown terms (2)"
    assert "misses 2 held-out term form(s)" in page.unknown_label.text()
    assert page.gaps_warning.isVisibleTo(page) and "means nothing" in page.gaps_warning.text()
    assert page.unknown_view.frame()["Term form"].tolist() == ["latinx", "nonbinary"]
    page.show_results(None)
    assert not page.gaps_warning.isVisibleTo(page) and page.gaps_view.row_count() == 0
