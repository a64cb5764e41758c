"""Model tab: train baseline classifiers on a features dataset (as a job), or import predictions made elsewhere."""
from __future__ import annotations

import pandas as pd
from PySide6.QtWidgets import (QComboBox, QFormLayout, QGroupBox, QHBoxLayout, QPushButton, QSpinBox, QVBoxLayout,
                               QWidget)

from fairdesk.core.data.roles import SAMPLE_NAMES, guess_feature_roles, normalise
from fairdesk.gui.tabs.base import JobPage
from fairdesk.gui.tabs.dataset import FEATURES, NONE, PREDICTIONS
from fairdesk.gui.widgets.panel_parts import (note_label, push_button, run_row, scroll_area, setup_column, size_combos,
                                              split_page)
from fairdesk.gui.widgets.tables import CheckList, DataFrameView

# The model kinds of fairdesk.core.models.tabular (kept here so the window starts without importing it).
MODEL_KINDS = {
    "logistic_regression": "Logistic regression",
    "gradient_boosting": "Gradient boosting (histogram)",
    "random_forest": "Random forest",
    "mlp": "Neural network (MLP, torch; GPU when present)",
}


def _model_kinds() -> dict[str, str]:
    try:
        from fairdesk.core.models.tabular import MODEL_KINDS as kinds, MODEL_LABELS as labels
    except ImportError:  # pragma: no cover - the module is part of FairDesk
        return dict(MODEL_KINDS)
    return {k: MODEL_KINDS.get(k, labels.get(k, k)) for k in kinds}


class ModelTab(JobPage):
    """Model › Tabular: one job slot (the training job)."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self._columns: list[str] = []

        self.dataset_combo = QComboBox(self)
        self.dataset_combo.setPlaceholderText("Add a features table on the Dataset tab first")
        size_combos(self.dataset_combo, chars=16, on_change=self._dataset_changed)
        self.features_list = CheckList(self, max_visible_rows=7)
        self.labels_list = CheckList(self, max_visible_rows=5)
        self.carry_list = CheckList(self, max_visible_rows=5)
        self.patient_combo = QComboBox(self)
        self.kind_combo = QComboBox(self)
        for key, text in _model_kinds().items():
            self.kind_combo.addItem(text, key)
        self.seed_spin = QSpinBox(self)
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setValue(window.settings.seed)
        self.all_features = QPushButton("All", self)
        self.no_features = QPushButton("None", self)
        self.all_features.clicked.connect(lambda: self.features_list.set_checked(self.features_list.items()))
        self.no_features.clicked.connect(lambda: self.features_list.set_checked([]))
        for lst in (self.features_list, self.labels_list):
            lst.changed.connect(self.update_buttons)

        form_box = QGroupBox("Train baseline classifiers", self)
        form = QFormLayout(form_box)
        form.addRow("Features dataset", self.dataset_combo)
        # the model and its seed first: in view on a small screen, above the long column lists
        form.addRow("Model", self.kind_combo)
        form.addRow("Seed", self.seed_spin)
        feat_row = QWidget(form_box)
        fr = QVBoxLayout(feat_row)
        fr.setContentsMargins(0, 0, 0, 0)
        fr.addWidget(self.features_list)
        fb = QHBoxLayout()
        fb.addWidget(self.all_features)
        fb.addWidget(self.no_features)
        fb.addStretch(1)
        fr.addLayout(fb)
        form.addRow("Features", feat_row)
        form.addRow("Labels (one task each)", self.labels_list)
        form.addRow("Patient id\n(splits keep patients apart)", self.patient_combo)
        form.addRow("Carry over to predictions\n(protected attributes)", self.carry_list)
        self.device_note = note_label("Splits: 60% train, 15% validation, 25% test, patient-disjoint. The MLP runs "
                                      "on a GPU when one is present, else on the CPU.", self)
        form.addRow(self.device_note)

        self.train_button = push_button("Train", self, self.train)

        self.import_button = QPushButton("Import predictions made elsewhere…", self)
        self.import_button.setToolTip("Load a CSV/Parquet file with a label and a score column on the Dataset tab.")
        self.import_button.clicked.connect(self.import_predictions)

        left_inner = QWidget(self)
        ll = QVBoxLayout(left_inner)
        ll.addWidget(form_box)
        ll.addStretch(1)
        left = setup_column(self, scroll_area(self, left_inner),
                            run_row(self.train_button, self.cancel_button, progress=self.progress), self.status,
                            min_width=440)
        left.layout().addWidget(self.import_button)

        self.models_view = DataFrameView(self, placeholder="Trained models appear here, with validation and test "
                                                            "AUROC per task.")
        models_box = QGroupBox("Models in the project (AUROC / AUPRC per task)", self)
        ml = QVBoxLayout(models_box)
        ml.addWidget(self.models_view)
        split_page(self, left, models_box, [500, 800], stretch=(2, 3))
        window.refresh_on_project(self, self.refresh_project)
        self.update_buttons()

    @property
    def train_job(self):
        return self.job

    # ---- project -------------------------------------------------------------------------------------------
    def refresh_project(self) -> None:
        project = self.window_.project
        current = self.dataset_combo.currentData()
        self.dataset_combo.blockSignals(True)
        self.dataset_combo.clear()
        self._infos = {}
        if project is not None:
            for d in project.datasets():
                if d.kind == FEATURES:
                    self.dataset_combo.addItem(f"{d.name}  (#{d.id}, {d.n_rows:,} rows)", d.id)
                    self._infos[d.id] = d
        idx = self.dataset_combo.findData(current)
        self.dataset_combo.setCurrentIndex(idx if idx >= 0 else self.dataset_combo.count() - 1)
        self.dataset_combo.blockSignals(False)
        self._dataset_changed()
        self._refresh_models()

    def _refresh_models(self) -> None:
        project = self.window_.project
        rows = []
        if project is not None:
            names = {d.id: d.name for d in project.datasets()}
            for m in project.models():
                for r in m.info.get("metrics", []):
                    rows.append({"model": m.id, "task": r.get("task"),
                                 "val AUROC": r.get("val_auroc"), "test AUROC": r.get("test_auroc"),
                                 "val AUPRC": r.get("val_auprc"), "test AUPRC": r.get("test_auprc"),
                                 "prevalence": r.get("prevalence"), "kind": m.kind, "device": m.info.get("device"),
                                 "seed": m.info.get("seed"), "predictions": f"dataset #{m.predictions_id}",
                                 "trained on": names.get(m.dataset_id, m.dataset_id)})
        self.models_view.set_frame(pd.DataFrame(rows) if rows else None)

    def _dataset_changed(self, *args) -> None:
        info = getattr(self, "_infos", {}).get(self.dataset_combo.currentData())
        cols = list(info.columns) if info else []
        self._columns = cols
        guess = guess_feature_roles(cols)  # identifiers and protected attributes are never offered as labels
        feats, labels, patient = guess["features"], guess["labels"], guess["patient_id"]
        others, attrs = guess["others"], guess["attributes"]
        self.features_list.set_items(feats + [c for c in cols if c not in labels and c not in feats], feats)
        self.labels_list.set_items(guess["label_candidates"], labels)
        self.carry_list.set_items(others, attrs)
        self.patient_combo.clear()
        self.patient_combo.addItem(NONE, None)
        for c in cols:
            self.patient_combo.addItem(c, c)
        if patient:
            self.patient_combo.setCurrentIndex(self.patient_combo.findData(patient))
        self.update_buttons()

    def update_buttons(self, *args) -> None:
        super().update_buttons()
        ok = bool(self._columns) and bool(self.features_list.checked()) and bool(self.labels_list.checked())
        self.train_button.setEnabled(ok and not self.busy and self.window_.project is not None)

    # ---- training ------------------------------------------------------------------------------------------
    def spec(self):
        from fairdesk.core.models.tabular import TrainSpec

        patient = self.patient_combo.currentData()
        carry = [c for c in self.carry_list.checked() if c != patient]
        id_cols = [c for c in self._columns if normalise(c) in SAMPLE_NAMES and c != patient and c not in carry]
        labels = self.labels_list.checked()
        tasks = {(c[2:] if c.startswith("y_") and len(c) > 2 else c): c for c in labels}
        return TrainSpec(kind=self.kind_combo.currentData(), features=self.features_list.checked(), tasks=tasks,
                         patient_id=patient, id_columns=id_cols, passthrough=carry, seed=self.seed_spin.value(),
                         threads=self.window_.settings.threads, device="auto")

    def train(self):
        project = self.window_.require_project()
        dataset_id = self.dataset_combo.currentData()
        if project is None or dataset_id is None:
            return None
        spec = self.spec()
        if not spec.features or not spec.tasks:
            self.say("Choose at least one feature and one label column.", error=True)
            return None
        project_path = project.path
        kind_text = self.kind_combo.currentText()

        def work(progress, cancel):
            from fairdesk.jobs.groups import train

            return train(project_path, dataset_id, spec, progress=progress, cancel=cancel)

        def done(job) -> None:
            model_id, pred_id = job.result
            self.say(f"Trained {kind_text} (model #{model_id}); its predictions are dataset #{pred_id}, ready on the "
                     "Audit tab.")
            self.window_.notify_project_changed(self)

        return self.start_job(f"Train {kind_text}", work, running=f"Training {kind_text}…", on_done=done)

    def import_predictions(self) -> None:
        tab = self.window_.dataset_tab
        self.window_.show_page(tab)
        tab.kind_combo.setCurrentIndex(tab.kind_combo.findData(PREDICTIONS))
        tab.open_file()
