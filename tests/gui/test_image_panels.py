"""Image pages of the Dataset, Model and Audit tabs: import → train → audit → results, through real jobs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairdesk.jobs.engine import JobState


@pytest.fixture(scope="module")
def morpho_folder(tmp_path_factory):
    """A Morpho-like image folder (16 px, 120 images, 60 patients) with one corrupt file."""
    from fairdesk.core.synthetic.morpho import make_morpho, write_folder

    folder = tmp_path_factory.mktemp("morpho")
    ds = make_morpho(120, seed=5, size=16, shortcut=0.8)
    csv = write_folder(ds, folder)
    (folder / "images" / "img_00007.png").write_bytes(b"\x89PNG broken")
    return csv, folder


def _wait_job(qtbot, job, timeout=60000):
    qtbot.waitUntil(lambda: job.state.finished, timeout=timeout)
    qtbot.wait(10)


def test_image_data_panel_import_thumbnails_splits(window, project_path, morpho_folder, run_and_wait, qtbot, tmp_path):
    from fairdesk.gui.tabs.image_data import ImageDataPanel

    csv, folder = morpho_folder
    window.open_project(project_path, create=True)
    panel = ImageDataPanel(window)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    assert not panel.import_button.isEnabled()
    panel.read_header(csv)
    assert panel.path_combo.currentData() == "Path" and panel.patient_combo.currentData() == "patient_id"
    assert panel.dir_edit.text() == str(folder)
    assert "disease" in panel.labels_list.items()[:2] and "attribute" in panel.labels_list.items()[:2]
    panel.labels_list.set_checked(["disease"])
    panel.attributes_list.set_checked(["attribute"])
    assert panel.import_button.isEnabled()
    job = run_and_wait(window, panel.import_dataset)
    assert job.state == JobState.DONE, job.error
    assert panel.dataset_combo.currentData() == job.result
    qtbot.waitUntil(lambda: panel.dataset is not None, timeout=30000)
    ds = panel.dataset
    assert len(ds) == 119 and [u["path"] for u in ds.unreadable] == ["images/img_00007.png"]
    counts = panel.counts_view.frame().set_index("split")
    assert counts.loc["all", "images"] == 119
    assert counts.loc[["train", "val", "test"], "images"].sum() == 119
    assert counts.loc["all", "patients"] == 60
    assert counts.loc["all", "attribute = 0"] + counts.loc["all", "attribute = 1"] == 119
    # patient-disjoint splits
    parts = {s: set(ds.table.loc[ds.table["split"] == s, "_patient"]) for s in ("train", "val", "test")}
    assert not (parts["train"] & parts["test"]) and not (parts["train"] & parts["val"])
    assert panel.unreadable_view.frame()["path"].tolist() == ["images/img_00007.png"]
    qtbot.waitUntil(lambda: not panel.thumbnails.loading, timeout=20000)
    assert panel.thumbnails.count() == 119 and panel.thumbnails.thumbnails_ready() == 119
    assert any("img_00007" in t for t in panel.thumbnails.unreadable_items())
    panel.grab().save(str(tmp_path / "image_data.png"))


@pytest.fixture
def image_project(project_path, morpho_folder):
    from fairdesk.jobs.images import import_image_dataset

    csv, folder = morpho_folder
    from fairdesk.core.data.images import ImageRoles

    dataset_id = import_image_dataset(project_path, csv, folder, ImageRoles("Path", ("disease",), ("attribute",),
                                                                            "patient_id"), "morpho")
    return project_path, dataset_id


def test_image_model_panel_train_classifier_and_generator_live(window, image_project, run_and_wait, qtbot, tmp_path):
    from fairdesk.core.project import Project
    from fairdesk.gui.tabs.image_model import ImageModelPanel

    project_path, dataset_id = image_project
    window.settings.threads = 1
    window.open_project(project_path)
    panel = ImageModelPanel(window)
    qtbot.addWidget(panel)
    panel.resize(1250, 800)
    panel.show()
    assert panel.dataset_combo.currentData() == dataset_id
    assert panel.labels_list.checked() == ["disease"] and panel.attribute_combo.currentData() == "attribute"
    assert panel.positive_combo.currentData() is None  # two values: no "one vs rest" needed

    # a small CNN, one epoch
    panel.epochs_spin.setValue(1)
    panel.cnn_size.setValue(16)
    job = run_and_wait(window, panel.train_classifier)
    assert job.state == JobState.DONE, job.error
    models = {m.id: m for m in Project(project_path).models()}
    assert models[job.result].kind == "image_classifier" and models[job.result].info["outputs"] == ["disease"]
    assert "classifier" in panel.models_view.frame()["kind"].tolist()

    # the generator: live loss curves of both phases and a preview, drained by the timer in the Qt thread
    panel.size_combo.setCurrentIndex(panel.size_combo.findData("tiny"))
    panel.gen_size.setValue(16)
    panel.vae_steps.setValue(3)
    panel.unet_steps.setValue(4)
    panel.batch_spin.setValue(8)
    panel.preview_spin.setValue(2)
    panel.checkpoint_spin.setValue(2)
    job = run_and_wait(window, panel.train_generator)
    assert job.state == JobState.DONE, job.error
    assert panel.loss_points("autoencoder") == 3 and panel.loss_points("diffusion") == 4
    assert panel.losses["diffusion"][0] == [4, 5, 6, 7]
    xs, ys = panel.curves["diffusion"].getData()
    assert len(xs) == 4
    assert panel.preview_step == 7 and len(panel.preview_labels) == 8   # 2 samples × 2 groups, image + caption
    assert "step 7" in panel.preview_box.title() and panel.preview_labels[0].isVisible()
    assert panel.plot_widget.isVisible()
    folder = Path(panel.out_edit.text())
    gen = next(m for m in Project(project_path).models() if m.kind == "image_generator")
    assert Path(gen.info["path"]) == folder.resolve() and gen.info["step"] == 7
    panel.grab().save(str(tmp_path / "image_model.png"))

    # resume from the folder's checkpoint with more diffusion steps: the old history is shown, then continued
    panel.unet_steps.setValue(6)
    panel.resume_check.setChecked(True)
    job = run_and_wait(window, panel.train_generator)
    assert job.state == JobState.DONE, job.error
    assert panel.loss_points("autoencoder") == 3 and panel.losses["diffusion"][0] == [4, 5, 6, 7, 8, 9]
    assert max(m.info.get("step") or 0 for m in Project(project_path).models()) == 9

    # cancel: the job stops, the status says the checkpoint is kept
    panel.resume_check.setChecked(False)
    panel.out_edit.setText(str(tmp_path / "gen-cancel"))
    panel.unet_steps.setValue(100000)

    def start_and_cancel():
        job = panel.train_generator()
        qtbot.waitUntil(lambda: panel.loss_points("diffusion") >= 3, timeout=60000)
        panel.cancel()
        return job

    job = run_and_wait(window, start_and_cancel)
    assert job.state == JobState.CANCELLED
    assert "checkpoint" in panel.status.text() and "Resume" in panel.status.text()
    assert (tmp_path / "gen-cancel" / "fairdesk_generator.json").is_file()
    assert not panel.cancel_button.isEnabled() and panel.train_gen_button.isEnabled()


@pytest.fixture(scope="module")
def audit_project(tmp_path_factory, morpho_folder):
    """A project with the Morpho images, a classifier, a control classifier and a tiny generator (job functions)."""
    import torch

    from fairdesk.core.data.images import ImageRoles
    from fairdesk.jobs import images as it

    torch.set_num_threads(1)
    csv, folder = morpho_folder
    root = tmp_path_factory.mktemp("audit-project")
    project = root / "audit.fairdesk"
    ds_id = it.import_image_dataset(project, csv, folder, ImageRoles("Path", ("disease",), ("attribute",),
                                                                     "patient_id"), "morpho")
    clf = it.train_image_classifier(project, ds_id, ["disease"], root / "clf", epochs=1, image_size=16, seed=0)
    ctrl = it.train_image_classifier(project, ds_id, ["disease"], root / "ctrl", epochs=1, image_size=16, seed=1,
                                     name="control")
    gen = it.train_generator_job(project, ds_id, "attribute", root / "gen", image_size=16, vae_steps=3,
                                 unet_steps=4, batch_size=8, checkpoint_every=0, steps=3)
    return project, ds_id, clf, ctrl, gen


def test_image_audit_panel_run_results_scatter_examples_export(window, audit_project, run_and_wait, qtbot,
                                                               tmp_path):
    from fairdesk.core.project import Project
    from fairdesk.gui.tabs.image_audit import ImageAuditPanel

    project, ds_id, clf, ctrl, gen = audit_project
    window.settings.threads = 1
    window.open_project(project)
    panel = ImageAuditPanel(window)
    qtbot.addWidget(panel)
    panel.resize(1400, 850)
    panel.show()
    assert panel.dataset_combo.currentData() == ds_id and panel.classifier_combo.currentData() == clf
    assert panel.generator_combo.currentData() == gen and panel.attribute_combo.currentData() == "attribute"
    assert panel.label_map() == {"disease": "disease"} and panel._label_combos["disease"].isVisible()
    assert panel.positive_combo.currentData() is None
    panel.control_combo.setCurrentIndex(panel.control_combo.findData(ctrl))
    panel.steps_spin.setValue(3)
    panel.examples_spin.setValue(4)
    job = run_and_wait(window, panel.run_audit)
    assert job.state == JobState.DONE, job.error
    audit_id = job.result
    assert panel.audit_ids()[-1] == audit_id and panel.audit_id == audit_id
    doc = panel.doc
    assert doc["kind"] == "cit_images" and doc["control_band"] is not None

    # tests table: 004 Tables 12-13 columns plus the oriented shifts and the verdict
    table = panel.table_view.frame()
    assert table["output"].tolist() == ["disease"]
    for col in ("weighted GCM p", "weighted GCM corrected p", "CIT-LR t", "CIT-LR p", "CIT-LR corrected p", "DP p",
                "EO p", "shift 0→1", "95% CI 0→1", "flip rate 1→0", "flip baseline mean |Δ|", "verdict"):
        assert col in table.columns, col
    row = doc["table"][0]
    assert table.loc[0, "CIT-LR p"] == pytest.approx(row["cit_lr_p"])
    assert table.loc[0, "shift 0→1"] == pytest.approx(row["shift_0->1"])
    assert table.loc[0, "verdict"] in ("differs", "equivalent within margin", "inconclusive")
    text = panel.verdict_view.toPlainText()
    assert f"Negative-control band ±{doc['control_band']:.3g}" in text and "disease" in text
    if table.loc[0, "verdict"] == "inconclusive":
        assert "inconclusive —" in text
    assert "Composition" in panel.quality_view.toPlainText()

    # scatter: one column per direction + the flip column, one dot per audited unit
    panel.show_page("scatter")
    sc = panel.scatter
    assert sc.isVisible() and sc.graphics.isVisible()
    assert sc.columns() == ["0->1", "1->0", "flip"]
    n = doc["dataset"]["n_audited"]
    assert sc.point_count("0->1") + sc.point_count("1->0") == n and sc.point_count("flip") == n
    assert sc.band == pytest.approx(doc["control_band"])
    panel.grab().save(str(tmp_path / "audit_scatter.png"))

    # diff viewer over the stored examples: largest change first, difference against the null reconstruction
    panel.show_page("examples")
    viewer = panel.diff_viewer
    assert viewer.isVisible() and viewer.graphics.isVisible()
    qtbot.wait(30)   # the image is fitted to the panels once the page is laid out
    r = viewer.views[0].viewRange()
    size = panel.arrays["original"].shape[-1]
    assert r[0][0] <= 0 and r[0][1] >= size and min(r[0][1] - r[0][0], r[1][1] - r[1][0]) < size * 1.2
    items = doc["examples"]["items"]
    assert len(viewer.examples) == len(items) > 0
    changes = [viewer.examples[i].change() for i in viewer.order]
    assert changes == sorted(changes, reverse=True)
    ex = viewer.examples[viewer.current]
    np.testing.assert_allclose(viewer.image("difference"), next(iter(ex.counterfactuals.values())) - ex.reference,
                               atol=1e-6)
    np.testing.assert_allclose(viewer.image("difference"), panel.arrays["diff"][viewer.current], atol=1e-6)
    panel.grab().save(str(tmp_path / "audit_examples.png"))
    panel.show_page("tests")
    panel.grab().save(str(tmp_path / "audit_tests.png"))

    # export: the PDF written by the GUI's job is the same bytes as the job function's
    pdf = tmp_path / "gui.pdf"
    job = run_and_wait(window, lambda: panel.export_pdf(pdf))
    assert job.state == JobState.DONE, job.error
    from fairdesk.jobs.reports import export_report

    export_report(project, audit_id, tmp_path / "cli.pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.read_bytes() == (tmp_path / "cli.pdf").read_bytes()
    assert Project(project).audits()[-1].id == audit_id


def test_synthetic_benchmark_view(window, run_and_wait, qtbot, tmp_path):
    from fairdesk.gui.tabs.image_audit import ImageAuditPanel

    panel = ImageAuditPanel(window)
    qtbot.addWidget(panel)
    panel.resize(1300, 700)
    panel.show()
    panel.show_page("benchmark")
    assert not panel.setup_panel.isVisible()
    view = panel.benchmark
    view.datasets_list.set_checked(["linear"])
    view.n_classifiers.setValue(4)
    view.confounded.setChecked(False)
    view.config_overrides = dict(n_train=200, n_audit=200, n_eca=300, gap_units=20, gap_reps=2,
                                 oracle_types=("bayes", "logistic"))
    job = run_and_wait(window, view.run)
    assert job.state == JobState.DONE, job.error
    res = view.result
    assert len(res["classifiers"]) == 6
    assert [view.point_count(t) for t in ("cit_p", "wgcm_p", "dp_p", "eo_p")] == [6, 6, 6, 6]
    summary = view.summary_view.frame()
    linear = summary[(summary["dataset"] == "linear") & (summary["variant"] == "paper")]
    assert len(linear) == 4 and "Spearman ρ (log p, ECA)" in summary.columns
    rho = {r["test"]: r["Spearman ρ (log p, ECA)"] for _, r in linear.iterrows()}
    expected = next(s for s in res["summary"] if s["dataset"] == "linear")["spearman_eca"]["wgcm_p"]
    assert rho[res["tests"]["wgcm_p"]] == expected or (expected is None and pd.isna(rho[res["tests"]["wgcm_p"]]))
    panel.grab().save(str(tmp_path / "benchmark.png"))


def test_image_model_panel_import_classifiers(window, project_path, audit_project, run_and_wait, qtbot, tmp_path):
    """A FairDesk classifier folder and a TorchScript file are imported as jobs; a bad file fails clearly."""
    import torch

    from fairdesk.core.project import Project
    from fairdesk.gui.tabs.image_model import ImageModelPanel

    window.open_project(project_path, create=True)
    panel = ImageModelPanel(window)
    qtbot.addWidget(panel)
    folder = Path(audit_project[0]).parent / "clf"
    panel.import_path.setText(str(folder))
    job = run_and_wait(window, panel.import_classifier)
    assert job.state == JobState.DONE, job.error
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16 * 16, 2))
    ts = tmp_path / "model.pt"
    torch.jit.trace(net.eval(), torch.zeros(1, 1, 16, 16)).save(str(ts))
    panel.import_path.setText(str(ts))
    panel.import_size.setValue(16)
    panel.import_outputs.setText("effusion, edema")
    job = run_and_wait(window, panel.import_classifier)
    assert job.state == JobState.DONE, job.error
    models = [m for m in Project(project_path).models() if m.kind == "image_classifier"]
    assert [m.info["outputs"] for m in models] == [["disease"], ["effusion", "edema"]]
    assert [m.info["format"] for m in models] == ["safetensors", "torchscript"]
    assert panel.models_view.frame()["outputs / attribute"].tolist() == ["disease", "effusion, edema"]
    bad = tmp_path / "notes.pt"
    bad.write_text("not a model")
    panel.import_path.setText(str(bad))
    job = run_and_wait(window, panel.import_classifier)
    assert job.state == JobState.FAILED and "TorchScript" in panel.status.text()
    assert len([m for m in Project(project_path).models()]) == 2


def test_mine_phase_has_its_own_curve_between_the_two_losses(window, qtbot, tmp_path):
    """With the MINE map, the worker reports a 'disentangling' phase (the DV estimate): drawn as its own curve, and a
    resumed run shows autoencoder, MINE and diffusion histories one after another."""
    import json

    from fairdesk.gui.tabs.image_model import ImageModelPanel, LiveFeed

    panel = ImageModelPanel(window)
    qtbot.addWidget(panel)
    panel._reset_curves(None)
    panel.feed = LiveFeed()
    for step, (phase, loss) in enumerate([("autoencoder", 0.5), ("disentangling", 0.6), ("disentangling", 0.2),
                                          ("diffusion", 0.9)], start=1):
        panel.feed.metrics({"phase": phase, "step": step, "loss": loss})
    panel.drain()
    assert panel.losses["disentangling"] == ([2, 3], [0.6, 0.2])
    assert len(panel.curves["disentangling"].getData()[0]) == 2
    (tmp_path / "fairdesk_generator.json").write_text(json.dumps(
        {"vae_loss": [0.5, 0.4], "mine_dv": [0.6, 0.3, 0.1], "unet_loss": [0.9]}))
    panel._reset_curves(tmp_path)
    assert [panel.losses[p][0] for p in ("autoencoder", "disentangling", "diffusion")] == [[1, 2], [3, 4, 5], [6]]


def test_validity_view(window, run_and_wait, qtbot, tmp_path):
    """The Validity page runs the cit family's simulations as a job and shows each row with its interval and
    a sentence saying what it means."""
    from fairdesk.gui.tabs.image_audit import ImageAuditPanel

    panel = ImageAuditPanel(window)
    qtbot.addWidget(panel)
    panel.resize(1300, 760)
    panel.show()
    panel.show_page("validity")
    assert not panel.setup_panel.isVisible()
    view = panel.validity
    view.family_combo.setCurrentIndex(view.family_combo.findData("cit"))
    view.runs_spin.setValue(1)  # one small run per design: the page is under test here, the statistics elsewhere
    view.n_spin.setValue(200)
    job = run_and_wait(window, view.run)
    assert job.state == JobState.DONE, job.error
    frame = view.table_view.frame()
    # with the sign-changing design and the invariant designs' exact-nuisance row
    assert len(frame) == 11 and set(frame["null / planted"]) == {"null", "planted"}
    assert list(frame["runs"]) == [1] * 11
    text = view.explain.toPlainText()
    assert "What each row means" in text and text.count("cit · null") == 6
    assert view.run_button.isEnabled() and not view.cancel_button.isEnabled()
    panel.grab().save(str(tmp_path / "validity.png"))


def test_opening_a_project_refreshes_the_page_in_front_at_once_and_the_others_later(window, image_project,
                                                                                     monkeypatch):
    """Opening a project refreshes only the page on screen in that turn of the event loop; every other page is
    refreshed in a later turn, or at once when brought to the front; the image pages read their tables in the view
    runner, never on the Qt thread; wait_view waits for all of it."""
    import threading

    from fairdesk.gui.main_window import MainWindow
    from fairdesk.gui.tabs import image_data
    from layout_walk import wait_views

    project_path, dataset_id = image_project
    readers: list[str] = []
    read = image_data.stored_table

    def stored_table(project, ds_id):
        readers.append(threading.current_thread().name)
        return read(project, ds_id)

    monkeypatch.setattr(image_data, "stored_table", stored_table)
    image_data._TABLES.clear()
    window.show_page(window.image_data_panel)
    MainWindow.open_project(window, project_path)  # the method itself (the fixture's wrapper waits for the views)
    assert window.image_data_panel.dataset_combo.currentData() == dataset_id  # in front: refreshed at once
    assert window.image_model_panel.dataset_combo.count() == 0  # hidden: not yet
    assert window.image_audit_panel.dataset_combo.count() == 0 and window.refreshing
    window.show_page(window.image_model_panel)  # brought to the front: refreshed at once, its table read later
    assert window.image_model_panel.dataset_combo.currentData() == dataset_id
    assert window.image_model_panel.labels_list.items() == [] and window.refreshing
    wait_views(window)
    assert not window.refreshing and window.image_audit_panel.dataset_combo.currentData() == dataset_id
    assert "disease" in window.image_model_panel.labels_list.items()
    assert window.image_audit_panel.attribute_combo.findData("attribute") >= 0
    assert readers and threading.current_thread().name not in readers


def test_the_image_data_page_opens_its_dataset_only_when_shown(window, image_project, qtbot):
    """Opening a project behind another page does not open the image dataset (a job resolving every file, then 240
    thumbnails read in a thread, then tables filled on the Qt thread); bringing the page to the front does."""
    project_path, dataset_id = image_project
    panel = window.image_data_panel
    window.show_page(window.audit_tab)
    jobs: list[str] = []
    window.runner.started.connect(lambda job: jobs.append(job.name))
    window.open_project(project_path)  # waits for every page's refresh and read
    assert panel.dataset_combo.currentData() == dataset_id  # the page's choices are refreshed
    assert panel.dataset is None and panel.thumbnails.count() == 0
    assert not any(title.startswith("Open image dataset") for title in jobs)
    window.show_page(panel)
    qtbot.waitUntil(lambda: panel.dataset is not None, timeout=30000)
    assert len(panel.dataset) == 119 and panel.thumbnails.count() == 119
    qtbot.waitUntil(lambda: not panel.thumbnails.loading, timeout=20000)
