"""Report of the fairness monitor (audit kind ``monitor``): "Watching the model".

:func:`report_tree` turns the stored document (:meth:`fairdesk.core.audits.monitor.MonitorResult.to_dict`) into the
generic :class:`~fairdesk.core.reports.document.Report`; :func:`build_report` (the registry's signature) writes the
PDF. Everything comes from the document. Counts below ``settings.suppress_k`` print as "<k", and a rate over fewer
than k cases is not shown.

Sections: page 1, the board (the question, the promise, every alarm as a sentence); page 2, the alarms and what
changed since the previous period; a trend chart of each alarmed gap with its confidence sequence, the latest
period's comparisons, context (prevalence and score distribution by group over time: not tested), methods and
settings, provenance.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from fairdesk.core.reports.board import Board, board_section
from fairdesk.core.reports.document import (with_disclosure, FigureSpec, Paragraph, Report, Section, Table, cap, report_date,
                                            suppress_text)
from fairdesk.core.reports.figures import fmt_count as count
from fairdesk.core.reports.figures import fmt_rate, fmt_signed, num

METRIC_WORDS = {"recall": "recall", "specificity": "specificity", "parity": "positive prediction rate"}
CASE_WORDS = {"recall": "positive cases", "specificity": "negative cases", "parity": "rows"}
PAGE1_ALARMS = 5
MAX_CHARTS = 8


def _who(r: dict) -> str:
    task = "" if r.get("task") in (None, "(all)") else f" in {r.get('task')}"
    return f"{r.get('attribute')} {r.get('group')}{task}"


def gap_words(gap, low, high, band=None) -> str:
    """"lower by 0.15 (0.08 to 0.22)" for a gap of −0.15 with sequence −0.22 to −0.08; with a released band
    (small counts withheld) the band, not its midpoint: "lower by 0.10 to 0.20 (a band: small counts withheld)"."""
    g, lo, hi = num(gap), num(low), num(high)
    if band and len(band) == 2 and num(band[0]) is not None and num(band[1]) is not None:
        b0, b1 = sorted((num(band[0]), num(band[1])))
        seq = f"; sequence {lo:+.2f} to {hi:+.2f}" if lo is not None and hi is not None else ""
        if b1 <= 0:
            return f"lower by {-b1:.2f} to {-b0:.2f} (a band: small counts withheld{seq})"
        if b0 >= 0:
            return f"higher by {b0:.2f} to {b1:.2f} (a band: small counts withheld{seq})"
        return f"between {-b0:.2f} lower and {b1:.2f} higher (a band: small counts withheld{seq})"
    if g is None or lo is None or hi is None:
        return "not estimable"
    if g < 0:
        return f"lower by {-g:.2f} ({-hi:.2f} to {-lo:.2f})"
    return f"higher by {g:.2f} ({lo:.2f} to {hi:.2f})"


def alarm_sentence(a: dict) -> str:
    """"since 2026-09, recall for ethnicity B in sepsis is lower by 0.15 (0.08 to 0.22) than for the rest; first
    alarmed in 2026-11"."""
    metric = METRIC_WORDS.get(a.get("metric"), str(a.get("metric")))
    tail = f"; first alarmed in {a.get('first_period')}"
    if not a.get("alarm_now"):
        tail += f", last alarmed in {a.get('period')} (no alarm in the latest period)"
    words = gap_words(a.get("gap"), a.get("cs_low"), a.get("cs_high"), a.get("gap_band"))
    if words == "not estimable":  # a released alarm whose every count is withheld: the verdict, not its size
        return f"since {a.get('since')}, {metric} for {_who(a)} differs from the rest (its size withheld: small counts){tail}."
    return f"since {a.get('since')}, {metric} for {_who(a)} is {words} than for the rest{tail}."


def alarm_sentences(doc: dict, k: int, limit: int = PAGE1_ALARMS) -> list[str]:  # noqa: ARG001 (no counts in them)
    """Every alarm in words, the ones still alarmed in the latest period first (what the PDF, the GUI and the CLI
    print)."""
    alarms = sorted(doc.get("alarms") or [], key=lambda a: (not a.get("alarm_now"), str(a.get("first_period"))))
    out = [cap(alarm_sentence(a)) for a in alarms[:limit]]
    if len(alarms) > limit:
        out.append(f"… and {len(alarms) - limit} more alarms (see the table of the latest period).")
    return out


def promise(doc: dict) -> str:
    plan = doc.get("plan") or {}
    alpha = num(plan.get("alpha")) or 0.05
    return (f"The promise: over any number of periods, however often this monitor is read, the chance of any false "
            f"alarm in a stream whose gaps are all 0 is at most {alpha:g} for the whole monitor "
            f"({doc.get('comparisons')} comparisons watched, each at {alpha:g}/{doc.get('comparisons')}).")


def change_sentences(doc: dict, k: int) -> list[str]:
    ch = doc.get("changes") or {}
    if not ch.get("previous"):
        return [f"{ch.get('period') or 'This'} is the first period: nothing to compare with yet."]
    out = []
    for key, verb in (("raised", "New alarm"), ("cleared", "No longer alarmed")):
        for r in ch.get(key) or []:
            out.append(f"{verb} in {ch['period']}: {METRIC_WORDS.get(r.get('metric'), r.get('metric'))} for "
                       f"{_who(r)}.")
    moves = ch.get("moves") or []
    if moves:
        m = moves[0]
        if min(int(m.get("n") or 0), int(m.get("previous_n") or 0)) >= k:
            out.append(f"The largest move of a period's own gap: {METRIC_WORDS.get(m.get('metric'), m.get('metric'))} "
                       f"for {_who(m)}, {fmt_signed(m.get('previous_gap'), 2)} in {ch['previous']} to "
                       f"{fmt_signed(m.get('gap'), 2)} in {ch['period']} (one period alone is noisy; the alarms "
                       "above are what to act on).")
    if not out:
        out.append(f"No alarm was raised or cleared between {ch['previous']} and {ch['period']}.")
    return out


def board(doc: dict, k: int) -> Board:
    """Page 1: per task and attribute watched, "differs" where a comparison is alarmed now or was (its sequence
    excluded 0), else "inconclusive" (an unalarmed stream is not shown to be fair); the alarms in words."""
    plan = doc.get("plan") or {}
    periods = doc.get("periods") or []
    alarms = doc.get("alarms") or []
    alarmed = {(str(a.get("task")), str(a.get("attribute"))) for a in alarms}
    watched = dict.fromkeys((str(r.get("task")), str(r.get("attribute"))) for r in doc.get("monitor") or [])
    entries = [(t, a, "differs" if (t, a) in alarmed else "inconclusive") for t, a in watched]
    metrics = ", ".join(METRIC_WORDS.get(m, m) for m in plan.get("metrics") or [])
    span = f"{periods[0]['period']} to {periods[-1]['period']}" if periods else "no periods"
    n = len(alarms)
    question = (f"Does the model still serve every group of {', '.join(plan.get('attributes') or [])} alike? "
                f"{metrics.capitalize()} of each group against the rest, period by period ({len(periods)} periods, "
                f"{span}), at the threshold {num(plan.get('threshold')):g}: {n} alarm{'s' if n != 1 else ''}.")
    return Board(question=question, entries=entries, row_title="Task",
                 findings=alarm_sentences(doc, k, limit=len(alarms) or 1),
                 no_findings=("No alarm: no gap's confidence sequence has excluded 0 in any period. That is not "
                              "proof that the groups are served alike: small groups give wide sequences."),
                 untested=[suppress_text(str(w), k) for w in doc.get("warnings") or []],
                 next_steps=change_sentences(doc, k) + [
                     "For an alarm, read its trend chart and the groups' prevalence and scores over time (context) "
                     "before acting."],
                 plan=promise(doc), more_where="the trend charts and the table of the latest period")


def _summary(doc: dict, k: int) -> Section:
    """Page 2: every alarm and what changed since the previous period, under page 1's question and promise (the
    board states them; not repeated here)."""
    s = Section("summary", "The alarms and what changed")
    sentences = alarm_sentences(doc, k)
    if sentences:
        n = len(doc.get("alarms") or [])
        s.blocks.append(Paragraph(f"{n} alarm{'s' if n != 1 else ''} (a gap whose confidence sequence excludes 0; "
                                  "'since': where the window of its strongest evidence begins):", "subheading"))
        for text in sentences:
            s.blocks.append(Paragraph(text, "finding"))
    else:
        s.blocks.append(Paragraph("No alarm: no gap's confidence sequence has excluded 0 in any period. That is not "
                                  "proof that the groups are served alike: small groups give wide sequences (see "
                                  "the table of the latest period).", "finding"))
    s.blocks.append(Paragraph("What changed since the previous period", "subheading"))
    for text in change_sentences(doc, k):
        s.blocks.append(Paragraph(suppress_text(text, k), "bullet"))
    for w in doc.get("warnings") or []:
        s.blocks.append(Paragraph(suppress_text(str(w), k), "note"))
    return s


def _key(r: dict) -> tuple:
    return (r.get("task"), r.get("attribute"), r.get("group"), r.get("comparison"), r.get("metric"))


def trend_data(doc: dict, key: tuple, k: int) -> pd.DataFrame:
    rows = [r for r in doc.get("monitor") or [] if _key(r) == key]
    return pd.DataFrame({"period": [str(r.get("period")) for r in rows],
                         "gap": [num(r.get("gap")) for r in rows],
                         "cs_low": [num(r.get("cs_low")) for r in rows],
                         "cs_high": [num(r.get("cs_high")) for r in rows],
                         "period_gap": [num(r.get("period_gap")) if (num(r.get("n")) or 0) >= k else None
                                        for r in rows],
                         "alarm": [bool(r.get("alarm")) for r in rows]})


def _trends(doc: dict, k: int) -> Section:
    s = Section("trends", "The gaps over time", new_page=False)
    alarms = doc.get("alarms") or []
    keys = [_key(a) for a in alarms][:MAX_CHARTS]
    if not keys:
        # no alarm: the comparisons that came closest, so the reader sees what "no alarm" rests on
        latest = [r for r in doc.get("monitor") or [] if r.get("period") == ((doc.get("periods") or [{}])[-1]
                                                                              .get("period"))]
        latest = [r for r in latest if num(r.get("cs_low")) is not None]
        latest.sort(key=lambda r: -max(num(r["cs_low"]), -num(r["cs_high"])))
        keys = [_key(r) for r in latest[:2]]
        s.blocks.append(Paragraph("No gap is alarmed; below, the comparisons closest to an alarm in the latest "
                                  "period."))
    for key in keys:
        task, attr, group, _, metric = key
        who = _who({"task": task, "attribute": attr, "group": group})
        s.blocks.append(FigureSpec(
            "monitor_trend", f"{METRIC_WORDS.get(metric, metric)}: {who} − rest", trend_data(doc, key, k),
            caption=("Line: the gap the monitor estimates at each period (over the window its alarm rests on); band: "
                     "its anytime-valid confidence sequence; red points: alarmed periods; grey dots: each period's "
                     f"own gap (not shown over fewer than {k} cases)."),
            xlabel="period"))
    return s


def _latest(doc: dict, k: int) -> Section:
    s = Section("latest", "Every comparison in the latest period", landscape=True)
    periods = doc.get("periods") or []
    last = periods[-1]["period"] if periods else None
    rows = []
    recs = [r for r in doc.get("monitor") or [] if r.get("period") == last]
    tasks = {str(r.get("task")) for r in recs}
    for r in recs:
        small = (num(r.get("n")) or 0) < k
        row = [str(r.get("attribute")), str(r.get("group")), METRIC_WORDS.get(r.get("metric"), str(r.get("metric"))),
               count(r.get("n"), k), "–" if small else fmt_rate(r.get("rate"), 2),
               fmt_rate(r.get("rest_rate"), 2) if (num(r.get("rest_n")) or 0) >= k else "–",
               (f"{fmt_signed(r['gap_band'][0], 2)} to {fmt_signed(r['gap_band'][1], 2)} (band)" if r.get("gap_band")
                else fmt_signed(r.get("gap"), 3)),
               (f"{fmt_signed(r.get('cs_low'), 3)} to {fmt_signed(r.get('cs_high'), 3)}"
                if num(r.get("cs_low")) is not None else "–"),
               str(r.get("since") or "–"), "ALARM" if r.get("alarm") else ("within ±margin" if r.get("within_margin")
                                                                        else "–")]
        if len(tasks) > 1:
            row.insert(0, str(r.get("task")))
        rows.append(row)
    header = ["Attribute", "Group", "Metric", "n", "Rate", "Rest", "Gap", "Confidence sequence", "Since", "Verdict"]
    if len(tasks) > 1:
        header.insert(0, "Task")
    margin = num((doc.get("plan") or {}).get("margin")) or 0.05
    s.blocks.append(Table(header, rows, title=f"Each group against the rest in {last}", small=True,
                          note=("n: the group's cases of the rate in this period (positive cases for recall, negative "
                                "cases for specificity, rows for the positive prediction rate); rate and rest: this "
                                "period alone. Gap, confidence sequence and since: the monitor's estimate over the "
                                "window from 'since' to this period, at the comparison's share of α. 'within "
                                f"±margin': the whole sequence lies within ±{margin:g}. Rates over fewer than {k} "
                                "cases are not shown.")))
    return s


def _context(doc: dict, k: int) -> Section:
    s = Section("context", "Context: prevalence and scores by group over time (not tested)", landscape=True)
    s.blocks.append(Paragraph("Context only, beside the verdicts: these numbers are not tested and raise no alarm. "
                              "A group's prevalence or score distribution may drift without any gap in recall or "
                              "specificity, and the gaps above are computed within each period, so drift alone "
                              "does not make an alarm."))
    ctx = pd.DataFrame.from_records(doc.get("context") or [])
    if ctx.empty:
        return s
    for (task, attr), part in ctx.groupby(["task", "attribute"], sort=True):
        rows = []
        for _, r in part.sort_values(["period", "group"]).iterrows():
            lab_small = (num(r.get("labelled")) or 0) < k
            row_small = (num(r.get("rows")) or 0) < k
            rows.append([str(r["period"]), str(r["group"]), count(r.get("rows"), k),
                         "–" if lab_small else fmt_rate(r.get("prevalence"), 3),
                         "–" if row_small else fmt_rate(r.get("flagged"), 3),
                         "–" if row_small else
                         f"{fmt_rate(r.get('score_q25'), 2)} / {fmt_rate(r.get('score_median'), 2)} / "
                         f"{fmt_rate(r.get('score_q75'), 2)}"])
        title = f"{attr}" + ("" if task in (None, "(all)") else f", {task}")
        s.blocks.append(Table(["Period", "Group", "n", "Prevalence", "Flagged", "Score quartiles"], rows,
                              title=f"Context by period: {title}", small=True,
                              note=(f"n: rows; prevalence among the labelled rows; flagged: share at or above the "
                                    f"threshold; score quartiles 25% / 50% / 75%. Not shown over fewer than {k} "
                                    "rows.")))
    return s


def _methods(doc: dict, k: int) -> Section:  # noqa: ARG001
    s = Section("methods", "Methods")
    plan = doc.get("plan") or {}
    alpha = num(plan.get("alpha")) or 0.05
    s.blocks += [
        Paragraph("Per period, whole patients: a patient's rows in one period count as one cluster, so a group's "
                  "rate is a ratio of cases with a cluster-robust variance. The period's gap is the group's rate "
                  "minus the rest's."),
        Paragraph("Across periods: the periods' gaps are combined with weights from their sizes only (never from "
                  "the flags), within each period, so a prevalence or calibration drift shared by group and rest "
                  "does not make a gap. The combined gap has a two-sided normal-mixture confidence sequence (Robbins "
                  "1970; Howard, Ramdas, McAuliffe & Sekhon 2021; with estimated variances, asymptotically valid as "
                  "in Waudby-Smith et al. 2024): it covers the gap at every period at once, however often it is "
                  "read."),
        Paragraph("A gap that opens mid-stream: one sequence is started at every period j, with the share 1/(j(j+1)) "
                  "of the comparison's level (they sum to 1), and the record shows the window furthest from 0 when "
                  "one excludes 0 (its start is 'since'), else the whole stream."),
        Paragraph(f"Multiplicity: α = {alpha:g} is split equally over the {doc.get('comparisons')} comparisons "
                  "(Bonferroni), which keeps the promise for the whole monitor. An alarm is a sequence that "
                  "excludes 0 at that period."),
        Paragraph("Assumptions: within a period, patients are independent of each other; periods are independent "
                  "given their cases (a patient seen in several periods is a new cluster each time); labels that "
                  "arrive late update their period only, and the whole history is recomputed from the stored "
                  "periods on every call (a group that first appears later changes the split of α)."),
    ]
    rows = [["Metrics", ", ".join(METRIC_WORDS.get(m, m) for m in plan.get("metrics") or [])],
            ["Attributes", ", ".join(plan.get("attributes") or [])],
            ["Threshold", f"{num(plan.get('threshold')):g}"], ["Period column", str(plan.get("period"))],
            ["Task column", str(plan.get("task") or "none (one task)")],
            ["Patient id", str(plan.get("patient_id") or "none (rows are independent)")],
            ["α (whole monitor) / per comparison", f"{alpha:g} / {num(doc.get('alpha_per_comparison')) or 0:.3g}"],
            ["Margin", f"±{num(plan.get('margin')) or 0.05:g}"]]
    s.blocks.append(Table(["Setting", "Value"], rows, title="Settings", align=["L", "L"]))
    prow = [[str(p.get("period")), count(p.get("rows"), k), count(p.get("labelled"), k)]
            for p in doc.get("periods") or []]
    s.blocks.append(Table(["Period", "Rows", "Labelled"], prow, title="Periods stored", align=["L", "R", "R"],
                          small=True))
    return s


def _provenance(doc: dict, k: int) -> Section:
    s = Section("provenance", "Provenance")
    prov = doc.get("provenance") or {}
    stream = doc.get("stream") or {}
    rows = [["Audit date", report_date(prov)], ["Data", str(prov.get("dataset", "–"))],
            ["Stream SHA-256", str(prov.get("data_sha256") or "–")],
            ["Periods added by this call", ", ".join(stream.get("added") or []) or "none"],
            ["Periods with late labels", ", ".join(stream.get("updated") or []) or "none"],
            ["Small-cell suppression", f"counts below {k} shown as “<{k}”"]]
    rows += [[f"Version: {name}", str(v)] for name, v in (prov.get("versions") or {}).items()]
    s.blocks.append(Table(["Item", "Value"], rows, widths=[1.3, 3.7], align=["L", "L"], small=True))
    return s


def report_tree(doc: dict, settings) -> Report:
    """The report tree of a stored monitor document (``settings``: :class:`fairdesk.core.kinds.ReportSettings`)."""
    k = int(settings.suppress_k)
    _register()
    return with_disclosure(Report(title="Watching the model", subtitle=f"Fairness over time, "
                                                       f"{(doc.get('provenance') or {}).get('dataset') or 'data'}",
                  date=report_date(doc.get("provenance") or {}), suppress_k=k,
                  sections=[board_section(board(doc, k), k), _summary(doc, k), _trends(doc, k), _latest(doc, k), _context(doc, k), _methods(doc, k),
                            _provenance(doc, k)],
                  footer=f"FairDesk · fairness monitor · counts below {k} shown as <{k}",
                  metadata={"title": "Watching the model", "subject": "FairDesk fairness monitor"}), doc)


def build_report(doc: dict, path: str | os.PathLike, settings) -> Path:
    """The registry's one report signature: the PDF of a stored ``monitor`` document at ``path``."""
    from fairdesk.core.reports.pdf import write_pdf

    return write_pdf(report_tree(doc, settings), path)


# --------------------------------------------------------------------------------------------------------------
# The trend chart


def trend_size(data: pd.DataFrame) -> tuple[float, float]:  # noqa: ARG001
    return 6.6, 2.5


def render_trend_png(data: pd.DataFrame, buf, title: str) -> None:
    """The gap over periods with its confidence sequence as a band, alarmed periods in red, each period's own gap
    as grey dots, and 0 as a line."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    w, h = trend_size(data)
    fig = Figure(figsize=(w, h), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.09, 0.25, 0.89, 0.62))
    fig.suptitle(title, fontsize=8.5, x=0.01, ha="left", y=0.98)
    x = np.arange(len(data))
    f = lambda c: pd.to_numeric(data[c], errors="coerce").to_numpy(float)  # noqa: E731
    ax.fill_between(x, f("cs_low"), f("cs_high"), color="#9ecae1", alpha=0.6, linewidth=0)
    ax.plot(x, f("gap"), color="#08519c", linewidth=1.2)
    ax.plot(x, f("period_gap"), linestyle="none", marker=".", color="#8a8a8a", markersize=3)
    alarm = data["alarm"].to_numpy(bool)
    ax.plot(x[alarm], f("gap")[alarm], linestyle="none", marker="o", color="#B00020", markersize=3.5)
    ax.axhline(0.0, color="black", linewidth=0.7)
    step = max(1, len(x) // 12)
    ax.set_xticks(x[::step])
    ax.set_xticklabels(list(data["period"])[::step], fontsize=6.5, rotation=45, ha="right")
    ax.tick_params(axis="y", labelsize=7)
    ax.set_ylabel("gap (group − rest)", fontsize=7)
    lim = np.nanmax(np.abs(np.r_[f("cs_low"), f("cs_high"), f("period_gap"), [0.05]]))
    ax.set_ylim(-min(lim, 1.0) * 1.05, min(lim, 1.0) * 1.05)
    fig.savefig(buf, format="png", dpi=110)


def _register() -> None:
    from fairdesk.core.reports.pdf import register_figure_kind

    register_figure_kind("monitor_trend", render_trend_png, trend_size)
