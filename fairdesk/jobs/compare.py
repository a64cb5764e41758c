"""The job of comparing two stored group audits (:mod:`fairdesk.core.compare`): the GUI's Compare dialog and
``fairdesk-cli report compare`` both call these."""
from __future__ import annotations

from pathlib import Path

from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project


def compare_stored(project_path: str | Path, audit_a: int, audit_b: int) -> dict:
    """The comparison (:func:`fairdesk.core.compare.compare_audits`) of two audits of one project, named by their
    stored names."""
    from fairdesk.core.compare import compare_audits
    from fairdesk.core.errors import DataError

    if int(audit_a) == int(audit_b):
        raise DataError(f"Choose two different audits to compare (both are audit {audit_a}).")
    project = Project(project_path, create=False)
    names = {a.id: a.name for a in project.audits()}
    docs = [project.audit_document(i) for i in (audit_a, audit_b)]  # raises naming an audit that is not there
    for i in (audit_a, audit_b):
        if project.audit_kind(i) != "groups":
            raise DataError(f"Audit {i} ('{names.get(i, '')}') is not a group audit; compare reads two group "
                            "audits (Group gaps).")
    return compare_audits(*docs, name_a=f"{audit_a}: {names.get(audit_a, '')}",
                          name_b=f"{audit_b}: {names.get(audit_b, '')}")


def export_comparison(project_path: str | Path, audit_a: int, audit_b: int, pdf_path: str | Path, *,
                      suppress_k: int = 11, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None) -> Path:
    """Write the comparison of two stored group audits as a PDF (the one renderer of every report)."""
    from fairdesk.core.compare import comparison_report
    from fairdesk.core.guard import guard_outputs
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.pdf import write_pdf

    settings = ReportSettings(suppress_k=suppress_k)
    guard_outputs([("The report file", pdf_path)], project=("the project", project_path))
    rep = Reporter(progress, cancel)
    rep(0.0, "Comparing the two audits")
    cmp = compare_stored(project_path, audit_a, audit_b)
    date = max(str(cmp["a"]["created"] or ""), str(cmp["b"]["created"] or ""))[:10]
    rep(0.3, "Writing the comparison")
    path = write_pdf(comparison_report(cmp, date, settings.suppress_k), pdf_path)
    rep(1.0, "Comparison written")
    return Path(path)
