"""The one report route: the report of a stored audit of any kind, through its row in :mod:`fairdesk.core.kinds`.

The GUI's export buttons, ``fairdesk-cli report`` and every audit command's ``--pdf`` and ``--html`` call
:func:`export_report` (PDF) and :func:`export_html` (HTML), so the same audit gives the same bytes whichever front
end asks.
"""
from __future__ import annotations

import json
from pathlib import Path

from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project


def export_report(project_path: str | Path, audit_id: int, pdf_path: str | Path, *, suppress_k: int = 11,
                  progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> Path:
    """Write the PDF report of a stored audit of any kind (the same bytes whichever front end asks)."""
    from fairdesk.core.kinds import build_report

    return _export(build_report, "The report file", project_path, audit_id, pdf_path, suppress_k, progress, cancel)


def export_html(project_path: str | Path, audit_id: int, html_path: str | Path, *, suppress_k: int = 11,
                progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> Path:
    """Write the self-contained HTML report of a stored audit of any kind: the PDF's report tree, the same route."""
    from fairdesk.core.kinds import build_html

    return _export(build_html, "The HTML report", project_path, audit_id, html_path, suppress_k, progress, cancel)


def _export(build, what: str, project_path, audit_id: int, out_path, suppress_k: int, progress, cancel) -> Path:
    from fairdesk.core.guard import guard_outputs
    from fairdesk.core.kinds import ReportSettings

    settings = ReportSettings(suppress_k=suppress_k)
    guard_outputs([(what, out_path)], project=("the project", project_path))  # never over the project
    rep = Reporter(progress, cancel)
    rep(0.0, "Loading the audit")
    project = Project(project_path, create=False)
    kind = project.audit_kind(audit_id)
    doc = project.audit_document(audit_id)
    rep(0.1, "Drawing figures and tables")
    try:
        path = build(kind, doc, out_path, settings)
    except DataError as err:  # a document whose parts do not fit together: say which audit
        raise DataError(f"Audit {audit_id} of project {project.name} cannot be reported: {err}") from err
    rep(1.0, "Report written")
    return path


def export_model_card(project_path: str | Path, audit_id: int, out_json: str | Path, *, intended_use: str | None,
                      limitations: list[str] | tuple[str, ...] = (), suppress_k: int = 11,
                      out_markdown: str | Path | None = None, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None) -> Path:
    """Write the model card (fairness and equity part) of a stored audit as JSON, and as Markdown when
    ``out_markdown`` is given. Both are built and validated before either is written; each write is atomic. The
    GUI's "Export model card…" button and ``fairdesk-cli report model-card`` call this."""
    from fairdesk.core import atomic
    from fairdesk.core.guard import guard_outputs
    from fairdesk.core.model_card import card_markdown, model_card

    guard_outputs([("The model card", out_json), ("The Markdown card", out_markdown)],
                  project=("the project", project_path))  # never over the project
    rep = Reporter(progress, cancel)
    rep(0.0, "Loading the audit")
    project = Project(project_path, create=False)
    try:
        card = model_card(project, audit_id, intended_use=intended_use, limitations=limitations,
                          suppress_k=suppress_k)
    except DataError as err:  # a document whose parts do not fit together: say which audit
        if str(err).startswith(f"Audit {audit_id} "):
            raise
        raise DataError(f"Audit {audit_id} of project {project.name}: no model card: {err}") from err
    text = json.dumps(card, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    markdown = card_markdown(card) if out_markdown else None
    rep(0.8, "Writing the card")
    path = atomic.write_text(Path(out_json), text)
    if markdown is not None:
        atomic.write_text(Path(out_markdown), markdown)
    rep(1.0, "Model card written")
    return path
