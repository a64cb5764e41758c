"""The report of the group audit (kind ``"groups"``): what it says, built from a result (never from widgets).

:func:`build_group_report` turns a :class:`~fairdesk.core.audits.groups.GroupAuditResult` into a :class:`Report` — a
plain tree of sections holding paragraphs, tables (header + rows of strings) and figure specs (figure data from
:mod:`fairdesk.core.reports.figures`). The renderer (:mod:`fairdesk.core.reports.pdf`) only lays it out, so
everything the report claims is decided, worded and small-cell-suppressed here, where tests can read it.
:func:`report_tree` and :func:`build_report` take the stored document and the
:class:`~fairdesk.core.kinds.ReportSettings` (the registry's one signature).

Small-cell suppression: every count (group sizes, numerators, denominators, positives, confusion counts, sizes of
dropped groups, counts inside warnings) below ``suppress_k`` is shown as ``"<k"``. Rates are still shown.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from fairdesk.core import numbers
from fairdesk.core.audits.groups import (BOOTSTRAP_INTERVALS_WARNING, CORRECTIONS, DISCRIMINATION_MEASURES,
                                         FAMILY_TEXT, FLAT_PREFIX, METRIC_TEXT, RULE_TEXT, comparison_counts,
                                         findings, kept_findings, plan_summary, tests_text, verdict_counts)
from fairdesk.core.reports import calibration_figures as CF
from fairdesk.core.reports import figures as F
from fairdesk.core.reports.board import Board, are, board_section
from fairdesk.core.reports.document import (with_disclosure, Block, FigureSpec, Paragraph, Report, Section, Table, cap,
                                            correction_words, join_words, plural, report_date, suppress_text)
from fairdesk.core.reports.figures import (as_text, fmt_ci, fmt_count, fmt_p, fmt_rate, fmt_signed, is_true, num,
                                           verdict_text)

if TYPE_CHECKING:  # pragma: no cover
    from fairdesk.core.audits.groups import GroupAuditResult
    from fairdesk.core.kinds import ReportSettings

MAX_FINDINGS_ON_SUMMARY = 8
MAX_FOREST_ROWS = 36  # rows per forest figure; more tasks are split over several figures
MAX_BIN_TASKS = 12  # small multiples per bins figure
MAX_CALIBRATION_ON_SUMMARY = 4  # calibration findings on the summary page (the rest: section 5)
MAX_CALIBRATION_FIGURES = 8  # (task, attribute) pairs drawn in section 5; miscalibrated ones first


# --------------------------------------------------------------------------------------------------------------
# Wording helpers

METRIC_TITLE = {"parity": "Positive prediction rate", "recall": "Recall", "specificity": "Specificity",
                "delta_eo": "Error spread Δ_eo", "auroc": "AUROC", "auprc": "AUPRC"}
METRIC_SHORT = {"parity": "PPR", "recall": "Recall", "specificity": "Specificity", "delta_eo": "Δ_eo",
                "auroc": "AUROC", "auprc": "AUPRC"}
METRIC_PLAIN = {
    "parity": "positive prediction rate — the share of patients the model flags",
    "recall": "recall — the share of patients who truly have the condition whom the model flags",
    "specificity": "specificity — the share of patients without the condition whom the model correctly "
                   "does not flag",
}
CONSEQUENCE = {  # what the difference means for the group named first
    ("parity", "lower"): "this group is flagged less often",
    ("parity", "higher"): "this group is flagged more often",
    ("recall", "lower"): "the model misses more true cases in this group",
    ("recall", "higher"): "the model finds more of the true cases in this group",
    ("specificity", "lower"): "the model raises more false alarms in this group",
    ("specificity", "higher"): "the model raises fewer false alarms in this group",
    ("auroc", "lower"): "the score ranks patients with the condition above those without less well in this group",
    ("auroc", "higher"): "the score ranks patients with the condition above those without better in this group",
    ("auprc", "lower"): "among the patients the score ranks highest, fewer have the condition in this group",
    ("auprc", "higher"): "among the patients the score ranks highest, more have the condition in this group",
}
DISCRIMINATION_PLAIN = ("AUROC and AUPRC — how well the risk score ranks patients with the condition above those "
                        "without, over all thresholds")
PREVALENCE_CAVEAT = ("a score that ranks at random has an AUPRC equal to the prevalence, so part of an AUPRC gap can "
                     "come from a difference in prevalence alone")
MAX_COMPARISONS_IN_FINDING = 3
CASES = {"parity": "patients", "recall": "patients with the condition",
         "specificity": "patients without the condition"}
RULE_PLAIN = {
    "max": "each group is compared with the group whose rate differs most from its own",
    "one-vs-rest": "each group is compared with all other tested groups together",
    "between": "the group with the highest rate is compared with the group with the lowest rate",
    "to-overall": "each group is compared with all other tested groups together",
}
def _s(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _sig_text(row, margin: float = 0.05) -> str:
    """The verdict cell: differs / equivalent within ±margin / inconclusive ("–" when not tested)."""
    if num(row.gap) is None:
        return "–"
    reason = _s(getattr(row, "reason", None))
    if getattr(row, "verdict", None) == "inconclusive" and reason.startswith("inconclusive:"):
        return reason  # e.g. "inconclusive: the model flags nobody in T at threshold 0.5"
    text = verdict_text(getattr(row, "verdict", None), margin)
    return text + (f" ({OUTSIDE_MARK})" if _s(getattr(row, "outside_region", None)) else "")


OUTSIDE_MARK = "outside verified region"


def outside_region_count(result) -> int:
    """How many tested comparisons rest on data outside the region where their test was verified."""
    f = kept_findings(result)  # read only
    if f.empty or "outside_region" not in f:
        return 0
    return sum(1 for v in f["outside_region"].tolist() if isinstance(v, str) and bool(v))


def outside_region_note(result, k: int) -> str | None:
    """Page 1's note on the comparisons outside the region where their test was verified, or None;
    counts below ``k`` suppressed."""
    f = kept_findings(result)  # read only
    if f.empty or "outside_region" not in f:
        return None
    out = F.table_rows(f, ("metric", "group", "task", "outside_region"),
                       [isinstance(v, str) and bool(v) for v in f["outside_region"].tolist()])
    if not out:
        return None
    example = out[0]._asdict()
    return (f"{plural(len(out), 'comparison')} (marked “{OUTSIDE_MARK}” in the tables) "
            f"{'rests' if len(out) == 1 else 'rest'} on data outside the region where FairDesk's simulations "
            f"verified the test's error rate and interval coverage, so {'its verdict' if len(out) == 1 else 'their verdicts'} "
            "may be less reliable than stated; "
            f"for example {example['metric']} of {example['group']}{in_task(example['task'])}: "
            f"{suppress_text(str(example['outside_region']).removeprefix('outside the verified region: '), k)}.")


def band_text(value, signed: bool = False) -> str | None:
    """A rate or gap withheld from a released document as the band it lies in ("0.40 to 0.60"), else None."""
    if not isinstance(value, (list, tuple)) or len(value) != 2 or num(value[0]) is None or num(value[1]) is None:
        return None
    f = fmt_signed if signed else fmt_rate  # 3 decimals, as stored: fewer would narrow the band
    return f"{f(value[0])} to {f(value[1])}"


def _rate_cell(row, k: int) -> str:
    rate = num(row.rate)
    banded = band_text(getattr(row, "rate_band", None))
    if banded:
        return f"{banded} (counts withheld)"
    if rate is None:
        reason = _s(row.reason) or "no cases in the denominator"
        return f"not estimable ({suppress_text(reason, k)})"
    return f"{fmt_rate(rate)} ({F.fmt_fraction(row.numerator, row.denominator, k)})"


# --------------------------------------------------------------------------------------------------------------
# Findings

@dataclass
class Finding:
    sentence: str
    magnitude: float
    order: tuple
    few_cases: bool = False  # a rate behind it rests on fewer cases than the minimum group size
    kind: int = 0  # 0 = gap of rates, 1 = error spread (another scale), 2 = AUROC / AUPRC gap

    def sort_key(self):
        """The rate gaps at the threshold first (the testing plan's primary measures by default), largest first;
        then AUROC / AUPRC gaps, then error spreads (another scale); those resting on few cases last."""
        return (self.few_cases, self.kind != 0, self.kind == 1, -round(abs(self.magnitude), 6), self.order)



def in_task(task) -> str:
    """" in task T" for a sentence; nothing for the one task of an audit without a task column ("(all)")."""
    return "" if str(task) == "(all)" else f" in task {task}"


def _comparison_parts(comps: list, direction: str, most: int = MAX_COMPARISONS_IN_FINDING) -> list[str]:
    """The clauses of one finding sentence, largest gap first: "0.15 lower than for B (0.70 vs 0.85; 95% CI …)",
    at most MAX_COMPARISONS_IN_FINDING of them and "also lower than for N other groups". ``comps``: (|gap|, other
    group, own value, other's value, (ci low, ci high), …) tuples; sorted here."""
    comps.sort(key=lambda c: (-round(c[0], 6), c[1]))
    parts = []
    for mag, other, s_val, o_val, ci, *rest in comps[:most]:
        detail = []
        if s_val is not None and o_val is not None:  # a value withheld from a released document is its band (text)
            words = [_value_words(v) for v in (s_val, o_val)]
            detail.append("counts withheld" if None in words else " vs ".join(words))
        if ci[0] is not None and ci[1] is not None:
            detail.append(f"adjusted CI {fmt_rate(ci[0], 2)} to {fmt_rate(ci[1], 2)}")
        size = rest[1] if len(rest) > 1 and rest[1] else f"{mag:.2f}"
        if size.startswith("0.00 to "):  # a band reaching 0 beside "differs" would read as "maybe no gap"
            parts.append(f"{direction} than for {other} (by at most {size[len('0.00 to '):]}"
                         + (f": {'; '.join(detail)})" if detail else ")"))
        else:
            parts.append(f"{size} {direction} than for {other}" + (f" ({'; '.join(detail)})" if detail else ""))
    more = len(comps) - most
    if more > 0:
        parts.append(f"also {direction} than for {plural(more, 'other group')}")
    return parts

def _value_words(v) -> str | None:
    """A rate in a finding sentence: 2 decimals; a released band as its text; None for the whole 0–1 range."""
    if isinstance(v, str):
        return None if v.replace(" (counts withheld)", "") == "0.000 to 1.000" else v
    return fmt_rate(v, 2)


def _gap_findings(result: "GroupAuditResult", *, significant_col: str = "significant_bh",
                  k: int | None = None, most: int = MAX_COMPARISONS_IN_FINDING) -> list[Finding]:
    """Significant gaps as plain sentences, one per (task, attribute, measure, group named first).

    A pair found from both sides (the max-gap rule reports A vs B and B vs A) is told once, from the side of the
    group with the lower rate; several significant comparisons of the same group are told in one sentence.
    """
    rec = result.records
    rule = result.plan.gap_rule
    if rec.empty:
        return []
    # one row per tested comparison (a pair shown from both sides is one test: the lower group's row is kept)
    shown = kept_findings(result)  # read only
    other = {"delta_eo", "calibration", *DISCRIMINATION_MEASURES}
    gaps = F.table_rows(shown, GAP_FIELDS, [m not in other and is_true(s) for m, s in
                                             zip(shown["metric"].tolist(), shown[significant_col].tolist())])
    chosen = {row.test_id: row for row in gaps if num(row.gap) is not None}
    few = max(int(result.plan.min_group_size), int(k or 0))
    cache: dict = {}
    grouped: dict[tuple, list[tuple]] = {}
    for row in chosen.values():
        gap = float(row.gap)
        lo, hi = num(row.ci_low), num(row.ci_high)
        metric = str(row.metric)
        own_den = num(row.denominator)
        comp = _s(row.comparison) or None
        other_den = F.comparison_counts(result, row.task, row.attribute, row.group, comp, metric, cache)[1]
        if gap < 0 or rule in ("one-vs-rest", "to-overall"):
            subject, other = str(row.group), _other_phrase(rule, row)
            s_rate, o_rate = num(row.rate), num(row.comparison_rate)
            s_den, o_den = own_den, other_den
            direction = "lower" if gap < 0 else "higher"
            ci = (-hi, -lo) if gap < 0 and lo is not None and hi is not None else (lo, hi)
        else:  # the higher group's record of a pair: tell it from the lower group's side
            subject, other = str(row.comparison), str(row.group)
            s_rate, o_rate = num(row.comparison_rate), num(row.rate)
            s_den, o_den = other_den, own_den
            direction = "lower"
            ci = (lo, hi)
        thin = [(name, d) for name, d in ((subject, s_den), (other, o_den)) if d is not None and d < few]
        key = (str(row.task), str(row.attribute), metric, subject, direction, bool(thin))
        size, s_rate, o_rate = _banded_finding(row, gap < 0 or rule in ("one-vs-rest", "to-overall"), s_rate, o_rate)
        grouped.setdefault(key, []).append((abs(gap), other, s_rate, o_rate, ci, thin, size))
    task_order = {t: i for i, t in enumerate(dict.fromkeys(rec["task"].astype(str)))}
    out = []
    for (task, attr, metric, subject, direction, fragile), comps in grouped.items():
        parts = _comparison_parts(comps, direction, most)
        sentence = (f"{METRIC_TITLE[metric]} for {attr} = {subject} is {join_words(parts)}{in_task(task)}. "
                    f"Meaning: {CONSEQUENCE[(metric, direction)]}.")
        if fragile:
            thin = dict(t for c in comps[:most] for t in c[5])
            names = join_words([f"{name} ({fmt_count(d, k)} {CASES[metric]})" for name, d in thin.items()])
            sentence += (f" Caution: few cases behind the rate{'s' if len(thin) > 1 else ''} of {names}, so "
                         "this estimate is fragile.")
        out.append(Finding(sentence, comps[0][0], (task_order.get(task, 0), attr, metric, subject), fragile))
    out.sort(key=Finding.sort_key)
    return out


GAP_FIELDS = ("test_id", "task", "attribute", "group", "comparison", "metric", "gap", "ci_low", "ci_high", "rate",
              "comparison_rate", "denominator", "gap_band", "rate_band",
              "comparison_rate_band")  # what a finding sentence reads of a findings row


def _banded_finding(row, own_side: bool, s_rate, o_rate):
    """(size words or None, subject's value, other's value) of a finding whose rates a released document withholds:
    the gap's size as the range its band allows ("0.25 to 0.48"), a withheld rate as its band."""
    band = getattr(row, "gap_band", None)
    if band_text(band) is None:
        return None, s_rate, o_rate
    lo, hi = (-band[1], -band[0]) if own_side and num(row.gap) < 0 else (band[0], band[1])
    size = f"{math.floor(max(lo, 0.0) * 100) / 100:.2f} to {math.ceil(hi * 100) / 100:.2f}"  # rounded outward
    own, comp = band_text(getattr(row, "rate_band", None)), band_text(getattr(row, "comparison_rate_band", None))
    if own_side:
        return size, own or s_rate, comp or o_rate
    return size, comp or s_rate, own or o_rate


def _other_phrase(rule: str, row) -> str:
    if rule == "one-vs-rest":
        return "all other groups together"
    if rule == "to-overall":
        return "all tested groups together"
    return str(row.comparison)


def _delta_findings(result: "GroupAuditResult", significant_col: str = "significant_bh") -> list[Finding]:
    """Significant error spreads, one sentence per (task, continuous attribute)."""
    rec = result.records
    if rec.empty:
        return []
    d = F.table_rows(rec, ("task", "attribute", "group", "gap", "ci_high", "bins"),  # Δ_eo records: unique tests
                     [m == "delta_eo" and is_true(s) for m, s in
                      zip(rec["metric"].tolist(), rec[significant_col].tolist())])
    task_order = {t: i for i, t in enumerate(dict.fromkeys(rec["task"].astype(str)))}
    grouped: dict[tuple, list] = {}
    for row in d:
        grouped.setdefault((str(row.task), str(row.attribute)), []).append(row)
    out = []
    for (task, attr), rows in grouped.items():
        parts = []
        for row in rows:
            bins = num(row.bins)
            n_used = int(bins) if bins is not None else str(row.group).removeprefix("N=")
            parts.append(f"Δ_eo = {fmt_rate(row.gap, 2)} over {n_used} {attr} bands "
                         f"(without dependence 95% of values fall at or below {fmt_rate(row.ci_high, 2)})")
        out.append(Finding(
            f"The model's error rates (missed cases and false alarms) vary with {attr} more than chance would "
            f"explain{in_task(task)}: error spread {join_words(parts)}, where 0 would mean equal error rates in every "
            "band.", max(float(r.gap) for r in rows), (task_order.get(task, 0), attr, "delta_eo", ""),
            kind=1))
    return out


def _discrimination_findings(result: "GroupAuditResult", k: int | None = None,
                             significant_col: str = "significant_bh",
                             most: int = MAX_COMPARISONS_IN_FINDING) -> list[Finding]:
    """AUROC / AUPRC gaps that differ as plain sentences, one per (task, attribute, measure, group named first),
    told from the side of the group with the lower value (the pair tests of ``findings``; METHODS §8). An AUPRC
    sentence says that part of the gap can come from a difference in prevalence, with both prevalences."""
    shown = kept_findings(result)  # read only
    if shown.empty:
        return []
    rows = F.table_rows(shown, GAP_FIELDS, [m in DISCRIMINATION_MEASURES and is_true(s) for m, s in
                                            zip(shown["metric"].tolist(), shown[significant_col].tolist())])
    disc = result.discrimination
    info: dict[tuple, dict] = {}  # (task, attribute, group) -> n, positives, prevalence
    firsts = disc[["task", "attribute", "group", "n", "n_positive"]].drop_duplicates(["task", "attribute", "group"])
    for r in F.table_rows(firsts, firsts.columns):
        n, pos = num(r.n), num(r.n_positive)
        info[(str(r.task), str(r.attribute), str(r.group))] = {
            "n": n, "pos": pos, "prev": pos / n if n and pos is not None else None}
    few = max(int(result.plan.min_group_size), int(k or 0))
    task_order = {t: i for i, t in enumerate(_tasks(result))}
    grouped: dict[tuple, list[tuple]] = {}
    for row in rows:
        gap, lo, hi = num(row.gap), num(row.ci_low), num(row.ci_high)
        if gap is None:
            continue
        group, comp = str(row.group), str(row.comparison)
        if gap < 0:  # tell it from the lower group's side, the interval as a positive distance
            subject, other, s_val, o_val = group, comp, num(row.rate), num(row.comparison_rate)
            ci = (-hi, -lo) if lo is not None and hi is not None else (None, None)
        else:
            subject, other, s_val, o_val = comp, group, num(row.comparison_rate), num(row.rate)
            ci = (lo, hi)
        task, attr = str(row.task), str(row.attribute)
        thin = []
        for name in (subject, other):
            c = info.get((task, attr, name), {})
            if c.get("n") is not None and c.get("pos") is not None and min(c["pos"], c["n"] - c["pos"]) < few:
                thin.append((name, c))
        key = (task, attr, str(row.metric), subject, bool(thin))
        grouped.setdefault(key, []).append((abs(gap), other, s_val, o_val, ci, thin))
    out = []
    for (task, attr, metric, subject, fragile), comps in grouped.items():
        parts = _comparison_parts(comps, "lower", most)
        where = in_task(task)
        sentence = (f"{METRIC_TITLE[metric]} for {attr} = {subject} is {join_words(parts)}{where}. "
                    f"Meaning: {CONSEQUENCE[(metric, 'lower')]}.")
        if metric == "auprc":
            prevs = [(name, info.get((task, attr, name), {}).get("prev"))
                     for name in [subject] + [c[1] for c in comps[:most]]]
            known = [f"{name} {fmt_rate(v, 2)}" for name, v in prevs if v is not None]
            sentence += (f" Caution: {PREVALENCE_CAVEAT}"
                         + (f" (prevalence {join_words(known)})." if len(known) > 1 else "."))
        if fragile:
            thin = dict(t for c in comps[:most] for t in c[5])
            names = join_words([f"{name} ({fmt_count(c['pos'], k)} patients with and "
                                f"{fmt_count(c['n'] - c['pos'], k)} patients without the condition)"
                                for name, c in thin.items()])
            sentence += (f" Caution: few cases behind the value{'s' if len(thin) > 1 else ''} of {names}, so this "
                         "estimate is fragile.")
        out.append(Finding(sentence, comps[0][0], (task_order.get(task, 0), attr, metric, subject), fragile,
                           kind=2))
    out.sort(key=Finding.sort_key)
    return out


def _summary_findings(findings: list[Finding], limit: int) -> list[Finding]:
    """The findings shown on the summary page in :meth:`Finding.sort_key` order (largest gap first); at least one
    finding of each kind is kept when there is any (an error spread's scale differs, and a discrimination gap
    answers another question, so neither is crowded out by rate gaps)."""
    ordered = sorted(findings, key=Finding.sort_key)
    shown = ordered[:limit]
    for kind in (2, 1):
        missing = [f for f in ordered if f.kind == kind]
        if missing and not any(f.kind == kind for f in shown) and len(shown) == limit:
            spare = [f for f in reversed(shown) if sum(g.kind == f.kind for g in shown) > 1]
            if spare:
                shown.remove(spare[0])
                shown.append(missing[0])
    shown.sort(key=Finding.sort_key)
    return shown


# --------------------------------------------------------------------------------------------------------------
# Sections

REPORT_TITLE = "FairDesk fairness audit"


def build_group_report(result: "GroupAuditResult", *, title: str = REPORT_TITLE, dataset_name: str = "",
                       model_description: str = "", suppress_k: int = 11, plan_description: str | None = None
                       ) -> Report:
    """The report model of a group audit. Pure: the same result and arguments give the same report.
    ``plan_description``: the stored testing plan in one sentence (page 1 prints it)."""
    k = _checked_k(suppress_k)
    prov = result.provenance or {}
    date = report_date(prov)
    sections = [
        board_summary(result, k, plan_description),
        _summary_section(result, title, dataset_name, model_description, k, date),
        _methods_section(result, k),
        _figures_section(result, k),
        _tables_section(result, k),
        _calibration_section(result, k),
        _dropped_section(result, k),
        _provenance_section(result, k, dataset_name, model_description),
    ]
    sub = " · ".join(p for p in (dataset_name, f"audit of {date}") if p)
    from fairdesk import __version__

    data_hash = str(prov.get("data_sha256") or "")
    footer = f"FairDesk {__version__} · data {data_hash[:12]}" if data_hash else f"FairDesk {__version__}"
    meta = {"title": title, "subject": f"Group fairness audit · {sub}", "author": "FairDesk",
            "creator": f"FairDesk {__version__}", "keywords": "fairness audit"}
    return Report(title=title, subtitle=sub, date=date, suppress_k=k, sections=sections, footer=footer,
                  metadata=meta)


def report_to_pdf(result: "GroupAuditResult", path: str | os.PathLike, **build_kwargs) -> Path:
    """Build the report of ``result`` (:func:`build_group_report` keyword arguments) and write its PDF."""
    from fairdesk.core.reports.pdf import write_pdf

    return write_pdf(build_group_report(result, **build_kwargs), path)


def report_tree(doc: dict, settings: "ReportSettings") -> Report:
    """The report of a stored group-audit document with the user's report settings."""
    from fairdesk.core.audits.groups import GroupAuditResult

    result = GroupAuditResult.from_dict(doc)
    records = doc.get("records") or []
    if len(records) == len(result.records):  # the bands of a released document (fairdesk.core.disclosure)
        for col in ("rate_band", "comparison_rate_band", "gap_band"):
            if any(col in r for r in records):
                result.records[col] = [r.get(col) for r in records]
    return with_disclosure(build_group_report(result, dataset_name=result.provenance.get("dataset", ""),
                              suppress_k=settings.suppress_k,
                                                   plan_description=plan_description(doc)), doc)


def plan_description(doc: dict) -> str | None:
    """The testing plan in one plain sentence, as the stored document names it (None when it does not)."""
    plan = doc.get("plan") if isinstance(doc, dict) else None
    text = plan.get("description") if isinstance(plan, dict) else None
    return text if isinstance(text, str) and text.strip() else None


def board_summary(result: "GroupAuditResult", suppress_k: int, description: str | None = None) -> Section:
    """Page 1 alone (:func:`board`) — what the PDF's first page prints and the GUI's Findings panel shows —
    without building the rest of the report. ``description``: the testing plan in one sentence, when the stored
    document names it."""
    k = _checked_k(suppress_k)
    return board_section(board(result, k, description), k)


def board(result: "GroupAuditResult", k: int, description: str | None = None) -> Board:
    """What page 1 says of a group audit: the verdict grid (tasks × attributes), the differences in words (largest
    first, with their intervals), what could not be tested, what to check next."""
    plan = result.plan
    prov = result.provenance or {}
    margin = float(getattr(plan, "margin", 0.05))
    tasks = _tasks(result)
    attrs = _categorical_attributes(result) + list(plan.roles.continuous_attributes)
    entries: list[tuple[str, str, str | None]] = []
    for frame in (result.records, result.discrimination, result.calibration):
        if frame is None or frame.empty or "verdict" not in frame:
            continue
        for task, attr, verdict in zip(frame["task"].tolist(), frame["attribute"].tolist(),
                                       frame["verdict"].tolist()):
            entries.append(("all rows" if str(task) == "(all)" else str(task), str(attr), as_text(verdict)))
    counts = comparison_counts(result)
    ds = str(prov.get("dataset") or "")
    where = (f" in {ds}" if ds else "") + (f", over {plural(len(tasks), 'task')}" if len(tasks) > 1 else "")
    question = (f"Does the model perform equally well for the patient groups of {join_words(attrs) or 'no attribute'}"
                f"{where}? Of {plural(counts['total'], 'comparison')}, {counts['differs']} "
                f"{'differs' if counts['differs'] == 1 else 'differ'}, {counts['equivalent']} "
                f"{'is' if counts['equivalent'] == 1 else 'are'} equivalent within ±{numbers.short(margin)} and "
                f"{counts['inconclusive']} {'is' if counts['inconclusive'] == 1 else 'are'} inconclusive.")
    # on page 1 each finding names its largest comparison only (the others: "also lower than for N other groups")
    found = _gap_findings(result, k=k, most=1) + _discrimination_findings(result, k, most=1) + _delta_findings(result)
    found.sort(key=Finding.sort_key)
    sentences = [f.sentence for f in found] + calibration_findings_text(result, k)
    # the model flags nobody / everybody in a task at its threshold: its rate comparisons could not be tested
    untested = [str(w) for w in dict.fromkeys(result.warnings) if str(w).startswith(FLAT_PREFIX)]
    n_dropped = len(result.dropped)
    if n_dropped:
        untested.append(f"{plural(n_dropped, 'group')} (counted per task): smaller than {plan.min_group_size} "
                        "rows, with missing values, or excluded (section 6).")
    if counts["inconclusive"]:
        untested.append(f"{are(counts['inconclusive'], 'comparison')} inconclusive, usually for too few cases.")
    n_outside = outside_region_count(result)
    if n_outside:
        untested.append(f"{plural(n_outside, 'comparison')} {'rests' if n_outside == 1 else 'rest'} on data outside "
                        "the region where the test was verified (marked in the tables).")
    if not (result.calibration is not None and not result.calibration.empty):
        untested.append(calibration_status(result) or "Calibration by group was not assessed.")
    steps = []
    if sentences:
        steps.append("For each difference, check the data behind it (recording, case mix, the model's inputs) "
                     "before reading it as unfair treatment.")
    if counts["inconclusive"] or n_dropped:
        steps.append("Audit again with more patients of the small groups (more time or sites).")
    steps.append("Repeat the audit after any change to the model or to the patients it serves.")
    return Board(question=question, entries=entries, row_title="Task", findings=sentences,
                 no_findings=("No comparison differs after the correction. That is not proof that the model is "
                              "fair: see what could not be tested."),
                 untested=untested, next_steps=steps,
                 plan=str(description or getattr(plan, "description", "") or ""),
                 more_where="sections 1 and 4 (from page 2)")


def _checked_k(suppress_k) -> int:
    """The small-cell threshold k as an int; a ValueError when it is below 1."""
    if int(suppress_k) < 1:
        raise ValueError("suppress_k must be at least 1 (1 shows every count).")
    return int(suppress_k)


def build_report(doc: dict, path: str | os.PathLike, settings: "ReportSettings") -> Path:
    """The group audit's PDF from its stored document (the registry's one report signature)."""
    from fairdesk.core.reports.pdf import write_pdf

    return write_pdf(report_tree(doc, settings), path)


def _tasks(result) -> list[str]:
    if not result.records.empty:
        return [str(t) for t in dict.fromkeys(result.records["task"])]
    return sorted(result.thresholds)


def _categorical_attributes(result) -> list[str]:
    """Categorical and intersectional attributes, in the result's order (they are the ones with group rows)."""
    if not result.groups.empty:
        return [str(a) for a in dict.fromkeys(result.groups["attribute"])]
    return list(result.plan.roles.attributes) + [" × ".join(c) for c in result.plan.intersections]


def _task_sizes(result) -> dict[str, int]:
    """Each task's number of rows: the sum of its first attribute's group sizes (read as lists: one pandas selection
    per task on Arrow-backed text cost the GUI's view thread about 30 ms per audit shown)."""
    g = result.groups
    sizes: dict[str, int] = {}
    withheld: set = set()  # a released copy withholds a group's size: the shown ones' sum is not the task's size
    if not g.empty:
        first: dict = {}
        for task, attr, n in zip(g["task"].tolist(), g["attribute"].tolist(), g["n"].tolist()):
            if first.setdefault(task, attr) == attr:
                if num(n) is None:
                    withheld.add(str(task))
                sizes[str(task)] = sizes.get(str(task), 0) + int(num(n) or 0)
    for task in withheld:
        del sizes[task]
    rec = result.records
    if not rec.empty:
        for r in F.table_rows(rec, ("task", "n"), [m == "delta_eo" for m in rec["metric"].tolist()]):
            if num(r.n) is not None:
                sizes.setdefault(str(r.task), int(num(r.n)))
    return sizes


def _threshold_text(result) -> str:
    plan = result.plan
    if plan.threshold == "best_f1":
        per = ", ".join(f"{t} {tau:.3f}" for t, tau in result.thresholds.items())
        return ("A prediction counts as positive (the patient is 'flagged') when the model's score reaches a "
                f"threshold chosen for each task on validation data to maximise F1 ({per}).")
    return (f"A prediction counts as positive (the patient is 'flagged') when the model's score is at least "
            f"{numbers.short(float(plan.threshold))}.")


def _attribute_lines(result, k: int) -> list[str]:
    g = result.groups
    by_attr: dict[str, tuple[dict, dict]] = {}  # attribute -> (its groups, those not tested), in order
    if not g.empty:
        for attr, group, tested in zip(g["attribute"].tolist(), g["group"].tolist(), g["tested"].tolist()):
            names, untested = by_attr.setdefault(str(attr), ({}, {}))
            names[str(group)] = None
            if not is_true(tested):
                untested[str(group)] = None
    lines = []
    for attr in _categorical_attributes(result):
        names, untested = (list(d) for d in by_attr.get(str(attr), ({}, {})))
        kind = "combined groups" if " × " in attr else "groups"
        listed = f" ({', '.join(names)})" if len(names) <= 6 else ""
        line = f"{attr}: {plural(len(names), kind[:-1], kind)}{listed}"
        if untested:
            shown = ", ".join(untested[:4]) + (f" and {len(untested) - 4} more" if len(untested) > 4 else "")
            line += f"; not tested in some or all tasks (too small or missing): {shown}"
        lines.append(line + ".")
    bins = result.plan.bins
    for attr in result.plan.roles.continuous_attributes:
        lines.append(f"{attr} (continuous): how much the model's error rates vary across "
                     f"{join_words([str(b) for b in bins])} equal-sized {attr} bands.")
    return lines


def _verdict_sentence(result, counts: dict) -> str:
    """"Of N comparisons made, X differ, Y are equivalent within ±m and Z are inconclusive", with the correction and
    the tests of each kind (``counts`` from :func:`comparison_counts`: N = X + Y + Z = the tests listed)."""
    plan = result.plan
    margin = float(getattr(plan, "margin", 0.05))
    family = getattr(plan, "family", "audit")
    corr = correction_words(getattr(plan, "correction", "bh"), plan.alpha)
    scope = {"audit": "one correction over the whole audit", "task": "a correction within each task",
             "attribute-group-measure": "a correction within each attribute, group and measure across tasks"}[family]
    if "calibration" in counts["families"] and getattr(plan, "calibration_own_family", True):
        scope = scope.replace("one correction", "one correction for the comparisons between groups and one for the "
                              "calibration checks", 1).replace("a correction", "separate corrections for the gaps "
                                                                "and the calibration checks", 1)
    after = f"after {scope} (the {corr})."
    if getattr(plan, "procedure", None) == "hierarchical":
        after = f"by the audit's testing plan. {plan_summary(result)['description']}"
    return (f"Of {plural(counts['total'], 'comparison')} made (each pair of groups counted once), "
            f"{counts['differs']} {'differs' if counts['differs'] == 1 else 'differ'}, "
            f"{counts['equivalent']} {'is' if counts['equivalent'] == 1 else 'are'} equivalent within ±{numbers.short(margin)} "
            f"and {counts['inconclusive']} {'is' if counts['inconclusive'] == 1 else 'are'} inconclusive, "
            f"{after} Each comparison is one test: {tests_text(counts)}.")


def _summary_section(result, title, dataset_name, model_description, k, date) -> Section:
    plan = result.plan
    prov = result.provenance or {}
    tasks = _tasks(result)
    sizes = _task_sizes(result)
    blocks: list[Block] = []
    data_hash = str(prov.get("data_sha256") or "")
    ds = dataset_name or "an unnamed dataset"
    if data_hash:
        ds += f" (data fingerprint {data_hash[:12]})"
    model = model_description or "a model whose predictions were loaded into FairDesk"
    blocks.append(Paragraph("What was audited", "subheading"))
    n_eval = prov.get("n_eval_rows")
    task_list = join_words([f"{t} (n\u00a0=\u00a0{fmt_count(sizes.get(t), k)})" for t in tasks]) if len(tasks) <= 8 else \
        f"{len(tasks)} tasks (listed in the tables)"
    blocks.append(Paragraph(
        f"This report checks whether {model} performs equally well for different patient groups in {ds}. "
        f"It covers {plural(len(tasks), 'prediction task')}: {task_list}"
        + (f", {fmt_count(n_eval, k)} prediction rows in all." if n_eval is not None else ".")
        + f" {_threshold_text(result)} The audit was run on {date}."))
    blocks.append(Paragraph("Patient groups compared:", "body"))
    for line in _attribute_lines(result, k):
        blocks.append(Paragraph(line, "bullet"))
    metrics = [m for m in plan.metrics]
    disc_tested = not result.discrimination.empty and result.discrimination["test_id"].notna().any()
    plain = [METRIC_PLAIN[m] for m in metrics] + ([DISCRIMINATION_PLAIN] if disc_tested else [])
    blocks.append(Paragraph(
        "Measures compared between groups: " + "; ".join(plain) + ". "
        f"Multi-group rule: {RULE_PLAIN[plan.gap_rule]}"
        + (" (AUROC and AUPRC: each group with the group whose value differs most from its own)."
           if disc_tested and plan.gap_rule != "max" else "."), "body"))

    found = _gap_findings(result, k=k) + _discrimination_findings(result, k) + _delta_findings(result)
    found.sort(key=Finding.sort_key)
    all_counts = comparison_counts(result)
    counts = verdict_counts(result)
    cal_counts = verdict_counts(result, "calibration")
    gap_counts = {v: counts[v] - cal_counts[v] for v in counts}
    cal_found = calibration_findings_text(result, k)
    margin = float(getattr(plan, "margin", 0.05))
    blocks.append(Paragraph("What was found", "subheading"))
    blocks.append(Paragraph(_verdict_sentence(result, all_counts), "lead"))
    for w in result.warnings:  # the model flags nobody / everybody in a task at its threshold
        if str(w).startswith(FLAT_PREFIX):
            blocks.append(Paragraph(suppress_text(str(w), k), "lead"))
    if cal_counts["total"]:
        # gaps and calibration are different questions: say each apart, so that a calibration finding is never
        # counted under "differs" while the text says that no comparison differs
        disc_counts = verdict_counts(result, "discrimination")
        spread = verdict_counts(result, "delta_eo")["total"]
        split = (f"{gap_counts['total'] - disc_counts['total'] - spread} of rates at the threshold"
                 + (f", {disc_counts['total']} of AUROC or AUPRC" if disc_counts["total"] else "")
                 + (f", {spread} of the error spread" if spread else "") + "; "
                 if disc_counts["total"] or spread else "")
        blocks.append(Paragraph(
            f"These are {plural(gap_counts['total'], 'comparison')} between groups ({split}{gap_counts['differs']} "
            f"{'differs' if gap_counts['differs'] == 1 else 'differ'}, {gap_counts['equivalent']} equivalent, "
            f"{gap_counts['inconclusive']} inconclusive) and {plural(cal_counts['total'], 'calibration check')} "
            f"of the risk score, one per group ({cal_counts['differs']} miscalibrated, {cal_counts['equivalent']} "
            f"calibrated within the margins, {cal_counts['inconclusive']} inconclusive; section 5).", "body"))
    if found:
        order = ""
        if len(found) > 1:
            later = ([] + (["error spreads, on another scale"] if any(f.kind == 1 for f in found) else [])
                     + (["those resting on few cases"] if any(f.few_cases for f in found) else []))
            order = (f", largest gaps first ({' and '.join(later)} last):" if later else ", largest gaps first:")
        blocks.append(Paragraph(f"Differences found between groups (verdict “differs”){order or ':'}", "lead"))
        limit = MAX_FINDINGS_ON_SUMMARY - min(len(cal_found), MAX_CALIBRATION_ON_SUMMARY)
        shown = _summary_findings(found, limit)
        for f in shown:
            blocks.append(Paragraph(f.sentence, "finding"))
        if len(found) > len(shown):
            rest = len(found) - len(shown)
            blocks.append(Paragraph(f"… and {plural(rest, 'more finding')}: every difference is marked "
                                    "“differs” in the results tables of section 4.", "body"))
    elif counts["differs"] == 0:
        blocks.append(Paragraph(
            "No comparison differs after the correction. This is not proof that the model is fair: "
            f"{plural(counts['inconclusive'], 'comparison is', 'comparisons are')} inconclusive (the data cannot "
            f"tell either way), only {counts['equivalent']} shown equivalent within ±{numbers.short(margin)}, and only the "
            "groups, measures and tasks listed above were checked.", "lead"))
    else:
        blocks.append(Paragraph(
            "No gap between groups differs after the correction; this is not proof that the model is fair: "
            f"{plural(gap_counts['inconclusive'], 'gap comparison is', 'gap comparisons are')} inconclusive and "
            f"only {gap_counts['equivalent']} shown equivalent within ±{numbers.short(margin)}. The risk score's calibration "
            "does differ, as follows.", "lead"))
    if cal_found:
        blocks.append(Paragraph("Calibration findings (the predicted risk does not match the observed risk in "
                                "these groups):", "lead"))
        for sentence in cal_found[:MAX_CALIBRATION_ON_SUMMARY]:
            blocks.append(Paragraph(sentence, "finding"))
        if len(cal_found) > MAX_CALIBRATION_ON_SUMMARY:
            blocks.append(Paragraph(f"… and {plural(len(cal_found) - MAX_CALIBRATION_ON_SUMMARY, 'more group')} "
                                    "miscalibrated: see section 5.", "body"))
    elif cal_counts["total"]:
        blocks.append(Paragraph(
            f"No group's calibration differs from perfect calibration after the correction ({cal_counts['equivalent']} "
            f"of {cal_counts['total']} shown calibrated within the margins, {cal_counts['inconclusive']} "
            "inconclusive).", "body"))
    else:
        blocks.append(Paragraph(calibration_status(result) or "Calibration by group was not assessed.", "body"))
    notes = []
    f_rows = findings(result)
    n_unadj_only = int((f_rows["significant"].map(is_true) & (f_rows["verdict"] != "differs")).sum()) \
        if not f_rows.empty else 0
    if n_unadj_only:
        notes.append(f"A further {plural(n_unadj_only, 'comparison')} had p ≤ {numbers.short(plan.alpha)} before the "
                     "correction only; with this many tests some are expected by chance, so they count as "
                     "inconclusive.")
    region = outside_region_note(result, k)
    if region:
        notes.append(region)
    n_dropped = len(result.dropped)
    if n_dropped:
        notes.append(f"{plural(n_dropped, 'group')} (counted per task) could not be tested because "
                     f"{'it was' if n_dropped == 1 else 'they were'} smaller than {plan.min_group_size} rows, "
                     "had missing values or were excluded; section 6 lists them with their sizes.")
    if notes:
        blocks.append(Paragraph(" ".join(notes), "body"))

    blocks.append(Paragraph("How to read this", "subheading"))
    for text in (
        "Rates are shares between 0 and 1 (0.80 = 80% of the patients concerned). A gap is a group's rate minus "
        "the rate it is compared with: 0 means no difference; 0.10 lower means 10 percentage points lower."
        + (" AUROC runs from 0.5 (the score ranks no better than chance) to 1 (every patient with the condition "
           "ranked above every patient without); AUPRC is read against the group's prevalence."
           if disc_tested else ""),
        "The confidence interval (CI) beside each verdict is the range of gaps consistent with the data, widened "
        "for the number of comparisons made (adjusted), so that it agrees with the verdict: it excludes 0 when "
        "the gap differs and lies inside the margin when it is equivalent; a wide interval means the group is "
        "too small to be sure either way. The 95% interval of each comparison on its own is kept in the "
        "results file.",
        "Every comparison gets one of three verdicts. “Differs”: the gap is unlikely to be chance even though "
        "many comparisons were made (q, the corrected p-value, is at most "
        f"{numbers.short(plan.alpha)}). “Equivalent within ±{numbers.short(margin)}”: the data show the gap is smaller than {numbers.short(margin)} "
        "(0.05 = 5 percentage points) in either direction, also after correction. “Inconclusive”: neither — the "
        "data cannot tell, usually because there are too few cases.",
        "A difference is a signal to investigate (data quality, case mix, how the model was built), not proof of "
        "unfair treatment; an inconclusive comparison is not evidence of fairness.",
        f"To protect privacy, any count below {k} is shown as “<{k}”. Rates that cannot be computed (for "
        "example recall in a group without positive cases) are shown as “not estimable”, never as 0.",
    ):
        blocks.append(Paragraph(text, "bullet"))
    return Section("summary", "1  Summary for the governance board", blocks, one_page=True)


def _methods_section(result, k) -> Section:
    plan = result.plan
    prov = result.provenance or {}
    b: list[Block] = []
    b.append(Paragraph("Rates", "subheading"))
    for m in plan.metrics:
        b.append(Paragraph(f"{cap(METRIC_TEXT[m])}.", "bullet"))
    b.append(Paragraph(
        "A rate whose denominator is zero in a group (no positive cases for recall, no negative cases for "
        "specificity) is reported as “not estimable” with the reason, never as 0: turning it into 0 would "
        "fabricate a gap. Every table shows the group size n and the numerator/denominator behind each rate."))
    b.append(Paragraph("Gaps", "subheading"))
    b.append(Paragraph(f"Rule used: {RULE_TEXT[plan.gap_rule]}. With two groups every rule reduces to the signed "
                       "difference of the two rates; the report names the group each gap favours."))
    b.append(Paragraph(_threshold_text(result) + " The same threshold is used in every bootstrap replicate."))
    b.append(Paragraph("Uncertainty, tests and verdicts", "subheading"))
    modes = prov.get("bootstrap") or {}
    mode_values = sorted(set(str(v) for v in modes.values()))
    mode_text = (mode_values[0] if len(mode_values) == 1 else
                 "; ".join(f"{t}: {m}" for t, m in modes.items())) if mode_values else "label-stratified row resampling"
    margin = float(getattr(plan, "margin", 0.05))
    family = getattr(plan, "family", "audit")
    correction = getattr(plan, "correction", "bh")
    counts = verdict_counts(result)
    what = ("every pair of tested groups" if plan.gap_rule in ("max", "between")
            else "each group against all other tested groups together")
    b.append(Paragraph(
        f"Tested unit: {what}, per task and measure. Test of “no gap”: a score test of the difference of two "
        "rates (pooled rate under the null), with its variance multiplied by a design effect measured by the "
        f"bootstrap ({plan.n_boot:,} replicates, {mode_text}, seed {plan.seed}; with a patient id and repeated "
        "rows whole patients are resampled, so correlated rows widen the test and the interval). The p-value is "
        "a normal tail probability, not a count of bootstrap replicates, so it is not limited to 1/(B + 1) and a "
        "clear gap survives a correction over many tests. With independent rows and fewer than 10 expected events "
        "in a group (e.g. the misses of a recall near 1 on a few cases), where the normal law fails, the p-value "
        "is the mid-p of the conditional exact (Fisher) test instead."))
    b.append(Paragraph(
        f"Interval: {plan.ci_level:.0%} Agresti–Caffo interval (one success and one failure added to each group) "
        "with the same design effect, clipped to [−1, 1]. It was chosen by a coverage study (10–100 cases per "
        "group, rates near 0, 0.5 and 1): it kept coverage at 0.94–1.00 where the plain bootstrap percentile "
        "interval fell to 0.78, and it stays centred near the estimate. With repeated patients the interval is "
        "instead the set of gaps the score test does not reject (the variance at each candidate gap, with the same "
        "design effect and t reference), so it excludes 0 exactly when the test rejects. "
        "The bootstrap shares get half a "
        "pseudo-row per outcome (a Jeffreys prior) so that a rate of exactly 0 or 1 still has a spread; "
        "estimates are never smoothed. "
        f"A rate resting on fewer than {getattr(plan, 'min_denominator', 1)} cases (positives for recall, "
        "negatives for specificity) is shown but not tested."))
    b.append(Paragraph(
        (f"Multiple testing: {plan_summary(result)['description']} "
         + " ".join(f"{f['name'].capitalize()} ({f['role']}, {f['tests']} tests): {f['error_rate']}."
                    for f in plan_summary(result)["families"]) + " "
         if getattr(plan, "procedure", None) == "hierarchical" else
         f"Multiple testing: {CORRECTIONS.get(correction, correction)} at {numbers.short(plan.alpha)} over {FAMILY_TEXT[family]} ")
        + f"({counts['tests']} tests in this audit: {tests_text(comparison_counts(result))}). A pair of groups shown "
        "in two rows is one test with one p-value and verdict; because every pair is corrected, choosing which "
        "pair to show adds no selection."))
    b.append(Paragraph(
        f"Verdicts: “differs” when the corrected p-value (q) is at most {numbers.short(plan.alpha)}; otherwise “equivalent "
        f"within ±{numbers.short(margin)}” when two one-sided tests show the gap lies inside ±{numbers.short(margin)} (the "
        f"{1 - 2 * plan.alpha:.0%} interval inside the margin), their p-values corrected in the same families so "
        "that a claim of equivalence has the same error control; otherwise “inconclusive”. A very precise small "
        "gap can be both non-zero and inside the margin; it is reported as “differs”. The unadjusted column "
        f"“significant” (p ≤ {numbers.short(plan.alpha)}) is kept for comparison with the source paper only."))
    if plan.gap_rule == "one-vs-rest":
        b.append(Paragraph(
            "One-vs-rest and to-overall: a group's gap to all groups together equals (1 − w) times its gap to the "
            "rest (w its share of the cases), so both always reach the same decision; FairDesk runs one-vs-rest "
            "only, and a to-overall request is run as one-vs-rest."))
    if plan.roles.continuous_attributes:
        b.append(Paragraph("Continuous attributes", "subheading"))
        b.append(Paragraph(
            f"{cap(METRIC_TEXT['delta_eo'])}. Bins are equal-frequency; a bin lacking either class is merged with a "
            f"neighbour and the number of bins actually used is reported. Requested N: "
            f"{join_words([str(x) for x in plan.bins])}. 0 means the same error rates in every bin; at most 2N. "
            f"p-value: permutation test ({plan.n_permutations:,} permutations; predicted positives spread over "
            "the bins at random within each class); where fewer than 10 permutations reach the observed value, "
            "the tail of a gamma distribution fitted to the permutation values gives p, so it is not limited to "
            "1/(B + 1). Δ_eo is unsigned, so a bootstrap interval of Δ_eo always excludes 0 and would contradict "
            "the test; the interval shown is instead the null band — where Δ_eo falls in data sets whose error "
            "rates do not depend on the bins — at the level adjusted for the number of tests, so that Δ_eo above "
            "its band means the spread differs. Verdicts are “differs” or “inconclusive” only: Δ_eo has no "
            "natural equivalence margin (its scale grows with N and the error rates). "
            + ("Δ_eo tests are a secondary family of their own." if getattr(plan, "procedure", None) == "hierarchical"
               else "Δ_eo tests are in the same correction family as the gaps.")))
    tests = [str(t) for t in dict.fromkeys(result.records["test"]) if isinstance(t, str)] \
        if "test" in result.records else []
    if any("centred" in t for t in tests):
        b.append(Paragraph(
            "Where whole patients are resampled, rows of one patient are not exchangeable, so the Δ_eo permutation "
            "test is replaced by a centred whole-patient bootstrap: the statistic of the bootstrap estimates minus "
            "the observed ones is the null distribution."))
    if tests:
        b.append(Paragraph("Tests used, as recorded with the results: " + ", ".join(f"“{t}”" for t in tests) + ".",
                           "note"))
    b.append(Paragraph("Groups", "subheading"))
    inter = [" × ".join(c) for c in plan.intersections]
    b.append(Paragraph(
        f"Groups with fewer than {plan.min_group_size} rows in a task, rows with a missing attribute value and "
        "groups excluded by the user are not tested; they are dropped for that attribute only (other attributes "
        "keep every row) and listed with their sizes in section 6."
        + (f" Intersectional groups ({join_words(inter)}) combine the values of several attributes." if inter else "")))
    b.append(Paragraph(
        f"Small-cell suppression: every count below {k} (group sizes, numerators, denominators, positives, "
        f"confusion counts) is shown as “<{k}” in this report; rates computed from such cells are still shown."))
    if outside_region_note(result, k):
        b.append(Paragraph(
            f"Comparisons marked “{OUTSIDE_MARK}” rest on fewer cases or patients than the smallest design at which "
            "FairDesk's simulations verified the test's error rate and interval coverage (FairDesk's methods "
            "documentation, “Validity over a design space”, gives the region for each measure)."))
    return Section("methods", "2  Methods", b)


def _chunks_by_task(data: pd.DataFrame, limit: int) -> list[list[str]]:
    """Whole tasks per figure, at most ``limit`` rows each (unless one task alone has more), sizes balanced."""
    sizes = [(str(t), len(part)) for t, part in data.groupby("task", sort=False)]
    total = sum(n for _, n in sizes)
    n_chunks = max(1, math.ceil(total / limit))
    target = total / n_chunks
    chunks: list[list[str]] = []
    current: list[str] = []
    rows = 0
    for task, n in sizes:
        if current and (rows + n > limit or (rows + n / 2 > target and len(chunks) < n_chunks - 1)):
            chunks.append(current)
            current, rows = [], 0
        current.append(task)
        rows += n
    if current:
        chunks.append(current)
    return chunks


def _figures_section(result, k) -> Section:
    plan = result.plan
    b: list[Block] = [Paragraph(
        "Each forest plot shows, for one attribute and one measure, every group's gap in every task: the dot is the "
        f"estimate and the whisker its {plan.ci_level:.0%} confidence interval; the vertical line marks no gap. "
        "Filled red dots: differs (after correction); green squares: equivalent within "
        f"±{numbers.short(float(getattr(plan, 'margin', 0.05)))}; hollow grey circles: inconclusive; grey crosses: not estimable "
        "or not tested. Labels read “task · group vs compared group”; a pair shown in two rows is one test with "
        "one verdict.")]
    rec = result.records
    attrs = [str(a) for a in dict.fromkeys(rec[rec["metric"] != "delta_eo"]["attribute"])] if not rec.empty else []
    for attr in attrs:
        for metric in plan.metrics:
            data = F.forest_data(result, attr, metric, suppress_k=k)
            if data.empty:
                continue
            chunks = _chunks_by_task(data, MAX_FOREST_ROWS)
            for i, tasks in enumerate(chunks):
                part = F.forest_data(result, attr, metric, suppress_k=k, tasks=tasks)
                suffix = f" (part {i + 1} of {len(chunks)})" if len(chunks) > 1 else ""
                b.append(FigureSpec("forest", f"{METRIC_TITLE[metric]} gaps by {attr}{suffix}", part,
                                    caption=f"Gap = {METRIC_TEXT[metric]} of the group minus that of the "
                                            f"compared group ({RULE_PLAIN[plan.gap_rule]})."))
    for attr in plan.roles.continuous_attributes:
        data = F.delta_eo_data(result, attr, suppress_k=k)
        if data.empty:
            continue
        b.append(FigureSpec("delta", f"Error spread over {attr}, Δ_eo", data,
                            caption=f"How much false positive and false negative rates vary across {attr} bands "
                                    "(0 = identical in every band). Grey bar: the 95% null band of the "
                                    "permutation test (where Δ_eo falls when errors do not depend on the bands); "
                                    "marker: the estimate, styled by its verdict. The band is that of one test; the verdict is "
                                    "taken after the audit's correction, so an estimate just beyond its band can "
                                    "still be inconclusive."))
        n_max = max(int(x) for x in plan.bins)
        bins = F.delta_bins_data(result, attr, n_max, suppress_k=k)
        if bins.empty:
            continue
        task_list = list(dict.fromkeys(bins["task"]))
        parts = [task_list[i:i + MAX_BIN_TASKS] for i in range(0, len(task_list), MAX_BIN_TASKS)]
        for i, tasks in enumerate(parts):
            suffix = f" (part {i + 1} of {len(parts)})" if len(parts) > 1 else ""
            b.append(FigureSpec("bins", f"Error rates by {attr} band (N = {n_max} requested){suffix}",
                                bins[bins["task"].isin(tasks)].reset_index(drop=True),
                                caption="The bins behind Δ_eo: each band holds about the same number of rows; "
                                        "counts are in table 4.4.", xlabel=attr))
    return Section("figures", "3  Figures", b)


def _tables_section(result, k) -> Section:
    plan = result.plan
    rec = result.records
    b: list[Block] = []
    # 4.1 results, one table per attribute
    b.append(Paragraph("4.1  Gap results", "subheading"))
    b.append(Paragraph(
        "One row per task, group and measure (PPR = positive prediction rate). Rate = numerator/denominator; "
        "“compared with” is the group (or groups) the gap is measured against, with its rate. q is the corrected "
        "p-value; Verdict: differs / equivalent within the margin / inconclusive (section 2).", "note"))
    gaps = rec[rec["metric"] != "delta_eo"] if not rec.empty else rec
    metric_order = {m: i for i, m in enumerate(plan.metrics)}
    task_order = {t: i for i, t in enumerate(_tasks(result))}
    notes: list[list[str]] = []
    for attr in [str(a) for a in dict.fromkeys(gaps["attribute"])] if not gaps.empty else []:
        sub = gaps[gaps["attribute"] == attr]
        sub = sub.assign(_m=sub["metric"].map(metric_order), _t=sub["task"].map(task_order),
                         _i=range(len(sub))).sort_values(["_m", "_t", "_i"], kind="stable")
        rows = []
        for r in sub.itertuples(index=False):
            comp = _s(r.comparison)
            if comp:
                comp += (f" ({band_text(getattr(r, 'comparison_rate_band', None))})"
                         if band_text(getattr(r, "comparison_rate_band", None)) else
                         f" ({fmt_rate(r.comparison_rate)})" if num(r.comparison_rate) is not None else
                         " (not estimable)")
            estimable = num(r.gap) is not None
            why = _s(r.reason) if num(r.rate) is not None else None  # the rate cell says why not estimable
            gap_txt = (band_text(getattr(r, "gap_band", None), signed=True) or fmt_signed(r.gap) if estimable
                       else F.untested_text(r.rate, why, k))
            if estimable and _s(r.reason):
                gap_txt += " *"
                notes.append([_s(r.task), attr, _s(r.group), METRIC_TITLE[r.metric], suppress_text(_s(r.reason), k)])
            rows.append([_s(r.task), _s(r.group), METRIC_SHORT[r.metric],
                         fmt_count(r.n, k), _rate_cell(r, k), comp or "–", gap_txt,
                         fmt_ci(r.ci_low, r.ci_high), fmt_p(r.p_value), fmt_p(r.q_value),
                         _sig_text(r, float(getattr(plan, "margin", 0.05))), _s(r.favours) or "–"])
        b.append(Table(["Task", "Group", "Measure", "n", "Rate (num/den)", "Compared with", "Gap", "Adjusted CI", "p",
                        "q", "Verdict", "Favours"], rows, title=f"Gap results: {attr}",

                       align=list("LLLRLLRRRRLL"), small=True))
    if notes:
        b.append(Table(["Task", "Attribute", "Group", "Measure", "Note"], notes,
                       title="Notes on estimates marked *", small=True))

    # 4.2 Table-4 style summary
    b.append(Paragraph("4.2  Verdicts per group across tasks", "subheading"))
    b.append(Paragraph(
        "For each attribute, group and measure: the number of tasks tested; how many had p ≤ α before correction and "
        "the share of those favouring the group (as Table 4 of Zhang et al. 2020); how many differ after the "
        "audit's correction and the share favouring the group; how many are equivalent within the margin and how "
        "many inconclusive. A pair of groups counts in the row of each of its two groups.", "note"))
    srows = []
    for r in result.summary.itertuples(index=False):
        share = num(r.share_favouring)
        share_bh = num(r.share_favouring_bh)
        srows.append([_s(r.attribute), _s(r.group), METRIC_TITLE.get(r.metric, _s(r.metric)), str(int(r.n_tasks)),
                      str(int(r.n_significant)), "–" if share is None else f"{share:.0%}",
                      str(int(r.n_significant_bh)), "–" if share_bh is None else f"{share_bh:.0%}",
                      str(int(num(getattr(r, "n_equivalent", 0)) or 0)),
                      str(int(num(getattr(r, "n_inconclusive", 0)) or 0))])
    b.append(Table(["Attribute", "Group", "Measure", "Tasks tested", "p ≤ α (unadjusted)", "Favouring group",
                    "Differs", "Favouring group (differs)", "Equivalent", "Inconclusive"], srows,
                   title="Summary of verdicts", align=list("LLLRRRRRRR"), small=True))

    # 4.3 per-group performance
    b.append(Paragraph("4.3  Performance and prevalence per group", "subheading"))
    b.append(Paragraph(
        "AUROC and AUPRC of the model's scores within each group, prevalence (share of positive cases) and the "
        "confusion counts at the threshold (TN true negatives, FP false positives, FN false negatives, TP true "
        "positives). Groups not tested for gaps are listed too. AUROC and AUPRC are not estimable in a group that "
        "holds only one class.", "note"))
    g = result.groups
    for attr in [str(a) for a in dict.fromkeys(g["attribute"])] if not g.empty else []:
        sub = g[g["attribute"] == attr]
        rows = []
        for r in sub.itertuples(index=False):
            auroc, auprc = num(r.auroc), num(r.auprc)
            one_class = "not estimable"
            rows.append([_s(r.task), _s(r.group), fmt_count(r.n, k), fmt_count(r.n_positive, k),
                         fmt_rate(r.prevalence), one_class if auroc is None else fmt_rate(auroc),
                         one_class if auprc is None else fmt_rate(auprc), fmt_count(r.tn, k), fmt_count(r.fp, k),
                         fmt_count(r.fn, k), fmt_count(r.tp, k), "yes" if is_true(r.tested) else "no"])
        b.append(Table(["Task", "Group", "n", "Positives", "Prevalence", "AUROC", "AUPRC", "TN", "FP", "FN", "TP",
                        "Tested"], rows, title=f"Per-group performance: {attr}",

                       align=list("LLRRRRRRRRRL"), small=True))

    # 4.4 Δ_eo
    if plan.roles.continuous_attributes:
        b.append(Paragraph("4.4  Error spread over continuous attributes (Δ_eo) and its bins", "subheading"))
        d = rec[rec["metric"] == "delta_eo"] if not rec.empty else rec
        drows = []
        for r in d.itertuples(index=False):
            value = num(r.gap)
            bins = num(r.bins)
            drows.append([_s(r.task), _s(r.attribute), _s(r.group).removeprefix("N="),
                          "–" if bins is None else str(int(bins)), fmt_count(r.n, k),
                          fmt_rate(value) if value is not None else
                          f"not estimable ({suppress_text(_s(r.reason), k)})",
                          fmt_ci(r.ci_low, r.ci_high, signed=False), fmt_p(r.p_value), fmt_p(r.q_value),
                          _sig_text(r)])
        b.append(Table(["Task", "Attribute", "N requested", "N used", "n", "Δ_eo", "Null band (adjusted)", "p (perm.)",
                        "q", "Verdict"], drows, title="Δ_eo estimates",
 align=list("LLRRRRRRRL"),
                       small=True))
        brows = []
        for r in result.delta_bins.itertuples(index=False):
            brows.append([_s(r.task), _s(r.attribute), str(int(r.bins_used)), str(int(r.bin) + 1),
                          f"{numbers.short(float(r.lower), 4)} – {numbers.short(float(r.upper), 4)}", fmt_count(r.n, k),
                          fmt_count(r.n_positive, k), fmt_rate(r.fpr), fmt_rate(r.fnr)])
        b.append(Table(["Task", "Attribute", "N used", "Bin", "Range", "n", "Positives", "FPR", "FNR"], brows,
                       title="Bins behind Δ_eo",
                       align=list("LLRRLRRRR"), small=True))
    return Section("tables", "4  Tables", b, landscape=True)


# --------------------------------------------------------------------------------------------------------------
# Calibration and discrimination by group (METHODS §8)

CAL_VERDICT = {"differs": "miscalibrated (differs)", "equivalent": "calibrated within the margins (equivalent)",
               "inconclusive": "inconclusive"}


def calibration_status(result) -> str | None:
    """Why calibration by group is not in this audit, in one sentence; None when it is."""
    plan = result.plan
    if not getattr(plan, "calibration", True):
        return ("Calibration by group was not assessed: it was switched off for this audit (re-run it with "
                "calibration on to compare predicted and observed risks per group).")
    if not result.calibration.empty:
        return None
    if any("not probabilities" in str(w) or "outside [0, 1]" in str(w) for w in result.warnings):
        return ("Calibration by group was not assessed: the scores are not probabilities (some lie outside "
                "[0, 1]), so predicted and observed risks cannot be compared. Convert the scores to probabilities "
                "(e.g. with the sigmoid function) and re-run the audit.")
    g = result.groups
    if not g.empty and not g["tested"].map(is_true).any():
        return "Calibration by group was not assessed: no group was large enough to test."
    return ("Calibration by group was not assessed: this audit was stored before FairDesk assessed calibration; "
            "re-run it to add calibration.")


def _ci_excludes_one(lo, hi) -> int:
    """-1 when the interval lies wholly below 1, +1 wholly above, 0 otherwise."""
    lo, hi = num(lo), num(hi)
    if lo is None or hi is None:
        return 0
    return -1 if hi < 1 else (1 if lo > 1 else 0)


def calibration_sentence(row, k: int | None = None) -> str:
    """The plain sentence of one miscalibrated group (a row of the ``calibration`` table)."""
    oe, slope = num(row.oe_ratio), num(row.calibration_slope)
    parts = []
    oe_dir = _ci_excludes_one(row.oe_ratio_ci_low, row.oe_ratio_ci_high)
    slope_dir = _ci_excludes_one(row.calibration_slope_ci_low, row.calibration_slope_ci_high)
    oe_ci = fmt_ci(row.oe_ratio_ci_low, row.oe_ratio_ci_high, 2, signed=False)
    slope_ci = fmt_ci(row.calibration_slope_ci_low, row.calibration_slope_ci_high, 2, signed=False)
    if oe_dir:
        parts.append(f"it {'over' if oe_dir < 0 else 'under'}-predicts risk (observed/expected {oe:.2f}, 95% CI "
                     f"{oe_ci})")
    if slope_dir:
        parts.append("its predicted risks are too " + ("extreme: high risks too high and low risks too low"
                                                       if slope_dir < 0 else
                                                       "moderate: high risks too low and low risks too high")
                     + f" (calibration slope {slope:.2f}, 95% CI {slope_ci})")
    if not parts:
        detail = [f"observed/expected {oe:.2f}" if oe is not None else "",
                  f"calibration slope {slope:.2f}" if slope is not None else "",
                  f"intercept {fmt_signed(row.calibration_intercept, 2)}"]
        parts.append("its predicted risks do not match the observed risks (" + ", ".join(d for d in detail if d)
                     + ")")
    where = "" if str(row.task) == "(all)" else f" in task {row.task}"
    return (f"The risk score is miscalibrated for {row.attribute} = {row.group}{where}: {join_words(parts)}. "
            "Meaning: for this group the score should not be read as a risk without recalibration.")


CALIBRATION_FIELDS = ("task", "attribute", "group", "oe_ratio", "oe_ratio_ci_low", "oe_ratio_ci_high",
                      "calibration_slope", "calibration_slope_ci_low", "calibration_slope_ci_high",
                      "calibration_intercept")  # what :func:`calibration_sentence` reads of a calibration row


def calibration_findings_text(result, k: int | None = None) -> list[str]:
    """One sentence per group whose calibration test says "differs", largest |log O/E| first."""
    cal = result.calibration
    if cal.empty:
        return []
    bad = F.table_rows(cal, CALIBRATION_FIELDS, [v == "differs" for v in cal["verdict"].tolist()])
    rows = sorted(bad,
                  key=lambda r: -abs(math.log(num(r.oe_ratio))) if (num(r.oe_ratio) or 0) > 0 else 0.0)
    return [calibration_sentence(r, k) for r in rows]


def _cal_cell(row, measure: str, signed: bool = False, digits: int = 2) -> str:
    value = num(getattr(row, measure))
    if value is None:
        return "–"
    f = fmt_signed if signed else fmt_rate
    ci = fmt_ci(getattr(row, f"{measure}_ci_low"), getattr(row, f"{measure}_ci_high"), digits, signed=signed)
    return f(value, digits) + ("" if ci == "–" else f" ({ci})")


def _operating_points(result, task: str, attr: str) -> dict[str, dict[str, float]]:
    cv = result.curves
    out: dict[str, dict[str, float]] = {}
    if cv.empty:
        return out
    where = [as_text(t) == task and as_text(a) == attr and c in ("operating_roc", "operating_pr")
             for t, a, c in zip(cv["task"].tolist(), cv["attribute"].tolist(), cv["curve"].tolist())]
    for r in F.table_rows(cv, ("group", "x", "y", "curve"), where):
        d = out.setdefault(str(r.group), {})
        x, y = (r.x or [None])[0], (r.y or [None])[0]
        if r.curve == "operating_roc":
            d["fpr"], d["tpr"] = x, y
        else:
            d["ppv"] = y
    return out


DISCRIMINATION_HEADER = ["Task", "Group", "n", "Positives", "AUROC (95% CI)", "AUROC gap vs group (adjusted CI)",
                         "q", "Verdict", "AUPRC (95% CI)", "AUPRC gap vs group (adjusted CI)", "q", "Verdict", "TPR", "FPR",
                         "PPV"]
DISCRIMINATION_ALIGN = list("LLRRRLRLRLRLRRR")  # gap cells wrap (a wrapped cell is set left)


def discrimination_method_text(plan, bootstrap: bool = False) -> str:
    """How the discrimination table was made, in a few sentences (section 5 and the GUI's ROC & PR tab);
    ``bootstrap``: an audit stored before the closed-form intervals (``bootstrap_intervals``)."""
    margin = float(getattr(plan, "margin", 0.05))
    if bootstrap:
        how = (f"{plan.ci_level:.0%} bootstrap percentile interval (this audit was stored by an earlier FairDesk). "
               f"Every pair of groups with at least {getattr(plan, 'min_denominator', 10)} patients with and "
               "without the condition is tested: the AUROC difference with DeLong variances, the AUPRC difference "
               "with bootstrap standard deviations, each by a z ")
    else:
        how = (f"{plan.ci_level:.0%} interval on the logit scale (DeLong's variance for AUROC, at least Hanley and "
               "McNeil's, the large-sample variance of average precision for AUPRC, at least the binomial "
               "AP(1 − AP)/n of its n cases; whole patients when patients "
               "repeat, then with a t reference). Every pair of groups with at least "
               f"{getattr(plan, 'min_denominator', 10)} patients with and without the condition is tested (fewer: "
               "inconclusive, too few cases): the AUROC difference at the two groups' pooled AUROC (a score-type "
               "test that holds its error rate near an AUROC of 1), the AUPRC difference with its large-sample "
               "variances (no floor), "
               "each by a z ")
    gap_ci = ("a normal interval of the difference" if bootstrap else
              "a normal interval of the AUROC difference and an AUPRC difference interval built from the two "
              "groups' intervals (MOVER)")
    return (
        "AUROC and AUPRC (average precision) of the score within each group, each with its " + how +
        f"test on the logit scale (closer to normal in small groups) with {gap_ci}. "
        "Each row shows the group it differs from most (gap = the group's "
        "value minus that group's); these tests are corrected together with the rate gaps (section 2), with the "
        f"same verdicts (equivalent: within ±{numbers.short(margin)}). AUPRC moves with prevalence — a score that ranks at "
        "random has an AUPRC equal to the group's prevalence — so an AUPRC gap between groups of different "
        "prevalence is not by itself a worse score. TPR (recall), FPR and PPV (precision) are each group's "
        "operating point at the threshold; their gaps with verdicts are the recall and specificity gaps of "
        "section 4.")


def _disc_value_cell(r) -> str:
    value = num(r["value"])
    if value is None:
        return "not estimable"
    ci = fmt_ci(r["value_ci_low"], r["value_ci_high"], signed=False)
    return fmt_rate(value) + ("" if ci == "–" else f" ({ci})")


def _disc_gap_cell(r) -> str:
    gap = num(r["gap"])
    if gap is None:
        return "not tested *" if num(r["value"]) is not None or _s(r["reason"]) else "–"
    ci = fmt_ci(r["ci_low"], r["ci_high"]).replace(" ", "\u00a0")  # a narrow cell wraps before the interval
    return f"{fmt_signed(gap)} vs {_s(r['comparison'])}" + ("" if ci == "–" else f" ({ci})")


def discrimination_table(result, attr: str, k: int | None, task: str | None = None
                         ) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """The discrimination table of one attribute (all tasks, or one ``task``): ``(header, rows, notes)``, one row
    per task and tested group — n and positives (below k shown as "<k"), AUROC and AUPRC each with its interval,
    its largest gap with the gap's interval, q and verdict, and the operating point (TPR, FPR, PPV) at the
    threshold. ``notes``: [task, attribute, group, measure, why not tested] of the rows marked *. Shared by the PDF
    and the GUI."""
    disc = result.discrimination
    margin = float(getattr(result.plan, "margin", 0.05))
    names = [str(c) for c in disc.columns]
    where = [as_text(a) == attr and (task is None or as_text(t) == str(task))
             for a, t in zip(disc["attribute"].tolist(), disc["task"].tolist())]
    task_order = {t: i for i, t in enumerate(_tasks(result))}
    cells: dict[tuple[str, str], dict] = {}
    for r in (dict(zip(names, values)) for values in F.table_rows(disc, names, where)):
        cells.setdefault((str(r["task"]), str(r["group"])), {})[str(r["metric"])] = r
    keys = sorted(cells, key=lambda key: task_order.get(key[0], len(task_order)))  # stable: groups keep their order
    ops: dict[str, dict] = {}
    rows, notes = [], []
    for t, group in keys:
        by = cells[(t, group)]
        first = next(iter(by.values()))
        if t not in ops:
            ops[t] = _operating_points(result, t, attr)
        op = ops[t].get(group, {})
        row = [t, group, fmt_count(first["n"], k), fmt_count(first["n_positive"], k)]
        why: dict[str, list[str]] = {}  # reason -> measures (one note when AUROC and AUPRC share it)
        for metric in DISCRIMINATION_MEASURES:
            r = by.get(metric)
            if r is None:
                row += ["–", "–", "–", "–"]
                continue
            gap_cell = _disc_gap_cell(r)
            if gap_cell.endswith("*"):
                reason = _s(r["reason"]) or "not tested"
                why.setdefault(suppress_text(reason, k) if k else reason, []).append(METRIC_TITLE[metric])
            verdict = verdict_text(r["verdict"], margin) if num(r["gap"]) is not None else "not tested"
            row += [_disc_value_cell(r), gap_cell, fmt_p(r["q_value"]), verdict]
        row += [fmt_rate(op.get("tpr")), fmt_rate(op.get("fpr")), fmt_rate(op.get("ppv"))]
        rows.append(row)
        notes += [[t, attr, group, ", ".join(measures), reason] for reason, measures in why.items()]
    return list(DISCRIMINATION_HEADER), rows, notes


def _discrimination_point_tables(result, k) -> list[Block]:
    """Audits stored before AUROC and AUPRC were tested: the point estimates and the operating points, said so."""
    b: list[Block] = [Paragraph(
        "This audit was stored before FairDesk tested AUROC and AUPRC between groups: they are shown as point "
        "estimates, with no interval and no verdict (re-run the audit to add them). The operating point is each "
        "group's true positive rate (TPR, recall), false positive rate (FPR) and precision (PPV) at the "
        "threshold; their gaps with verdicts are the recall and specificity gaps of section 4.", "note")]
    g, cal = result.groups, result.calibration
    for attr in [str(a) for a in dict.fromkeys(cal["attribute"].astype(str))]:
        rows = []
        sub = g[(g["attribute"].astype(str) == attr) & g["tested"].map(is_true)] if not g.empty else g
        ops = {}
        for r in sub.itertuples(index=False):
            task = str(r.task)
            if task not in ops:
                ops[task] = _operating_points(result, task, attr)
            op = ops[task].get(str(r.group), {})
            rows.append([task, _s(r.group), fmt_count(r.n, k), fmt_rate(r.auroc), fmt_rate(r.auprc),
                         fmt_rate(op.get("tpr")), fmt_rate(op.get("fpr")), fmt_rate(op.get("ppv"))])
        if rows:
            b.append(Table(["Task", "Group", "n", "AUROC", "AUPRC", "TPR", "FPR", "PPV"], rows,
                           title=f"Discrimination by group: {attr}", align=list("LLRRRRRR"), small=True))
    return b


def bootstrap_intervals(result) -> bool:
    """Whether the audit was stored with the §8 intervals of the per-group bootstrap (before 2026-11-25)."""
    return BOOTSTRAP_INTERVALS_WARNING in result.warnings


def _calibration_section(result, k) -> Section:
    plan = result.plan
    b: list[Block] = []
    status = calibration_status(result)
    lo_s, hi_s = getattr(plan, "calibration_slope_range", (0.8, 1.25))
    own = getattr(plan, "calibration_own_family", True)
    b.append(Paragraph(
        "Is the risk score equally trustworthy for every group? A score is calibrated in a group when, among "
        "patients given a risk of 0.30, about 30% have the outcome. Per group: observed/expected (O/E: the share "
        "with the outcome divided by the mean score; below 1 the score over-predicts, above 1 it under-predicts), "
        "the calibration intercept (0 when calibrated in the large) and slope (1 when calibrated; below 1 the "
        "predictions are too extreme, above 1 too moderate), the Brier score and the expected calibration error "
        f"(ECE, 10 equal-width bins, debiased, with a simultaneous interval over the bins), each with a "
        f"{plan.ci_level:.0%} "
        + ("bootstrap percentile interval (this audit was stored by an earlier FairDesk)"
           if bootstrap_intervals(result) else
           "interval from its large-sample standard error (the spread a bootstrap of the group's rows — of whole "
           "patients when patients repeat — would show, computed in closed form)")
        + ". Verdict of the joint test "
        "of intercept 0 and slope 1: “miscalibrated (differs)”; “calibrated within the margins (equivalent)” when "
        f"|intercept| < {numbers.short(getattr(plan, 'calibration_intercept_margin', 0.2))} and the slope lies in "
        f"{numbers.short(lo_s)}–{numbers.short(hi_s)} (two one-sided tests); otherwise “inconclusive” — not shown miscalibrated is not shown "
        "calibrated. The tests are corrected for multiple testing "
        + ("in a family of their own next to the gaps' family." if own else "together with the gap tests.")))
    if status:
        b.append(Paragraph(status, "lead"))
        return Section("calibration", "5  Calibration and discrimination by group", b, landscape=True)
    cal = result.calibration
    task_order = {t: i for i, t in enumerate(_tasks(result))}
    notes = []
    pairs: list[tuple[str, str, bool]] = []
    for attr in [str(a) for a in dict.fromkeys(cal["attribute"].astype(str))]:
        sub = cal[cal["attribute"].astype(str) == attr]
        sub = sub.assign(_t=sub["task"].astype(str).map(task_order).fillna(0), _i=range(len(sub)))
        sub = sub.sort_values(["_t", "_i"], kind="stable")
        rows = []
        for r in sub.itertuples(index=False):
            verdict = CAL_VERDICT.get(r.verdict, "not tested") if isinstance(r.verdict, str) else "not tested"
            if _s(r.reason):
                notes.append([_s(r.task), attr, _s(r.group), suppress_text(_s(r.reason), k)])
                verdict += " *"
            rows.append([_s(r.task), _s(r.group), fmt_count(r.n, k), fmt_count(r.n_positive, k),
                         _cal_cell(r, "oe_ratio"), _cal_cell(r, "calibration_intercept", signed=True),
                         _cal_cell(r, "calibration_slope"), _cal_cell(r, "brier", digits=3),
                         _cal_cell(r, "ece", digits=3), fmt_p(r.p_value), fmt_p(r.q_value), verdict])
        b.append(Table(["Task", "Group", "n", "Positives", "O/E (95% CI)", "Intercept (95% CI)", "Slope (95% CI)",
                        "Brier (95% CI)", "ECE (95% CI)", "p", "q", "Verdict"], rows,
                       title=f"Calibration by group: {attr}", align=list("LLRRRRRRRRRL"), small=True))
        for task in dict.fromkeys(sub["task"].astype(str)):
            differs = bool((sub[sub["task"].astype(str) == task]["verdict"] == "differs").any())
            pairs.append((task, attr, differs))
    if notes:
        b.append(Table(["Task", "Attribute", "Group", "Note"], notes, title="Notes on rows marked *", small=True))

    # figures: miscalibrated (task, attribute) pairs first, at most MAX_CALIBRATION_FIGURES
    chosen = sorted(pairs, key=lambda p: not p[2])[:MAX_CALIBRATION_FIGURES]
    chosen.sort(key=lambda p: pairs.index(p))
    if len(pairs) > len(chosen):
        b.append(Paragraph(
            f"Figures are drawn for {len(chosen)} of {len(pairs)} task × attribute combinations (those with a "
            "miscalibrated group first); the tables above cover all of them.", "note"))
    for task, attr, _ in chosen:
        data = CF.curve_data(result, task, attr, suppress_k=k)
        where = "" if task == "(all)" else f" · task {task}"
        if data.empty:
            continue
        b.append(FigureSpec("calibration", f"Calibration and discrimination by {attr}{where}", data,
                            caption="Left, reliability: dots are the observed share with the outcome in each of 10 "
                                    "equal-width score bins against the bin's mean predicted risk, with 95% "
                                    "Clopper–Pearson intervals; the line is the isotonic recalibration curve; the "
                                    "dotted diagonal is perfect calibration. Middle and right: ROC and "
                                    "precision–recall curves of the score within each group; the black-edged dot is "
                                    "the group's operating point at the audit's threshold. One colour per group (n "
                                    "in the legend)."))

    b.append(Paragraph("Discrimination by group", "subheading"))
    disc = getattr(result, "discrimination", None)
    if disc is None or disc.empty:
        b += _discrimination_point_tables(result, k)
    else:
        b.append(Paragraph(discrimination_method_text(plan, bootstrap_intervals(result)), "note"))
        notes: list[list[str]] = []
        for attr in [str(a) for a in dict.fromkeys(disc["attribute"].astype(str))]:
            header, rows, attr_notes = discrimination_table(result, attr, k)
            notes += attr_notes
            if rows:
                b.append(Table(header, rows, title=f"Discrimination by group: {attr}", align=DISCRIMINATION_ALIGN,
                               small=True))
        if notes:
            b.append(Table(["Task", "Attribute", "Group", "Measure", "Note"], notes,
                           title="Notes on discrimination rows marked *", small=True))
    return Section("calibration", "5  Calibration and discrimination by group", b, landscape=True)


def _dropped_section(result, k) -> Section:
    b: list[Block] = []
    d = result.dropped
    if d.empty:
        b.append(Paragraph("Every group was large enough to test; none was dropped."))
    else:
        b.append(Paragraph(
            "These groups were not tested in the task shown (they are dropped for that attribute only). Their sizes "
            f"are shown so that a reader can judge what the audit does not cover; sizes below {k} appear as “<{k}”."))
        rows = [[_s(r.task), _s(r.attribute), _s(r.group), fmt_count(r.n, k), suppress_text(_s(r.reason), k)]
                for r in d.itertuples(index=False)]
        b.append(Table(["Task", "Attribute", "Group", "n", "Reason"], rows, title="Groups not tested",
 align=list("LLLRL"), small=len(rows) > 30))
    return Section("dropped", "6  Groups not tested", b)


def _provenance_section(result, k, dataset_name, model_description) -> Section:
    from fairdesk import __version__
    from fairdesk.core.executor import executor_text

    plan = result.plan
    prov = result.provenance or {}
    versions = prov.get("versions") or {}
    models = prov.get("model_hashes") or {}
    rows = [
        ["Audit date", report_date(prov)],
        ["FairDesk version (audit)", str(versions.get("fairdesk", "not recorded"))],
        ["FairDesk version (report)", __version__],
        ["Dataset", dataset_name or "not named"],
        ["Data SHA-256", str(prov.get("data_sha256") or "not recorded")],
        ["Model", model_description or "not described"],
    ]
    if models:
        rows += [[f"Model SHA-256 ({name})", str(h)] for name, h in sorted(models.items())]
    else:
        rows.append(["Model hashes", "none recorded (predictions imported)"])
    modes = prov.get("bootstrap") or {}
    rows += [
        ["Seed", str(prov.get("seed", plan.seed))],
        ["Executor", executor_text(prov)],
        ["Bootstrap replicates", f"{int(prov.get('n_boot', plan.n_boot)):,}"],
        ["Bootstrap mode", (f"{next(iter(modes.values()))} (every task)" if len(set(modes.values())) == 1
                            else "; ".join(f"{t}: {m}" for t, m in modes.items())) or "not recorded"],
        ["Permutations", f"{plan.n_permutations:,}"],
        ["CI level / α", f"{plan.ci_level:.0%} / {numbers.short(plan.alpha)}"],
        ["Gap rule", plan.gap_rule],
        ["Correction / family", f"{getattr(plan, 'correction', 'bh')} / {getattr(plan, 'family', 'audit')}"],
        ["Equivalence margin", f"±{numbers.short(float(getattr(plan, 'margin', 0.05)))}"],
        ["Measures", ", ".join(plan.metrics)],
        ["Thresholds", ", ".join(f"{t}: {numbers.short(v, 4)}" for t, v in result.thresholds.items()) or "–"],
        ["Minimum group size", str(plan.min_group_size)],
        ["Rows in table / evaluated", f"{fmt_count(prov.get('n_rows'), k)} / {fmt_count(prov.get('n_eval_rows'), k)}"],
        ["Columns", "; ".join(f"{role.replace('_', ' ')} = {', '.join(col) if isinstance(col, (list, tuple)) else col}"
                              for role, col in plan.roles.to_dict().items() if col not in (None, [], ()))],
        ["Intersections", "; ".join(" × ".join(c) for c in plan.intersections) or "none"],
        ["Small-cell suppression", f"counts below {k} shown as “<{k}”"],
    ]
    b: list[Block] = [Paragraph(
        "Everything needed to reproduce this audit: the same data (same fingerprint), model, plan and seed give the "
        "same numbers and the same report.")]
    b.append(Table(["Item", "Value"], [[a, str(v)] for a, v in rows], title="Audit provenance"))
    vrows = [[name, str(v)] for name, v in versions.items()]
    if vrows:
        b.append(Table(["Package", "Version"], vrows, title="Software versions"))
    warnings = list(result.warnings)
    b.append(Paragraph("Warnings recorded during the audit", "subheading"))
    if warnings:
        for w in warnings:
            b.append(Paragraph(suppress_text(str(w), k), "bullet"))
    else:
        b.append(Paragraph("No warnings were recorded."))
    return Section("provenance", "7  Provenance", b)
