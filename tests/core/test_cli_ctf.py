"""The command-line contract of counterfactual token fairness (issue 12): ``data madlibs``, ``counterfactuals``,
``train text-classifier``, ``audit ctf`` — exact columns and JSON fields, the JSON is the stored document, CLI and
job store the same document, the PDF honours the small-cell k, unknown terms reach the user."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from fairdesk.cli import main  # noqa: E402
from fairdesk.cli.outputs import working_json  # noqa: E402
from fairdesk.core.kinds import ReportSettings  # noqa: E402
from fairdesk.core.project import Project  # noqa: E402


def _cli(argv, capsys) -> str:
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Demo notes, a term file, a CLP-nontox model trained through the CLI with --terms FILE."""
    from fairdesk.core.text.madlibs import clinical_notes_demo

    root = tmp_path_factory.mktemp("cli_ctf")
    df = clinical_notes_demo(150, seed=1)
    df.to_csv(root / "train.csv", index=False)
    df.loc[len(df)] = ["50 yo quiet zorblax pt with cough.", 0, "zorblax", "cough"]
    df.to_csv(root / "notes.csv", index=False)
    terms = root / "terms.txt"
    terms.write_text("black\nwhite\nmuslim\nchristian\ngay\nstraight\nelderly\nyoung\n", encoding="utf-8")
    held = root / "held.txt"
    held.write_text("african\nasian\ndeaf\nblind\nzorblax\n", encoding="utf-8")
    assert main(["train", "text-classifier", "--data", str(root / "train.csv"), "--text-col", "text", "--label-col",
                 "label", "--method", "clp-nontox", "--lambda", "1", "--terms", str(terms), "--seed", "2",
                 "--epochs", "1", "--out", str(root / "model"), "--quiet"]) == 0
    return root


@pytest.fixture(scope="module")
def audited(trained):
    """``audit ctf`` through the CLI into a project, with --held-out-terms, --pdf; returns its stdout."""
    import contextlib
    import io

    root = trained
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["audit", "ctf", "--model", str(root / "model"), "--data", str(root / "notes.csv"), "--text-col",
                     "text", "--label-col", "label", "--held-out-terms", str(root / "held.txt"), "--max-tokens",
                     "10", "--seed", "0", "--n-boot", "200", "--json", str(root / "a.json"), "--pdf",
                     str(root / "a.pdf"), "--project", str(root / "p.fairdesk"), "--quiet"])
    assert code == 0
    return buf.getvalue()


def test_data_madlibs_columns_and_size(tmp_path, capsys):
    out = _cli(["data", "madlibs", "--out", str(tmp_path / "m.csv")], capsys)
    df = pd.read_csv(tmp_path / "m.csv", keep_default_na=False)
    assert list(df.columns) == ["text", "label", "template", "term"]
    assert len(df) == 76_564 and (df["label"] == 1).sum() == 38_282
    assert set(df["template"]) == {"verb_adj", "am_hate_adj", "being_adj", "name_adj", "you_are_adj",
                                   "you_occupation"}
    assert (df.loc[df["template"] == "you_occupation", "term"] == "").all()  # no identity term: no counterfactual
    assert "CC BY 4.0" in out


def test_counterfactuals_columns_and_substitution(tmp_path, capsys):
    src = pd.DataFrame({"note": ["He has chest pain.", "Transparent dressing applied.", "Black stool noted.",
                                 "She is pregnant.", "45 yo M with cough."]})
    src.to_csv(tmp_path / "n.csv", index=False)
    out = _cli(["counterfactuals", "--data", str(tmp_path / "n.csv"), "--text-col", "note", "--terms", "gender",
                "--out", str(tmp_path / "cf.csv"), "--quiet"], capsys)
    cf = pd.read_csv(tmp_path / "cf.csv")
    assert list(cf.columns) == ["id", "text", "counterfactual", "term", "counterfactual_term"]
    got = dict(zip(cf["text"], cf["counterfactual"]))
    assert got["He has chest pain."] == "She has chest pain."
    assert got["45 yo M with cough."] == "45 yo F with cough."
    assert "She is pregnant." not in got and "1 left out" in out  # meaning depends on sex: left out, counted
    # a term file; other senses and longer words stay
    (tmp_path / "t.txt").write_text("trans\nblack\nwhite\n", encoding="utf-8")
    _cli(["counterfactuals", "--data", str(tmp_path / "n.csv"), "--text-col", "note", "--terms",
          str(tmp_path / "t.txt"), "--out", str(tmp_path / "cf2.csv"), "--quiet"], capsys)
    assert pd.read_csv(tmp_path / "cf2.csv").empty
    # default term set: all 50 Dixon et al. terms (one counterfactual per other term)
    pd.DataFrame({"note": ["Elderly patient, stable."]}).to_csv(tmp_path / "e.csv", index=False)
    _cli(["counterfactuals", "--data", str(tmp_path / "e.csv"), "--text-col", "note", "--out",
          str(tmp_path / "cf3.csv"), "--quiet"], capsys)
    cf3 = pd.read_csv(tmp_path / "cf3.csv")
    assert len(cf3) == 49 and set(cf3["term"]) == {"elderly"}
    assert "African american patient, stable." in set(cf3["counterfactual"])


def test_train_records_the_terms_and_audit_json_contract(trained, audited):
    root, out = trained, audited
    cfg = json.loads((root / "model" / "config.json").read_text())
    assert cfg["method"] == "clp_nontox" and cfg["lam"] == 1.0 and cfg["seed"] == 2
    assert cfg["terms"]["name"] == "terms.txt"
    project = root / "p.fairdesk"
    text = (root / "a.json").read_text(encoding="utf-8")
    [audit] = Project(project).audits()
    # the JSON is the stored document, byte for byte after its working-document header
    assert text == working_json(Project(project).audit_json(audit.id))
    doc = json.loads(text)
    assert doc["kind"] == "ctf" and doc["settings"]["term_sets"]["train"]["name"] == "terms.txt"  # the model's terms
    got = {(r["subset"], r["terms"]) for r in doc["ctf_gap"]}
    contract = {(s, t) for s in ("all", "label_0", "label_1") for t in ("train", "held_out")}
    assert contract <= got and {s for s, _ in got - contract} <= {"synthetic"}  # the one addition: the madlibs sample
    assert ("synthetic", "train") in got and doc["attribution"]  # on by default; its use needs the attribution
    for r in doc["ctf_gap"]:
        assert {"subset", "terms", "value", "ci_low", "ci_high", "n"} <= set(r)
    for p in doc["pairs"]:
        assert {"term", "counterfactual_term", "n", "mean_abs_change", "flip_rate", "reverse_flip_rate"} <= set(p)
    assert {"terms", "gaps", "pair_gaps"} <= set(doc["group_rates"])
    assert {"term", "tpr", "tnr"} <= set(doc["group_rates"]["terms"][0])
    assert {"records", "mean_abs_change", "informative"} <= set(doc["control"])
    assert {"seed", "data_sha256", "model_hashes", "term_set_sha256", "versions"} <= set(doc["provenance"])
    assert (root / "a.pdf").read_bytes()[:4] == b"%PDF"
    # unknown terms reach the user: on the terminal and in the document
    assert "zorblax" in doc["unknown_terms"]["held_out"] and doc["unknown_terms"]["train"] == []
    assert re.search(r"note: \d held-out term form\(s\) are outside the model's vocabulary \([a-z, ]*zorblax", out)
    assert "train/all: CTF gap" in out


def test_cli_and_job_store_the_same_document(trained, tmp_path, capsys):
    from fairdesk.jobs.ctf import audit_ctf

    root = trained
    _cli(["audit", "ctf", "--model", str(root / "model"), "--data", str(root / "notes.csv"), "--text-col", "text",
          "--label-col", "label", "--terms", "dixon_train", "--seed", "4", "--n-boot", "150", "--json",
          str(tmp_path / "cli.json"), "--quiet"], capsys)  # no --project: a temporary one, nothing left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.json"]
    audit_id = audit_ctf(tmp_path / "job.fairdesk", root / "model", root / "notes.csv", "text", label_col="label",
                         terms="dixon_train", seed=4, n_boot=150)
    job = json.loads(Project(tmp_path / "job.fairdesk").audit_json(audit_id))
    cli = json.loads((tmp_path / "cli.json").read_text())
    cli.pop("disclosure")  # the working-document header of --json
    for d in (job, cli):
        d["provenance"].pop("created_utc")
    assert cli == job


def _count_cells(report) -> list[str]:
    """Every cell of a count column of the report's tables."""
    cells = []
    for t in report.tables():
        for j, h in enumerate(t.header):
            if h in ("n", "Pairs", "n label 1", "n label 0", "n a′→a", "Term pairs"):
                cells += [r[j] for r in t.rows]
    return cells


@pytest.mark.parametrize("k", [11, 1])
def test_report_honours_the_small_cell_k(trained, audited, k):
    from fairdesk.core.reports.ctf import report_tree

    doc = json.loads((trained / "a.json").read_text())
    report = report_tree(doc, ReportSettings(suppress_k=k))
    cells = _count_cells(report)
    assert cells
    small = [c for c in cells if c not in ("–", f"<{k}") and int(c.replace(",", "")) < 11]
    text = report.text()
    if k == 11:
        assert small == [] and "<11" in cells  # the tiny data has small cells: they print as <11
        assert not re.search(r"(?<!\S)([0-9]|10) (texts|pairs)\b", text)
    else:
        assert small  # the same document shows the small counts when k = 1 (so the check above can fail)
    assert "zorblax" in text  # the unknown held-out term is named in the report
    assert "CC BY 4.0" not in text or doc.get("attribution")


def test_pdf_through_the_one_route_equals_the_cli_pdf(trained, audited, tmp_path):
    from fairdesk.jobs.reports import export_report

    project = trained / "p.fairdesk"
    [audit] = Project(project).audits()
    export_report(project, audit.id, tmp_path / "again.pdf", suppress_k=11)
    assert (tmp_path / "again.pdf").read_bytes() == (trained / "a.pdf").read_bytes()
