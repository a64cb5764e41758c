"""Simulated monthly streams of a deployed model's predictions, for the monitor's validity bench
(``fairdesk-cli bench validity --family monitor``) and its tests.

One stream: ``months`` periods; each month new patients (a fifth in group A, two fifths each in B and C), each
with 1–3 predictions that month whose flags are correlated within the patient (a Gaussian copula, correlation
:data:`PATIENT_CORRELATION`), so whole-patient clustering matters. Drift that is not a gap: the prevalence moves
from 0.15 to 0.25 over the stream (in group A from 0.08 to 0.35), and the model's calibration moves for everyone
(recall 0.80 → 0.70, specificity 0.85 → 0.78). A planted gap: from month ``onset`` on, group A's recall is lower
by ``gap``. Scores are drawn so that score ≥ threshold exactly when the copula says "flag", so the rates are known.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

PATIENT_CORRELATION = 0.5
THRESHOLD = 0.3
GROUPS = ("A", "B", "C")
SHARES = (0.2, 0.4, 0.4)
MONTHS = 24
ONSET = 13
GAP = 0.15
PER_MONTH = 3000  # predictions a month (about; patients have 1–3 each)
DETECT_WITHIN = 6  # months after onset
DEFAULT_RUNS = 100


def month_name(t: int) -> str:
    """Month t (1-based) of a stream starting 2025-01, as text that sorts: 2025-01 … 2026-12."""
    y, m = divmod(t - 1, 12)
    return f"{2025 + y}-{m + 1:02d}"


def simulate_stream(seed: int, months: int = MONTHS, per_month: int = PER_MONTH, gap: float = 0.0,
                    onset: int = ONSET, group: str = "A") -> pd.DataFrame:
    """One stream as a predictions table: columns y (label), p (score), eth (group), month, pid."""
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    parts = []
    next_pid = 0
    for t in range(1, months + 1):
        f = (t - 1) / max(months - 1, 1)
        n_pat = max(int(round(per_month / 2.0)), 3)
        grp = rng.choice(len(GROUPS), size=n_pat, p=SHARES)
        k = rng.integers(1, 4, size=n_pat)  # 1–3 predictions each (mean 2)
        prev = np.where(grp == 0, 0.08 + 0.27 * f, 0.15 + 0.10 * f)
        y_pat = rng.random(n_pat) < prev  # a patient's condition holds all month
        z = rng.standard_normal(n_pat)
        rows_p = np.repeat(np.arange(n_pat), k)
        e = rng.standard_normal(len(rows_p))
        x = math.sqrt(PATIENT_CORRELATION) * z[rows_p] + math.sqrt(1 - PATIENT_CORRELATION) * e
        y = y_pat[rows_p]
        g = grp[rows_p]
        recall = np.full(len(rows_p), 0.80 - 0.10 * f)
        if gap and t >= onset:
            recall = np.where(g == GROUPS.index(group), recall - gap, recall)
        spec = 0.85 - 0.07 * f
        flag_prob = np.where(y, recall, 1.0 - spec)
        cut = norm.ppf(1.0 - flag_prob)  # flagged when x > cut: P = flag_prob
        score = norm.cdf(x - cut + norm.ppf(THRESHOLD))
        parts.append(pd.DataFrame({"y": y.astype(int), "p": np.clip(score, 0.0, 1.0),
                                   "eth": np.array(GROUPS)[g], "month": month_name(t),
                                   "pid": [f"P{next_pid + i}" for i in rows_p]}))
        next_pid += n_pat
    return pd.concat(parts, ignore_index=True)


def stream_plan(alpha: float = 0.05):
    from fairdesk.core.audits.monitor import MonitorPlan

    return MonitorPlan(label="y", score="p", attributes=("eth",), threshold=THRESHOLD, period="month",
                       patient_id="pid", alpha=alpha)


def snapshot_alarms(records: pd.DataFrame, level: float) -> pd.Series:
    """The comparators: each month's own gap tested alone (normal test of the period gap with the same
    whole-patient variance) at ``level``; True where it rejects. (Records need ``period_gap`` and ``period_z``.)"""
    from scipy.stats import norm

    return records["period_z"].abs() > norm.ppf(1 - level / 2)


def one_stream(seed: int, gap: float, months: int = MONTHS, per_month: int = PER_MONTH, onset: int = ONSET) -> dict:
    """Run the monitor and the two comparators on one stream. Per method: (the first month it alarms on any
    comparison, the first month from the onset on that it alarms on the planted comparison (group A, recall), the
    first month before the onset that it alarms on any comparison); None: never."""
    from fairdesk.core.audits.monitor import period_z, run_monitor

    df = simulate_stream(seed, months, per_month, gap, onset)
    plan = stream_plan()
    res = run_monitor(df, plan)
    rec = res.records.copy()
    rec["t"] = rec["period"].map({month_name(t): t for t in range(1, months + 1)})
    rec["period_z"] = period_z(rec)
    K = res.comparisons
    planted = (rec["group"] == "A") & (rec["metric"] == "recall")
    out = {}
    for name, flags in (("monitor", rec["alarm"].astype(bool)),
                        ("naive", snapshot_alarms(rec, plan.alpha)),
                        ("fixed", snapshot_alarms(rec, plan.alpha / (K * months)))):
        any_t = rec.loc[flags, "t"]
        hit_t = rec.loc[flags & planted & (rec["t"] >= onset), "t"]
        other_t = rec.loc[flags & (rec["t"] < onset), "t"]
        out[name] = (int(any_t.min()) if len(any_t) else None, int(hit_t.min()) if len(hit_t) else None,
                     int(other_t.min()) if len(other_t) else None)
    return out


def validity_runs(runs: int | None, seed: int, rep, notes: list[str], months: int = MONTHS,
                  per_month: int = PER_MONTH) -> list[dict]:
    """The monitor family's rows (arguments of ``fairdesk.core.validity._row`` without the family): false alarms
    over ``months`` monthly looks on null streams with drifting prevalence and calibration, and detection of a
    recall gap of :data:`GAP` opening at month :data:`ONSET` in group A (a fifth of the patients), each for the
    monitor, a naive monthly test at α and a fixed-horizon test at α/(comparisons × months)."""
    runs = runs or DEFAULT_RUNS
    rows = []
    results = {"null": [], "planted": []}
    t0 = time.monotonic()
    for i in range(2 * runs):
        kind = "null" if i < runs else "planted"
        rep(i / (2 * runs), f"monitor: {kind} stream {i % runs + 1} of {runs}")
        s = int(np.random.default_rng([int(seed), 46, i]).integers(0, 2**31 - 1))
        results[kind].append(one_stream(s, 0.0 if kind == "null" else GAP, months, per_month))
    secs = time.monotonic() - t0
    design = f"{months} monthly looks, ~{per_month:,} predictions a month, drifting prevalence and calibration"
    names = {"monitor": "monitor (confidence sequences)", "naive": "naive monthly test at α",
             "fixed": f"fixed horizon, α/(K·{months})"}
    for name, label in names.items():
        flags = [r[name][0] is not None for r in results["null"]]
        rows.append(dict(design=f"null, {months} months: {label}; {design}", kind="null", flags=flags,
                         target_max=0.05 if name != "naive" else None,
                         meaning=f"share of null streams with any false alarm in {months} months ({label})",
                         seconds=secs / 2))
    for name, label in names.items():
        first = [r[name][1] for r in results["planted"]]
        flags = [f is not None and f <= ONSET + DETECT_WITHIN - 1 for f in first]
        delays = [f - ONSET + 1 for f in first if f is not None]
        med = float(np.median(delays)) if delays else float("nan")
        early = sum(r[name][2] is not None for r in results["planted"])
        notes.append(f"monitor, planted, {label}: {sum(flags)} of {len(flags)} streams alarmed within "
                     f"{DETECT_WITHIN} months of the onset; median delay {med:g} months; {early} with a false alarm "
                     "before the onset.")
        rows.append(dict(design=f"gap {GAP} from month {ONSET} in A (1/5): {label}; recall gap in group A (a fifth "
                                f"of the patients), alarmed within {DETECT_WITHIN} months",
                         kind="planted", flags=flags, target_min=0.5 if name == "monitor" else None,
                         meaning=(f"share alarmed within {DETECT_WITHIN} months of the onset; median delay "
                                  f"{med:g} months over the {len(delays)} streams alarmed; "
                                  f"{early} streams with a (false) alarm before the onset ({label})"),
                         seconds=secs / 2))
    notes.append(f"monitor: {runs} null and {runs} planted streams of {months} months, {secs:.0f} s.")
    return rows
