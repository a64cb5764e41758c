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
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from disclosure_arithmetic import attack_fractions

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
    leaks += _attack_window_differences(released, working, k)
    leaks += _attack_window_pairs(released, working, k)
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
        elif len(hidden) > 1 and len(hidden) < len(members):  # the withheld groups' union is a count too
            value = sum(truth[m]["n"] or 0 for m in hidden)
            if _small(value, k):
                leaks.append(f"{hidden}: n together = the period's total minus the other groups = {value}")
    # a period's own totals, printed
    for p in released.get("periods") or []:
        for col in ("rows", "labelled"):
            if _small(p.get(col), k):
                leaks.append(f"period {p.get('period')}: {col} = {p[col]} printed")
    cparts = defaultdict(list)
    for key in ctx_truth:
        cparts[(key[0], key[1], key[3])].append(key)
    cshown = {(c["task"], c["attribute"], c["group"], c["period"]): c for c in released.get("context") or []}
    for members in cparts.values():
        for col in ("rows", "labelled"):
            hidden = [m for m in members if cshown[m].get(col) is None]
            if len(hidden) == 1 and _small(ctx_truth[hidden[0]][col], k):
                leaks.append(f"{hidden[0]}: {col} = the period's total minus the other groups")
            elif 1 < len(hidden) < len(members) and _small(sum(ctx_truth[m][col] or 0 for m in hidden), k):
                leaks.append(f"{hidden}: {col} together = the period's total minus the other groups")
    return leaks


def _attack_window_differences(released: dict, working: dict, k: int = K) -> list[str]:
    """The monitor's gap over a window is S/W with S = Σ w·d and W = Σ w over its periods (w = M·M_r/(M + M_r) from
    the true cases): two consecutive gaps over windows with the same start give w_t·d_t = S_t − S_{t−1}, and with the
    period's total found cases Y (known) the group's found cases are w_t·d_t + Y·M/(M + M_r)."""
    leaks = []
    order = [p["period"] for p in working.get("periods") or []]
    truth = {_mkey(r): r for r in working.get("monitor") or []}
    by_key = defaultdict(dict)
    for r in released.get("monitor") or []:
        by_key[_mkey(r)[:4]][r["period"]] = r

    def weight(t):
        m, mr = t.get("n") or 0, t.get("rest_n") or 0
        return m * mr / (m + mr) if m > 0 and mr > 0 else 0.0

    for key, recs in by_key.items():
        for i in range(1, len(order)):
            prev, cur = recs.get(order[i - 1]), recs.get(order[i])
            if prev is None or cur is None or cur.get("since") is None or cur.get("since") != prev.get("since"):
                continue
            since = order.index(cur["since"])
            t = truth[key + (order[i],)]
            m, mr = t.get("n") or 0, t.get("rest_n") or 0
            if not (m > 0 and mr > 0) or t.get("rate") is None or t.get("rest_rate") is None:
                continue
            w_prev = sum(weight(truth[key + (p,)]) for p in order[since:i])
            w_cur = w_prev + weight(t)
            num = round(t["rate"] * m)
            total = num + round(t["rest_rate"] * mr)
            for glo, ghi in _intervals(cur.get("gap"), cur.get("gap_band")):
                for plo, phi in _intervals(prev.get("gap"), prev.get("gap_band")):
                    lo = glo * w_cur - phi * w_prev + total * m / (m + mr)
                    hi = ghi * w_cur - plo * w_prev + total * m / (m + mr)
                    cands = _candidates(lo, hi, m)
                    if _recovered(cands, num, k) or _recovered([m - c for c in cands], m - num, k):
                        leaks.append(f"{key + (order[i],)}: {num} of {m} from two consecutive window gaps")
    return leaks


def _attack_window_pairs(released: dict, working: dict, k: int = K, across_only: bool = False) -> list[str]:
    """Any two windows, of one comparison or of two, whose periods differ by one period q give w_q·d_q = S_2 − S_1.
    Two comparisons share their windows' sums when an attribute has two groups in a period: group B's rest is group
    A, so w is the same and d_B = −d_A, and B's window starting at another period than A's is one more window of A.
    With the period's total found cases Y (known) the group's found cases are w_q·d_q + Y·M/(M + M_r).
    ``across_only``: only pairs of a window of each comparison, starting at different periods."""
    leaks = []
    order = [p["period"] for p in working.get("periods") or []]
    truth = {_mkey(r): r for r in working.get("monitor") or []}

    def weight(t):
        m, mr = t.get("n") or 0, t.get("rest_n") or 0
        return m * mr / (m + mr) if m > 0 and mr > 0 else 0.0

    groups = defaultdict(set)
    for key in truth:
        groups[(key[0], key[1], key[3])].add(key[2])
    windows = defaultdict(list)  # (task, attribute, group, metric) → [(first, last, gap intervals, sign)]
    for r in released.get("monitor") or []:
        if r.get("since") is None or r.get("gap") is None and r.get("gap_band") is None:
            continue
        key = _mkey(r)[:4]
        span = (order.index(r["since"]), order.index(r["period"]))
        ivs = _intervals(r.get("gap"), r.get("gap_band"))
        windows[key].append(span + (ivs, False))
        others = groups[(key[0], key[1], key[3])] - {key[2]}
        if len(others) == 1:  # its rest is the other group in every period of the window: the same window, negated
            other = next(iter(others))
            if all(truth.get(key[:2] + (other, key[3], order[p]), {}).get("n") == truth[key + (order[p],)].get("rest_n")
                   for p in range(span[0], span[1] + 1) if key + (order[p],) in truth):
                windows[key[:2] + (other, key[3])].append(span + ([(-hi, -lo) for lo, hi in ivs], True))
    for key, spans in windows.items():
        def W(a, b):
            return sum(weight(truth.get(key + (order[p],), {})) for p in range(a, b + 1))

        for (a1, b1, iv1, x1) in spans:
            for (a2, b2, iv2, x2) in spans:
                if across_only and not (x1 != x2 and a1 != a2):
                    continue
                if not (a2 <= a1 and b1 <= b2 and (b2 - b1) + (a1 - a2) == 1):
                    continue
                q = a2 if a2 < a1 else b2
                t = truth.get(key + (order[q],))
                if t is None:
                    continue
                m, mr = t.get("n") or 0, t.get("rest_n") or 0
                if not (m > 0 and mr > 0) or t.get("rate") is None or t.get("rest_rate") is None:
                    continue
                w1, w2 = W(a1, b1), W(a2, b2)
                num = round(t["rate"] * m)
                total = num + round(t["rest_rate"] * mr)
                for glo, ghi in iv2:
                    for plo, phi in iv1:
                        lo = glo * w2 - phi * w1 + total * m / (m + mr)
                        hi = ghi * w2 - plo * w1 + total * m / (m + mr)
                        cands = _candidates(lo, hi, m)
                        if _recovered(cands, num, k) or _recovered([m - c for c in cands], m - num, k):
                            leaks.append(f"{key + (order[q],)}: {num} of {m} from windows {order[a1]}–{order[b1]} "
                                         f"and {order[a2]}–{order[b2]}")
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


def attack_words(text: str, k: int = K) -> list[str]:
    """A small count printed in words ("7 patients"), and the fractions "rate (<k/den)" and "rate (num/den)"."""
    return [m.group(0) for m in COUNT_WORDS.finditer(text) if _small(int(m.group(1)), k)] + attack_fractions(text, k)


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
@example(18, 4, 400, ("recall", "specificity"), 0.0)  # two window gaps rounded to 2 decimals gave 29 of 37 back
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
    _alarms_stay_readable(released)


def _alarms_stay_readable(released):
    """Suppression keeps every alarm a finding: its sentence says differs (a size, a band or "size withheld"), and a
    sequence printed beside it (rounded outward to the band's grid) still excludes 0."""
    from fairdesk.core.reports.monitor import alarm_sentence

    for a in released.get("alarms") or []:
        assert "not estimable" not in alarm_sentence(a)
        if a.get("cs_low") is not None and a.get("cs_high") is not None:
            assert a["cs_high"] < 0 or a["cs_low"] > 0, a
    for r in released.get("monitor") or []:
        if r.get("alarm") and r.get("cs_low") is not None and r.get("cs_high") is not None:
            assert r["cs_high"] < 0 or r["cs_low"] > 0, r


@pytest.mark.parametrize("seed", [123, 7])
def test_an_alarm_on_a_small_group_is_still_told_when_every_period_of_it_is_withheld(seed):
    """A group of a tenth of a stream, its recall falling from month 5: its periods hold fewer than k found or
    missed cases, so every one is withheld; the alarm is still told, its sequence never rounded out to 0."""
    from fairdesk.core.audits.monitor import MonitorPlan, run_monitor

    rng = np.random.default_rng(seed)
    rows = []
    for m in range(1, 9):
        for _ in range(500):
            g = rng.choice(["A", "B", "C", "D"], p=[0.4, 0.3, 0.2, 0.1])
            y = int(rng.random() < 0.3)
            s = float(np.clip(rng.normal(0.62 if y else 0.35, 0.18), 0, 1))
            if g == "D" and y and m >= 5:
                s = max(s - 0.3, 0.0)
            rows.append((f"2026-{m:02d}", f"p{rng.integers(0, 1500)}", g, y, s))
    df = pd.DataFrame(rows, columns=["month", "pid", "grp", "y", "s"])
    plan = MonitorPlan(label="y", score="s", attributes=("grp",), threshold=0.45, period="month", patient_id="pid",
                       metrics=("recall",))
    working = json.loads(run_monitor(df, plan).to_json())
    assert any(a["group"] == "D" for a in working["alarms"])
    released = kinds.releasable("monitor", working, ReportSettings(suppress_k=K))
    _alarms_stay_readable(released)
    assert not attack_monitor(released, working)


def test_the_monitor_attack_recovers_counts_from_todays_artefacts():
    """The working document (and the report built from it) gives small counts back: the attack has teeth."""
    working = _monitor_doc(4, 3, 200, ("recall", "specificity"), 0.0)
    assert attack_monitor(working, working)
    tree = kinds.resolve("fairdesk.core.reports.monitor:report_tree")(working, ReportSettings(suppress_k=K))
    assert attack_monitor_tables(tree, working)
    released = kinds.releasable("monitor", working, ReportSettings(suppress_k=K))
    assert not attack_monitor(released, working)


def _two_group_monitor(seed, months, per_month):
    from fairdesk.core.audits.monitor import run_monitor
    from fairdesk.core.synthetic.monitor_sim import simulate_stream, stream_plan

    df = simulate_stream(seed, months=months, per_month=per_month, gap=0.3, onset=2)
    df["eth"] = df["eth"].replace({"C": "B"})  # two groups: each one's rest is the other
    plan = stream_plan()
    plan.metrics = ("recall", "specificity")
    return json.loads(run_monitor(df, plan).to_json())


def _with_a_later_start(doc: dict) -> dict:
    """``doc`` with group B's record at the last period showing its window from the second period on (computed
    exactly from the true counts), while group A's shows the window from the first: the two comparisons' windows
    start at different periods and differ by the first period only."""
    out = json.loads(json.dumps(doc))
    order = [p["period"] for p in out["periods"]]
    recs = {_mkey(r): r for r in out["monitor"]}
    for r in out["monitor"]:
        if r["group"] != "B" or r["period"] != order[-1]:
            continue
        a = recs[(r["task"], r["attribute"], "A", r["metric"], order[-1])]
        if a["since"] != order[0]:
            continue
        window = [x for x in (recs[(r["task"], r["attribute"], "B", r["metric"], p)] for p in order[1:])
                  if x["n"] and x["rest_n"] and x["rate"] is not None and x["rest_rate"] is not None]
        w = [x["n"] * x["rest_n"] / (x["n"] + x["rest_n"]) for x in window]
        gap = sum(wi * (x["rate"] - x["rest_rate"]) for wi, x in zip(w, window)) / sum(w)
        r.update(since=order[1], gap=gap, cs_low=gap - 0.2, cs_high=gap + 0.2, alarm=False)
    return out


@pytest.mark.parametrize("seed", [0, 3])
def test_windows_of_two_comparisons_starting_at_different_periods(seed):
    """A two-group attribute: B's rest is A, so B's window sum is −(A's) over the same periods, and A's window from
    the first period minus B's from the second gives the first period's w·d, and with it A's found cases there. The
    monitor picks mirrored windows for mirrored comparisons (the same start), so its own documents never show this
    pair; shown exactly it gives counts back, and released each window is a band at least 2k of its own weight wide,
    so the difference of two is at least 4k wide and gives nothing."""
    working = _with_a_later_start(_two_group_monitor(seed, 4, 60))
    assert _attack_window_pairs(working, working, across_only=True)
    released = kinds.releasable("monitor", working, ReportSettings(suppress_k=K))
    assert not _attack_window_pairs(released, working)
    assert not attack_monitor(released, working)
    plain = _two_group_monitor(seed, 4, 60)  # the monitor's own document: mirrored windows start together
    starts = defaultdict(set)
    for r in plain["monitor"]:
        starts[(r["task"], r["attribute"], r["metric"], r["period"])].add(r["since"])
    assert all(len(s) == 1 for s in starts.values())


def test_a_period_with_few_rows_in_all_is_withheld():
    """A period of 8 rows in all (its total, not only a group's, is below k): the period's rows and labelled rows
    are not printed, every group of it is withheld, and no count follows from the other periods or groups."""
    from fairdesk.core.audits.monitor import run_monitor
    from fairdesk.core.synthetic.monitor_sim import simulate_stream, stream_plan

    df = simulate_stream(7, months=4, per_month=120, gap=0.0, onset=2)
    months = sorted(df["month"].unique())
    thin = df[df["month"] == months[2]].head(8)
    df = pd.concat([df[df["month"] != months[2]], thin], ignore_index=True)
    plan = stream_plan()
    plan.metrics = ("recall", "specificity")
    working = json.loads(run_monitor(df, plan).to_json())
    assert any(p["rows"] == 8 for p in working["periods"])
    released = kinds.releasable("monitor", working, ReportSettings(suppress_k=K))
    assert not attack_monitor(released, working)
    period = next(p["period"] for p in working["periods"] if p["rows"] == 8)
    assert all(p["rows"] is None for p in released["periods"] if p["period"] == period)
    assert all(r["n"] is None for r in released["monitor"] if r["period"] == period)
    text = _tree("monitor", released).text()
    assert not attack_words(text)


# --------------------------------------------------------------------------------------------------------------
# Counterfactual token fairness, images, age-independent learners, masked-LM: documents generated directly (the
# stored document of each kind in tests/data/documents with drawn counts and the rates that follow from them). A
# report and a model card are built from the released document only, so what the JSON attack cannot recover they
# cannot print; their text is still read for counts in words and fractions.

DOCS = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "documents"


def _stored(kind):
    return json.loads((DOCS / f"{kind}.json").read_text(encoding="utf-8"))


def _counts(draw, top=60):
    return draw(st.integers(0, top))


@st.composite
def ctf_docs(draw):
    doc = _stored("ctf")
    rates = {}
    for t in doc["group_rates"]["terms"]:
        pos, neg = _counts(draw), _counts(draw)
        tp, tn = draw(st.integers(0, pos)), draw(st.integers(0, neg))
        t.update(n=pos + neg, n_pos=pos, n_neg=neg, tpr=tp / pos if pos else None, tnr=tn / neg if neg else None)
        rates[t["term"]] = (t["tpr"], t["tnr"])
    for g in doc["group_rates"]["pair_gaps"]:
        a, b = rates.get(g["term"], (None, None)), rates.get(g["other_term"], (None, None))
        g["tpr_gap"] = None if None in (a[0], b[0]) else a[0] - b[0]
        g["tnr_gap"] = None if None in (a[1], b[1]) else a[1] - b[1]
    for p in doc["pairs"]:
        n, rn = draw(st.integers(1, 60)), draw(st.integers(1, 60))
        up = draw(st.integers(0, n))
        down = draw(st.integers(0, n - up))
        p.update(n=n, flip_rate=(up + down) / n, flip_up_rate=up / n, flip_down_rate=down / n, reverse_n=rn,
                 reverse_flip_rate=draw(st.integers(0, rn)) / rn)
    n = draw(st.integers(20, 200))
    doc["performance"].update(n=n, n_positive=draw(st.integers(0, n)), accuracy=draw(st.integers(0, n)) / n)
    return doc


def attack_ctf(released, working, k=K):
    leaks = []
    truth = {t["term"]: t for t in working["group_rates"]["terms"]}
    shown = {t["term"]: t for t in released["group_rates"]["terms"]}
    for term, t in truth.items():
        r = shown[term]
        for c in ("n", "n_pos", "n_neg"):
            if _small(r.get(c), k):
                leaks.append(f"{term}: {c} = {r[c]} printed")
        for rate, den in (("tpr", "n_pos"), ("tnr", "n_neg")):
            if t.get(rate) is None:
                continue
            ivs = _intervals(r.get(rate))
            for g in released["group_rates"]["pair_gaps"]:  # a gap to a shown term gives this term's rate
                for mine, other, sign in ((g["term"], g["other_term"], 1), (g["other_term"], g["term"], -1)):
                    o = shown.get(other, {}).get(rate)
                    if mine == term and g.get(f"{rate}_gap") is not None and o is not None:
                        ivs += [(o + sign * lo, o + sign * hi) if sign > 0 else (o - hi, o - lo)
                                for lo, hi in _intervals(g[f"{rate}_gap"])]
            _from_rate(ivs, t[den], round(t[rate] * t[den]), f"{term} {rate}", leaks, k)
    for t, r in zip(working["pairs"], released["pairs"]):
        for rate, den in (("flip_rate", "n"), ("flip_up_rate", "n"), ("flip_down_rate", "n"),
                          ("reverse_flip_rate", "reverse_n")):
            _from_rate(_intervals(r.get(rate)), t[den], round(t[rate] * t[den]), f"pair {t['term']} {rate}", leaks, k)
        for c in ("n", "reverse_n"):
            if _small(r.get(c), k):
                leaks.append(f"pair {t['term']}: {c} = {r[c]} printed")
    t, r = working["performance"], released["performance"]
    _from_rate(_intervals(r.get("accuracy")), t["n"], round(t["accuracy"] * t["n"]), "accuracy", leaks, k)
    return leaks


@st.composite
def cit_docs(draw):
    doc = _stored("cit_images")
    per = {g: draw(st.integers(1, 60)) for g in doc["dataset"]["n_per_group"]}
    doc["dataset"]["n_per_group"] = per
    doc["dataset"]["n_audited"] = sum(per.values())
    for effect in doc["effects"].values():
        for d in effect["directions"]:
            n = per[str(d["source"])]
            d.update(n=n, flip_rate=draw(st.integers(0, n)) / n)
    for r in doc["table"]:
        r["n"] = sum(per.values())
        for key in [x for x in r if x.startswith("flip_rate_")]:
            n = per[key.split("_")[-1].split("->")[0]]
            r[key] = draw(st.integers(0, n)) / n
    return doc


def attack_cit(released, working, k=K):
    leaks = []
    per_t, per = working["dataset"]["n_per_group"], released["dataset"]["n_per_group"]
    for g, v in per.items():
        if _small(v, k):
            leaks.append(f"images of {g}: {v} printed")
    hidden = [g for g, v in per.items() if v is None]
    if len(hidden) == 1 and released["dataset"].get("n_audited") is not None:
        rest = released["dataset"]["n_audited"] - sum(v for v in per.values() if v is not None)
        if _small(rest, k):
            leaks.append(f"images of {hidden[0]}: the images audited minus the other values = {rest}")
    for name, effect in working["effects"].items():
        for t, r in zip(effect["directions"], released["effects"][name]["directions"]):
            if _small(r.get("n"), k):
                leaks.append(f"{name} {t['source']}->{t['target']}: n = {r['n']} printed")
            _from_rate(_intervals(r.get("flip_rate")), t["n"], round(t["flip_rate"] * t["n"]),
                       f"{name} {t['source']}->{t['target']} flips", leaks, k)
    for t, r in zip(working["table"], released["table"]):
        for key in [x for x in t if x.startswith("flip_rate_") and t[x] is not None]:
            n = per_t[key.split("_")[-1].split("->")[0]]
            _from_rate(_intervals(r.get(key)), n, round(t[key] * n), f"table {key}", leaks, k)
    return leaks


@st.composite
def age_docs(draw):
    doc = _stored("age_independence")
    folds = doc["settings"]["fold_sizes"]
    rows = [draw(st.integers(5, 80)) for _ in folds]
    for f, n in zip(folds, rows):
        f["rows"] = n
    doc["settings"]["n_rows"] = sum(rows)
    for m in doc["methods"].values():
        acc = [draw(st.integers(0, n)) / n for n in rows]
        m["accuracy"].update(folds=acc, mean=float(np.mean(acc)), std=float(np.std(acc, ddof=1)))
    return doc


def attack_age(released, working, k=K):
    leaks = []
    rows = [f["rows"] for f in working["settings"]["fold_sizes"]]
    for f in released["settings"]["fold_sizes"]:
        for c in ("rows", "participants", "positives"):
            if _small(f.get(c), k):
                leaks.append(f"fold {c} = {f[c]} printed")
    for name, m in working["methods"].items():
        r = released["methods"][name]["accuracy"]
        per_fold = [_intervals(v) for v in (r.get("folds") or [None] * len(rows))]
        if len(rows) == 2 and r.get("mean") is not None:  # the other fold's accuracy lies in [0, 1]
            for lo, hi in _intervals(r["mean"], r.get("mean_band")):
                per_fold[0].append((2 * lo - 1, 2 * hi))
                per_fold[1].append((2 * lo - 1, 2 * hi))
        if len(rows) == 2 and r.get("mean") is not None and r.get("std") is not None:
            # two folds: mean ± std/√2 are the two fold accuracies (in some order)
            for (mlo, mhi) in _intervals(r["mean"]):
                for (slo, shi) in _intervals(r["std"]):
                    d_lo, d_hi = slo / math.sqrt(2), shi / math.sqrt(2)
                    per_fold[0].append((mlo - d_hi, mhi - d_lo))
                    per_fold[0].append((mlo + d_lo, mhi + d_hi))
                    per_fold[1] += per_fold[0][-2:]
        for j, (v, n) in enumerate(zip(m["accuracy"]["folds"], rows)):
            right = round(v * n)
            _from_rate(per_fold[j], n, right, f"{name} fold {j} accuracy", leaks, k)
    return leaks


KIND_CASES = {"ctf": (ctf_docs, attack_ctf), "cit_images": (cit_docs, attack_cit),
              "age_independence": (age_docs, attack_age)}


@pytest.mark.parametrize("kind", sorted(KIND_CASES))
def test_no_small_count_recovered_from_a_released_document(kind):
    strategy, attack = KIND_CASES[kind]

    @settings(max_examples=15, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
              suppress_health_check=[HealthCheck.too_slow])
    @given(strategy())
    def check(working):
        released = kinds.releasable(kind, working, ReportSettings(suppress_k=K))
        assert released["disclosure"]["for_release"] and released["disclosure"]["k"] == K
        leaks = attack(released, working)
        assert not leaks, "\n".join(leaks[:10])
        text = _tree(kind, released).text()
        assert not attack_words(text), attack_words(text)
        assert f"k = {K}" in text
        assert not attack_words(_card_text(kind, released))

    check()


@pytest.mark.parametrize("kind", sorted(KIND_CASES))
def test_the_attack_recovers_counts_from_the_working_document(kind):
    """Each attacker finds small counts in the working document of a generated audit with small cells."""
    strategy, attack = KIND_CASES[kind]
    found = []

    @settings(max_examples=15, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate))
    @given(strategy())
    def collect(working):
        found.extend(attack(working, working))

    collect()
    assert found


def test_a_masked_lm_audit_counts_no_people_and_says_so():
    """Its counts are of templates, masks and scores: shown as they are, with the reason in the artefact."""
    working = _stored("mlm_bias")
    released = kinds.releasable("mlm_bias", working, ReportSettings(suppress_k=K))
    assert [r["n_templates"] for r in released["records"]] == [r["n_templates"] for r in working["records"]]
    assert any(1 <= r["n_templates"] < K for r in released["records"])  # a small template count stays shown
    assert any("not people" in r for r in released["disclosure"]["rules"])
    assert "not people" in _tree("mlm_bias", released).text()
