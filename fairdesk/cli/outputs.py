"""What every audit command of ``fairdesk-cli`` does around its job: the one path every front end shares.

An audit command calls the job the GUI calls (the ``job`` of its row in :mod:`fairdesk.core.kinds`) on a project —
the user's ``--project``, or a temporary one that is deleted afterwards — and then writes ``--json`` from the
document the job stored (:meth:`~fairdesk.core.project.Project.audit_json`) and ``--pdf`` / ``--html`` through the
one report route (:func:`fairdesk.jobs.reports.export_report`, :func:`~fairdesk.jobs.reports.export_html`). So the
CLI and the GUI store the same document and print the same report bytes.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from fairdesk.console import say


@contextmanager
def scratch_project() -> Iterator[str]:
    """The path of a new, empty project in the run's private scratch folder (:mod:`fairdesk.core.scratch`),
    deleted with everything in it on leaving (and on SIGTERM/SIGHUP; a SIGKILLed run's is removed by the next
    start)."""
    from fairdesk.core.scratch import scratch_path

    with scratch_path("scratch.fairdesk") as path:
        yield str(path)


@contextmanager
def audit_project(project: str | None) -> Iterator[str]:
    """The project an audit command's job stores into: ``--project`` when given, else a scratch project."""
    if project:
        yield project
        return
    with scratch_project() as path:
        yield path


def stored_document(project_path: str | Path, audit_id: int) -> dict:
    from fairdesk.core.project import Project

    return Project(project_path, create=False).audit_document(audit_id)


def release_of(args) -> tuple[str, int] | None:
    """(``--release-json`` path, ``--suppress-k``) of an audit command, or None without ``--release-json``."""
    path = getattr(args, "release_json", None)
    return (path, int(getattr(args, "suppress_k", 11))) if path else None


def working_json(text: str) -> str:
    """The stored document's text with the working-document header first (``"disclosure": {"for_release":
    false, …}``): it holds exact counts, small cells included. The rest is the stored text byte for byte."""
    from fairdesk.core.disclosure import working_header

    if not text.startswith("{") or text[1:].strip() == "}":
        return text
    head = json.dumps(working_header(), ensure_ascii=False, allow_nan=False)
    return "{\n \"disclosure\": " + head + "," + text[1:]


def write_json(project_path: str | Path, audit_id: int, json_path: str | Path,
               release: tuple[str, int] | None = None) -> dict:
    """``--json``: the stored document byte for byte after its working-document header (:func:`working_json`),
    and with ``release`` = (path, k) its releasable copy (:func:`fairdesk.core.kinds.releasable`) too; both
    written atomically. Returns the stored document parsed."""
    from fairdesk.core import atomic
    from fairdesk.core.kinds import ReportSettings, releasable
    from fairdesk.core.project import Project

    project = Project(project_path, create=False)
    text = project.audit_json(audit_id)
    doc = json.loads(text)
    if release:
        path, k = release
        out = releasable(project.audit_kind(audit_id), doc, ReportSettings(suppress_k=k))
        atomic.write_text(path, json.dumps(out, indent=1, ensure_ascii=False, allow_nan=False))
    atomic.write_text(json_path, working_json(text))
    return doc


def write_outputs(project_path: str | Path, audit_id: int, json_path: str | Path,
                  pdf_path: str | Path | None = None, suppress_k: int = 11,
                  release: tuple[str, int] | None = None, html_path: str | Path | None = None) -> dict:
    """``--json`` (and ``--release-json``: :func:`write_json`) and, with ``pdf_path``, ``--pdf`` through
    :func:`~fairdesk.jobs.reports.export_report`, with ``html_path``, ``--html`` through
    :func:`~fairdesk.jobs.reports.export_html`. Returns the document."""
    doc = write_json(project_path, audit_id, json_path, release)
    if pdf_path:
        write_pdf(project_path, audit_id, pdf_path, suppress_k)
    if html_path:
        write_html(project_path, audit_id, html_path, suppress_k)
    return doc


def write_reports(project_path: str | Path, audit_id: int, args) -> None:
    """An audit command's ``--pdf`` and ``--html`` (when given), both through the one report route."""
    if getattr(args, "pdf", None):
        write_pdf(project_path, audit_id, args.pdf, args.suppress_k)
    if getattr(args, "html", None):
        write_html(project_path, audit_id, args.html, args.suppress_k)


def write_html(project_path: str | Path, audit_id: int, html_path: str | Path, suppress_k: int = 11) -> Path:
    from fairdesk.jobs.reports import export_html

    return export_html(project_path, audit_id, html_path, suppress_k=suppress_k)


def write_pdf(project_path: str | Path, audit_id: int, pdf_path: str | Path, suppress_k: int = 11) -> Path:
    from fairdesk.jobs.reports import export_report

    return export_report(project_path, audit_id, pdf_path, suppress_k=suppress_k)


def copy_into(project_path: str | Path, scratch_path: str | Path, audit_id: int) -> int:
    """Store the scratch project's audit (and the dataset it was run on) in ``project_path``, both in one
    transaction: together or not at all. Returns the audit's id there."""
    from fairdesk.core.project import Project

    return Project(project_path).copy_audit(Project(scratch_path, create=False), audit_id)


def run_table_audit(args, roles, job, plan, **job_options) -> dict:
    """What ``audit groups`` and ``audit slices`` do around their job: import ``args.data`` with ``roles`` into a
    scratch project (:func:`~fairdesk.core.data.tables.import_table`), run ``job(scratch, dataset_id, plan, progress=,
    **job_options)`` (e.g. ``executor=``),
    write ``--json`` (and ``--pdf``), and copy the dataset with its audit into ``--project`` when given. Returns the
    stored document.

    Always a scratch project, also with --project: the two jobs store the dataset and the audit in two writes;
    copying the pair into --project afterwards is one transaction, so --project never keeps a dataset without its
    audit (a failed or killed run stores nothing there). The document is copied byte for byte."""
    import sys

    from fairdesk.cli.progress import TerminalProgress
    from fairdesk.core.project import Project
    from fairdesk.core.data.tables import import_table

    progress = TerminalProgress(args.quiet)
    with scratch_project() as scratch:
        dataset_id = import_table(scratch, args.data, roles=roles, missing=tuple(args.missing_value or ()),
                                  progress=lambda f, m: progress(0.05 * f, m))
        for note in (Project(scratch, create=False).dataset(dataset_id).origin or {}).get("notes", []):
            say(f"fairdesk-cli: note: {note}", file=sys.stderr)
        audit_id = job(scratch, dataset_id, plan, progress=lambda f, m: progress(0.05 + 0.95 * f, m), **job_options)
        progress.done()
        doc = write_outputs(scratch, audit_id, args.json, release=release_of(args))
        if args.project:
            say(stored_where(args.project, copy_into(args.project, scratch, audit_id)))
        write_reports(scratch, audit_id, args)
    return doc


def stored_where(project_path: str | Path, audit_id: int) -> str:
    """``"stored as audit N in /path/p.fairdesk"``: the line an audit command prints after storing in --project."""
    from fairdesk.core.project import Project

    return f"stored as audit {audit_id} in {Project(project_path, create=False).path}"
