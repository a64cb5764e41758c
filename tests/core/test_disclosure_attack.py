"""Disclosure control proved by attack: a reader's arithmetic on every shareable artefact must recover no count
from 1 to k − 1.

The attacker below is written from the reader's side, independently of :mod:`fairdesk.core.disclosure`: it reads
only what an artefact shows (the releasable JSON, the report tree's text, the model card) and is generous to
itself — it is told every true denominator and every partition total, as if it had them from elsewhere. It tries:

* rate × denominator (a rate read as the interval its printed digits allow, or its band),
* denominator − numerator, size − positives, TP + FN against positives, two rates over a known size,
* a rate worked back from a printed gap and the other group's rate,
* a partition total minus the shown parts (groups of an attribute, cells of an intersection sharing a value, bins):
  one withheld group's count, or the withheld groups' union's count when the shown parts leave 1 … k − 1,
* printed fractions "rate (<k/den)" in the report text.

A count is *recovered* when the arithmetic leaves exactly one whole value and it lies in 1 … k − 1. The same
attacker run on the working document and on today's report tree (built from it) does recover counts: that is what
the release step prevents.
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
from threadpoolctl import threadpool_limits

from disclosure_arithmetic import attack_fractions

from fairdesk.core import kinds
from fairdesk.core.disclosure import release, release_table
from fairdesk.core.kinds import ReportSettings

K = 11
EPS = 0.0005 + 1e-9  # a number printed to 3 decimals


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(limits=1):
        yield


def _interval(value, band=None, eps=EPS):
    if band is not None:
        return (band[0], band[1])
    if value is None:
        return None
    return (value - eps, value + eps)


def _candidates(lo, hi, top):
    """Whole values in [lo, hi] ∩ [0, top]."""
    a, b = max(0, math.ceil(lo - 1e-9)), min(top, math.floor(hi + 1e-9))
    return list(range(a, b + 1)) if a <= b else []


def _recovered(cands, truth, k=K) -> bool:
    return len(cands) == 1 and cands[0] == truth and 1 <= truth < k


def _truth_units(doc):
    """Every (task, attribute, group)'s true counts, from the working document."""
    out = {}
    for g in doc.get("groups") or []:
        n, pos = g["n"], g["n_positive"]
        out[(g["task"], g["attribute"], g["group"])] = {"n": n, "n_positive": pos, "negatives": n - pos,
                                                        **{c: g[c] for c in ("tn", "fp", "fn", "tp")}}
    return out


def attack_groups(released: dict, working: dict, k: int = K) -> list[str]:
    """Counts from 1 to k − 1 a reader recovers from a released group-audit document."""
    leaks = []
    truth = _truth_units(working)
    true_rec = {(r["task"], r["attribute"], r["group"], r["metric"], r.get("comparison")): r
                for r in working.get("records") or []}
    shown_units = {(g["task"], g["attribute"], g["group"]): g for g in released.get("groups") or []}
    # 1. size − positives, TP/FP/FN/TN against the shown margins
    for key, g in shown_units.items():
        t = truth.get(key)
        if t is None:
            continue
        if g.get("n") is not None and g.get("n_positive") is not None and _small(g["n"] - g["n_positive"], k):
            leaks.append(f"{key}: n − positives = {g['n'] - g['n_positive']}")
        for c in ("tn", "fp", "fn", "tp", "n", "n_positive"):
            if g.get(c) is not None and _small(g[c], k):
                leaks.append(f"{key}: {c} = {g[c]} printed")
        cm = [g.get(c) for c in ("tn", "fp", "fn", "tp")]
        if g.get("n") is not None and sum(v is None for v in cm) == 1:
            missing = ("tn", "fp", "fn", "tp")[cm.index(None)]
            value = g["n"] - sum(v for v in cm if v is not None)
            if _small(value, k):
                leaks.append(f"{key}: {missing} = n − the other cells = {value}")
    # 2. rates: rate × denominator, denominator − numerator, gap + other rate
    rate_iv = {}
    for r in released.get("records") or []:
        key = (r["task"], r["attribute"], r["group"], r["metric"], r.get("comparison"))
        tr = true_rec.get(key)
        if tr is None or tr.get("denominator") in (None, 0) or tr.get("rate") is None:
            continue
        den, num = int(tr["denominator"]), int(tr["numerator"])
        if r.get("numerator") is not None and r.get("denominator") is not None:
            d = r["denominator"] - r["numerator"]
            if _small(d, k):
                leaks.append(f"{key}: denominator − numerator = {d}")
        iv = _interval(r.get("rate"), r.get("rate_band"))
        if r.get("gap") is not None and r.get("comparison_rate") is not None:
            g_iv = _interval(r["gap"], r.get("gap_band"))
            c_iv = _interval(r["comparison_rate"], r.get("comparison_rate_band"))
            if r.get("gap_band") is None and r.get("comparison_rate_band") is None and c_iv and g_iv:
                via_gap = (g_iv[0] + c_iv[0], g_iv[1] + c_iv[1])
                iv = via_gap if iv is None else (max(iv[0], via_gap[0]), min(iv[1], via_gap[1]))
        pooled = (working.get("plan") or {}).get("gap_rule") == "one-vs-rest"
        if pooled and tr.get("test_id") and r.get("comparison_rate") is not None:
            c_iv = _interval(r["comparison_rate"], r.get("comparison_rate_band"))
            tested = [x for x in working["records"] if x.get("test_id") and x["task"] == r["task"]
                      and x["attribute"] == r["attribute"] and x["metric"] == r["metric"] and x.get("denominator")]
            total_num = sum(int(x["numerator"]) for x in tested)
            rest_den = sum(int(x["denominator"]) for x in tested) - den
            cands = _candidates(total_num - c_iv[1] * rest_den, total_num - c_iv[0] * rest_den, den)
            if _recovered(cands, num, k) or _recovered([den - c for c in cands], den - num, k):
                leaks.append(f"{key}: total − rest rate × rest = {num} of {den}")
        if iv is None:
            continue
        rate_iv[key[:4]] = iv
        cands = _candidates(iv[0] * den, iv[1] * den, den)
        if _recovered(cands, num, k):
            leaks.append(f"{key}: rate × denominator = {num}")
        if _recovered([den - c for c in cands], den - num, k):
            leaks.append(f"{key}: denominator − rate × denominator = {den - num}")
    # 3. two rates over a known size: FP = parity × n − recall × positives (and the like)
    for key, t in truth.items():
        p, rc, sp = (rate_iv.get(key + (m,)) for m in ("parity", "recall", "specificity"))
        n, pos, neg = t["n"], t["n_positive"], t["negatives"]
        if shown_units.get(key, {}).get("n_positive") is None:
            # positives withheld: "at least one TP" bounds nothing, it only says the group has a positive case
            pos_top = neg_top = n
        else:
            pos_top, neg_top = pos, neg
        if p and rc:
            lo = p[0] * n - rc[1] * pos
            hi = p[1] * n - rc[0] * pos
            if _recovered(_candidates(lo, hi, neg_top), t["fp"], k):
                leaks.append(f"{key}: fp from parity and recall = {t['fp']}")
        if p and sp:
            lo = p[0] * n - (neg - sp[0] * neg)
            hi = p[1] * n - (neg - sp[1] * neg)
            if _recovered(_candidates(lo, hi, pos_top), t["tp"], k):
                leaks.append(f"{key}: tp from parity and specificity = {t['tp']}")
    # 4. a partition's total minus its shown parts. The total of a task's attribute is given to the reader when it is
    #    not small (it may be printed); a small one only when it follows from the released document (a task-level
    #    count, another attribute whose groups are all shown, the audit's rows minus the other tasks). That of the
    #    intersection cells sharing a value is known when that value's own group is shown.
    parts = defaultdict(list)
    for key in truth:
        task, attr, group = key
        parts[(task, attr)].append(key)
        if " × " in attr:
            for i, v in enumerate(group.split(" & ")):
                parts[(task, attr, i, v)].append(key)
    known = _known_task_totals(released, shown_units, truth)
    for pkey, members in parts.items():
        if len(pkey) == 4:  # cells of an intersection sharing a value: their total is that value's group, if shown
            task, attr, i, v = pkey
            marginal = shown_units.get((task, attr.split(" × ")[i], v), {})
            if marginal.get("n") is None:
                continue
        for c in ("n", "n_positive", "negatives", "tn", "fp", "fn", "tp"):
            total = sum(truth[m][c] for m in members)
            if len(pkey) == 2 and _small(total, k):  # the task's own total is small: does the reader have it?
                if known.get((pkey[0], c)) == total:
                    leaks.append(f"{pkey[0]}: its total {c} = {total} follows from the document")
                continue
            hidden = []
            rest = total
            for m in members:
                g = shown_units.get(m, {})
                shown = (g.get("n") - g.get("n_positive") if c == "negatives" and None not in (g.get("n"), g.get("n_positive"))
                         else g.get(c) if c != "negatives" else None)
                if shown is None:
                    hidden.append(m)
                else:
                    rest -= shown
            if len(hidden) == 1 and _small(rest, k) and truth[hidden[0]][c] == rest:
                leaks.append(f"{hidden[0]}: {c} = partition total − shown parts = {rest}")
            elif len(hidden) > 1 and _small(rest, k) and (len(pkey) == 2 or rest != total):
                # (the union of an intersection's cells sharing a value is that value's group: protected there)
                leaks.append(f"{hidden}: their {c} together = partition total − shown parts = {rest}")
    return leaks


def _known_task_totals(released: dict, shown_units: dict, truth: dict) -> dict:
    """(task, count type) → the task's total as a reader works it out from the released document alone: the sum of
    an attribute's groups when all are shown, a task-level count (the rows behind the error spread), and the audit's
    rows minus every other task's known rows."""
    known: dict = {}
    by_attr = defaultdict(list)
    for key in truth:
        if " × " not in key[1]:
            by_attr[key[:2]].append(key)
    for (task, attr), members in by_attr.items():
        rows = [shown_units.get(m, {}) for m in members]
        for c in ("n", "n_positive", "negatives", "tn", "fp", "fn", "tp"):
            vals = [(g.get("n") - g.get("n_positive")) if c == "negatives" and None not in (g.get("n"), g.get("n_positive"))
                    else None if c == "negatives" else g.get(c) for g in rows]
            if all(v is not None for v in vals):
                known[(task, c)] = sum(vals)
    for r in released.get("records") or []:
        if r.get("metric") == "delta_eo" and r.get("n") is not None:
            known[(r["task"], "n")] = r["n"]
    tasks = sorted({key[0] for key in truth}, key=str)
    audit = ((released.get("provenance") or {}).get("n_eval_rows"))
    missing = [t for t in tasks if known.get((t, "n")) is None]
    if audit is not None and len(missing) == 1:
        known[(missing[0], "n")] = audit - sum(known[(t, "n")] for t in tasks if t != missing[0])
    return known


def _small(value, k=K) -> bool:
    return value is not None and 1 <= value < k


def attack_text(text: str, k: int = K) -> list[str]:
    return attack_fractions(text, k)


# --------------------------------------------------------------------------------------------------------------
# Generated audits


@st.composite
def audits(draw):
    """A predictions table: 1–2 tasks, two attributes (2–4 groups of 1–200 rows), their intersection, an age."""
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    tasks = draw(st.integers(1, 2))
    sizes = draw(st.lists(st.integers(1, 200), min_size=2, max_size=4).filter(lambda s: sum(s) >= 20))
    prevalence = draw(st.floats(0.05, 0.5))
    rule = draw(st.sampled_from(["max", "one-vs-rest"]))
    rows = []
    for t in range(tasks):
        group = np.repeat([f"g{i}" for i in range(len(sizes))], sizes)
        n = len(group)
        y = (rng.random(n) < prevalence).astype(int)
        s = np.clip(np.where(y == 1, rng.normal(0.65, 0.2, n), rng.normal(0.35, 0.2, n)), 0, 1)
        rows.append(pd.DataFrame({"label": y, "score": s, "task": f"t{t}", "site": group,
                                  "sex": np.resize(["F", "M"], n), "age": rng.uniform(18, 90, n)}))
    return pd.concat(rows, ignore_index=True), rule


def _group_doc(df, rule: str = "max") -> dict:
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="label", score="score", task="task", attributes=("site", "sex"),
                        continuous_attributes=("age",))
    plan = GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, n_permutations=100, min_group_size=5, bins=(3,),
                          intersections=(("site", "sex"),), calibration=False, gap_rule=rule)
    return json.loads(run_group_audit(df, plan).to_json())


def _report_text(name, doc, k=K) -> str:
    module = kinds.resolve(kinds.AUDIT_KINDS[name].report.split(":")[0] + ":report_tree")
    return module(doc, ReportSettings(suppress_k=k)).text()


@settings(max_examples=6, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(audits())
def test_no_small_count_recovered_from_a_released_group_audit(table):
    df, rule = table
    working = _group_doc(df, rule)
    released = kinds.releasable("groups", working, ReportSettings(suppress_k=K))
    assert released["disclosure"]["for_release"] and released["disclosure"]["k"] == K
    leaks = attack_groups(released, working)
    assert not leaks, "\n".join(leaks)
    text = _report_text("groups", released)
    assert not attack_text(text), attack_text(text)
    assert f"k = {K}" in text  # the rule is stated on the page


def test_the_attack_recovers_counts_from_todays_artefacts():
    """The same attacker on the working document and on the report built from it (today's route) recovers
    counts: the attack has teeth."""
    rng = np.random.default_rng(1)
    n = 37 + 150
    group = np.repeat(["small", "large"], [37, 150])
    y = (rng.random(n) < 0.3).astype(int)
    s = np.clip(np.where(y == 1, rng.normal(0.65, 0.2, n), rng.normal(0.35, 0.2, n)), 0, 1)
    df = pd.DataFrame({"label": y, "score": s, "task": "t0", "site": group, "sex": rng.choice(["F", "M"], n),
                       "age": rng.uniform(18, 90, n)})
    working = _group_doc(df)
    assert attack_groups(working, working)
    assert attack_text(_report_text("groups", working))
    released = kinds.releasable("groups", working, ReportSettings(suppress_k=K))
    assert not attack_groups(released, working)
    assert not attack_text(_report_text("groups", released))


def _two_tasks(seed: int, small: tuple[int, int]) -> pd.DataFrame:
    """A task of 300 rows (90 positive) beside a task of ``small`` = (rows, positives)."""
    rng = np.random.default_rng(seed)
    frames = []
    for t, (n, npos) in enumerate([(300, 90), small]):
        y = np.zeros(n, int)
        y[rng.choice(n, npos, replace=False)] = 1
        s = np.clip(np.where(y == 1, rng.normal(0.65, 0.2, n), rng.normal(0.35, 0.2, n)), 0, 1)
        frames.append(pd.DataFrame({"label": y, "score": s, "task": f"t{t}", "site": rng.choice(["a", "b", "c"], n),
                                    "sex": np.resize(["F", "M"], n), "age": rng.uniform(18, 90, n)}))
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("small", [(8, 3), (200, 6), (40, 2)])
def test_a_task_whose_total_is_small_is_withheld_whole(small):
    """A task with 8 rows, 6 positives or 2 positives in all: its total is itself a count from 1 to k − 1. The
    audit's rows minus the other task's rows gave the 8 back; the task is now withheld as a whole (the audit's row
    counts with it) and says so, while the other task keeps its counts."""
    working = _group_doc(_two_tasks(1, small))
    released = kinds.releasable("groups", working, ReportSettings(suppress_k=K))
    leaks = attack_groups(released, working)
    assert not leaks, "\n".join(leaks)
    assert all(g["n"] is None for g in released["groups"] if g["task"] == "t1")
    assert any(g["n"] is not None for g in released["groups"] if g["task"] == "t0")
    assert any("Task(s) t1" in r for r in released["disclosure"]["rules"])
    text = _report_text("groups", released)
    assert not attack_text(text) and "t1 (n\u00a0=\u00a0–)" in text and "t0 (n\u00a0=\u00a0300)" in text


@pytest.mark.parametrize("rule", ["max", "to-overall"])
def test_a_task_with_few_missed_cases_withholds_every_groups_cells(rule):
    """60 positives of which 4 are missed in all (a sharp model): the task's total FN is from 1 to k − 1. Every
    group keeps its size and positives but not its TP/FP/FN/TN, its rates are wide grid bands, and nothing is
    recovered (the overall recall of the to-overall rule included)."""
    rng = np.random.default_rng(5)
    n = 240
    y = np.zeros(n, int)
    y[:60] = 1
    s = np.where(y == 1, 0.9, 0.1)
    s[:4] = 0.2  # the 4 missed cases
    s[60:75] = 0.8  # 15 false alarms
    df = pd.DataFrame({"label": y, "score": s, "task": "t0", "site": rng.choice(["a", "b", "c"], n),
                       "sex": np.resize(["F", "M"], n), "age": rng.uniform(18, 90, n)})
    working = _group_doc(df, rule)
    released = kinds.releasable("groups", working, ReportSettings(suppress_k=K))
    assert not attack_groups(released, working)
    site = [g for g in released["groups"] if g["attribute"] == "site"]
    assert all(g["n"] is not None and g["n_positive"] is not None and g["fn"] is None for g in site)
    assert sum(g["n"] for g in site) == n
    assert any("Task(s) t0 have a total of TP, FP, FN or TN" in r for r in released["disclosure"]["rules"])
    recall = [r for r in released["records"] if r["metric"] == "recall" and r["attribute"] == "site"]
    assert all(r["rate_band"][1] - r["rate_band"][0] >= min(1.0, 2 * K / r_w["denominator"]) - 1e-9
               for r, r_w in zip(recall, [x for x in working["records"] if x["metric"] == "recall"
                                          and x["attribute"] == "site"]))
    assert not attack_text(_report_text("groups", released))


def test_the_task_total_attack_has_teeth():
    """Before a small task was withheld whole, its 8 rows followed from the audit's rows minus the other task's."""
    working = _group_doc(_two_tasks(1, (8, 3)))
    leaks = attack_groups(working, working)
    assert any("t1: its total n = 8 follows from the document" in x for x in leaks)


def test_release_table_withholds_small_rows_and_one_more():
    df = pd.DataFrame({"group": ["a", "b", "c", "d"], "n": [120, 80, 40, 7], "numerator": [60, 30, 20, 3],
                       "denominator": [120, 80, 40, 7], "rate": [0.5, 0.375, 0.5, 3 / 7],
                       "gap": [0.0, -0.125, 0.0, -0.0714285]})
    out, rule = release_table(df, K)
    assert out.loc[3, ["n", "numerator", "rate", "gap"]].isna().all()
    assert out.loc[2, ["n", "numerator"]].isna().all()  # the next smallest: the total minus the shown rows
    assert out.loc[0, "n"] == 120 and f"k = {K}" in rule
    total = int(df["n"].sum())
    assert total - out["n"].dropna().sum() == 47  # the two withheld rows together: not one small count
    assert list(df["n"]) == [120, 80, 40, 7]  # the input is left as it was


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), min_size=1, max_size=8))
def test_release_table_recovers_nothing(pairs):
    rows = [(max(a, b), min(a, b)) for a, b in pairs]
    df = pd.DataFrame({"n": [r[0] for r in rows], "numerator": [r[1] for r in rows],
                       "denominator": [r[0] for r in rows],
                       "rate": [r[1] / r[0] if r[0] else np.nan for r in rows]})
    out, _ = release_table(df, K)
    for i, (den, num) in enumerate(rows):
        shown = out.loc[i]
        for c in ("n", "numerator"):
            assert pd.isna(shown[c]) or not _small(shown[c])
        if pd.notna(shown["numerator"]) and pd.notna(shown["denominator"]):
            assert not _small(shown["denominator"] - shown["numerator"])
    for c, truth in (("n", [r[0] for r in rows]), ("numerator", [r[1] for r in rows])):
        hidden = [t for t, v in zip(truth, out[c]) if pd.isna(v)]
        if len(hidden) == 1:
            assert not _small(hidden[0]), (c, rows)


@pytest.mark.slow
def test_the_demo_released_recovers_nothing_and_still_names_its_harms():
    """The demo's audit (fewer bootstrap replicates): nothing recovered from its releasable copy or its report, while
    today's report of it does leak (a rate printed with its denominator beside a hidden numerator); page 1 names the same
    findings, in the same order, and the planted recall harm of sepsis (language = Other, 12 of 39 found: no small
    cell) is in the tables with its counts and its verdict."""
    from fairdesk.core.audits.groups import run_group_audit
    from fairdesk.core.demo import demo_predictions
    from fairdesk.jobs.demo import demo_plan

    pred, _ = demo_predictions(seed=0, n_stays=8000, kind="logistic_regression")
    working = json.loads(run_group_audit(pred, demo_plan(n_boot=100, seed=0)).to_json())
    released = kinds.releasable("groups", working, ReportSettings(suppress_k=K))
    assert not attack_groups(released, working)
    assert attack_text(_report_text("groups", working))
    module = kinds.resolve(kinds.AUDIT_KINDS["groups"].report.split(":")[0] + ":report_tree")
    page1 = [module(d, ReportSettings(suppress_k=K)).sections[0] for d in (working, released)]
    findings = [[p.text.split(" is ")[0] for p in s.blocks if getattr(p, "style", "") == "finding"] for s in page1]
    assert findings[0] and findings[0] == findings[1]
    text = module(released, ReportSettings(suppress_k=K)).text()
    assert not attack_text(text)
    assert "sepsis | Other | Recall | 317 | 0.308 (12/39) | English (0.655) | −0.347 |" in text
    assert "| differs | English" in text.split("sepsis | Other | Recall |")[1].splitlines()[0]
    assert f"k = {K}" in text


def test_cli_writes_a_working_and_a_releasable_json(tmp_path):
    """``audit groups --json W --release-json R --suppress-k 11``: W keeps the exact counts and says it is not for
    release; R is the releasable copy, and the attacker recovers nothing from it."""
    from fairdesk.cli import main

    rng = np.random.default_rng(2)
    group = np.repeat(["small", "large", "mid"], [37, 150, 60])
    n = len(group)
    y = (rng.random(n) < 0.3).astype(int)
    s = np.clip(np.where(y == 1, rng.normal(0.65, 0.2, n), rng.normal(0.35, 0.2, n)), 0, 1)
    data = tmp_path / "preds.csv"
    pd.DataFrame({"label": y, "score": s, "site": group}).to_csv(data, index=False)
    code = main(["audit", "groups", str(data), "--label", "label", "--score", "score", "--attribute", "site",
                 "--threshold", "0.5", "--n-boot", "100", "--min-group-size", "5", "--json", str(tmp_path / "w.json"),
                 "--release-json", str(tmp_path / "r.json"), "--suppress-k", str(K), "--quiet"])
    assert code == 0
    working = json.loads((tmp_path / "w.json").read_text())
    header = working.pop("disclosure")
    assert header["for_release"] is False and "not for release" in header["note"]
    released = json.loads((tmp_path / "r.json").read_text())
    assert released["disclosure"]["for_release"] is True and released["disclosure"]["k"] == K
    assert attack_groups(working, working)  # the working document holds small cells
    assert not attack_groups(released, working)
    # the release path may not be the working path (the one output guard)
    assert main(["audit", "groups", str(data), "--label", "label", "--score", "score", "--attribute", "site",
                 "--threshold", "0.5", "--json", str(tmp_path / "x.json"), "--release-json", str(tmp_path / "x.json"),
                 "--quiet"]) == 2


def test_an_exported_summary_table_states_its_rule(tmp_path):
    from fairdesk.core.export import write_table

    df = pd.DataFrame({"group": ["a", "b", "c"], "n": [120, 80, 4], "rate": [0.5, 0.25, 0.75]})
    back = pd.read_csv(write_table(df, tmp_path / "t.csv", release_k=K))
    assert back["n"].isna().tolist() == [False, True, True]  # the small row and the next smallest
    assert f"k = {K}" in back.loc[0, "disclosure"]


def attack_slices(released: dict, working: dict, k: int = K) -> list[str]:
    """Counts from 1 to k − 1 a reader recovers from a released slice audit: the slice's found (or flagged) cases
    and their complement from its rate, and from the total minus the rest's, given every true denominator."""
    leaks = []
    truth = {s["test_id"]: s for s in working.get("slices") or []}
    for s in released.get("slices") or []:
        t = truth[s["test_id"]]
        if (t.get("n") or 0) < k:
            leaks.append(f"{s['test_id']}: a slice of {t['n']} rows is described")
        den = {"recall": t["cases"], "specificity": t["n"] - t["cases"]}.get(t["metric"], t["n"])
        rest_den = {"recall": t["rest_cases"], "specificity": t["rest_n"] - t["rest_cases"]}.get(t["metric"],
                                                                                                t["rest_n"])
        if not den or t.get("value") is None:
            continue
        num = round(t["value"] * den)
        ivs = [_interval(s.get("value"), s.get("value_band"))]
        r_iv = _interval(s.get("rest_value"), s.get("rest_value_band"))
        if s.get("gap") is not None and r_iv is not None:
            g = _interval(s["gap"], s.get("gap_band"))
            ivs.append((g[0] + r_iv[0], g[1] + r_iv[1]))
        for iv in ivs:
            if iv is None:
                continue
            cands = _candidates(iv[0] * den, iv[1] * den, den)
            if _recovered(cands, num, k) or _recovered([den - c for c in cands], den - num, k):
                leaks.append(f"{s['test_id']}: {num} of {den} from its rate")
        if r_iv is not None and rest_den:  # the total's found cases (known) minus the rest's
            rest_num = round(t["rest_value"] * rest_den)
            total = num + rest_num
            cands = _candidates(total - r_iv[1] * rest_den, total - r_iv[0] * rest_den, den)
            if _recovered(cands, num, k) or _recovered([den - c for c in cands], den - num, k):
                leaks.append(f"{s['test_id']}: {num} of {den} from the total minus the rest")
        for c in ("n", "cases", "rest_n", "rest_cases"):
            if s.get(c) is not None and _small(s[c], k):
                leaks.append(f"{s['test_id']}: {c} = {s[c]} printed")
    return leaks


@settings(max_examples=5, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(150, 600), st.integers(0, 1000), st.sampled_from(["recall", "specificity", "parity"]))
def test_no_small_count_recovered_from_a_released_slice_audit(n_rows, seed, metric):
    from fairdesk.core.audits.slices import SliceAuditPlan, run_slice_audit
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.synthetic.slice_sim import simulate_slice_table

    df, _ = simulate_slice_table(n_rows, 3, order=2, gap=0.3, seed=seed, slice_share=0.1)
    plan = SliceAuditPlan(roles=ColumnRoles(label="y", score="p", attributes=("a1", "a2", "a3")), threshold=0.5,
                          metric=metric, min_size=3, min_denominator=2, suppress_k=1, carry=10, n_boot=100)
    working = json.loads(json.dumps(run_slice_audit(df, plan).to_dict()))
    released = kinds.releasable("slices", working, ReportSettings(suppress_k=K))
    assert not attack_slices(released, working), attack_slices(released, working)
    text = _report_text("slices", released)
    assert not attack_text(text) and f"k = {K}" in text
    if any(s["n"] < K for s in working["slices"]):
        assert len(released["slices"]) < len(working["slices"])


def test_the_slice_attack_recovers_counts_from_todays_artefacts():
    from fairdesk.core.audits.slices import SliceAuditPlan, run_slice_audit
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.synthetic.slice_sim import simulate_slice_table

    df, _ = simulate_slice_table(400, 4, order=2, gap=0.3, seed=3, slice_share=0.1)
    plan = SliceAuditPlan(roles=ColumnRoles(label="y", score="p", attributes=("a1", "a2", "a3", "a4")),
                          threshold=0.5, min_size=3, min_denominator=2, suppress_k=1, carry=10, n_boot=100)
    working = json.loads(json.dumps(run_slice_audit(df, plan).to_dict()))
    assert attack_slices(working, working)


def attack_curves(released: dict, working: dict, k: int = K) -> list[str]:
    """The ROC and precision–recall points of shown groups (3 decimals) times the group's true positives and
    negatives: a true- or false-positive count, its complement, or the step between two neighbouring points pinned
    to one value from 1 to k − 1."""
    truth = _truth_units(working)
    found = []
    for c in released.get("curves") or []:
        if c.get("curve") not in ("roc", "pr"):
            continue
        key = (c["task"], c["attribute"], c["group"])
        pos, neg = truth[key]["n_positive"], truth[key]["negatives"]
        prev = None
        for x, y in zip(c.get("x") or [], c.get("y") or []):
            if x is None or y is None:
                prev = None
                continue
            if c["curve"] == "roc":
                tp = _candidates((y - EPS) * pos, (y + EPS) * pos, pos)
                fp = _candidates((x - EPS) * neg, (x + EPS) * neg, neg)
            else:
                tp = _candidates((x - EPS) * pos, (x + EPS) * pos, pos)
                fp = (_candidates(tp[0] / (y + EPS) - tp[0], tp[0] / max(y - EPS, 1e-12) - tp[0], neg)
                      if len(tp) == 1 and tp[0] and y > EPS else [])
            for name, cands, total in (("TP", tp, pos), ("FP", fp, neg)):
                if len(cands) == 1 and (1 <= cands[0] < k or 1 <= total - cands[0] < k):
                    found.append(f"{key} {c['curve']}: {name} = {cands[0]} of {total}")
            here = (tp[0] if len(tp) == 1 else None, fp[0] if len(fp) == 1 else None)
            if prev is not None:
                for name, a, b in (("TP", here[0], prev[0]), ("FP", here[1], prev[1])):
                    if a is not None and b is not None and 1 <= abs(a - b) < k:
                        found.append(f"{key} {c['curve']}: a step of {abs(a - b)} {name}")
            prev = here
    return found


@settings(max_examples=4, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(audits())
def test_no_small_count_recovered_from_released_roc_and_pr_points(table):
    """Curve points are rates over a group's known positives and negatives: the released copy keeps only points
    whose counts, complements and steps are 0 or at least k; the working copy's points give counts away."""
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    df, rule = table
    roles = ColumnRoles(label="label", score="score", task="task", attributes=("site", "sex"))
    plan = GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, min_group_size=5, calibration=True, gap_rule=rule)
    working = json.loads(run_group_audit(df, plan).to_json())
    released = kinds.releasable("groups", working, ReportSettings(suppress_k=K))
    assert not attack_curves(released, working), attack_curves(released, working)[:5]
    if any(c.get("curve") == "roc" for c in working.get("curves") or []):
        assert attack_curves(working, working)  # the attacker has teeth
