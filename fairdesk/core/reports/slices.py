"""PDF report of a slice audit (audit kind ``slices``): "Groups nobody named".

:func:`report_tree` turns the stored document (:meth:`fairdesk.core.audits.slices.SliceAuditResult.to_dict`) into the
generic :class:`~fairdesk.core.reports.document.Report`; :func:`build_report` (the registry's signature) writes it.
Everything comes from the document, so every front end prints the same bytes. Counts below ``settings.suppress_k``
print as "<k", and a rate over fewer than k cases is not shown (rate and "<k" together would give the count).

Sections: "Groups nobody named" (the slices in plain words, the number of candidates searched, the split), the table
of every carried slice, methods and settings, provenance.
"""
from __future__ import annotations

import os
from pathlib import Path

from fairdesk.core import numbers
from fairdesk.core.reports.board import Board, are, board_section
from fairdesk.core.reports.document import (with_disclosure, CORRECTION_WORDS, Paragraph, Report, Section, Table, cap, correction_words,
                                            join_words, report_date, suppress_text)
from fairdesk.core.reports.figures import fmt_count as count  # counts below k print as "<k"
from fairdesk.core.reports.figures import fmt_rate, fmt_signed, num

METRIC_WORDS = {"recall": "recall", "specificity": "specificity", "parity": "positive prediction rate",
                "error": "error rate"}
CASE_WORDS = {"recall": "positive cases", "specificity": "negative cases", "parity": "rows", "error": "rows"}
MAX_SENTENCES = 10


def shown_rate(value, cases, k: int) -> str:
    return "–" if (num(cases) or 0) < k else fmt_rate(value, 2)


def band_of(r: dict, key: str, signed: bool = False) -> str | None:
    """A rate or gap a released document withholds (``<key>_band``: :mod:`fairdesk.core.disclosure`) as the band
    it lies in, to 3 decimals ("0.583 to 0.959"); None when the document shows it."""
    band = r.get(f"{key}_band")
    if not isinstance(band, (list, tuple)) or len(band) != 2:
        return None
    f = fmt_signed if signed else fmt_rate
    return f"{f(band[0], 3)} to {f(band[1], 3)}"


def verdict_words(verdict: str | None, margin: float) -> str:
    if verdict == "equivalent":
        return f"equivalent within ±{numbers.short(margin)}"
    if verdict == "inconclusive":
        return "inconclusive (the confirmation rows cannot tell either way)"
    return verdict or "–"


def slice_sentence(r: dict, k: int, margin: float) -> str:
    """One carried slice in words: "patients with age ≥ 80, insurance = none and ethnicity = B: recall 0.48 vs
    0.82 for the rest (gap −0.34, adjusted CI −0.47 to −0.21; 149 rows) — differs"."""
    metric = METRIC_WORDS.get(r.get("metric"), str(r.get("metric")))
    task = "" if r.get("task") in (None, "(all)") else f"Task {r['task']}: "
    rest = (f"{metric} {band_of(r, 'value') or shown_rate(r.get('value'), r.get('cases'), k)} vs "
            f"{band_of(r, 'rest_value') or shown_rate(r.get('rest_value'), r.get('rest_cases'), k)} for the rest")
    gap = ""
    if band_of(r, "gap", signed=True):
        gap = f"gap {band_of(r, 'gap', signed=True)}, counts withheld; "
    elif num(r.get("gap")) is not None and (num(r.get("cases")) or 0) >= k:
        gap = (f"gap {fmt_signed(r.get('gap'), 2)}, adjusted CI {fmt_signed(r.get('ci_low'), 2)} to "
               f"{fmt_signed(r.get('ci_high'), 2)}; ")
    return (f"{task}patients with {r.get('description')}: {rest} ({gap}{count(r.get('n'), k)} rows on the "
            f"confirmation part) — {verdict_words(r.get('verdict'), margin)}.")


def slice_sentences(doc: dict, k: int, limit: int = MAX_SENTENCES) -> list[str]:
    """The slices that differ, in words, best-scored first (what the PDF, the GUI and the CLI print)."""
    margin = num((doc.get("plan") or {}).get("margin")) or 0.05
    recs = [r for r in doc.get("slices") or [] if r.get("verdict") == "differs"]
    out = [cap(slice_sentence(r, k, margin)) for r in recs[:limit]]
    if len(recs) > limit:
        out.append(f"… and {len(recs) - limit} more slices that differ (see the table of carried slices).")
    return out


def searched_min(plan: dict, key: str = "min_size") -> int:
    """The fewest rows (or cases, ``key="min_denominator"``) of a searched slice: the plan's, at least its small-cell
    k (the audit's own setting, not the report's)."""
    return max(int(plan.get(key) or 0), int(plan.get("suppress_k") or 0))


def searched_sentence(doc: dict, k: int) -> str:
    plan = doc.get("plan") or {}
    split = doc.get("split") or {}
    by_order = doc.get("searched_by_order") or {}
    orders = ", ".join(f"{int(v):,} of order {o}" for o, v in sorted(by_order.items()))
    unit = "patients" if split.get("unit") == "patient" else "rows"
    disc = split.get("discovery_patients") if unit == "patients" else split.get("discovery_rows")
    conf = split.get("confirmation_patients") if unit == "patients" else split.get("confirmation_rows")
    return (f"{int(doc.get('searched') or 0):,} candidate slices (intersections of up to {plan.get('max_order')} "
            f"attribute values with at least {searched_min(plan)} rows; {orders}) were searched "
            f"on the discovery part ({count(disc, k)} {unit}, {num(split.get('fraction')) or 0:.0%} drawn within "
            f"each label with seed {split.get('seed')}); the {len(doc.get('slices') or [])} worst served were "
            f"tested on the confirmation part ({count(conf, k)} {unit}), which the search never saw."
            + (f" Both parts are drawn from {split['evaluated_on']}." if split.get("evaluated_on") else ""))


def board(doc: dict, k: int) -> Board:
    """What page 1 says of a slice audit: a grid of tasks × the attributes the carried slices combine (a cell: the
    most important verdict of the slices using that attribute), the slices that differ in words, what was not
    searched, what to check next."""
    plan = doc.get("plan") or {}
    c = doc.get("counts") or {}
    roles = plan.get("roles") or {}
    attrs = [str(a) for a in list(roles.get("attributes") or []) + list(roles.get("continuous_attributes") or [])]
    metric = METRIC_WORDS.get(plan.get("metric"), str(plan.get("metric") or "rate"))
    margin = num(plan.get("margin")) or 0.05
    entries = []
    for r in doc.get("slices") or []:
        task = "all rows" if r.get("task") in (None, "(all)") else str(r.get("task"))
        for attr in (r.get("definition") or {}):
            entries.append((task, str(attr), r.get("verdict")))
    differ = [r for r in doc.get("slices") or [] if r.get("verdict") == "differs"]
    untested = [f"Subgroups smaller than {searched_min(plan)} rows were not searched."]
    if int(c.get("inconclusive") or 0):
        untested.append(f"{are(int(c.get('inconclusive') or 0), 'carried slice')} inconclusive: the confirmation rows "
                        "cannot tell.")
    steps = []
    if differ:
        steps.append("For each slice that differs, check how its patients are recorded and served, and whether "
                     "the model saw enough of them in training.")
    steps.append("Name the slices that matter in the next group audit, so they are tested directly.")
    return Board(
        question=(f"Which combinations of {join_words(attrs) or 'the attributes'} does the model serve worst "
                  f"({metric})? Of the {int(c.get('total') or 0)} slices carried forward, {int(c.get('differs') or 0)} "
                  f"differ from the rest, {int(c.get('equivalent') or 0)} are equivalent within ±{numbers.short(margin)} and "
                  f"{int(c.get('inconclusive') or 0)} are inconclusive."),
        entries=entries, row_title="Task", findings=[cap(slice_sentence(r, k, margin)) for r in differ],
        no_findings=("No carried slice differs from the rest on the confirmation rows. That is not evidence that "
                     "every subgroup is served alike."),
        untested=untested, next_steps=steps, plan=str(plan.get("description") or ""),
        more_where="the table of carried slices")


def _summary(doc: dict, k: int) -> Section:
    s = Section("summary", "Groups nobody named")
    plan = doc.get("plan") or {}
    c = doc.get("counts") or {}
    metric = METRIC_WORDS.get(plan.get("metric"), str(plan.get("metric")))
    attrs = list((plan.get("roles") or {}).get("attributes") or []) + list(
        (plan.get("roles") or {}).get("continuous_attributes") or [])
    s.blocks.append(Paragraph(f"Which combinations of {', '.join(attrs)} does the model serve worst ({metric})?",
                              "lead"))
    s.blocks.append(Paragraph(searched_sentence(doc, k)))
    s.blocks.append(Paragraph(
        f"Of the {int(c.get('total') or 0)} slices carried forward, {int(c.get('differs') or 0)} differ from the "
        f"rest, {int(c.get('equivalent') or 0)} are equivalent within ±{numbers.short(num(plan.get('margin')) or 0.05)} and "
        f"{int(c.get('inconclusive') or 0)} are inconclusive, after the "
        f"{correction_words(plan.get('correction') or 'bh', num(plan.get('alpha')) or 0.05)}, over the carried "
        "slices. "
        "A slice is called 'differs' only from the confirmation rows; the discovery numbers, which are always "
        "too good for the slices a search picks, are shown beside it but never tested."))
    sentences = slice_sentences(doc, k)
    if sentences:
        for text in sentences:
            s.blocks.append(Paragraph(text, "finding"))
    else:
        s.blocks.append(Paragraph("No carried slice differs from the rest on the confirmation rows. That is not "
                                  "evidence that every subgroup is served alike: slices smaller than the minimum "
                                  "size were not searched, and inconclusive slices cannot tell.", "finding"))
    for w in doc.get("warnings") or []:
        s.blocks.append(Paragraph(suppress_text(str(w), k), "note"))
    return s


def _table(doc: dict, k: int) -> Section:
    s = Section("slices", "The carried slices", landscape=True)
    plan = doc.get("plan") or {}
    margin = num(plan.get("margin")) or 0.05
    rows = []
    tasks = {str(r.get("task")) for r in doc.get("slices") or []}
    for r in doc.get("slices") or []:
        row = [str(r.get("rank")), str(r.get("description")), count(r.get("n"), k), count(r.get("cases"), k),
               band_of(r, "value") or shown_rate(r.get("value"), r.get("cases"), k),
               band_of(r, "rest_value") or shown_rate(r.get("rest_value"), r.get("rest_cases"), k),
               band_of(r, "gap", signed=True) or (fmt_signed(r.get("gap"), 3) if (num(r.get("cases")) or 0) >= k
                                                  else "–"),
               (f"{fmt_signed(r.get('ci_low'), 3)} to {fmt_signed(r.get('ci_high'), 3)}"
                if num(r.get("ci_low")) is not None and (num(r.get("cases")) or 0) >= k else "–"),
               f"{numbers.short(num(r.get('q_value')), 2)}" if num(r.get("q_value")) is not None else "–",
               verdict_words(r.get("verdict"), margin).split(" (")[0],
               band_of(r, "discovery_gap", signed=True) or fmt_signed(r.get("discovery_gap"), 3)]
        if len(tasks) > 1:
            row.insert(1, str(r.get("task")))
        rows.append(row)
    header = ["#", "Slice", "n", "Cases", "Rate", "Rest", "Gap", "Adjusted CI", "q", "Verdict", "Discovery gap"]
    align = ["R", "L", "R", "R", "R", "R", "R", "R", "R", "L", "R"]
    if len(tasks) > 1:
        header.insert(1, "Task")
        align.insert(1, "L")
    metric = METRIC_WORDS.get(plan.get("metric"), "rate")
    s.blocks.append(Table(
        header, rows, title=f"Every carried slice: {metric} on the confirmation rows against the rest", small=True,
        align=align,
        note=(f"n: the slice's confirmation rows; cases: the {CASE_WORDS.get(plan.get('metric'), 'rows')} its rate "
              "rests on. Rate, rest, gap (slice − rest) and its interval on the confirmation rows, adjusted for the "
              "number of slices tested so that it agrees with the verdict (the 95% Agresti–Caffo interval of each "
              "slice on its own is kept in the results file); q: corrected p. Discovery gap: on the rows the "
              "search saw (not tested; it is biased away from 0 "
              f"by the search). Rates over fewer than {k} cases are not shown.")))
    reasons = [suppress_text(f"Slice {r.get('rank')}: {r.get('reason')}", k) for r in doc.get("slices") or []
               if r.get("reason")]
    for text in reasons:
        s.blocks.append(Paragraph(text, "bullet"))
    return s


def _methods(doc: dict, k: int) -> Section:
    s = Section("methods", "Methods")
    plan = doc.get("plan") or {}
    roles = plan.get("roles") or {}
    s.blocks += [
        Paragraph("Split. The patients (rows, without a patient id) of each task are drawn into a discovery part and "
                  "a confirmation part within each label (a patient is positive when any of their rows is), so both "
                  "parts keep the prevalence; a patient's rows stay together."),
        Paragraph("Search. On the discovery part only, every intersection of one to "
                  f"{plan.get('max_order')} attribute values (continuous attributes cut into {plan.get('bins')} "
                  "equal-frequency bins whose edges come from the discovery rows) with at least "
                  f"{searched_min(plan)} rows and at least {searched_min(plan, 'min_denominator')} cases of its "
                  "rate is compared with the rest of the task by the score statistic of the difference "
                  "of two rates; the slices served worse than the rest are ranked by it. A missing value defines no "
                  "slice (its row stays in the rest)."),
        Paragraph(f"Carried forward: the {plan.get('carry')} best-ranked slices, skipping any slice that shares at "
                  "least 80% of its rows with a slice already carried (a near copy or a part of a better slice). The "
                  "list is fixed before any confirmation row is looked at."),
        Paragraph("Test. Each carried slice against the rest on the confirmation rows, with the group audit's test: "
                  "score test of the difference of rates with a bootstrap design effect "
                  f"({int(plan.get('n_boot') or 0):,} replicates; a whole-patient sandwich when patients repeat), "
                  "Agresti–Caffo "
                  f"95% interval, and two one-sided tests of equivalence within ±{numbers.short(num(plan.get('margin')) or 0.05)}; "
                  f"{CORRECTION_WORDS.get(plan.get('correction'), 'corrected')} over the carried slices at α = "
                  f"{numbers.short(num(plan.get('alpha')) or 0.05)}. Verdicts: differs; equivalent within ±margin; otherwise "
                  "inconclusive — not evidence that the slice is served alike."),
    ]
    tau = doc.get("thresholds") or {}
    rows = [["Metric", METRIC_WORDS.get(plan.get("metric"), "–")],
            ["Attributes", ", ".join(roles.get("attributes") or []) or "–"],
            ["Continuous attributes", ", ".join(roles.get("continuous_attributes") or []) or "–"],
            ["Threshold", ("best F1 on the discovery rows: " if plan.get("threshold") == "best_f1" else "")
             + ", ".join(f"{t}: {numbers.short(num(v), 3)}" if len(tau) > 1 else f"{numbers.short(num(v), 3)}" for t, v in tau.items())],
            ["Max order / min size / carried", f"{plan.get('max_order')} / {plan.get('min_size')} / "
                                               f"{plan.get('carry')}"],
            ["Discovery fraction / seed", f"{plan.get('discovery_fraction')} / {plan.get('seed')}"],
            ["Patient id", str(roles.get("patient_id") or "none (rows are independent)")],
            ["Searched slices", f"at least {searched_min(plan)} rows and at least "
                                f"{searched_min(plan, 'min_denominator')} cases (the search's small-cell k: "
                                f"{plan.get('suppress_k')})"]]
    s.blocks.append(Table(["Setting", "Value"], rows, title="Settings", align=["L", "L"]))
    trow = [[str(t.get("task")), f"{int(t.get('searched') or 0):,}", str(t.get("carried")),
             count(t.get("discovery_rows"), k), count(t.get("confirmation_rows"), k)]
            for t in doc.get("tasks") or []]
    s.blocks.append(Table(["Task", "Searched", "Carried", "Discovery rows", "Confirmation rows"], trow,
                          title="Per task", align=["L", "R", "R", "R", "R"]))
    return s


def _provenance(doc: dict, k: int) -> Section:
    s = Section("provenance", "Provenance")
    prov = doc.get("provenance") or {}
    rows = [["Audit date", report_date(prov)], ["Data", str(prov.get("dataset", "–"))],
            ["Data SHA-256", str(prov.get("data_sha256") or "–")], ["Seed", str(prov.get("seed", "–"))]]
    rows += [[f"Model hash ({key})", str(v)] for key, v in (prov.get("model_hashes") or {}).items()]
    rows.append(["Small-cell suppression", f"counts below {k} shown as “<{k}”"])
    rows += [[f"Version: {name}", str(v)] for name, v in (prov.get("versions") or {}).items()]
    s.blocks.append(Table(["Item", "Value"], rows, widths=[1.3, 3.7], align=["L", "L"], small=True))
    return s


def report_tree(doc: dict, settings) -> Report:
    """The report tree of a stored slice audit (``settings``: :class:`fairdesk.core.kinds.ReportSettings`)."""
    k = int(settings.suppress_k)
    metric = METRIC_WORDS.get((doc.get("plan") or {}).get("metric"), "rate")
    return with_disclosure(Report(title="Slices nobody named", subtitle=f"Worst-served subgroups by {metric}, "
                                                        f"{(doc.get('provenance') or {}).get('dataset') or 'data'}",
                  date=report_date(doc.get("provenance") or {}), suppress_k=k,
                  sections=[board_section(board(doc, k), k), _summary(doc, k), _table(doc, k), _methods(doc, k), _provenance(doc, k)],
                  footer=f"FairDesk · slices nobody named · counts below {k} shown as <{k}",
                  metadata={"title": "Slices nobody named", "subject": "FairDesk slice audit"}), doc)


def build_report(doc: dict, path: str | os.PathLike, settings) -> Path:
    """The registry's one report signature: the PDF of a stored ``slices`` document at ``path``."""
    from fairdesk.core.reports.pdf import write_pdf

    return write_pdf(report_tree(doc, settings), path)
