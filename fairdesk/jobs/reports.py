"""The one PDF route: the report of a stored audit of any kind, through its row in :mod:`fairdesk.core.kinds`.

The GUI's export button, ``fairdesk-cli report`` and every audit command's ``--pdf`` call :func:`export_report`, so
the same audit gives the same bytes whichever front end asks.
"""
from __future__ import annotations

import json
from pathlib import Path

from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project


def export_report(project_path: str | Path, audit_id: int, pdf_path: str | Path, *, suppress_k: int = 11,
                  progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> Path:
    """Write the PDF report of a stored audit of any kind (the same bytes whichever front end asks)."""
    from fairdesk.core.export import check_output_files, check_outputs
    from fairdesk.core.kinds import ReportSettings, build_report

    settings = ReportSettings(suppress_k=suppress_k)
    check_outputs([("The report file", pdf_path)], [("the project", project_path)])  # never over the project
    check_output_files([("The report file", pdf_path)])
    rep = Reporter(progress, cancel)
    rep(0.0, "Loading the audit")
    project = Project(project_path, create=False)
    kind = project.audit_kind(audit_id)
    doc = json.loads(project.audit_json(audit_id))
    rep(0.1, "Drawing figures and tables")
    path = build_report(kind, doc, pdf_path, settings)
    rep(1.0, "Report written")
    return path
