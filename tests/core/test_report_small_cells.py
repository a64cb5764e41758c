"""Every report honours the small-cell setting (issue 11): built with k = 11 from data with small cells (groups of 3,
7 and 10 rows, notes, images, templates), no report of any audit kind prints a count below 11 — not in a table, a
figure label or tooltip, a caption, a list of dropped groups, a warning or free text — while the same document
with k = 1 does print them (so the scanner sees them). Parametrised over every row of ``kinds.AUDIT_KINDS``: a new
audit kind needs a small-cell document here (``DOCUMENTS``), or this test fails.

The documents are built by the audits themselves where that is cheap (the group audit, the masked-LM statistics
on synthetic scores, the image audit on a precomputed predictions table) and in the stored shape otherwise (the
encoder comparison, whose classifiers need encoders)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.core import kinds
from fairdesk.core.kinds import AUDIT_KINDS, ReportSettings
from fairdesk.core.reports.document import Report

K = 11


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(limits=1):
        yield


# --------------------------------------------------------------------------------------------------------------
# Documents with small cells


def _group_table(seed: int = 0) -> pd.DataFrame:
    """Two tasks; sites of 150, 90, 10, 7 and 3 rows (the last below the minimum group size of 5: dropped)."""
    rng = np.random.default_rng(seed)
    parts = []
    for task, prev in (("sepsis", 0.3), ("aki", 0.25)):
        site = np.repeat(["A", "B", "C", "D", "E"], [150, 90, 10, 7, 3])
        n = len(site)
        y = (rng.random(n) < prev).astype(int)
        y[site == "D"] = [1, 1, 0, 0, 0, 0, 0]  # 2 positives: recall rests on 2 cases
        s = np.clip(np.where(y == 1, rng.normal(0.7, 0.15, n), rng.normal(0.3, 0.15, n)), 0, 1)
        parts.append(pd.DataFrame({"label": y, "score": s, "task": task, "site": site,
                                   "age": rng.uniform(18, 90, n)}))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def group_result():
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="label", score="score", task="task", attributes=("site",),
                        continuous_attributes=("age",))
    plan = GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, n_permutations=100, min_group_size=5, bins=(3,))
    return run_group_audit(_group_table(), plan)


def _groups_doc(group_result) -> dict:
    return json.loads(group_result.to_json())


def _mlm_doc(group_result) -> dict:  # noqa: ARG001 - same signature for every builder
    """Masked-LM statistics on synthetic scores: categories with 3, 7 and 10 templates, one attribute phrase each,
    two word pairs (so 6, 14 and 20 word pairs); the category with 3 templates is "inconclusive: 3 templates"."""
    from fairdesk.core.audits import mlm_bias as mb

    rng = np.random.default_rng(3)
    words = {"male": ["he", "man"], "female": ["she", "lady"]}
    rows = []
    for cat, n_tpl, shift in (("CVD", 3, 0.0), ("HIV", 7, 0.9), ("DNR", 10, 0.0)):
        for t in range(n_tpl):
            effect = rng.normal(0, 0.05)
            for g, ws in words.items():
                for i, w in enumerate(ws):
                    score = effect + rng.normal(0, 0.05) + (shift if g == "male" else 0.0)
                    rows.append({"category": cat, "template": f"[GEND] has {cat.lower()} pattern {t} [ATTR]",
                                 "attribute": f"{cat.lower()} phrase", "group": g, "pair_index": i, "word": w,
                                 "sentence": f"{w} has {cat.lower()} pattern {t}", "word_pieces": [w],
                                 "n_prior_masks": 1, "log_p_target": score - 2.0, "log_p_prior": -2.0,
                                 "score": score})
    scores = pd.DataFrame(rows)
    records = mb.category_statistics(scores, ("male", "female"))
    for r in records:
        r["name"] = {"CVD": "cardiovascular", "HIV": "HIV", "DNR": "do not resuscitate"}[r["category"]]
        r["scores"] = scores[scores["category"] == r["category"]].drop(columns="category").to_dict(orient="records")
    counts = {"CVD": 3, "HIV": 7, "DNR": 10}
    method = {"name": "log-probability bias score", "score": "ln(p_target / p_prior)", "prior_rule": "pieces",
              "test": mb.TEST_NAMES["template"], "test_code": "template",
              "effect_size": mb.EFFECT_NAMES["template"], **mb.verdict_method("template"),
              "n_forward_sequences": 9, "n_scores": len(scores), "groups": words, "slot": "GEND",
              "multi_piece_words": {}, "templates": {"path": "tiny.txt", "sha256": "t" * 64, "source": "test",
                                                     "counts": counts, "n_pairs": 20},
              "model": "tiny", "notes": ["3 templates of CVD were written for this test."]}
    prov = {"created_utc": "2026-01-02T03:04:05Z", "seed": 0, "versions": {"fairdesk": "test"}}
    res = mb.MLMBiasResult(records, scores, method, prov)
    assert [r["n_templates"] for r in records] == [3, 7, 10]
    return json.loads(json.dumps(mb.mlm_audit_document({"tiny": res, "other": res})))


def _encoders_doc(group_result) -> dict:
    """The stored shape of an encoder comparison (note_classifiers_document), its group audits the small-cell
    group audit above: 10 notes, 7 test notes, 3 truncated, 10 notes probed, a dropped group of 3."""
    audit = json.loads(group_result.to_json())
    gaps = [{"encoder": name, **r} for name in ("baseline", "debiased")
            for r in group_result.summary.to_dict(orient="records")]
    encoder = {"path": "/enc", "fingerprint": "f" * 64, "model_type": "bert", "num_hidden_layers": 2,
               "hidden_size": 32, "layers_concatenated": 4, "feature_dim": 128, "max_length": 32, "stride": 16,
               "n_windows": 10, "n_notes": 10, "mean_windows_per_note": 1.0, "notes_at_window_cap": 3,
               "max_windows": 4, "truncated_notes": 3, "truncated_tokens": 7, "notes_per_second": 12.5,
               "split_sizes": {"train": 3, "val": 0, "test": 7},
               "notes": ["3 notes had no text and were left out."], "model_hashes": {"sepsis": "h" * 64}}
    results = [{"encoder": name, "task": task, "n_test": 7, "prevalence_test": 0.29, "test_auroc": 0.7,
                "test_auprc": 0.5, "val_auprc": 0.5, "c": 4.0, "mlp": {"hidden_layer_sizes": [16], "alpha": 1e-4},
                "threshold": 0.4, "test_f1": 0.5, "model_hash": "m" * 64}
               for name in ("baseline", "debiased") for task in ("sepsis", "aki")]
    probe = {"n": 10, "n_folds": 5, "accuracy": 0.6, "balanced_accuracy": 0.55, "auroc": 0.6, "log_loss": 0.69,
             "majority": 0.6, "classes": ["A", "B"]}
    return {"kind": "note_classifiers", "version": 1,
            "method": {"windows": {"max_length": 32, "stride": 16, "max_windows": 4}, "features": "[CLS]",
                       "merge": "P = (max p + mean p · n/c) / (1 + n/c)", "c_grid": [1.0, 4.0], "default_c": 4.0,
                       "mlp_grid": [{"hidden_layer_sizes": [16], "alpha": 1e-4}], "max_iter": 50,
                       "selection": "by validation AUPRC", "threshold": "best F1 on the validation notes",
                       "split": {"val_size": 0.2, "test_size": 0.2, "patient_disjoint": True}, "n_boot": 100,
                       "attribute": "site"},
            "tasks": ["sepsis", "aki"], "encoders": {"baseline": encoder, "debiased": dict(encoder)},
            "results": results, "gaps": gaps, "probe": {"baseline": probe, "debiased": dict(probe)},
            "audits": {"baseline": audit, "debiased": audit},
            "provenance": {"created_utc": "2026-01-02T03:04:05Z", "seed": 0, "dataset": "notes.csv",
                           "data_sha256": "d" * 64, "versions": {"fairdesk": "test"}}}


def _cit_doc(group_result) -> dict:  # noqa: ARG001
    """The image audit on a precomputed predictions table: 7 units with sex F, 30 with M, 3 without a sex."""
    from fairdesk.core.audits.cit_images import audit_prediction_table

    rng = np.random.default_rng(5)
    sex = np.array(["F"] * 7 + ["M"] * 30 + [None] * 3, dtype=object)
    n = len(sex)
    z = rng.normal(size=(n, 2))
    p = 1 / (1 + np.exp(-z[:, 0]))
    df = pd.DataFrame({"sex": sex, "reads": p, "reads__cf": np.clip(p + np.where(sex == "F", 0.2, -0.2), 0, 1),
                       "reads__flip": p, "z_0": z[:, 0], "z_1": z[:, 1]})
    return json.loads(json.dumps(audit_prediction_table(df, "sex", seed=0)))


def _age_doc(group_result) -> dict:  # noqa: ARG001
    """The age-independent learners' job on a cohort of 24 participants in 2 folds (held-out folds of <11 people)."""
    import tempfile

    import torch

    from fairdesk.core.models.age_independent import LearnerSettings
    from fairdesk.core.project import Project
    from fairdesk.core.synthetic.age_cohort import make_age_cohort
    from fairdesk.jobs.age import train_age_independent

    torch.set_num_threads(1)
    tiny = LearnerSettings(z_dim=3, hidden=(8,), head_hidden=4, epochs=2, batch_size=16, device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        cohort = make_age_cohort(n_participants=18, n_features=8, seed=3)
        from fairdesk.core.export import write_table

        csv = write_table(cohort, f"{tmp}/cohort.csv")
        audit_id = train_age_independent(f"{tmp}/p.fairdesk", csv, "label", "age", "participant_id",
                                         methods=("dnn", "svm", "simple"), folds=2, seed=4, learner=tiny,
                                         reference=False)
        return json.loads(Project(f"{tmp}/p.fairdesk", create=False).audit_json(audit_id))


def _ctf_doc(group_result) -> dict:  # noqa: ARG001
    """The CTF job on 60 demo notes with a 1-epoch baseline model: term pairs with a handful of texts each."""
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
        audit_id = ctf_jobs.audit_ctf(project, f"{tmp}/model", data, "text", label_col="label", n_boot=100)
        return json.loads(Project(project, create=False).audit_json(audit_id))


def _slices_doc(group_result) -> dict:  # noqa: ARG001
    """A slice audit of 400 rows searched with min size 3 and the audit's k at 1: carried slices of a few rows."""
    from fairdesk.core.audits.slices import SliceAuditPlan, run_slice_audit
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.synthetic.slice_sim import simulate_slice_table

    df, _ = simulate_slice_table(400, 4, order=2, gap=0.3, seed=3, slice_share=0.1)
    plan = SliceAuditPlan(roles=ColumnRoles(label="y", score="p", attributes=("a1", "a2", "a3", "a4")),
                          threshold=0.5, min_size=3, min_denominator=2, suppress_k=1, carry=10, n_boot=100)
    return run_slice_audit(df, plan).to_dict()


def _monitor_doc(group_result) -> dict:  # noqa: ARG001
    """A monitor of 3 small months: groups with a few cases a month."""
    from fairdesk.core.audits.monitor import run_monitor
    from fairdesk.core.synthetic.monitor_sim import simulate_stream, stream_plan

    return run_monitor(simulate_stream(2, months=3, per_month=120), stream_plan()).to_dict()


DOCUMENTS = {"monitor": _monitor_doc, "ctf": _ctf_doc, "slices": _slices_doc, "groups": _groups_doc, "mlm_bias": _mlm_doc, "note_classifiers": _encoders_doc,
             "cit_images": _cit_doc, "age_independence": _age_doc}


@pytest.fixture(scope="module")
def documents(group_result):
    return {}


def _doc(name, documents, group_result) -> dict:
    if name not in DOCUMENTS:
        pytest.fail(f"Audit kind '{name}' has no small-cell document in tests/core/test_report_small_cells.py: add "
                    "one to DOCUMENTS, so that its report is checked for small counts.")
    if name not in documents:
        documents[name] = DOCUMENTS[name](group_result)
    return documents[name]


def _tree(name: str, doc: dict, k: int) -> Report:
    """The report tree the kind's registry builder renders: the module of ``build_report`` has ``report_tree``."""
    module = kinds.resolve(AUDIT_KINDS[name].report.split(":")[0] + ":report_tree")
    return module(doc, ReportSettings(suppress_k=k))


# --------------------------------------------------------------------------------------------------------------
# The scanner: counts printed below k. Written independently of the code under test.

COUNT_HEADERS = {"n", "positives", "tn", "fp", "fn", "tp", "test notes", "tpl.", "templates", "attributes",
                 "pairs", "sentences", "held-out rows", "participants", "label 1"}
UNITS = ("rows", "row", "patients", "patient", "participants", "participant", "cases", "positive cases", "negative cases", "patients with the "
         "condition", "patients without the condition", "notes", "note", "images", "image", "units", "unit",
         "windows", "window", "word pieces", "sentences", "sentence", "templates", "template", "tpl.",
         "word pairs", "word pair", "pairs", "positives", "files")
NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+)"
COUNT_RE = re.compile(r"(?<![\w.,<\u2212+\-#])" + NUMBER + r"\s+(?:" +
                      "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True)) + r")(?!\w)")
N_EQ_RE = re.compile(r"\bn\s*=\s*" + NUMBER + r"(?!\d|[.,]\d)")
LIST_RE = re.compile(r"\b[A-Za-z]+: " + NUMBER + r" images")  # "F: 7 images"
FRACTION_RE = re.compile(r"\((<?[\d,]+)/(<?[\d,]+)\)")
THRESHOLD = re.compile(r"(?:at least|at most|fewer than|more than|less than|smaller than|larger than|minimum of|"
                       r"maximum of|cap of|the first)\s*$")


def _small(value: str, k: int) -> bool:
    return not value.startswith("<") and int(value.replace(",", "")) < k


def scan_text(text: str, k: int) -> list[str]:
    """Counts below k in free text ("3 notes", "n = 7", "F: 7 images"), thresholds ("fewer than 5 rows") aside."""
    hits = []
    for rx in (COUNT_RE, N_EQ_RE, LIST_RE):
        for m in rx.finditer(text):
            if _small(m.group(1), k) and not THRESHOLD.search(text, 0, m.start()):
                hits.append(m.group(0))
    for m in FRACTION_RE.finditer(text):
        if any(_small(v, k) for v in m.groups()):
            hits.append(m.group(0))
    return hits


def scan_report(report: Report, k: int) -> list[str]:
    """Every count below k the report prints: count columns of tables, and counts in any text of the tree —
    paragraphs, titles, table cells and notes, captions, figure labels and tooltips."""
    hits = []
    for t in report.tables():
        cols = [j for j, h in enumerate(t.header) if h.strip().lower() in COUNT_HEADERS]
        for row in t.rows:
            for j in cols:
                cell = row[j].strip()
                if re.fullmatch(r"[\d,]+", cell) and _small(cell, k):
                    hits.append(f"{t.title} | {t.header[j]} = {cell} | {row}")
    texts = [report.text(include_tooltips=True)]
    for fig in report.figures():
        for col in fig.data.columns:
            values = [v for v in fig.data[col] if isinstance(v, str)]
            if values and col not in ("sentence", "word", "template", "attribute"):  # the templates' own words
                texts += values
    for text in texts:
        hits += scan_text(text, k)
    return hits


# --------------------------------------------------------------------------------------------------------------
# Tests


def test_the_scanner_sees_counts_and_ignores_settings():
    assert scan_text("groups of 3 rows; n = 7; (2/10) rate; F: 4 images", 11) == \
        ["3 rows", "4 images", "n = 7", "F: 4 images", "(2/10)"]
    assert scan_text("fewer than 5 rows; <11 notes; 12 images; 0.5 rows; 10 bins; 1,000 bootstrap replicates; "
                     "unit #3 image; n = 1,200", 11) == []


@pytest.mark.parametrize("name", sorted(AUDIT_KINDS))
def test_no_count_below_k_in_any_report(name, documents, group_result):
    doc = _doc(name, documents, group_result)
    shown = _tree(name, doc, 1)
    assert shown.suppress_k == 1
    small = scan_report(shown, K)
    assert small, f"the {name} document has no small counts, so this test would prove nothing"
    report = _tree(name, doc, K)
    assert report.suppress_k == K
    leaks = scan_report(report, K)
    assert not leaks, f"{name}: counts below {K} printed with k = {K}:\n" + "\n".join(leaks)
    assert f"<{K}" in report.text()


@pytest.mark.parametrize("name", sorted(AUDIT_KINDS))
def test_every_report_states_its_k(name, documents, group_result):
    doc = _doc(name, documents, group_result)
    for k in (5, K):
        text = _tree(name, doc, k).text()
        assert f"counts below {k} shown as “<{k}”" in text or f"every count below {k}" in text, name


def test_small_counts_named_in_each_kind_are_suppressed(documents, group_result):
    """Hand-picked cells of each kind: printed with k = 1, "<11" with k = 11."""
    def cells(name, k, title_part, header):
        rep = _tree(name, _doc(name, documents, group_result), k)
        t = next(t for t in rep.tables() if title_part in t.title)
        j = t.header.index(header)
        return [r[j] for r in t.rows]

    assert "3" in cells("groups", 1, "Groups not tested", "n") and \
        set(cells("groups", K, "Groups not tested", "n")) == {f"<{K}"}
    # the discrimination table (AUROC/AUPRC by group, section 5): sizes, positives and the reasons of its notes
    for header, small in (("n", "7"), ("Positives", "2")):
        assert small in cells("groups", 1, "Discrimination by group: site", header)
        assert not [c for c in cells("groups", K, "Discrimination by group: site", header)
                    if c.isdigit() and int(c) < K]
    assert "inconclusive: too few cases to test (only 2 positive cases, fewer than 10)" in \
        cells("groups", 1, "Notes on discrimination rows marked *", "Note")
    assert set(cells("groups", K, "Notes on discrimination rows marked *", "Note")) == \
        {f"inconclusive: too few cases to test (only <{K} positive cases, fewer than 10)"}
    assert "7" in cells("note_classifiers", 1, "Test performance", "Test notes")
    assert set(cells("note_classifiers", K, "Test performance", "Test notes")) == {f"<{K}"}
    assert "3" in cells("note_classifiers", 1, "Groups not tested", "n")
    assert "3" in cells("mlm_bias", 1, "Log-probability bias scores per category — tiny", "Tpl.")
    assert cells("mlm_bias", K, "Log-probability bias scores per category — tiny", "Verdict")[0] == \
        f"inconclusive: <{K} templates"
    assert "7" in cells("cit_images", 1, "Oriented prediction shift", "n")
    assert f"<{K}" in cells("cit_images", K, "Oriented prediction shift", "n")


def test_registry_pdfs_carry_no_small_count(documents, group_result, tmp_path):
    """The one PDF route (kinds.build_report) with k = 11: the printed text has no small count either."""
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    for name in ("note_classifiers", "cit_images"):  # the two whose builders ignored the setting before
        path = kinds.build_report(name, _doc(name, documents, group_result), tmp_path / f"{name}.pdf",
                                  ReportSettings(suppress_k=K))
        text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
        assert f"<{K}" in text
        assert not scan_text(text, K), (name, scan_text(text, K))
        # the PDF is the releasable copy's, and says so
        assert f"Disclosure control: Released with small-cell threshold k = {K}" in " ".join(text.split())


@pytest.mark.parametrize("name", sorted(AUDIT_KINDS))
def test_every_kind_reports_its_releasable_copy(name, documents, group_result):
    """The copy ``kinds.build_report`` renders (``kinds.releasable``): its report builds, prints no count below k
    and ends with the disclosure rules; the working document's report says it is not for release."""
    doc = _doc(name, documents, group_result)
    released = kinds.releasable(name, doc, ReportSettings(suppress_k=K))
    assert released["disclosure"]["for_release"] and released["disclosure"]["k"] == K
    assert "disclosure" not in doc  # the working document is left as it was
    report = _tree(name, released, K)
    assert not scan_report(report, K), (name, scan_report(report, K))
    assert f"Disclosure control: Released with small-cell threshold k = {K}" in report.text()
    assert "not for release" in _tree(name, doc, K).text()
