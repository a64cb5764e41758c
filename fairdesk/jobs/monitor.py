"""The job of the fairness monitor (audit kind ``monitor``): add a table of predictions with a period column to the
project's stream for the same plan, and store the monitor's document over every period stored. The GUI's Monitor
page and ``fairdesk-cli monitor`` both call :func:`watch_model`."""
from __future__ import annotations

from pathlib import Path

from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project


def previous_stream(project: Project, plan) -> tuple[int | None, int | None]:
    """(audit id, dataset id) of the latest monitor audit of the project with the same plan (the stream this call
    continues); (None, None) when there is none."""
    key = plan.stream_key()
    for info in reversed(project.audits()):
        if info.kind != "monitor" or info.dataset_id is None:
            continue
        doc = project.audit_document(info.id)
        if doc.get("plan") == key:
            return info.id, info.dataset_id
    return None, None


def watch_model(project_path: str | Path, dataset_id: int, plan, *, name: str | None = None,
                progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Merge dataset ``dataset_id`` (new periods, or late labels of stored ones) into the project's stream of
    ``plan`` (:func:`fairdesk.core.audits.monitor.merge_stream`; a stored period given with other rows is refused
    and nothing is stored), run :func:`~fairdesk.core.audits.monitor.run_monitor` over the whole stream and store
    the document (kind ``monitor``) on the stream's dataset. Returns the audit id."""
    from fairdesk.core.audits.monitor import merge_stream, prepare_stream, run_monitor
    from fairdesk.core.data.loaders import table_sha256

    rep = Reporter(progress, cancel)
    project = Project(project_path)
    info = project.dataset(dataset_id)
    rep(0.0, "Reading the new periods")
    new = prepare_stream(project.load_dataset(dataset_id), plan)
    prev_audit, prev_dataset = previous_stream(project, plan)
    stored = project.load_dataset(prev_dataset) if prev_dataset is not None else None
    stream, what = merge_stream(stored, new, plan)
    sha = table_sha256(stream)
    stream_info = {**what, "continues_audit": prev_audit, "periods": int(stream[plan.period].nunique()),
                   "rows": int(len(stream))}
    result = run_monitor(stream, plan, rep.sub(0.05, 0.95), rep.cancel, data_sha256=sha, stream_info=stream_info)
    result.provenance["dataset"] = info.name
    attrs = ", ".join(plan.attributes)
    title = name or f"Monitor ({', '.join(plan.metrics)}): {attrs} by {plan.period}"
    rep(0.97, "Saving")
    with project.transaction():
        target = dataset_id
        if prev_dataset is not None:  # the stream so far, as one dataset beside its audit
            target = project.add_dataset(f"{info.name} (monitor stream, {stream_info['periods']} periods)", stream,
                                         sha, kind="predictions", source=info.source)
        return project.add_audit(title, "monitor", result.to_json(), dataset_id=target)
