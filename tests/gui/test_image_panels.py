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
    from fairdesk.jobs.image_tasks import import_image_dataset

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
    assert "step 7" in panel.preview_box.title()
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
