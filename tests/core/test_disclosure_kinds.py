"""Disclosure control of the kinds other than group and slice audits, proved by attack: a reader's arithmetic on
every shareable artefact (the releasable JSON, the report tree's text and tables, the model card's parts) must
recover no count of people from 1 to k − 1.

The attackers are written from the reader's side, independently of :mod:`fairdesk.core.disclosure`, and are
generous to themselves: they are told every true denominator and every partition total (as if from elsewhere).
A count is *recovered* when the arithmetic leaves exactly one whole value and it lies in 1 … k − 1. Each attacker
run on the working document recovers counts (it has teeth); on the releasable copy it must recover none.
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fairdesk.core import kinds
from fairdesk.core.kinds import ReportSettings

K = 11


def _small(value, k=K) -> bool:
    return value is not None and not isinstance(value, bool) and 1 <= value < k


def _intervals(value, band=None):
    """What a printed number allows: its band, or the value ± half a unit of its 3rd (or 2nd) decimal."""
    if band is not None:
        return [(band[0], band[1])]
    if value is None:
        return []
    return [(value - e, value + e) for e in (0.0005 + 1e-9, 0.005 + 1e-9)]


def _candidates(lo, hi, top):
    a, b = max(0, math.ceil(lo - 1e-9)), min(top, math.floor(hi + 1e-9))
    return list(range(a, b + 1)) if a <= b else []


def _recovered(cands, truth, k=K) -> bool:
    return len(cands) == 1 and cands[0] == truth and 1 <= truth < k


def _from_rate(ivs, den, num, what, leaks, k=K):
    """rate × denominator and denominator − rate × denominator, for each interval the reader has for the rate."""
    if not den or num is None:
        return
    for lo, hi in ivs:
        cands = _candidates(lo * den, hi * den, den)
        if _recovered(cands, num, k) or _recovered([den - c for c in cands], den - num, k):
            leaks.append(f"{what}: {num} of {den} from a rate in [{lo:.4f}, {hi:.4f}]")


def _sum(a, b):
    return [(x[0] + y[0], x[1] + y[1]) for x in a for y in b]


# --------------------------------------------------------------------------------------------------------------
# Monitor


def _mkey(r):
    return (r.get("task"), r.get("attribute"), r.get("group"), r.get("metric"), r.get("period"))


def attack_monitor(released: dict, working: dict, k: int = K) -> list[str]:
    """Counts from 1 to k − 1 a reader recovers from a released monitor document: a period's found (or missed)
    cases from its rate × cases, from its period gap plus the rest's rate, from the monitor's gap over a one-period
    window plus the rest's rate, and from the period's total minus the rest's; positives from prevalence × labelled,
    flagged rows from the flagged share × rows; printed small counts; a period's total minus the other groups."""
    leaks: list[str] = []
    truth = {_mkey(r): r for r in working.get("monitor") or []}
    moves = {}
    ch = released.get("changes") or {}
    for m in ch.get("moves") or []:
        moves[(m.get("task"), m.get("attribute"), m.get("group"), m.get("metric"), ch.get("period"))] = m.get("gap")
        moves[(m.get("task"), m.get("attribute"), m.get("group"), m.get("metric"), ch.get("previous"))] = \
            m.get("previous_gap")
        for c in ("n", "previous_n"):
            if _small(m.get(c), k):
                leaks.append(f"move {m.get('group')}: {c} = {m[c]} printed")
    for r in released.get("monitor") or []:
        t = truth[_mkey(r)]
        for c in ("n", "rest_n", "patients"):
            if _small(r.get(c), k):
                leaks.append(f"{_mkey(r)}: {c} = {r[c]} printed")
        if t.get("rate") is None or not t.get("n"):
            continue
        den, num = t["n"], round(t["rate"] * t["n"])
        rest_iv = _intervals(r.get("rest_rate"), r.get("rest_rate_band"))
        ivs = _intervals(r.get("rate"), r.get("rate_band"))
        ivs += _sum(_intervals(r.get("period_gap"), r.get("period_gap_band")), rest_iv)
        if r.get("since") == r.get("period"):  # the monitor's gap over this period alone is its period gap
            ivs += _sum(_intervals(r.get("gap"), r.get("gap_band")), rest_iv)
        if _mkey(r) in moves:
            ivs += _sum(_intervals(moves[_mkey(r)]), rest_iv)
        _from_rate(ivs, den, num, str(_mkey(r)), leaks, k)
        # the period's found cases (known) minus the rest's, over the rest's cases if the reader knows them: printed,
        # or the period's total minus the group's printed cases
        known_rest = r.get("rest_n") is not None or r.get("n") is not None
        if known_rest and t.get("rest_rate") is not None and t.get("rest_n"):
            rden, rnum = t["rest_n"], round(t["rest_rate"] * t["rest_n"])
            total = num + rnum
            for lo, hi in rest_iv:
                cands = _candidates(total - hi * rden, total - lo * rden, den)
                if _recovered(cands, num, k) or _recovered([den - c for c in cands], den - num, k):
                    leaks.append(f"{_mkey(r)}: {num} of {den} from the total minus the rest")
    ctx_truth = {(c["task"], c["attribute"], c["group"], c["period"]): c for c in working.get("context") or []}
    for c in released.get("context") or []:
        key = (c["task"], c["attribute"], c["group"], c["period"])
        t = ctx_truth[key]
        for col in ("rows", "labelled"):
            if _small(c.get(col), k):
                leaks.append(f"{key}: {col} = {c[col]} printed")
        if t.get("prevalence") is not None:
            _from_rate(_intervals(c.get("prevalence")), t["labelled"], round(t["prevalence"] * t["labelled"]),
                       f"{key} positives", leaks, k)
        if t.get("flagged") is not None:
            _from_rate(_intervals(c.get("flagged")), t["rows"], round(t["flagged"] * t["rows"]), f"{key} flagged",
                       leaks, k)
    # a period's total (known to the reader) minus the other groups' shown counts
    parts = defaultdict(list)
    for key, t in truth.items():
        parts[(key[0], key[1], key[3], key[4])].append(key)
    shown = {_mkey(r): r for r in released.get("monitor") or []}
    for members in parts.values():
        hidden = [m for m in members if shown[m].get("n") is None]
        if len(hidden) == 1:
            value = truth[hidden[0]]["n"]
            if _small(value, k):
                leaks.append(f"{hidden[0]}: n = the period's total minus the other groups = {value}")
    cparts = defaultdict(list)
    for key in ctx_truth:
        cparts[(key[0], key[1], key[3])].append(key)
    cshown = {(c["task"], c["attribute"], c["group"], c["period"]): c for c in released.get("context") or []}
    for members in cparts.values():
        for col in ("rows", "labelled"):
            hidden = [m for m in members if cshown[m].get(col) is None]
            if len(hidden) == 1 and _small(ctx_truth[hidden[0]][col], k):
                leaks.append(f"{hidden[0]}: {col} = the period's total minus the other groups")
    return leaks


def attack_monitor_tables(report, working: dict, k: int = K) -> list[str]:
    """The report's tables read as printed: the latest period's rate (and the rest's) times its true cases; the
    context's prevalence and flagged share times the true labelled rows and rows."""
    leaks = []
    last = (working.get("periods") or [{}])[-1].get("period")
    truth = {(r["attribute"], str(r["group"]), r["metric"]): r for r in working.get("monitor") or []
             if r["period"] == last}
    ctx = {(str(c["period"]), str(c["group"])): c for c in working.get("context") or []}
    words = {"recall": "recall", "specificity": "specificity", "positive prediction rate": "parity"}
    for table in report.tables():
        h = table.header
        for row in table.rows:
            cell = dict(zip(h, row))
            if "Rate" in cell and "Metric" in cell:
                t = truth.get((cell["Attribute"], cell["Group"], words.get(cell["Metric"], cell["Metric"])))
                if t is None or t.get("rate") is None:
                    continue
                for col, rate, den in (("Rate", t["rate"], t["n"]), ("Rest", t["rest_rate"], t["rest_n"])):
                    try:
                        printed = float(cell[col].replace("−", "-"))
                    except (ValueError, AttributeError):
                        continue
                    if rate is not None and den:
                        _from_rate(_intervals(printed), den, round(rate * den), f"table {cell[col]} of {row}", leaks, k)
            if "Prevalence" in cell:
                c = ctx.get((cell["Period"], cell["Group"]))
                for col, share, den in (("Prevalence", "prevalence", "labelled"), ("Flagged", "flagged", "rows")):
                    try:
                        printed = float(cell[col])
                    except (ValueError, TypeError):
                        continue
                    if c is not None and c.get(share) is not None:
                        _from_rate(_intervals(printed), c[den], round(c[share] * c[den]), f"context {row}", leaks, k)
    return leaks


COUNT_WORDS = re.compile(r"(?<![\w.−-])([1-9]|10)\s+(?:rows?|patients?|cases?|positive cases|negative cases|people|"
                         r"participants?|images?|notes?)\b")


FRACTION = re.compile(r"(\d\.\d+) \(<(\d+)/([\d,]+)\)")
FRACTION2 = re.compile(r"(\d\.\d+) \(([\d,]+)/([\d,]+)\)")


def attack_words(text: str, k: int = K) -> list[str]:
    """A small count printed in words ("7 patients"), and the fractions "rate (<k/den)" and "rate (num/den)"."""
    leaks = [m.group(0) for m in COUNT_WORDS.finditer(text) if _small(int(m.group(1)), k)]
    for m in FRACTION.finditer(text):
        rate, den = float(m.group(1)), int(m.group(3).replace(",", ""))
        eps = 0.5 * 10 ** -len(m.group(1).split(".")[1])
        cands = _candidates((rate - eps) * den, (rate + eps) * den, den)
        if len(cands) == 1 and (_small(cands[0], k) or _small(den - cands[0], k)):
            leaks.append(m.group(0))
    for m in FRACTION2.finditer(text):
        num, den = int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))
        if _small(den - num, k):
            leaks.append(m.group(0))
    return leaks


def _tree(name, doc, k=K):
    return kinds.report_tree(name, doc, ReportSettings(suppress_k=k))


def _card_text(name, released, k=K) -> str:
    """The model card's kind-specific parts (findings, groups, limitations) as the card's JSON prints them."""
    from fairdesk.core.model_card import KIND_PARTS

    parts = KIND_PARTS[name](released, k)
    return json.dumps({"findings": parts.findings, "groups": parts.groups, "limitations": parts.limitations,
                       "not_tested": parts.not_tested, "data": parts.data}, ensure_ascii=False)


def _monitor_doc(seed, months, per_month, metrics, gap):
    from fairdesk.core.audits.monitor import run_monitor
    from fairdesk.core.synthetic.monitor_sim import simulate_stream, stream_plan

    df = simulate_stream(seed, months=months, per_month=per_month, gap=gap, onset=2)
    plan = stream_plan()
    plan.metrics = metrics
    return json.loads(run_monitor(df, plan).to_json())


@settings(max_examples=8, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(2, 4), st.integers(30, 400),
       st.sampled_from([("recall", "specificity"), ("recall", "specificity", "parity"), ("parity",)]),
       st.sampled_from([0.0, 0.3]))
def test_no_small_count_recovered_from_a_released_monitor(seed, months, per_month, metrics, gap):
    working = _monitor_doc(seed, months, per_month, metrics, gap)
    released = kinds.releasable("monitor", working, ReportSettings(suppress_k=K))
    assert released["disclosure"]["for_release"] and released["disclosure"]["k"] == K
    leaks = attack_monitor(released, working)
    assert not leaks, "\n".join(leaks[:10])
    tree = kinds.resolve("fairdesk.core.reports.monitor:report_tree")(released, ReportSettings(suppress_k=K))
    assert not attack_monitor_tables(tree, working)
    text = tree.text()
    assert not attack_words(text), attack_words(text)
    assert f"k = {K}" in text  # the rule is stated on the page
    assert not attack_words(_card_text("monitor", released))


def test_the_monitor_attack_recovers_counts_from_todays_artefacts():
    """The working document (and the report built from it) gives small counts back: the attack has teeth."""
    working = _monitor_doc(4, 3, 200, ("recall", "specificity"), 0.0)
    assert attack_monitor(working, working)
    tree = kinds.resolve("fairdesk.core.reports.monitor:report_tree")(working, ReportSettings(suppress_k=K))
    assert attack_monitor_tables(tree, working)
    released = kinds.releasable("monitor", working, ReportSettings(suppress_k=K))
    assert not attack_monitor(released, working)
