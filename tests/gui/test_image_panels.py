"""Image pages of the Dataset, Model and Audit tabs: import → train → audit → results, through real jobs."""
from __future__ import annotations

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
