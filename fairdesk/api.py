"""The notebook API: ``import fairdesk as fd; res = fd.audit_groups(df, label=..., score=..., ...)``.

Each call runs the job the CLI and the GUI run (:func:`fairdesk.jobs.groups.audit_groups`,
:func:`fairdesk.jobs.slices.audit_slices`) on a scratch project that is deleted afterwards: the table goes in by the
same import (:func:`fairdesk.core.data.tables.import_table`, a DataFrame through a Parquet copy in the scratch folder),
so the stored document — and the PDF from :meth:`AuditResult.to_pdf` — is what ``fairdesk-cli audit groups`` gives
for the same table and settings.

:class:`AuditResult` is what a notebook user reads: ``rates()`` (each group's rate with its 95% interval),
``gaps()`` (the comparisons with their verdicts), ``summary``, ``warnings``, ``to_pdf``, ``to_html`` and the
notebook's ``_repr_html_``. The full stored document is ``res.document``.
"""
from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from fairdesk.core.errors import DataError, FairDeskError

GAP_COLUMNS = ["task", "attribute", "group", "metric", "n", "rate", "comparison", "comparison_rate", "gap",
               "ci_low", "ci_high", "p_value", "q_value", "verdict", "reason"]
SLICE_GAP_COLUMNS = ["task", "rank", "description", "metric", "n", "value", "rest_value", "gap", "ci_low",
                     "ci_high", "p_value", "q_value", "verdict", "reason"]


def _table(data: Any, what: str):
    """``(DataFrame, source path or None)`` from a DataFrame or a path pandas reads; anything else: one sentence."""
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        return data, None
    if isinstance(data, (str, os.PathLike)):
        return None, Path(data)
    raise DataError(f"{what} takes a pandas DataFrame or the path of a CSV or Parquet table; it was given "
                    f"a {type(data).__name__}.")


def _run(data: Any, what: str, roles, job, plan, extra_columns=(), **job_options):
    """Import ``data`` into a scratch project, run ``job`` there, return (document, kind, the imported table)."""
    from fairdesk.core.project import Project
    from fairdesk.core.scratch import scratch_path
    from fairdesk.core.data.tables import import_table

    frame, source = _table(data, what)
    with scratch_path("api.fairdesk") as project_path:
        if source is None:
            if frame.empty:
                raise DataError(f"{what} was given an empty DataFrame; it needs rows to audit.")
            source = project_path.parent / "table.parquet"
            wanted = list(dict.fromkeys([*roles.all_columns(), *extra_columns]))
            missing = [c for c in wanted if c not in frame.columns]
            if missing:
                raise DataError(f"{what}: column(s) {', '.join(repr(c) for c in missing)} are not in the "
                                f"DataFrame (it has {', '.join(repr(str(c)) for c in frame.columns[:12])}"
                                f"{' …' if len(frame.columns) > 12 else ''}).")
            try:  # only the columns the audit reads, as the CLI reads only those of a file
                frame[wanted].to_parquet(source, index=False)
            except Exception as err:  # pyarrow's own types (ArrowInvalid, ...): say it in one sentence
                raise DataError(f"{what}: the DataFrame cannot be stored as a table ({' '.join(str(err).split())}"
                                "); give columns of numbers or text.") from None
        dataset_id = import_table(project_path, source, roles=roles)
        audit_id = job(project_path, dataset_id, plan, **job_options)
        project = Project(project_path, create=False)
        return project.audit_document(audit_id), project.audit_kind(audit_id), project.load_dataset(dataset_id)


@dataclass
class AuditResult:
    """One audit's results, as a notebook reads them. ``kind``: ``"groups"`` or ``"slices"``; ``document``: the
    stored document (the CLI's ``--json``)."""

    kind: str
    document: dict
    table: Any = field(repr=False)  # the imported table the audit ran on (for rates())
    source: Path | None = None  # the table's file when a path was given (never written over)
    _rates: Any = field(default=None, repr=False)

    # ---- what a notebook reads -----------------------------------------------------------------------------
    def rates(self):
        """Per-group rates with their intervals: task, attribute, group, metric, n, rate, ci_low, ci_high (and
        numerator, design_effect, interval). Groups: every group of every categorical attribute and intersection on
        the audited rows (whole-patient intervals when ``patient_id`` repeats). Slices: each confirmed slice's rate on
        the confirmation rows (attribute "slice", group its description)."""
        if self._rates is None:
            self._rates = self._group_rates() if self.kind == "groups" else self._slice_rates()
        return self._rates.copy()

    def gaps(self):
        """The comparisons: task, attribute, group, metric, n, rate, comparison, comparison_rate, gap, ci_low,
        ci_high, p_value, q_value, verdict (and reason when a row was not tested). Slices: each carried slice
        against the rest of its task's confirmation rows."""
        import pandas as pd

        if self.kind == "slices":
            frame = pd.DataFrame.from_records(self.document.get("slices") or [])
            return frame.reindex(columns=SLICE_GAP_COLUMNS)
        frame = pd.DataFrame.from_records(self.document.get("records") or [])
        return frame.reindex(columns=GAP_COLUMNS)

    @property
    def warnings(self) -> list[str]:
        """What the reader must know (each once): data problems, thresholds that flag nobody, 0/1 scores."""
        return list(dict.fromkeys(self.document.get("warnings") or []))

    @property
    def summary(self) -> str:
        """One paragraph: how many comparisons differ, are equivalent, or are inconclusive, and how."""
        doc = self.document
        plan = doc.get("plan", {})
        if self.kind == "slices":
            c = doc["counts"]
            return (f"{doc['searched']:,} slices searched on {doc['split']['discovery_rows']:,} discovery rows; "
                    f"{c['total']} carried to {doc['split']['confirmation_rows']:,} confirmation rows: "
                    f"{c['differs']} differ, {c['equivalent']} equivalent within ±{plan.get('margin', 0.05):g}, "
                    f"{c['inconclusive']} inconclusive.")
        c = doc.get("comparisons") or {}
        thresholds = ", ".join(f"{t} {v:.3g}" for t, v in (doc.get("thresholds") or {}).items())
        return (f"{c.get('total', 0)} comparisons: {c.get('differs', 0)} differ, {c.get('equivalent', 0)} "
                f"equivalent within ±{plan.get('margin', 0.05):g}, {c.get('inconclusive', 0)} inconclusive "
                f"({plan.get('correction', 'bh')}, family {plan.get('family', 'audit')}); threshold {thresholds}.")

    # ---- documents -------------------------------------------------------------------------------------------
    def to_pdf(self, path, suppress_k: int = 11) -> Path:
        """The PDF report, through the one report route (:func:`fairdesk.core.kinds.build_report`): the same bytes
        as ``fairdesk-cli report`` of this audit. Counts below ``suppress_k`` print as "<k"."""
        from fairdesk.core.guard import guard_outputs
        from fairdesk.core.kinds import ReportSettings, build_report

        guard_outputs([("The report file", path)], inputs=self._inputs())
        return Path(build_report(self.kind, self.document, path, ReportSettings(suppress_k=suppress_k)))

    def to_html(self, path, suppress_k: int = 11) -> Path:
        """The report as one HTML file (:func:`fairdesk.core.kinds.build_html`, the PDF's tables and figures)."""
        from fairdesk.core import kinds
        from fairdesk.core.guard import guard_outputs

        build_html = getattr(kinds, "build_html", None)
        if build_html is None:
            raise FairDeskError("This FairDesk cannot write HTML reports yet; use to_pdf(path).")
        guard_outputs([("The report file", path)], inputs=self._inputs())
        return Path(build_html(self.kind, self.document, path, kinds.ReportSettings(suppress_k=suppress_k)))

    def _repr_html_(self) -> str:
        """What a notebook shows: the summary, the warnings, and the gaps that differ (all gaps when none do)."""
        gaps = self.gaps()
        shown = gaps[gaps["verdict"] == "differs"] if (gaps["verdict"] == "differs").any() else gaps
        parts = [f"<p><b>FairDesk {html.escape(self.kind)} audit.</b> {html.escape(self.summary)}</p>"]
        if self.warnings:
            parts.append("<ul>" + "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings) + "</ul>")
        title = "Gaps that differ" if shown is not gaps else "Gaps"
        parts.append(f"<p>{title} ({len(shown)} of {len(gaps)} rows; <code>.gaps()</code> has all, "
                     "<code>.rates()</code> each group's rate):</p>")
        parts.append(shown.head(30).to_html(index=False, na_rep="", float_format=lambda v: f"{v:.3g}",
                                            escape=True))
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"<fairdesk AuditResult {self.kind}: {self.summary}>"

    # ---- helpers -----------------------------------------------------------------------------------------------
    def _inputs(self) -> list:
        return [("the data table", self.source)] if self.source is not None else []

    def _group_rates(self):
        import pandas as pd

        from fairdesk.core.audits.groups import GroupAuditPlan
        from fairdesk.core.audits.rates import group_rates

        plan = GroupAuditPlan.from_dict(self.document["plan"])
        stored = pd.DataFrame.from_records(self.document.get("groups") or [])
        return group_rates(self.table, plan, self.document["thresholds"], stored)

    def _slice_rates(self):
        from fairdesk.core.audits.rates import slice_rates

        return slice_rates(self.table, self.document)


def _roles(label, score, attributes, task, continuous_attributes, patient_id, what):
    from fairdesk.core.data.schema import ColumnRoles

    if isinstance(attributes, str):
        attributes = [attributes]
    if isinstance(continuous_attributes, str):
        continuous_attributes = [continuous_attributes]
    if not attributes and not continuous_attributes:
        raise DataError(f"{what} needs attributes=[...]: the protected attribute columns to compare groups by.")
    return ColumnRoles(label=label, score=score, task=task, attributes=tuple(attributes or ()),
                       continuous_attributes=tuple(continuous_attributes or ()), patient_id=patient_id)


def audit_groups(data, *, label: str, score: str, attributes: Sequence[str] = (), threshold,
                 task: str | None = None, continuous_attributes: Sequence[str] = (), patient_id: str | None = None,
                 n_boot: int = 1000, seed: int = 0, **options) -> AuditResult:
    """The group audit of a predictions table (``fairdesk-cli audit groups``): each group's recall, specificity and
    positive prediction rate, their gaps with intervals, tests corrected for multiple testing and a verdict
    (differs / equivalent / inconclusive), calibration and discrimination by group.

    ``data``: a DataFrame or the path of a CSV/Parquet table. ``threshold``: the score at which the model flags a
    patient (a number in (0, 1), or "best_f1"). ``options``: any other field of
    :class:`~fairdesk.core.audits.groups.GroupAuditPlan` (``metrics``, ``gap_rule``, ``margin``, ``alpha``,
    ``intersections``, ``min_group_size``, ...)."""
    from fairdesk.core.audits.groups import GroupAuditPlan
    from fairdesk.jobs.groups import audit_groups as job

    roles = _roles(label, score, attributes, task, continuous_attributes, patient_id, "audit_groups")
    try:
        plan = GroupAuditPlan(roles=roles, threshold=threshold, n_boot=n_boot, seed=seed, **options)
    except TypeError as err:
        raise DataError(f"audit_groups: {err}.") from None
    _table(data, "audit_groups")  # refuse a wrong input before any work
    doc, kind, table = _run(data, "audit_groups", roles, job, plan,
                            extra_columns=[c for combo in plan.intersections for c in combo])
    return AuditResult(kind, doc, table, source=_table(data, "audit_groups")[1])


def audit_slices(data, *, label: str, score: str, attributes: Sequence[str] = (), threshold,
                 task: str | None = None, continuous_attributes: Sequence[str] = (), patient_id: str | None = None,
                 n_boot: int = 1000, seed: int = 0, **options) -> AuditResult:
    """The slice audit (``fairdesk-cli audit slices``): search intersections of the attributes nobody named on
    discovery rows, confirm the worst on the rest. Same arguments as :func:`audit_groups`; ``options``: any other
    field of :class:`~fairdesk.core.audits.slices.SliceAuditPlan` (``metric``, ``max_order``, ``min_size``,
    ``carry``, ``discovery_fraction``, ``margin``, ...)."""
    from fairdesk.core.audits.slices import SliceAuditPlan
    from fairdesk.jobs.slices import audit_slices as job

    roles = _roles(label, score, attributes, task, continuous_attributes, patient_id, "audit_slices")
    try:
        plan = SliceAuditPlan(roles=roles, threshold=threshold, n_boot=n_boot, seed=seed, **options)
    except TypeError as err:
        raise DataError(f"audit_slices: {err}.") from None
    _table(data, "audit_slices")
    doc, kind, table = _run(data, "audit_slices", roles, job, plan)
    return AuditResult(kind, doc, table, source=_table(data, "audit_slices")[1])
