"""Synthetic prediction tables for validating the group audit: complete nulls and one planted gap.

:func:`simulate_audit_table` is imported by name by the validity benchmark (``fairdesk-cli bench validity``), the
tests and ``benchmarks/bench_groups.py``; keep its name and keyword names.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fairdesk.core.data.schema import ColumnRoles

BASE_RECALL = 0.70
BASE_FPR = 0.15


def simulate_audit_table(n_tasks: int = 10, group_sizes: tuple[int, ...] = (400, 200, 100, 60, 40),
                         prevalence: float = 0.1, planted_gap: float = 0.0, planted_metric: str = "recall",
                         repeats_per_patient: int = 1, seed: int = 0) -> tuple[pd.DataFrame, ColumnRoles]:
    """A long-format prediction table (``task, patient, group, y, s``) and its column roles.

    Every task has the same groups (``group_sizes`` rows each, named G1, G2, …), labels with the given
    ``prevalence`` and predictions (score ≥ 0.5) with recall 0.70 and false positive rate 0.15 in every group, so
    that every gap is 0 — a complete null — when ``planted_gap`` is 0. Otherwise task ``task00`` gets a gap of
    ``planted_gap`` in group G1 for ``planted_metric``: recall 0.70 + gap; specificity 0.85 + gap (false positive
    rate 0.15 − gap); parity + gap (recall and false positive rate both shifted by the gap).

    ``repeats_per_patient`` > 1: rows come in patients of that many rows sharing group, label and one prediction
    (perfectly correlated rows), ``patient`` is set in the roles and the audit resamples whole patients.
    """
    if planted_metric not in ("parity", "recall", "specificity"):
        raise ValueError(f"planted_metric must be parity, recall or specificity, not {planted_metric!r}")
    r = max(1, int(repeats_per_patient))
    rng = np.random.default_rng(seed)
    frames = []
    for t in range(n_tasks):
        for g, size in enumerate(group_sizes):
            n_pat = max(1, int(size) // r)
            tpr, fpr = BASE_RECALL, BASE_FPR
            if t == 0 and g == 0 and planted_gap:
                if planted_metric in ("recall", "parity"):
                    tpr += planted_gap
                if planted_metric in ("specificity", "parity"):
                    fpr += planted_gap if planted_metric == "parity" else -planted_gap
            tpr, fpr = float(np.clip(tpr, 0, 1)), float(np.clip(fpr, 0, 1))
            y = (rng.random(n_pat) < prevalence).astype(int)
            yhat = rng.random(n_pat) < np.where(y == 1, tpr, fpr)
            s = np.where(yhat, rng.uniform(0.5, 1.0, n_pat), rng.uniform(0.0, 0.4999, n_pat)).round(4)
            pid = np.arange(n_pat)
            frame = pd.DataFrame({"task": f"task{t:02d}", "patient": [f"G{g + 1}-{i}" for i in pid],
                                  "group": f"G{g + 1}", "y": y, "s": s})
            frames.append(frame.loc[frame.index.repeat(r)] if r > 1 else frame)
    df = pd.concat(frames, ignore_index=True)
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("group",),
                        patient_id="patient" if r > 1 else None)
    return df, roles


# --------------------------------------------------------------------------------------------------------------
# Power study: a few planted harms among hundreds of null comparisons, in the shape of the benchmark cohort
# (benchmarks/bench_groups.py: attributes of 2, 2, 5 and 4 groups with the MIMIC shares of paper 001).

POWER_ATTRIBUTES = {
    "gender": (("M", "F"), (0.55, 0.45)),
    "language": (("English", "Other"), (0.83, 0.17)),
    "ethnicity": (("White", "Black", "Hispanic", "Asian", "Other"), (0.71, 0.10, 0.04, 0.03, 0.12)),
    "insurance": (("Medicare", "Private", "Medicaid", "Government"), (0.58, 0.30, 0.09, 0.03)),
}
#: (task index, attribute, harmed group, measure, reference group): each harm lowers the group's rate so that its
#: pair test against the reference has an expected z of :data:`POWER_Z` (two-sided p ≈ 1e-3)
POWER_HARMS = ((0, "language", "Other", "recall", "English"), (1, "gender", "F", "specificity", "M"),
               (2, "ethnicity", "Black", "recall", "White"), (3, "insurance", "Medicaid", "parity", "Medicare"))
POWER_Z = 3.29
POWER_THRESHOLD = 0.3


def _base_rates(rng) -> dict:
    """Recall, specificity and parity of the score model at :data:`POWER_THRESHOLD` (large Monte-Carlo sample)."""
    s = rng.beta(1.0, 3.0, 400_000)
    y = rng.random(s.size) < s
    h = s >= POWER_THRESHOLD
    return {"recall": float(h[y].mean()), "specificity": float((~h[~y]).mean()), "parity": float(h.mean()),
            "prevalence": float(y.mean())}


def simulate_power_table(n_tasks: int = 6, n_rows: int = 4000, harms=POWER_HARMS, seed: int = 0,
                         z: float = POWER_Z) -> tuple[pd.DataFrame, ColumnRoles, list[dict]]:
    """A long-format table (``task, sample, y, s`` and the four attributes of :data:`POWER_ATTRIBUTES`, drawn
    independently per task) whose scores are calibrated risks (s ~ Beta(1, 3), y ~ Bernoulli(s)) and identical in
    law in every group — a complete null — except for ``harms``: in task ``t`` the rate of the harmed group is
    lowered (flagged positives unflagged for recall, unflagged negatives flagged for specificity, flagged rows
    unflagged for parity) by ``z`` times the expected standard error of its gap to the reference group. Returns
    the table, its roles and the harms with their planted gaps."""
    rng = np.random.default_rng(seed)
    base = _base_rates(np.random.default_rng(12345))
    planted = []
    frames = []
    for t in range(n_tasks):
        attrs = {a: rng.choice(np.array(g, dtype=object), n_rows, p=np.array(p) / sum(p))
                 for a, (g, p) in POWER_ATTRIBUTES.items()}
        s = rng.beta(1.0, 3.0, n_rows)
        y = rng.random(n_rows) < s
        for (ht, attr, group, metric, ref) in harms:
            if ht != t:
                continue
            groups, shares = POWER_ATTRIBUTES[attr]
            share_g, share_r = shares[groups.index(group)], shares[groups.index(ref)]
            denom = {"recall": base["prevalence"], "specificity": 1 - base["prevalence"], "parity": 1.0}[metric]
            r = base[metric]
            se = math.sqrt(r * (1 - r) * (1 / (n_rows * share_g * denom) + 1 / (n_rows * share_r * denom)))
            gap = z * se
            in_g = attrs[attr] == group
            if metric == "recall":  # flagged positives unflagged with probability gap / recall
                move = in_g & y & (s >= POWER_THRESHOLD) & (rng.random(n_rows) < gap / r)
                s = np.where(move, rng.uniform(0, POWER_THRESHOLD, n_rows), s)
            elif metric == "specificity":
                move = in_g & ~y & (s < POWER_THRESHOLD) & (rng.random(n_rows) < gap / r)
                s = np.where(move, rng.uniform(POWER_THRESHOLD, 1, n_rows), s)
            else:
                move = in_g & (s >= POWER_THRESHOLD) & (rng.random(n_rows) < gap / r)
                s = np.where(move, rng.uniform(0, POWER_THRESHOLD, n_rows), s)
            planted.append({"task": f"task{t:02d}", "attribute": attr, "group": group, "metric": metric,
                            "comparison": ref, "gap": -gap})
        frames.append(pd.DataFrame({"task": f"task{t:02d}", "sample": np.arange(n_rows), "y": y.astype(int),
                                    "s": s.round(5), **attrs}))
    roles = ColumnRoles(label="y", score="s", task="task", attributes=tuple(POWER_ATTRIBUTES), sample_id="sample")
    return pd.concat(frames, ignore_index=True), roles, planted


def power_study(n_audits: int = 10, n_tasks: int = 6, n_rows: int = 4000, n_boot: int = 200, seed: int = 0,
                progress=None) -> dict:
    """Planted harms and null cohorts of the same shape, each audited once and judged by the hierarchical plan
    and the flat plan (one BH family over the whole audit) on the same tests (:func:`..audits.groups.correct`).

    Returns per plan: ``power`` (per harm, the share of planted audits in which the harm's pair test reads
    "differs"), ``false_discoveries`` (mean per planted audit: "differs" among tests touching no harmed group of
    its task and attribute), ``false_discovery_proportion`` (mean over planted audits of the share of the primary
    family's "differs" — every "differs" for the flat plan — touching no harmed group), ``power_near_1e-3`` (the
    share of harms whose own test had p in [3e-4, 3e-3] that were found), ``null_any_differs`` (null audits with any
    "differs", of ``n_audits``; ``null_any_differs_share`` the share) and the number of tests per audit."""
    from fairdesk.core.audits.groups import GroupAuditPlan, correct, run_group_audit

    plans = {}
    out: dict = {"n_audits": n_audits, "n_tasks": n_tasks, "n_rows": n_rows, "z": POWER_Z, "plans": {}}
    for name in ("hierarchical", "flat"):
        out["plans"][name] = {"found": [0] * len(POWER_HARMS), "false_discoveries": 0, "null_any_differs": 0,
                              "near_1e-3": [0, 0], "withheld": 0, "fdp": []}
    tests_per_audit = []
    for k in range(2 * n_audits):
        null = k >= n_audits
        table, roles, planted = simulate_power_table(n_tasks, n_rows, harms=() if null else POWER_HARMS,
                                                     seed=seed * 1000 + k)
        if not plans:
            plans = {name: GroupAuditPlan(threshold=POWER_THRESHOLD, roles=roles, n_boot=n_boot, seed=seed,
                                          procedure=name) for name in ("hierarchical", "flat")}
        res = run_group_audit(table, plans["hierarchical"])
        tests_per_audit.append(int(res.tests["p_value"].notna().sum()))
        raw = res.tests.drop(columns=["q_value", "q_equivalence", "verdict"])
        for name, plan in plans.items():
            tst = res.tests if name == "hierarchical" else correct(raw, plan)
            rec = out["plans"][name]
            differs = tst[tst["verdict"] == "differs"]
            # q ≤ α but the interval at the adjusted level held 0 (test and interval not exact duals): not claimed
            rec["withheld"] += int(((tst["q_value"] <= plan.alpha) & (tst["verdict"] != "differs")).sum())
            if null:
                rec["null_any_differs"] += int(len(differs) > 0)
                continue
            harmed = {(h["task"], h["attribute"], h["group"]) for h in planted}
            for i, h in enumerate(planted):
                pair = {h["group"], h["comparison"]}
                hit = differs[(differs["task"] == h["task"]) & (differs["attribute"] == h["attribute"])
                              & (differs["metric"] == h["metric"])]
                found = any({g, c} == pair for g, c in zip(hit["group"], hit["comparison"]))
                rec["found"][i] += int(found)
                own = tst[(tst["task"] == h["task"]) & (tst["attribute"] == h["attribute"])
                          & (tst["metric"] == h["metric"])
                          & np.array([{g, c} == pair for g, c in zip(tst["group"], tst["comparison"])])]
                if len(own) and 3e-4 <= float(own["p_value"].iloc[0]) <= 3e-3:  # the harm's test at p ≈ 1e-3
                    rec["near_1e-3"][0] += int(found)
                    rec["near_1e-3"][1] += 1
            touch = [(t, a, g) in harmed or (t, a, c) in harmed
                     for t, a, g, c in zip(differs["task"], differs["attribute"], differs["group"],
                                           differs["comparison"])]
            rec["false_discoveries"] += int(len(differs) - sum(touch))
            # of the primary gaps called "differs", the share touching no harmed group (the family's FDP)
            prim = [tc for tc, fam in zip(touch, differs["family"]) if fam == "primary" or name == "flat"]
            rec["fdp"].append((len(prim) - sum(prim)) / max(1, len(prim)))
        if progress is not None:
            progress((k + 1) / (2 * n_audits), f"power study: audit {k + 1} of {2 * n_audits}")
    for rec in out["plans"].values():
        rec["power"] = [f / n_audits for f in rec.pop("found")]
        rec["false_discoveries_per_audit"] = rec.pop("false_discoveries") / n_audits
        rec["false_discovery_proportion"] = float(np.mean(rec.pop("fdp"))) if n_audits else float("nan")
        found, tried = rec["near_1e-3"]
        rec["power_near_1e-3"] = found / tried if tried else float("nan")
        rec["null_any_differs_share"] = rec["null_any_differs"] / n_audits if n_audits else float("nan")
    out["harms"] = [dict(zip(("task", "attribute", "group", "metric", "comparison"),
                             (f"task{h[0]:02d}",) + h[1:])) for h in POWER_HARMS]
    out["tests_per_audit"] = float(np.mean(tests_per_audit))
    return out


def format_power(study: dict) -> str:
    """The power study as a small table: per harm the power of each plan, then false discoveries and nulls."""
    lines = [f"Power study: {study['n_audits']} planted and {study['n_audits']} null audits, {study['n_tasks']} tasks "
             f"× {study['n_rows']:,} rows, {study['tests_per_audit']:.0f} tests per audit, harms at z = {study['z']}"]
    lines.append(f"{'harm':52s} {'hierarchical':>12s} {'flat':>8s}")
    for i, h in enumerate(study["harms"]):
        label = f"{h['task']} {h['metric']} {h['attribute']}={h['group']} vs {h['comparison']}"
        lines.append(f"{label:52s} {study['plans']['hierarchical']['power'][i]:12.2f} "
                     f"{study['plans']['flat']['power'][i]:8.2f}")
    h, f = (study["plans"][k]["near_1e-3"] for k in ("hierarchical", "flat"))
    lines.append(f"{'harms whose test had p in [3e-4, 3e-3], found':52s} {f'{h[0]}/{h[1]}':>12s} {f'{f[0]}/{f[1]}':>8s}")
    lines.append(f"{'  share (target: at least 0.75)':52s} {study['plans']['hierarchical']['power_near_1e-3']:12.2f} "
                 f"{study['plans']['flat']['power_near_1e-3']:8.2f}")
    for key, what in (("false_discoveries_per_audit", "false discoveries per planted audit"),
                      ("false_discovery_proportion", "mean share of primary 'differs' touching no harm"),
                      ("withheld", "q ≤ α but interval holds 0: not claimed (all audits)"),
                      ("null_any_differs", f"null audits with any 'differs' (of {study['n_audits']})")):
        lines.append(f"{what:52s} {study['plans']['hierarchical'][key]:12.3g} {study['plans']['flat'][key]:8.3g}")
    lines.append(f"{'  share of null audits (target: at most 0.1)':52s} "
                 f"{study['plans']['hierarchical']['null_any_differs_share']:12.2f} "
                 f"{study['plans']['flat']['null_any_differs_share']:8.2f}")
    return "\n".join(lines)
