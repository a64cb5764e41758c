"""The encoder comparison (001 §4.1, Table 5 and Table D4): audit kind ``"note_classifiers"``.

:func:`compare_encoders` trains the note classifiers of :mod:`fairdesk.core.models.note_classifier` on each
encoder's frozen features (e.g. a baseline and a debiased clinical BERT), audits every encoder's predictions for
group gaps (:func:`fairdesk.core.audits.groups.run_group_audit`: BH-corrected significant-gap counts, 001 Table 5)
and probes how well the protected attribute can be recovered from the note features (001 Table D4), returning one
JSON document (:func:`note_classifiers_document`), which the project stores and the kind's report renders.

torch, transformers and sklearn are imported inside functions only.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fairdesk.core.errors import DataError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.models.note_classifier import (DEFAULT_C, EncodedNotes, NoteClassifierResult,
                                                  NoteClassifierSpec, prediction_roles, train_note_classifiers)
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter


# ==============================================================================================================
# Baseline vs debiased encoder (001 Table 5 and Table D4)


def probe_attribute(encoded: EncodedNotes, notes: pd.DataFrame, attribute: str, patient_id: str | None,
                    seed: int = 0) -> dict[str, Any]:
    """How well a cross-validated logistic regression recovers ``attribute`` from the notes' [CLS] features
    (mean over a note's windows, numeric columns not included). One note per patient (drawn with ``seed``), so
    that notes of one patient never sit on both sides of a fold."""
    from fairdesk.core.models.mlm import attribute_probe

    df = notes.reset_index(drop=True)
    keep = ~df[attribute].isna().to_numpy()
    if patient_id:  # one note per patient, drawn with the seed
        order = np.random.default_rng(seed).permutation(len(df))
        first = ~df[patient_id].astype(str).iloc[order].duplicated().to_numpy()
        one = np.zeros(len(df), dtype=bool)
        one[order[first]] = True
        keep &= one
    labels = df.loc[keep, attribute].astype(str).to_numpy()
    counts = pd.Series(labels).value_counts()
    if len(counts) < 2:
        raise DataError(f"The attribute '{attribute}' has fewer than two groups among the notes; nothing to probe.")
    n_folds = int(min(5, counts.min()))
    if n_folds < 2:
        raise DataError(f"The attribute '{attribute}' has a group with a single patient ({counts.idxmin()}); the "
                        "probe needs at least two per group.")
    out = attribute_probe(encoded.note_means()[keep], labels, n_folds=n_folds, seed=seed)
    out.update({"attribute": attribute, "n_folds": n_folds, "unit": "one note per patient" if patient_id else "note",
                "model": "standardised logistic regression, stratified K-fold"})
    return out


def note_classifiers_document(results: dict[str, NoteClassifierResult], *, attribute: str | None = None,
                              audits: dict[str, Any] | None = None, probes: dict[str, dict] | None = None,
                              n_boot: int | None = None, elapsed_seconds: float | None = None) -> dict:
    """The JSON document (kind ``note_classifiers``) of one or several encoders' classifiers, their group audits
    (``GroupAuditResult`` per encoder) and attribute probes. What the report renders and the project stores."""
    from fairdesk.core import provenance as prov

    first = next(iter(results.values()))
    spec = first.spec
    rows, gaps = [], []
    for name, res in results.items():
        for m in res.metrics:
            rows.append({"encoder": name, **{k: v for k, v in m.items() if k not in ("c_curve", "mlp_grid")}})
    for name, audit in (audits or {}).items():
        summary = audit.summary
        if attribute is not None:
            summary = summary[summary["attribute"] == attribute]
        for r in summary.to_dict(orient="records"):
            gaps.append({"encoder": name, **r})
    doc = {
        "kind": "note_classifiers", "version": 1,
        "method": {
            "windows": {"max_length": first.encoder.get("max_length"), "stride": first.encoder.get("stride"),
                        "max_windows": spec.max_windows},
            "features": f"concatenated [CLS] vectors of the last {first.encoder.get('layers_concatenated')} layers "
                        "of the frozen encoder" + (f" + {', '.join(spec.numeric_columns)}" if spec.numeric_columns
                                                   else "") + ", standardised on the training windows",
            "merge": "P = (max p + mean p · n/c) / (1 + n/c) over a note's n window probabilities (001 eq. 1)",
            "c_grid": [float(c) for c in spec.c_grid], "default_c": DEFAULT_C,
            "mlp_grid": jsonable(list(spec.mlp_grid)), "max_iter": spec.max_iter,
            "selection": "MLP configuration and c jointly by validation AUPRC of the merged note scores",
            "threshold": "best F1 on the validation notes",
            "split": {"val_size": spec.val_size, "test_size": spec.test_size,
                      "patient_disjoint": bool(spec.patient_id)},
            "n_boot": n_boot, "attribute": attribute,
        },
        "tasks": list(spec.resolved_tasks()),
        "encoders": {name: {**res.encoder, "split_sizes": res.split_sizes, "notes": res.notes,
                            "model_hashes": res.model_hashes, "train_seconds": round(res.elapsed_seconds, 3)}
                     for name, res in results.items()},
        "results": rows,
        "c_curves": {name: {m["task"]: m["c_curve"] for m in res.metrics} for name, res in results.items()},
        "mlp_grids": {name: {m["task"]: m["mlp_grid"] for m in res.metrics} for name, res in results.items()},
        "gaps": gaps,
        "probe": dict(probes or {}),
        "audits": {name: a.to_dict() for name, a in (audits or {}).items()},
        "spec": spec.to_dict(),
        "provenance": prov.make(spec.seed, first.data_sha256,
                                {f"{name}:encoder": r.encoder.get("fingerprint") for name, r in results.items()}
                                | {f"{name}:{t}": h for name, r in results.items() for t, h in r.model_hashes.items()},
                                elapsed_seconds=None if elapsed_seconds is None else round(elapsed_seconds, 3)),
    }
    doc["provenance"]["versions"] = dict(first.versions)
    return jsonable(doc)


def compare_encoders(notes: pd.DataFrame, encoders: dict[str, str | Path], tasks, attribute: str,
                     spec: NoteClassifierSpec | None = None, *, n_boot: int = 200, min_group_size: int = 30,
                     data_sha256: str | None = None, progress: ProgressFn | None = None,
                     cancel: CancelToken | None = None) -> dict:
    """Train note classifiers on each encoder's features (e.g. ``{"baseline": dir1, "debiased": dir2}``), audit
    their predictions for gaps across ``attribute`` (BH-corrected, ``n_boot`` replicates, best-F1 thresholds on
    the validation notes) and probe the features for the attribute. Returns the ``note_classifiers`` document."""
    from dataclasses import replace

    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit

    t0 = time.perf_counter()
    rep = Reporter(progress, cancel)
    if not encoders:
        raise DataError("Give at least one encoder folder to compare.")
    if isinstance(tasks, str):
        tasks = [t.strip() for t in tasks.split(",") if t.strip()]
    spec = replace(spec or NoteClassifierSpec(tasks=list(tasks)), tasks=tasks if isinstance(tasks, dict)
                   else list(tasks))
    if attribute not in spec.attributes:
        spec = replace(spec, attributes=list(spec.attributes) + [attribute])
    if attribute not in notes.columns:
        raise DataError(f"The attribute column '{attribute}' is not in the notes table.")
    results, audits, probes = {}, {}, {}
    k = len(encoders)
    for i, (name, path) in enumerate(encoders.items()):
        erep = rep.sub(i / k, (i + 1) / k)
        res = train_note_classifiers(notes, path, spec, data_sha256=data_sha256,
                                     progress=lambda f, m, n=name, r=erep: r(0.75 * f, f"{n}: {m}"),
                                     cancel=rep.cancel)
        erep(0.75, f"{name}: auditing group gaps")
        roles = replace(prediction_roles(spec), attributes=(attribute,), continuous_attributes=())
        plan = GroupAuditPlan(roles=roles, threshold="best_f1", n_boot=n_boot, seed=spec.seed,
                              min_group_size=min_group_size, bins=())
        audit = run_group_audit(res.predictions, plan, erep.sub(0.75, 0.95), erep.cancel,
                                data_sha256=res.data_sha256, model_hashes=res.model_hashes)
        erep(0.95, f"{name}: probing the features for {attribute}")
        probes[name] = probe_attribute(res.encoded, notes, attribute, spec.patient_id, seed=spec.seed)
        results[name], audits[name] = res, audit
    rep(1.0, "Comparison done")
    return note_classifiers_document(results, attribute=attribute, audits=audits, probes=probes, n_boot=n_boot,
                                     elapsed_seconds=time.perf_counter() - t0)
