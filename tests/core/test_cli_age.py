"""``fairdesk-cli data age-demo`` and ``fairdesk-cli train age-independent``: issue 13's command-line contract
(exact JSON and CSV layout), the command and the job store the same document, ``--pdf`` honours ``--suppress-k``."""
import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from scipy.stats import t as t_dist  # noqa: E402
from scipy.stats import ttest_rel  # noqa: E402

from fairdesk.cli import main  # noqa: E402
from fairdesk.cli.outputs import working_json  # noqa: E402
from fairdesk.core.models.age_independent import LearnerSettings  # noqa: E402
from fairdesk.core.project import Project  # noqa: E402
from fairdesk.jobs.age import predictions_csv_table, train_age_independent  # noqa: E402

torch.set_num_threads(1)
COLUMNS = ["row", "group_id", "method", "repeat", "fold", "label", "attribute", "score", "predicted"]
METRICS = ("accuracy", "delta_eo_2", "delta_eo_5")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agecli")
    assert main(["data", "age-demo", "--out", str(folder / "demo.csv"), "--seed", "3", "--participants", "24",
                 "--features", "8"]) == 0
    return folder


def _train_argv(folder, *extra):
    return ["train", "age-independent", "--data", str(folder / "demo.csv"), "--label", "label", "--attribute", "age",
            "--group-id", "participant_id", "--methods", "dnn,svm,simple", "--folds", "2", "--repeats", "2",
            "--lambda", "0.5", "--seed", "7", "--epochs", "2", "--no-reference", "--quiet", *extra]


@pytest.fixture(scope="module")
def run(demo):
    argv = _train_argv(demo, "--json", str(demo / "out.json"), "--predictions", str(demo / "preds.csv"),
                       "--project", str(demo / "p.fairdesk"))
    assert main(argv) == 0
    return demo


def test_age_demo_is_seeded(demo, tmp_path):
    df = pd.read_csv(demo / "demo.csv")
    assert list(df.columns[:3]) == ["participant_id", "age", "label"] and df.shape[1] == 3 + 8
    assert df["participant_id"].nunique() == 24
    assert main(["data", "age-demo", "--out", str(tmp_path / "a.csv"), "--seed", "3", "--participants", "24",
                 "--features", "8"]) == 0
    assert (tmp_path / "a.csv").read_bytes() == (demo / "demo.csv").read_bytes()
    assert main(["data", "age-demo", "--out", str(tmp_path / "b.csv"), "--seed", "4", "--participants", "24",
                 "--features", "8"]) == 0
    assert (tmp_path / "b.csv").read_bytes() != (demo / "demo.csv").read_bytes()


def test_json_contract(run):
    doc = json.loads((run / "out.json").read_text())
    assert set(doc) == {"disclosure", "methods", "settings", "provenance"}  # disclosure: the working-document header
    assert doc["disclosure"]["for_release"] is False
    assert list(doc["methods"]) == ["dnn", "svm", "simple"]
    assert doc["settings"]["folds"] == 2 and doc["settings"]["repeats"] == 2
    assert doc["settings"]["test"] == "corrected" and "Nadeau" in doc["settings"]["test_name"]
    assert doc["settings"]["learner"]["lam"] == 0.5 and doc["provenance"]["seed"] == 7
    dnn = doc["methods"]["dnn"]
    for name, m in doc["methods"].items():
        for metric in METRICS:
            s = m[metric]
            assert len(s["folds"]) == 4  # one per (repeat, fold), repeat then fold
            assert s["mean"] == pytest.approx(np.mean(s["folds"]))
            assert s["std"] == pytest.approx(np.std(s["folds"], ddof=1))
        if name == "dnn":
            assert "t_test" not in m
            continue
        assert set(m["t_test"]) == set(METRICS)
        for metric in METRICS:
            t = m["t_test"][metric]
            assert set(t) == {"statistic", "p", "alternative"} and t["alternative"] == "less"
            if np.any(np.asarray(m[metric]["folds"]) != np.asarray(dnn[metric]["folds"])):
                # the default test: the corrected resampled t (the plain t-statistic shrunk by √(1 + J·ratio))
                ref = ttest_rel(m[metric]["folds"], dnn[metric]["folds"], alternative="less")
                shrink = np.sqrt(1 + 4 * doc["settings"]["test_train_ratio"])
                assert t["statistic"] == pytest.approx(ref.statistic / shrink)
                assert t["p"] == pytest.approx(t_dist.cdf(ref.statistic / shrink, 3))
    assert doc["methods"]["svm"]["leakage"] is None
    for name in ("dnn", "simple"):
        assert set(doc["methods"][name]["leakage"]) >= {"r2", "mae", "auroc"}


def test_predictions_csv_contract(run):
    preds = pd.read_csv(run / "preds.csv")
    data = pd.read_csv(run / "demo.csv")
    assert list(preds.columns) == COLUMNS
    assert len(preds) == len(data) * 3 * 2  # one line per input row, method and repeat
    counts = preds.groupby(["method", "repeat"])["row"].agg(["nunique", "size"])
    assert (counts["nunique"] == len(data)).all() and (counts["size"] == len(data)).all()
    joined = preds.merge(data.reset_index().rename(columns={"index": "row"}), on="row")
    assert (joined["group_id"] == joined["participant_id"]).all()
    assert (joined["label_x"] == joined["label_y"]).all() and np.allclose(joined["attribute"], joined["age"])
    assert ((preds["score"] >= 0.5).astype(int) == preds["predicted"]).all()
    # no participant in two folds of one repeat
    assert (preds.groupby(["repeat", "group_id"])["fold"].nunique() == 1).all()
    # each per-fold accuracy in the JSON is the accuracy of that fold's held-out rows
    doc = json.loads((run / "out.json").read_text())
    for method in ("dnn", "simple"):
        sub = preds[preds["method"] == method].sort_values(["repeat", "fold"])
        acc = [float((g["label"] == g["predicted"]).mean()) for _, g in sub.groupby(["repeat", "fold"])]
        assert acc == pytest.approx(doc["methods"][method]["accuracy"]["folds"])


def test_cli_stores_what_it_writes_and_the_job_stores_the_same(run, tmp_path):
    project = Project(run / "p.fairdesk", create=False)
    (audit,) = project.audits()
    assert audit.kind == "age_independence"
    # --json is the stored document after its working-document header
    assert (run / "out.json").read_text() == working_json(project.audit_json(audit.id))
    csv = predictions_csv_table(run / "p.fairdesk", audit.id)
    assert pd.read_csv(run / "preds.csv")[["row", "method", "fold"]].equals(csv[["row", "method", "fold"]])
    learner = LearnerSettings(lam=0.5, epochs=2)
    aid = train_age_independent(tmp_path / "job.fairdesk", run / "demo.csv", "label", "age", "participant_id",
                                methods=("dnn", "svm", "simple"), folds=2, repeats=2, lam=0.5, seed=7,
                                learner=learner, reference=False)
    job_doc = json.loads(Project(tmp_path / "job.fairdesk", create=False).audit_json(aid))
    cli_doc = json.loads((run / "out.json").read_text())
    cli_doc.pop("disclosure")  # the working-document header of --json
    for d in (job_doc, cli_doc):
        d["provenance"].pop("created_utc")
    assert job_doc == cli_doc


def test_same_seed_same_json_and_pdf_honours_k(run, tmp_path):
    argv = _train_argv(run, "--json", str(tmp_path / "again.json"), "--pdf", str(tmp_path / "r.pdf"),
                       "--suppress-k", "1000")
    assert main(argv) == 0
    a, b = json.loads((run / "out.json").read_text()), json.loads((tmp_path / "again.json").read_text())
    a["provenance"].pop("created_utc")
    b["provenance"].pop("created_utc")
    assert a == b
    pdf = (tmp_path / "r.pdf").read_bytes()
    assert pdf[:5] == b"%PDF-"
    # the bytes of the report route at k = 1000 for this document, not at the default k = 11
    from fairdesk.core.kinds import ReportSettings, build_report

    doc = json.loads((tmp_path / "again.json").read_text())
    assert build_report("age_independence", doc, tmp_path / "k1000.pdf", ReportSettings(1000)).read_bytes() == pdf
    assert build_report("age_independence", doc, tmp_path / "k11.pdf", ReportSettings(11)).read_bytes() != pdf
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(tmp_path / "r.pdf"), "-"], capture_output=True, text=True).stdout
        flat = " ".join(text.split())  # below k the counts are withheld in the released copy ("–") or "<k"
        assert re.search(r"(–|<1000) rows of (–|<1000) participants", flat), flat[:400]
        assert f"{a['settings']['n_rows']} rows" not in text


def test_bad_method_and_bad_k_fail_before_training(demo, tmp_path, capsys):
    argv = _train_argv(demo, "--json", str(tmp_path / "x.json"))
    argv[argv.index("dnn,svm,simple")] = "dnn,magic"
    assert main(argv) == 2
    assert "magic" in capsys.readouterr().err and not (tmp_path / "x.json").exists()
    assert main(_train_argv(demo, "--json", str(tmp_path / "x.json"), "--suppress-k", "0")) == 2
    assert "--suppress-k 0 is outside the limits" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


def test_report_and_page_tables_name_the_test(run, tmp_path):
    """Issue 22: the verdicts use the corrected resampled t-test by default and the report (whose tables the GUI page
    shows) says so; a document run with --test plain is named anti-conservative; a document stored before the
    choice existed is read as the plain test it ran. A bad --test fails before training."""
    from fairdesk.core.reports import age_independence as report
    from fairdesk.core.reports.document import Table

    doc = json.loads((run / "out.json").read_text())

    def table2(d):
        tree = report.build_age_report(d)
        return next(b for b in tree.section("tables").blocks if isinstance(b, Table) and b.title.startswith("Table 2"))

    assert "corrected resampled t-tests" in table2(doc).title and "Nadeau" in table2(doc).note
    summary = " ".join(b.text for b in report.build_age_report(doc).section("summary").blocks)
    assert "corrected resampled t-test" in summary
    plain = {**doc, "settings": {**doc["settings"], "test": "plain"}}
    assert "plain paired t-tests (anti-conservative)" in table2(plain).title
    old = {**doc, "settings": {k: v for k, v in doc["settings"].items() if k != "test"}}
    assert "anti-conservative" in table2(old).title
    # issue 27: each difference against the DNN carries its 95% CI (how uncertain the cost is), in Table 2 and in
    # the summary's verdict lines; a document stored before the interval was kept shows none and says nothing false
    t2 = table2(doc)
    ci_col = t2.header.index("95% CI")
    acc = doc["methods"]["simple"]["comparison"]["accuracy"]
    row = next(r for r in t2.rows if r[0] == "age-indep-simple" and r[1] == "accuracy")
    assert row[ci_col] == f"{report.fmt_signed(acc['ci_low'])} to {report.fmt_signed(acc['ci_high'])}"
    assert f"95% CI {report.fmt_signed(acc['ci_low'])} to {report.fmt_signed(acc['ci_high'])}" in summary
    bare = json.loads(json.dumps(doc))
    for e in bare["methods"].values():
        for c in (e.get("comparison") or {}).values():
            del c["ci_low"], c["ci_high"], c["ci_level"]
    assert all(r[ci_col] == "–" for r in table2(bare).rows)
    assert "95% CI" not in " ".join(b.text for b in report.build_age_report(bare).section("summary").blocks)
    with pytest.raises(SystemExit) as exit_info:     # argparse: the choices are corrected and plain
        main(_train_argv(run, "--json", str(tmp_path / "x.json"), "--test", "welch"))
    assert exit_info.value.code == 2
    assert not (tmp_path / "x.json").exists()


def test_command_line_prints_each_difference_with_its_interval(run, capsys):
    """Issue 27: the command line's summary gives each verdict against the DNN with the difference and its 95% CI
    (how uncertain the accuracy cost is), the numbers of the stored document."""
    from fairdesk.core.reports.age_independence import difference_words

    doc = json.loads((run / "out.json").read_text())
    capsys.readouterr()
    assert main(_train_argv(run, "--json", str(run / "again.json"))) == 0
    out = capsys.readouterr().out
    acc = doc["methods"]["simple"]["comparison"]["accuracy"]
    assert f"accuracy {acc['verdict']} ({difference_words(acc)})" in out and "95% CI" in out


def test_choose_body_chooses_each_learners_body_with_lambda_and_says_so(demo, tmp_path, capsys):
    """Issue 27, round 10: ``--choose-body`` has the nested validation choose each learner's body (its own layers or
    the DNN's) with λ; the document records it per fold and the printed words name it. With ``--lambda`` (nothing
    is chosen) it is refused before training."""
    argv = _train_argv(demo, "--json", str(tmp_path / "b.json"), "--choose-body")
    assert main(argv) == 2
    assert "--choose-body" in capsys.readouterr().err and not (tmp_path / "b.json").exists()
    i = argv.index("--lambda")
    del argv[i:i + 2]
    argv[argv.index("dnn,svm,simple")] = "dnn,simple"
    argv[argv.index("--repeats") + 1] = "1"
    assert main(argv + ["--lambda-grid", "0.3,1"]) == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["settings"]["select_body"] is True
    sel = doc["methods"]["simple"]["lambda_selection"]
    assert sel["bodies"] == ["own", "dnn"] and len(sel["folds"]) == 2
    assert all(c["body"] in ("own", "dnn") and len(c["points"]) == 4 for c in sel["folds"])
    assert sel["dnn_body_in_folds"] == sum(c["body"] == "dnn" for c in sel["folds"])
    assert "λ and body chosen per fold: " in capsys.readouterr().out
