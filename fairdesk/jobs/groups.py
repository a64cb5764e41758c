"""Jobs of the group-gap family: train the tabular baselines, run and store a group audit (a table comes in
through :func:`fairdesk.core.data.tables.import_table`).

Each job is ``f(inputs..., progress, cancel) -> result``; the GUI and the CLI both call these.

Heavy modules are imported inside the functions, so they load in the worker thread, never in the Qt thread.
"""
from __future__ import annotations

from pathlib import Path

from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project


def train(project_path: str | Path, dataset_id: int, spec, *, progress: ProgressFn | None = None,
          cancel: CancelToken | None = None) -> tuple[int, int]:
    """Train baseline classifiers on a features dataset; store the model record and its predictions.

    Returns ``(model_id, predictions_dataset_id)``. Nothing is stored when training fails or is cancelled.
    """
    from fairdesk.core.data.loaders import table_sha256
    from fairdesk.core.models.tabular import train_and_predict

    project = Project(project_path)
    rep = Reporter(progress, cancel)
    df = project.load_dataset(dataset_id)
    result = train_and_predict(df, spec, progress=rep.sub(0.0, 0.95), cancel=rep.cancel)
    rep(0.97, "Saving predictions")
    preds = result.predictions
    source = project.dataset(dataset_id)
    carried = list(spec.passthrough or ())
    continuous = [c for c in carried if _is_continuous(preds[c])]
    roles = ColumnRoles(label="label", score="score", task="task",
                        attributes=tuple(c for c in carried if c not in continuous),
                        continuous_attributes=tuple(continuous), patient_id=spec.patient_id, split="split")
    name = f"{result.kind} predictions on {source.name}"
    info = {"kind": result.kind, "seed": result.seed, "params": result.params, "device": result.device,
            "model_hashes": result.model_hashes, "metrics": result.metrics.to_dict(orient="records"),
            "features": list(spec.features)}
    with project.transaction():  # predictions and their model record together or not at all
        pred_id = project.add_dataset(name, preds, table_sha256(preds), kind="predictions", roles=roles.to_dict(),
                                      origin={"dataset_id": dataset_id, "model_kind": result.kind})
        model_id = project.add_model(result.kind, result.kind, info, dataset_id=dataset_id, predictions_id=pred_id)
    return model_id, pred_id


def _is_continuous(values) -> bool:
    """Numeric with many distinct values (age, a score): audited by error spread, not as groups."""
    import pandas as pd

    return pd.api.types.is_numeric_dtype(values) and values.nunique() > 12


def model_hashes_for(project: Project, dataset_id: int) -> dict[str, str]:
    """Hashes of the model that wrote a predictions dataset (empty for imported predictions)."""
    for model in project.models():
        if model.predictions_id == dataset_id:
            return {f"{model.kind}:{task}": h for task, h in model.info.get("model_hashes", {}).items()}
    return {}


def audit_groups(project_path: str | Path, dataset_id: int, plan, *, name: str | None = None,
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None, executor=None) -> int:
    """Run the group audit on a stored dataset and store the result. Returns the audit id. ``executor``: an
    :class:`~fairdesk.core.executor.ExecutorSpec` (None: this process); nothing is stored on cancel or failure."""
    from fairdesk.core.audits.groups import run_group_audit
    from fairdesk.core.audits.rates import two_valued_scores_warning

    project = Project(project_path)
    info = project.dataset(dataset_id)
    df = project.load_dataset(dataset_id)
    result = run_group_audit(df, plan, progress, cancel, data_sha256=info.sha256,
                             model_hashes=model_hashes_for(project, dataset_id), executor=executor)
    result.provenance["dataset"] = info.name
    two_valued = two_valued_scores_warning(df[plan.roles.score])
    if two_valued:  # 0/1 predictions passed as scores: the document (and so every report and screen) says so
        result.warnings.append(two_valued)
    attrs = ", ".join(list(plan.roles.attributes) + list(plan.roles.continuous_attributes))
    # the values, not their text: the project writes the text from them and checks them without parsing it again
    return project.add_audit(name or f"Group gaps: {attrs}", "groups", result.to_dict(), dataset_id=dataset_id)
