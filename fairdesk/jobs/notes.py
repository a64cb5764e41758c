"""Job functions for note-level classifiers on frozen clinical-BERT features.

``f(inputs..., progress, cancel) -> result``, run by the GUI's worker thread and by the CLI alike. Everything is
computed before anything is stored, and nothing checks for cancellation between the writes, so a cancelled or
failed job leaves the project as it was. Heavy modules load inside the functions.
"""
from __future__ import annotations

import json
from pathlib import Path

from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project


def load_notes(project: Project, notes_path_or_dataset) -> tuple["object", str, str, int | None]:
    """``(table, sha256, name, dataset_id)`` of a notes table given as a file path or a project dataset id."""
    from fairdesk.core.data.loaders import file_sha256, load_table

    if isinstance(notes_path_or_dataset, int) and not isinstance(notes_path_or_dataset, bool):
        info = project.dataset(notes_path_or_dataset)
        return project.load_dataset(info.id), info.sha256, info.name, info.id
    path = Path(notes_path_or_dataset)
    return load_table(path), file_sha256(path), path.name, None


def train_note_classifiers(project_path: str | Path, notes_path_or_dataset, encoder_dir: str | Path, spec, *,
                           progress: ProgressFn | None = None,
                           cancel: CancelToken | None = None) -> tuple[int, int]:
    """Train one note classifier per task on the frozen encoder's features; store the predictions (a predictions
    dataset with column roles, ready for the group audit) and the model record. Returns
    ``(model_id, predictions_dataset_id)``."""
    from fairdesk.core.data.loaders import table_sha256
    from fairdesk.core.models import note_classifier as nc

    rep = Reporter(progress, cancel)
    project = Project(project_path)
    rep(0.0, "Reading the notes")
    notes, sha, name, dataset_id = load_notes(project, notes_path_or_dataset)
    result = nc.train_note_classifiers(notes, encoder_dir, spec, data_sha256=sha, progress=rep.sub(0.02, 0.98),
                                       cancel=rep.cancel)
    rep(0.99, "Saving the predictions")
    # no cancellation checks from here on: both records are written or the job failed before either
    preds = result.predictions
    roles = nc.prediction_roles(spec)
    encoder_name = Path(encoder_dir).name or str(encoder_dir)
    origin = {"notes": name, "notes_sha256": sha, "model_kind": nc.MODEL_KIND, "encoder": str(encoder_dir),
              "encoder_fingerprint": result.encoder.get("fingerprint")}
    if dataset_id is not None:
        origin["dataset_id"] = dataset_id
    info = result.to_dict()
    with project.transaction():
        pred_id = project.add_dataset(f"Note classifiers ({encoder_name}) on {name}", preds, table_sha256(preds),
                                      kind="predictions", source=None if dataset_id is not None else str(
                                          Path(notes_path_or_dataset).resolve()),
                                      roles=roles.to_dict(), origin=origin)
        model_id = project.add_model(f"Note MLP on {encoder_name}", nc.MODEL_KIND, info, dataset_id=dataset_id,
                                     predictions_id=pred_id)
    return model_id, pred_id


def compare_encoders_job(project_path: str | Path, notes_path_or_dataset, encoders: dict[str, str | Path], tasks,
                         attribute: str, spec=None, *, n_boot: int = 200, min_group_size: int = 30,
                         name: str | None = None, progress: ProgressFn | None = None,
                         cancel: CancelToken | None = None) -> int:
    """Baseline vs debiased (or any) encoders: classifiers, group-gap counts and attribute probe per encoder,
    stored as one audit of kind ``note_classifiers``. Returns the audit id."""
    from fairdesk.core.audits.encoders import compare_encoders

    if not encoders:
        raise DataError("Give at least one encoder to compare.")
    rep = Reporter(progress, cancel)
    project = Project(project_path)
    rep(0.0, "Reading the notes")
    notes, sha, notes_name, dataset_id = load_notes(project, notes_path_or_dataset)
    doc = compare_encoders(notes, encoders, tasks, attribute, spec, n_boot=n_boot, min_group_size=min_group_size,
                           data_sha256=sha, progress=rep.sub(0.02, 0.99), cancel=rep.cancel)
    doc["provenance"]["dataset"] = notes_name
    from fairdesk.core.models.training_record import training_record

    trained = {f"encoder {enc}": rec for enc, folder in encoders.items() if isinstance(folder, (str, Path))
               and (rec := training_record(folder, (doc["encoders"].get(enc) or {}).get("fingerprint")))}
    if trained:  # encoders FairDesk trained (train mlm): their training records, for the model card
        doc["provenance"]["training"] = trained
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)
    return project.add_audit(name or f"Encoders {' vs '.join(encoders)}: {attribute}", "note_classifiers", text,
                             dataset_id=dataset_id)
