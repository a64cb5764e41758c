"""Jobs of the age-independent learners (METHODS §2–3): train and compare them, store the result.

:func:`train_age_independent` runs :func:`fairdesk.core.audits.age_independence.run_age_independence` on a features
table (a stored dataset or a CSV/Parquet file) and stores, in ONE project transaction:

* the input table as a ``"features"`` dataset (when it came from a file);
* the audit document (kind ``"age_independence"``; ``{"methods", "settings", "provenance"}``, JSON with
  ``allow_nan=False``) — the document ``fairdesk-cli train age-independent --json`` writes byte for byte;
* the out-of-fold predictions of every method as a ``"predictions"`` dataset with column roles (label, score,
  ``task`` = method — "method r2" etc. when R > 1 repeats —, the attribute as a continuous attribute, the
  participant id as patient id), so the group audit (Δ_eo with bins, gaps by age band) runs on it directly;
* a model record (kind ``"age_independent"``) holding the per-fold model hashes, linking the features, the
  predictions and the audit (:func:`predictions_dataset_of` finds the predictions of an audit).

The stored predictions carry the contract's columns (``row, group_id, method, repeat, fold, label, attribute,
score, predicted``) plus ``task``; the ``attribute`` column is named after the input's attribute column (``age``)
so the group audit names it, unless that name is taken by another column of the table. :func:`predictions_csv_table`
gives the contract's long table back.

Optionally (``frontier_lambdas``) the accuracy–fairness frontier is added: per learner, accuracy, Δ^(2), Δ^(5) and
leakage at each λ on the same folds (the main run supplies the point at the run's λ), stored as
``methods[learner]["frontier"]``, so the document keeps its three top-level keys.

Cancel (``cancel.cancel()``) stops at the next fold, method or epoch; nothing is stored.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project

AUDIT_KIND = "age_independence"
MODEL_KIND = "age_independent"
FEATURES_KIND = "features"
PREDICTIONS_KIND = "predictions"


def train_age_independent(project_path: str | Path, dataset_id_or_csv: int | str | Path, label: str, attribute: str,
                          group_id: str, *, methods: tuple[str, ...] | None = None, folds: int = 5,
                          repeats: int = 1, lam: float | None = None, seed: int = 0, learner=None,
                          features: list[str] | None = None, reference: bool = True,
                          frontier_lambdas: tuple[float, ...] = (), name: str | None = None, test: str = "corrected",
                          leakage_target: float | None = None, lambda_grid: tuple[float, ...] | None = None,
                          select_body: bool | None = None, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                          executor=None) -> int:
    """Train and compare the baselines and learners by participant-disjoint CV; store everything. Returns the
    audit id. ``lam``: a fixed adversary strength λ; None (the default) chooses λ per learner and fold from
    ``lambda_grid`` by nested validation to reach ``leakage_target`` (the protocol's defaults when None).
    ``learner``: a :class:`~fairdesk.core.models.age_independent.LearnerSettings` (its λ is replaced by ``lam``);
    ``select_body``: also choose the learner's body (its own layers or the DNN's) with λ (None: the protocol's
    default); ``reference``: add fairlearn's AdversarialFairnessClassifier when fairlearn is installed; ``test``: the
    comparison against the DNN, "corrected" (Nadeau–Bengio corrected resampled t, default) or "plain" (the paired t, anti-conservative).
    ``executor``: an :class:`~fairdesk.core.executor.ExecutorSpec` for the method × fold fits (None: this process)."""
    from fairdesk.core.audits.age_independence import AgeProtocolSettings, run_age_independence
    from fairdesk.core.data.loaders import load_table, table_sha256
    from fairdesk.core.models.age_independent import METHODS, REFERENCE_METHOD, LearnerSettings

    rep = Reporter(progress, cancel)
    rep(0.0, "Reading the features table")
    if isinstance(dataset_id_or_csv, (str, Path)):
        table = load_table(dataset_id_or_csv)  # before the project is opened: a bad file creates nothing
        source_name, source_id = Path(dataset_id_or_csv).name, None
        project = Project(project_path)
    else:
        project = Project(project_path, create=False)
        info = project.dataset(int(dataset_id_or_csv))
        table = project.load_dataset(info.id)
        source_name, source_id = info.name, info.id
    learner = learner or LearnerSettings()
    if lam is not None:
        learner = replace(learner, lam=float(lam))
    choice = {k: v for k, v in (("leakage_target", leakage_target), ("lambda_grid", lambda_grid),
                                ("select_body", select_body)) if v is not None}
    settings = AgeProtocolSettings(methods=tuple(methods or METHODS), folds=folds, repeats=repeats, seed=seed,
                                   learner=learner, reference=reference, select_lambda=lam is None, test=test,
                                   **choice)
    lambdas = _frontier_lambdas(frontier_lambdas, settings)
    main_share = 0.9 if not lambdas else 0.9 / (1 + len(lambdas))
    result = run_age_independence(table, label, attribute, group_id, features, settings,
                                  progress=rep.sub(0.02, 0.02 + main_share), cancel=rep.cancel, executor=executor)
    doc = result.document
    doc["provenance"]["dataset"] = source_name
    doc["settings"]["fold_sizes"] = fold_sizes(result.predictions)
    if REFERENCE_METHOD in doc["methods"]:  # the external reference row: record the fairlearn that ran it
        from importlib.metadata import version

        doc["provenance"]["versions"]["fairlearn"] = version("fairlearn")
    if lambdas:
        _add_frontier(doc, table, label, attribute, group_id, features, settings, lambdas,
                      rep.sub(0.02 + main_share, 0.93))
    text = json.dumps(doc, indent=1, allow_nan=False)  # JSON-safe: a NaN anywhere fails here, before storing
    preds = stored_predictions(result.predictions, attribute, repeats)
    roles = predictions_roles(preds, attribute)
    rep(0.95, "Saving into the project")
    with project.transaction():  # the input, the document, the predictions and the model record: all or nothing
        if source_id is None:
            source_id = project.add_dataset(source_name, table, table_sha256(table), kind=FEATURES_KIND,
                                            source=str(Path(dataset_id_or_csv).resolve()))
        audit_id = project.add_audit(name or f"Age-independent learners: {attribute}", AUDIT_KIND, text,
                                     dataset_id=source_id)
        pred_id = project.add_dataset(f"Out-of-fold predictions (age-independent learners, audit {audit_id})",
                                      preds, table_sha256(preds), kind=PREDICTIONS_KIND, roles=roles,
                                      origin={"dataset_id": source_id, "audit_id": audit_id,
                                              "model_kind": MODEL_KIND})
        project.add_model(f"Age-independent learners on {source_name}", MODEL_KIND,
                          {"kind": MODEL_KIND, "audit_id": audit_id, "seed": seed,
                           "methods": doc["settings"]["methods_run"], "learner": learner.to_dict(),
                           "model_hashes": doc["provenance"]["model_hashes"]},
                          dataset_id=source_id, predictions_id=pred_id)
    rep(1.0, "Stored")
    return audit_id


def _frontier_lambdas(values, settings) -> tuple[float, ...]:
    from fairdesk.core.errors import DataError
    from fairdesk.core.models.age_independent import LEARNERS

    values = tuple(sorted({float(v) for v in values or ()}))
    if any(v < 0 for v in values):
        raise DataError("Give the frontier's adversary strengths λ as numbers ≥ 0.")
    if values and not any(m in LEARNERS for m in settings.methods):
        raise DataError("The frontier varies λ, which only the learners have: add a learner to the methods.")
    return values


def _add_frontier(doc: dict, table, label, attribute, group_id, features, settings, lambdas, rep: Reporter) -> None:
    """Per learner, one point per λ (the main run's numbers at its own fixed λ, re-runs on the same folds
    elsewhere; with λ chosen per fold the main run is no point of the sweep and every λ is re-run)."""
    from fairdesk.core.audits.age_independence import accuracy_fairness_frontier
    from fairdesk.core.models.age_independent import LEARNERS

    learners = tuple(m for m in settings.methods if m in LEARNERS)
    lam = None if settings.select_lambda else settings.learner.lam
    others = tuple(v for v in lambdas if v != lam)
    points = []
    if others:
        points = [p for p in accuracy_fairness_frontier(table, label, attribute, group_id, features, learners,
                                                        others, settings, progress=rep, cancel=rep.cancel)
                  if p["lambda"] is not None]  # the DNN point is the main run's dnn row
    for m in learners:
        e = doc["methods"][m]
        leak = e.get("leakage") or {}
        own = {"method": m, "lambda": lam, "accuracy": e["accuracy"]["mean"], "accuracy_std": e["accuracy"]["std"],
               "delta_eo_5": e["delta_eo_5"]["mean"], "delta_eo_5_std": e["delta_eo_5"]["std"],
               "delta_eo_2": e["delta_eo_2"]["mean"], "leakage_r2": leak.get("r2"),
               "leakage_r2_beyond_label": (leak.get("beyond_label") or {}).get("r2"),
               "leakage_mae": leak.get("mae"), "leakage_auroc": leak.get("auroc")}
        mine = [p for p in points if p["method"] == m] + ([own] if lam is not None else [])
        e["frontier"] = sorted(({k: v for k, v in p.items() if k != "method"} for p in mine),
                               key=lambda p: p["lambda"])
    doc["settings"]["frontier_lambdas"] = sorted(set(lambdas) | ({lam} if lam is not None else set()))


def fold_sizes(predictions) -> list[dict]:
    """Held-out rows, participants and label-1 rows per (repeat, fold) (every method uses the same folds); the
    report prints them with small-cell suppression."""
    first = predictions[predictions["method"] == predictions["method"].iloc[0]]
    out = []
    for (r, f), g in first.groupby(["repeat", "fold"], sort=True):
        out.append({"repeat": int(r), "fold": int(f), "rows": int(len(g)),
                    "participants": int(g["group_id"].nunique()), "positives": int(g["label"].sum())})
    return out


# --------------------------------------------------------------------------------------------------------------
# The predictions dataset


def _attribute_column(attribute: str) -> str:
    from fairdesk.core.audits.age_independence import PREDICTION_COLUMNS

    return "attribute" if attribute in PREDICTION_COLUMNS or attribute == "task" else attribute


def stored_predictions(predictions, attribute: str, repeats: int):
    """The contract's long table as stored: plus ``task`` (method, or "method rN" with repeats), the attribute
    column named after the input's attribute when that name is free."""
    preds = predictions.copy()
    preds["task"] = (preds["method"] if repeats == 1
                     else preds["method"] + " r" + (preds["repeat"] + 1).astype(str))
    return preds.rename(columns={"attribute": _attribute_column(attribute)})


def predictions_roles(preds, attribute: str) -> dict:
    """Column roles of the stored predictions (the group audit reads them)."""
    from fairdesk.core.data.schema import ColumnRoles

    return ColumnRoles(label="label", score="score", task="task",
                       continuous_attributes=(_attribute_column(attribute),), patient_id="group_id").to_dict()


def predictions_dataset_of(project_path: str | Path, audit_id: int) -> int:
    """The id of the predictions dataset an age-independence audit stored."""
    from fairdesk.core.errors import ProjectError

    project = Project(project_path, create=False)
    for model in project.models():
        if model.kind == MODEL_KIND and model.info.get("audit_id") == audit_id and model.predictions_id is not None:
            return model.predictions_id
    raise ProjectError(f"Audit {audit_id} in {project.name} has no stored predictions of the age-independent "
                       "learners.")


def predictions_csv_table(project_path: str | Path, audit_id: int):
    """The contract's long predictions table (``--predictions``) of a stored audit, read back from the project."""
    from fairdesk.core.audits.age_independence import PREDICTION_COLUMNS

    project = Project(project_path, create=False)
    doc = project.audit_document(audit_id)
    preds = project.load_dataset(predictions_dataset_of(project_path, audit_id))
    preds = preds.rename(columns={_attribute_column(doc["settings"]["attribute"]): "attribute"})
    return preds[list(PREDICTION_COLUMNS)]
