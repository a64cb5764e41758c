"""The imaging audit's report (fairdesk/core/reports/cit_images.py) and the precomputed-predictions route.

Exact counterfactuals of the Morpho-like benchmark decide pass/fail (a classifier reading the attribute's rim is
"dependent", one restricted to the central disc is "equivalent within margin"); a generator trained for two steps
provides a learned-generator document with example images for the layout (its quality is irrelevant here)."""
import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.cli import main
from fairdesk.core.audits.cit_images import PREDICTION_TABLE_COLUMNS, audit_prediction_table
from fairdesk.core.errors import DataError
from fairdesk.core.reports.cit_images import build_cit_report, cit_report_to_pdf, render_cit_bytes
from fairdesk.core.synthetic import morpho
from fairdesk.jobs import images as it
from fairdesk.jobs.reports import export_report


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def exact_table(tmp_path_factory):
    """Predictions of two pixel classifiers on originals, exact counterfactuals and flips, plus Z and a control."""
    train = morpho.make_morpho(400, seed=0, shortcut=0.9)
    test = morpho.make_morpho(400, seed=1, shortcut=0.8)
    reads = morpho.train_pixel_classifier(train.images, train.y)
    ignores = morpho.train_pixel_classifier(train.images, train.y, mask=morpho.central_mask())
    control = morpho.train_pixel_classifier(train.images, train.y, mask=morpho.central_mask(), C=0.5)
    cf, flip = test.counterfactual(), test.images[:, :, ::-1]
    df = pd.DataFrame({"sex": np.where(test.a == 1, "M", "F"), "patient_id": test.patient_id})
    for name, clf in (("reads", reads), ("ignores", ignores)):
        df[name], df[f"{name}__cf"], df[f"{name}__flip"] = clf(test.images), clf(cf), clf(flip)
        df[f"{name}__label"] = test.y
    df["control"], df["control__cf"] = control(test.images), control(cf)
    for j, col in enumerate(test.exogenous().T):
        df[f"z_{j}"] = col
    df.loc[5, "sex"] = None                       # one unit without the attribute: left out, counted
    path = tmp_path_factory.mktemp("preds") / "preds.csv"
    df.to_csv(path, index=False)
    return path, df


@pytest.fixture(scope="module")
def learned_doc(tmp_path_factory):
    """A learned-generator document with example images (generator trained for 2 + 2 steps)."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from fairdesk.core.audits.cit_images import run_cit_pipeline
    from fairdesk.core.data.images import open_image_folder
    from fairdesk.core.generation import images as gi

    root = tmp_path_factory.mktemp("learned")
    bench = morpho.make_morpho(120, seed=2, shortcut=0.8)
    csv = morpho.write_folder(bench, root)
    (root / "images" / "img_00007.png").write_bytes(b"\x89PNG broken")
    ds = open_image_folder(csv, root)
    gen = gi.train_generator(bench.images, bench.a, gi.config_for_size("tiny", 32, default_steps=2),
                             gi.TrainSchedule(vae_steps=2, unet_steps=2, batch_size=8, checkpoint_every=0)).generator
    reads = morpho.train_pixel_classifier(bench.images, bench.y)
    clf = lambda im: reads(im)[:, None]  # noqa: E731
    clf.outputs = ("disease",)
    ctrl = morpho.train_pixel_classifier(bench.images, bench.y, mask=morpho.central_mask())
    return run_cit_pipeline(ds, clf, gen, "attribute", control=ctrl, split="all", steps=2, n_examples=4,
                            seed=0, full_quality=True, provenance={"data_sha256": "d" * 64, "dataset": "labels.csv"})


def test_exact_counterfactuals_from_a_predictions_table(exact_table):
    _, df = exact_table
    doc = audit_prediction_table(df, "sex", margin=0.02, seed=0)
    rows = {r["output"]: r for r in doc["table"]}
    assert doc["settings"]["generator"] == "exact" and doc["attribute"]["values"] == ["F", "M"]
    assert rows["reads"]["verdict"] == "dependent" and rows["reads"]["p"] < 1e-4
    assert rows["reads"]["shift_0->1"] > 0.2 and rows["reads"]["shift_1->0"] < -0.2
    assert rows["ignores"]["verdict"] == "equivalent within margin"
    assert rows["ignores"]["dp_p"] < 1e-3          # association through the sample, not dependence
    assert "eo_p" in rows["ignores"] and "flip_mean_abs_shift" in rows["reads"]
    assert doc["dataset"]["n_audited"] == 399 and doc["dataset"]["n_missing_attribute"] == 1
    assert doc["control_band"] is not None
    with pytest.raises(DataError, match="NAME__cf"):
        audit_prediction_table(df[["sex", "reads", "z_0"]], "sex")
    with pytest.raises(DataError, match="z_0, z_1"):
        audit_prediction_table(df[["sex", "reads", "reads__cf"]], "sex")
    with pytest.raises(DataError, match="'site' is not in the predictions table"):
        audit_prediction_table(df, "site")
    assert "NAME__cf" in PREDICTION_TABLE_COLUMNS


def test_report_tables_and_words(learned_doc, exact_table):
    rep = build_cit_report(learned_doc)
    text = rep.text()
    tests = rep.section("tests").blocks[0]
    assert tests.header[:2] == ["Output", "n"] and {"CIT-LR t", "CIT-LR p", "CIT-LR q", "DP p", "EO p"} <= \
        set(tests.header)
    assert [r[0] for r in tests.rows] == ["disease"]
    shifts = next(t for t in rep.tables() if t.title.startswith("Oriented prediction shift"))
    assert {r[1] for r in shifts.rows} == {"0 → 1", "1 → 0"}
    for phrase in ("Negative-control band", "inconclusive", "null-intervention reconstruction",
                   "NOT Inception FID", "Effectiveness", "Composition (L1 after 10 cycles)", "Reversibility",
                   "img_00007.png", "Unreadable files"):
        assert phrase in text, phrase
    kinds = [f.kind for f in rep.figures()]
    assert kinds == ["cit_scatter", "cit_examples"]
    scatter = rep.figures()[0].data
    assert {"0 → 1", "1 → 0", "flip (0)", "flip (1)"} == set(scatter["panel"])
    assert len(rep.figures()[1].data) == 6         # 4 largest changes + 2 of the 4 random units
    exact = build_cit_report(audit_prediction_table(exact_table[1], "sex"))
    assert "Counterfactuals are exact" in exact.text() and "F → M" in exact.text()
    assert [f.kind for f in exact.figures()] == ["cit_scatter", "cit_scatter"]


def test_pdf_deterministic_atomic_and_readable(learned_doc, tmp_path):
    a = cit_report_to_pdf(learned_doc, tmp_path / "a.pdf")
    b = cit_report_to_pdf(json.loads(json.dumps(learned_doc)), tmp_path / "b.pdf")
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:5] == b"%PDF-"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]    # no temporary files left
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", "-layout", str(a), "-"], capture_output=True, text=True).stdout
        for phrase in ("Tests per output", "CIT-LR p", "DP p", "Oriented prediction shift", "Scatter plots",
                       "Example counterfactuals", "Counterfactual quality", "Provenance"):
            assert phrase in text, phrase
    with pytest.raises(DataError):
        build_cit_report({"kind": "groups"})


def test_predictions_job_export_report_and_cli(exact_table, tmp_path, capsys):
    path, _ = exact_table
    proj = tmp_path / "p.fairdesk"
    aid = it.audit_cit_predictions(proj, path, "sex", seed=0)
    doc, examples = it.load_cit_audit(proj, aid)
    assert examples == {} and doc["kind"] == "cit_images"
    assert {r["output"]: r["verdict"] for r in doc["table"]} == {"reads": "dependent",
                                                                 "ignores": "equivalent within margin"}
    # the project's report (what the GUI exports) = the report of the stored document's releasable copy, byte for byte
    from fairdesk.core.kinds import ReportSettings, releasable
    from fairdesk.core.reports.cit_images import report_tree

    pdf = export_report(proj, aid, tmp_path / "job.pdf")
    settings = ReportSettings()
    assert pdf.read_bytes() == render_cit_bytes(report_tree(releasable("cit_images", doc, settings), settings))
    code = main(["audit", "cit-predictions", "--predictions", str(path), "--attribute", "sex", "--json",
                 str(tmp_path / "cli.json"), "--pdf", str(tmp_path / "cli.pdf"), "--quiet"])
    assert code == 0
    cli_doc = json.loads((tmp_path / "cli.json").read_text())
    assert cli_doc["table"] == doc["table"]
    assert (tmp_path / "cli.pdf").read_bytes()[:5] == b"%PDF-"
    code = main(["audit", "cit-predictions", "--predictions", str(path), "--attribute", "patient_id", "--json",
                 str(tmp_path / "x.json"), "--quiet"])
    assert code == 2 and "positive" in capsys.readouterr().err     # k > 2 values: says how to binarise
