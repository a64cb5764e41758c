"""The PDF report of masked-LM bias audits (fairdesk.core.reports.mlm_bias): report content, figure data, deterministic
and atomic PDF, the CLI's --pdf and the project's export giving the same bytes.

No training: the scores come from the real probe run on a tiny untrained BERT over the shipped templates (445
pairs); planted differences are added to some categories' male scores and the statistics recomputed with
``category_statistics`` so that a category is flagged."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from fairdesk.core.audits import mlm_bias as mb  # noqa: E402
from fairdesk.core.errors import DataError  # noqa: E402
from fairdesk.core.reports import mlm_bias as T  # noqa: E402
from fairdesk.core.reports.document import Table  # noqa: E402
from fairdesk.core.text.templates import load_bias_templates  # noqa: E402

KEEP = ["template", "attribute", "group", "pair_index", "word", "sentence", "word_pieces", "n_prior_masks",
        "log_p_target", "log_p_prior", "score"]


def _tokenizer():
    """The probe's words without "woman": a gendered word split into pieces (w ##o ##m ##a ##n) that the report must
    name."""
    from tiny_text import probe_words

    from fairdesk.core.models.mlm import vocabulary_tokenizer

    return vocabulary_tokenizer(probe_words(completion_templates=True, drop=("woman",)))


def _model(n_vocab: int, seed: int):
    from tiny_text import tiny_bert

    return tiny_bert(n_vocab, seed)


def _planted(res: mb.MLMBiasResult, shifts: dict[str, float], seed: int) -> mb.MLMBiasResult:
    """The same sentences with ``shifts[category]`` nats added to the male scores (plus noise), statistics redone."""
    rng = np.random.default_rng(seed)
    s = res.scores.copy()
    s["score"] = s["score"] + rng.normal(0, 0.2, len(s)) + (
        s["category"].map(shifts).fillna(0.0).to_numpy() * (s["group"] == "male").to_numpy())
    recs = mb.category_statistics(s, ("male", "female"))
    names = {r["category"]: r["name"] for r in res.records}
    for r in recs:
        r["name"] = names[r["category"]]
        r["scores"] = s[s["category"] == r["category"]][KEEP].to_dict(orient="records")
    return mb.MLMBiasResult(recs, s, dict(res.method), dict(res.provenance))


@pytest.fixture(scope="module")
def tiny():
    tok = _tokenizer()
    return _model(len(tok), 0), tok


@pytest.fixture(scope="module")
def base(tiny):
    model, tok = tiny
    return mb.run_mlm_bias_audit(model, None, tokenizer=tok)


@pytest.fixture(scope="module")
def doc(tiny, base):
    model, tok = tiny
    a = _planted(base, {"CVD": 0.8}, 1)
    b = _planted(base, {"HIV": -1.0, "DNR": -1.0}, 2)   # DNR has 4 templates: inconclusive however large
    comp = mb.sentence_completion(model, tok, None, top_k=3)
    return mb.mlm_audit_document({"clinical": a, "debiased": b}, {"clinical": "/models/clinical",
                                                                  "debiased": "/models/debiased"}, comp)


@pytest.fixture(scope="module")
def pdf_bytes(doc, tmp_path_factory):
    path = tmp_path_factory.mktemp("pdf") / "mlm.pdf"
    T.mlm_bias_report_to_pdf(doc, path)
    return path.read_bytes()


def _pdf_text(data: bytes, tmp_path) -> str:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    path = tmp_path / "t.pdf"
    path.write_bytes(data)
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def _table(report, title_part: str) -> Table:
    return next(t for t in report.tables() if title_part in t.title)


# --------------------------------------------------------------------------------------------------------------
# The report model


def test_report_content(doc):
    rep = T.build_mlm_bias_report(doc, suppress_k=1)  # every count shown (k = 11 below: test_counts_below_k)
    assert [s.key for s in rep.sections] == ["board", "summary", "method", "lists", "results", "comparison",
                                             "completion", "provenance"]
    clinical = {r["category"]: r for r in doc["records"]}
    assert clinical["CVD"]["flagged"] and sum(r["flagged"] for r in doc["records"]) == 1
    assert [r["category"] for r in doc["compared"][0]["records"] if r["flagged"]] == ["HIV"]
    verdicts = {r["category"]: r["verdict"] for r in doc["records"]}
    assert verdicts == {"ADD": "equivalent", "CVD": "differs", "DIAB": "equivalent", "DNR": "inconclusive",
                        "DRUG": "inconclusive", "HIV": "equivalent", "HTN": "equivalent", "MENT": "equivalent"}

    summary = "\n".join(p.text for p in rep.section("summary").blocks)
    assert "Flagged for model “clinical”: Heart disease." in summary
    cvd = clinical["CVD"]
    ratio = f"{np.exp(cvd['mean_difference']):.2f} times as high"
    assert "Heart disease (CVD): the model finds the male words more likely than the female words" in summary
    assert ratio in summary
    assert "HIV (HIV): the model finds the female words more likely" in summary
    assert "q < 0.05" in summary and "at least 0.3" in summary and "at least 0.25 nats" in summary
    # the three verdicts are counted and explained; nothing non-significant reads as fair
    assert ("Verdicts for model “clinical” (8 categories): 1 differs, 5 equivalent within ±0.25 nats, "
            "2 inconclusive.") in summary
    assert ("Verdicts for model “debiased” (8 categories): 1 differs, 5 equivalent within ±0.25 nats, "
            "2 inconclusive.") in summary
    assert '"Do not resuscitate" (4 templates)' in summary and "Analgesics (2 templates)" in summary
    assert "not evidence of fairness" in summary and "template is the unit of inference" in summary
    assert "fewer than 6 templates" in summary and "within ±0.25 nats" in summary
    assert "(man, he, male, m)" in summary and "(woman, she, female, f)" in summary

    method = "\n".join(p.text for p in rep.section("method").blocks)
    assert "ln(p_target / p_prior)" in method and "every word piece of the attribute masked" in method
    assert "offset mapping" in method and "sign-flip test of the per-template mean differences" in method
    assert "Benjamini–Hochberg" in method and "Unit of inference: the template" in method
    assert "Minimum templates: 6" in method and "margin 0.25 nats" in method and "TOST" in method
    assert "rank-biserial" in method
    assert "woman → w + ##o + ##m + ##a + ##n" in method  # the multi-piece word, summed over its pieces
    for note in doc["method"]["notes"]:
        assert note in method

    lists = _table(rep, "attribute phrases")
    rows = {r[0]: r for r in lists.rows}
    assert {c: rows[c][4] for c in doc["method"]["templates"]["counts"]} == {
        "ADD": "32", "CVD": "150", "DIAB": "30", "DNR": "8", "DRUG": "30", "HIV": "30", "HTN": "90", "MENT": "75"}
    assert rows["All"][4] == "445" and rows["All"][5] == "3,560"
    assert "high blood pressure" in rows["HTN"][6]
    words = _table(rep, "slot")
    assert words.header == ["Pair", "male", "female"] and words.rows[0] == ["1", "man", "woman"]
    lists_text = "\n".join(p.text for p in rep.section("lists").blocks if hasattr(p, "text"))
    assert doc["method"]["templates"]["sha256"] in lists_text and "Hurtful Words" in lists_text
    assert doc["completion"]["method"]["templates"]["sha256"] in lists_text

    res = _table(rep, "per category — clinical")
    r = next(r for r in res.rows if r[0] == "CVD")
    assert r[3] == f"{cvd['n']:,}" and r[-1] == "differs (male-leaning)" and r[-2] == "yes (BH)"
    assert r[2] == "15" and r[7] == f"{T.fmt_nats(cvd['ci_low'], True)} to {T.fmt_nats(cvd['ci_high'], True)}"
    assert r[6] == T.fmt_nats(cvd["mean_difference"], True) and r[4] == T.fmt_nats(cvd["mean_male"], True)
    rows_v = {r[0]: r for r in res.rows}
    assert rows_v["DRUG"][-1] == "inconclusive: 2 templates" and rows_v["DRUG"][9] == "–"
    assert rows_v["HTN"][-1] == "equivalent (±0.25 nats)"
    assert [f.kind for f in rep.figures()] == ["mlm_distribution", "mlm_distribution", "mlm_comparison"]

    comp = _table(rep, "Side-by-side")
    assert comp.header[:7] == ["Code", "Category", "A: M", "A: F", "A: Δ", "A: q", "A: verdict"]
    crow = {r[0]: r for r in comp.rows}
    assert crow["CVD"][6] == "DIFFERS" and crow["HIV"][11] == "DIFFERS" and crow["CVD"][11] == "equivalent"
    assert crow["DNR"][11] == "inconclusive (4 tpl.)"
    comp_text = "\n".join(p.text for p in rep.section("comparison").blocks if hasattr(p, "text"))
    changes = ("Compared with clinical: Heart disease is no longer flagged for debiased (now equivalent); HIV is "
               "flagged for debiased.")
    assert changes in comp_text and changes in summary

    ct = [t for t in rep.tables() if t.title.startswith("Template ")]
    assert len(ct) == 4 and all(len(t.rows) == 7 for t in ct)
    first = doc["completion"]["rows"][0]
    assert ct[0].rows[0][1] == first["completed"] and first["fills"][0]["top_k"][0][0] in " ".join(ct[0].rows[0])

    prov = dict(_table(rep, "Audit provenance").rows)
    assert prov["Seed"] == "0" and prov["Template file SHA-256"] == doc["method"]["templates"]["sha256"]
    assert prov["Model “debiased”"] == "/models/debiased"
    assert dict(_table(rep, "Software versions").rows)["torch"] == doc["provenance"]["versions"]["torch"]


def test_single_model_result_without_comparison_or_completion(tiny, tmp_path):
    model, tok = tiny
    res = mb.run_mlm_bias_audit(model, load_bias_templates().select(["DNR", "HIV"]), tokenizer=tok)
    rep = T.build_mlm_bias_report(res)  # an MLMBiasResult is accepted as well as the document
    assert [s.key for s in rep.sections] == ["board", "summary", "method", "lists", "results", "provenance"]
    summary = rep.section("summary").blocks
    assert any(p.text == "No category is flagged for the model." for p in summary)  # untrained: tiny differences
    from fairdesk.core.reports.pdf import write_pdf

    out = write_pdf(rep, tmp_path / "one.pdf")  # the generic renderer draws this report's figures too (GUI path)
    assert out.read_bytes()[:5] == b"%PDF-"


def test_rank_sum_option_is_named_and_counted_in_sentences(base):
    res = _planted(base, {"HIV": 1.0}, 3)
    recs = mb.category_statistics(res.scores, ("male", "female"), "ranksum")
    for r in recs:
        r["name"] = r["category"]
        r["scores"] = []
    method = {**res.method, "test": mb.TEST_NAMES["ranksum"], "test_code": "ranksum",
              "effect_size": mb.EFFECT_NAMES["ranksum"]}
    rep = T.build_mlm_bias_report(mb.mlm_audit_document({"m": mb.MLMBiasResult(recs, res.scores, method,
                                                                                res.provenance)}))
    summary = "\n".join(p.text for p in rep.section("summary").blocks)
    hiv = next(r for r in recs if r["category"] == "HIV")
    assert hiv["flagged"] and f"{hiv['n']:,} sentences)" in summary and hiv["n"] == 240
    assert "pseudo-replication" in summary      # the release's per-sentence test is named with its caveat
    table = _table(rep, "bias scores per category")
    assert "not stored in this document" in _table(rep, "Templates per category").rows[0][1]
    assert rep.figures() == [] and "holds no per-sentence scores" in rep.text()
    assert "rank-sum z statistic" in table.note and "rank-sum" in rep.text()
    assert next(r for r in table.rows if r[0] == "HIV")[10] == T._fmt_r(hiv["effect_size"])


def test_bad_documents_are_refused(doc):
    with pytest.raises(DataError, match="not a masked-LM bias audit"):
        T.build_mlm_bias_report({"kind": "groups", "records": []})
    with pytest.raises(DataError, match="no category results"):
        T.build_mlm_bias_report({**doc, "records": []})
    with pytest.raises(DataError, match="No model 'nope'"):
        T.category_distribution_data(doc, "nope")


# --------------------------------------------------------------------------------------------------------------
# Figure data (for the GUI) and renderers


def test_figure_data(doc):
    d = T.category_distribution_data(doc)
    assert len(d) == 2 * 445 * 8 and list(d["model"].unique()) == ["clinical", "debiased"]
    one = d[d["model"] == "clinical"]
    assert list(one["category"].unique()) == [r["category"] for r in doc["records"]]
    assert ((one["x"] - one["group_index"]).abs() <= 0.25).all()
    assert (one.groupby(["category", "pair_key"])["group"].agg(sorted).map(tuple) == ("female", "male")).all()
    assert d.equals(T.category_distribution_data(json.loads(json.dumps(doc))))  # deterministic, from stored JSON
    cvd = doc["records"][[r["category"] for r in doc["records"]].index("CVD")]
    assert one[(one.category == "CVD") & (one.group == "male")]["score"].mean() == pytest.approx(cvd["mean_male"])
    assert one["tooltip"].iloc[0].startswith(one["sentence"].iloc[0])

    s = T.category_summary_data(doc, "clinical")
    row = s[(s.category == "CVD") & (s.group == "female")].iloc[0]
    assert row["mean"] == pytest.approx(cvd["mean_female"]) and row["flagged"]
    assert row["whisker_low"] >= row["min"] and row["q1"] <= row["median"] <= row["q3"] <= row["whisker_high"]

    c = T.comparison_data(doc)
    assert len(c) == 16 and list(c[c.model == "clinical"]["y"]) == list(range(8))
    flagged = {(r.model, r.category) for r in c.itertuples() if r.status == "flagged"}
    assert flagged == {("clinical", "CVD"), ("debiased", "HIV")}
    assert c[(c.model == "debiased") & (c.category == "DNR")]["mean_difference"].iloc[0] == pytest.approx(
        doc["compared"][0]["records"][3]["mean_difference"])
    status = {(r.model, r.category): r.status for r in c.itertuples()}
    assert status[("debiased", "DNR")] == "inconclusive" and status[("clinical", "HTN")] == "equivalent"
    assert "inconclusive: 4 templates" in c[(c.model == "debiased") & (c.category == "DNR")]["tooltip"].iloc[0]
    assert (c["min_log_ratio"] == 0.25).all() and c.groupby("y")["offset"].nunique().eq(2).all()


def test_module_import_is_light():
    code = ("import sys, fairdesk.core.reports.mlm_bias; "
            "print(sorted(m for m in ('matplotlib', 'reportlab', 'torch', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------------------------------------------
# The PDF


def test_pdf_is_deterministic_and_says_what_matters(doc, pdf_bytes, tmp_path):
    assert pdf_bytes[:5] == b"%PDF-"
    again = T.render_mlm_bias_bytes(json.loads(json.dumps(doc)))  # the stored JSON gives the same bytes
    assert again == pdf_bytes
    # the atomic writer: a failed report leaves the earlier one in place
    target = tmp_path / "r.pdf"
    target.write_bytes(pdf_bytes)
    with pytest.raises(DataError):
        T.mlm_bias_report_to_pdf({"kind": "mlm_bias", "records": []}, target)
    assert target.read_bytes() == pdf_bytes
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".r.pdf")] == []
    text = _pdf_text(pdf_bytes, tmp_path)
    flat = " ".join(text.split())
    assert "Flagged for model “clinical”" in flat and "Heart disease (CVD)" in flat
    assert doc["method"]["templates"]["sha256"] in flat
    assert "Comparison of models" in flat and "Side-by-side comparison" in flat
    assert "Sentence completion" in flat and f"Template 1: {doc['completion']['rows'][0]['template']}" in flat
    assert "DIFFERS" in flat and "Provenance" in flat and "page 1 of" in flat
    assert "inconclusive: <11 templates" in flat and "equivalent (±0.25 nats)" in flat  # the default k = 11
    assert "inconclusive: 2 templates" not in flat


def test_counts_below_k(doc):
    """The default k = 11 suppresses counts of templates, pairs and sentences below 11 — in tables and verdicts —
    and leaves settings (minimum templates) alone."""
    rep = T.build_mlm_bias_report(doc)
    assert rep.suppress_k == 11
    rows = {r[0]: r for r in _table(rep, "attribute phrases").rows}
    assert rows["DNR"][4] == "<11" and rows["CVD"][4] == "150" and rows["DRUG"][2] == "<11"
    res = {r[0]: r for r in _table(rep, "per category — clinical").rows}
    assert res["DRUG"][-1] == "inconclusive: <11 templates" and res["CVD"][2] == "15"
    crow = {r[0]: r for r in _table(rep, "Side-by-side").rows}
    assert crow["DNR"][11] == "inconclusive (<11 tpl.)"
    text = rep.text()
    assert "Minimum templates: 6" in text and "counts below 11 shown as “<11”" in text
    assert "(2 templates)" not in text and "(<11 templates)" in text


def test_group_report_figures_still_render():
    """The figure kinds added for this report do not disturb the group report's own kinds."""
    from fairdesk.core.reports import figures as F
    from fairdesk.core.reports.document import FigureSpec, Report, Section
    from fairdesk.core.reports.pdf import render_bytes

    T._install_figure_kinds()
    data = pd.DataFrame(columns=F.DELTA_COLUMNS)
    rep = Report("t", "", "2026-01-01", 0, [Section("s", "S", [FigureSpec("delta", "empty", data)])])
    assert render_bytes(rep)[:5] == b"%PDF-"
    with pytest.raises(KeyError):
        render_bytes(Report("t", "", "d", 0, [Section("s", "S", [FigureSpec("unknown", "x", data)])]))


# --------------------------------------------------------------------------------------------------------------
# Command line and project export: the same bytes


def test_cli_pdf_and_project_export_give_the_same_bytes(tiny, tmp_path, capsys):
    from fairdesk.cli import main
    from fairdesk.core.models.mlm import model_fingerprint
    from fairdesk.core.project import Project
    from fairdesk.jobs.reports import export_report

    _, tok = tiny
    for name, seed in (("base", 0), ("other", 1)):
        _model(len(tok), seed).save_pretrained(tmp_path / name)
        tok.save_pretrained(tmp_path / name)
    j, p = tmp_path / "a.json", tmp_path / "out" / "a.pdf"
    code = main(["audit", "mlm-bias", "--model", str(tmp_path / "base"), "--compare", str(tmp_path / "other"),
                 "--categories", "DNR,HIV", "--completion", "--top-k", "2", "--json", str(j), "--pdf", str(p),
                 "--quiet", "--threads", "1"])
    assert code == 0 and p.is_file() and f", {p}" in capsys.readouterr().out
    data = p.read_bytes()
    project = Project(tmp_path / "p.fairdesk")
    audit = project.add_audit("masked LM", "mlm_bias", j.read_text())
    exported = export_report(tmp_path / "p.fairdesk", audit, tmp_path / "export.pdf")  # from the stored JSON
    assert exported.read_bytes() == data
    text = " ".join(_pdf_text(data, tmp_path).split())
    assert model_fingerprint(tmp_path / "base") in text and model_fingerprint(tmp_path / "other") in text
    assert "Comparison of models" in text and "Sentence completion" in text and "DNR" in text


def test_document_stored_before_verdicts_never_reads_as_equivalent(doc):
    """An audit stored by an earlier release has only flagged / significant: not flagged reads as inconclusive."""
    old = json.loads(json.dumps(doc))
    old.pop("compared"), old.pop("comparison")
    for key in ("unit", "unit_text", "equivalence", "margin", "min_templates", "min_templates_rule", "verdict_rule"):
        old["method"].pop(key, None)
    old["method"]["test_code"] = "wilcoxon"
    for r in old["records"]:
        for key in ("verdict", "verdict_text", "verdict_reason", "ci_low", "ci_high", "p_equivalence",
                    "q_equivalence", "in_family"):
            r.pop(key, None)
    rep = T.build_mlm_bias_report(old)
    summary = "\n".join(p.text for p in rep.section("summary").blocks)
    assert "1 differs, 0 equivalent, 7 inconclusive" in summary and "stored before verdicts existed" in summary
    assert "pseudo-replication" in summary
    assert [r[-1] for r in _table(rep, "bias scores per category").rows].count("inconclusive") == 7
    assert set(T.category_summary_data(old)["tooltip"].str.contains("equivalent")) == {False}
