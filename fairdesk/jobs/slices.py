"""The job of the slice audit: run a slice search with confirmation on a stored predictions dataset and
store the result. The GUI's Slices page and ``fairdesk-cli audit slices`` both call :func:`audit_slices`."""
from __future__ import annotations

from pathlib import Path

from fairdesk.core.progress import CancelToken, ProgressFn
from fairdesk.core.project import Project


def audit_slices(project_path: str | Path, dataset_id: int, plan, *, name: str | None = None,
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Run the slice audit (:func:`fairdesk.core.audits.slices.run_slice_audit`) on a stored dataset and store the
    document (kind ``slices``). Returns the audit id."""
    from fairdesk.core.audits.rates import two_valued_scores_warning
    from fairdesk.core.audits.slices import run_slice_audit
    from fairdesk.jobs.groups import model_hashes_for

    project = Project(project_path)
    info = project.dataset(dataset_id)
    df = project.load_dataset(dataset_id)
    result = run_slice_audit(df, plan, progress, cancel, data_sha256=info.sha256,
                             model_hashes=model_hashes_for(project, dataset_id))
    result.provenance["dataset"] = info.name
    two_valued = two_valued_scores_warning(df[plan.roles.score])
    if two_valued:  # 0/1 predictions passed as scores: the document says so
        result.warnings.append(two_valued)
    attrs = ", ".join(list(plan.roles.attributes) + list(plan.roles.continuous_attributes))
    return project.add_audit(name or f"Slices ({plan.metric}): {attrs}", "slices", result.to_json(),
                             dataset_id=dataset_id)
