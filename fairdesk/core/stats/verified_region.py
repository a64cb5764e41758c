"""The region of designs in which each test's size and interval coverage were verified.

The design-space map (:mod:`fairdesk.core.synthetic.design_space`, ``fairdesk-cli bench validity --design-space``;
its table is in docs/methods.md "Validity over a design space") draws group audits at random from a stated space
and measures, by region, the size of every test and the coverage of every interval. :data:`VERIFIED` records, per
measure, the part of that space where both met their targets (size ≤ α + 0.02, coverage ≥ 0.93). A test of an
audit whose cells fall outside it is flagged: :func:`outside_region` is the one check, used by the audit (the
``outside_region`` column of its tests and records) and by the report (a note next to the verdict).

Dimensions: the cases a comparison rests on in its smaller group (rows for parity, positives for recall, negatives
for specificity, the smaller class for AUROC, AUPRC and calibration); with repeated patients, the patients among
those cases (:func:`case_patients`: the cases over the group's mean rows per patient; smaller group) and the mean
rows per patient; the AUROC (AUROC and AUPRC gaps, calibration); the group size and prevalence
of the space itself (prevalence 0.01–0.5; groups larger than its 5,000 rows are not flagged: the normal
approximations behind every test only improve with size).
"""
from __future__ import annotations

import math

#: Per measure: the fewest cases (independent rows) and patients (clustered) from which the map verified the test
#: (None: not verified there at all) and, for AUROC and AUPRC, the AUROC below which it was (for calibration with
#: repeated patients ``max_auroc_clustered``, from the single-group studies below). Copied from
#: ``verified_region()`` of the map in docs/methods.md ("Validity over a design space").
VERIFIED: dict[str, dict] = {  # the design-space map: 300 designs, seed 0,
    # clustered regions by the patients among the cases; min_patients counts those patients (:func:`case_patients`)
    "parity": {"min_cases": 30, "min_patients": 10},  # from 10 case patients (below)
    "recall": {"min_cases": 10, "min_patients": 10},  # from 10 cases; from 10 case patients (below)
    "specificity": {"min_cases": 10, "min_patients": 10},  # from 10 case patients (below)
    "auroc": {"min_cases": 10, "min_patients": 10, "max_auroc": 0.99},
    "auprc": {"min_cases": 10, "min_patients": 1, "max_auroc": None},  # the AUPRC intervals' map (docs/validation/)
    "calibration": {"min_cases": 10, "min_patients": 10, "max_auroc_clustered": 0.99},
}
# calibration: from 10 cases (independent rows) and 10 patients among them (repeated patients),
# measured on 375–600 single groups per band drawn from the map's space (benchmarks/bench_calibration_regions.py,
# docs/methods.md "Calibration intervals in the map's low regions"): every interval ≥ 0.934, the test's size with
# repeated patients 0.021–0.058 (below AUROC 0.99). At AUROC ≥ 0.99 with repeated patients the drawn groups' intervals
# cover 0.95–0.98 but the test's size there was not measured and two single designs' slope intervals covered
# 0.90–0.92 (bench_cluster_calibration --part boot): still excluded; ``max_auroc_clustered`` applies to repeated
# patients only
# recall with independent rows: from 10 cases since the conditional mid-p at few expected events
# (stats.gaps.gap_p_value): size 0.016 / 0.030 (307 / 230 null tests) at 10–29 cases and 0.049 / 0.032 (142 / 187) at
# 30–99 in designs targeted to those bands (benchmarks/bench_rate_gaps.py --part map), 0.021–0.030 at 100–299;
# coverage 0.969 / 0.958 (522 / 333) at 10–29 / 30–99 (docs/methods.md "The rate gaps' sizes in the map")
# recall with repeated patients: from 10 patients among the cases, on 600 designs targeted to the
# band (`bench validity --design-space --designs 300 --region 'recall gap | clustered, 10-29 case patients' …`, seeds
# 101 and 202): size 0.027 (480 null tests), coverage 0.962 (1,109). Parity with repeated patients stays from 100:
# in those designs its size is 0.042 at 10–29 and 30–99 case patients (1,796 and 1,614 tests) but its interval covers
# only 0.936 and 0.943, and the map's first-pass designs 0.915 and 0.898 (docs/methods.md "The clustered rate gaps'
# unclear regions settled")
# parity and specificity with repeated patients: from 10 patients among the cases, on the score
# interval. Coverage / size at 10–29, 30–99 and ≥ 100 case patients in the 74 clustered designs of the
# map's first pass with a parity pair at 30–99 case patients, 20 data sets each: parity 0.953 / 0.955 / 0.953
# (7,111 / 6,398 / 2,341 intervals), size 0.039 / 0.048 / 0.037; specificity 0.961 / 0.956 / 0.963, size 0.032 /
# 0.033 / 0.039; 400 fresh clustered designs (1–5 and 1–30 rows per patient, 4 data sets each): parity ≥ 0.949,
# size ≤ 0.054; specificity ≥ 0.944, size ≤ 0.057 (every band ≥ 473 null tests; benchmarks/bench_rate_gaps.py
# --part cluster; docs/methods.md "Whole patients: rate gaps over drawn designs")
SPACE_PREVALENCE = (0.01, 0.5)
MAX_ROWS_PER_PATIENT = 30


def cases_of(metric: str, n: float, n_positive: float) -> float:
    """The cases a measure rests on in one group (see the module docstring)."""
    if metric == "parity":
        return n
    if metric == "recall":
        return n_positive
    if metric == "specificity":
        return n - n_positive
    return min(n_positive, n - n_positive)


def case_patients(metric: str, n: float, n_positive: float, n_patients: float) -> float:
    """The patients the cases of a measure come from in one group (repeated patients): its cases
    (:func:`cases_of`) over the group's mean rows per patient. What a whole-patient interval rests on is the number
    of patients among its cases, not in the whole group: 529 rows of 460 patients with 10 positive rows have about
    9 patients with a positive, and a recall or calibration interval there rests on them (the map of 2026-11-25
    found slope intervals covering 0.84 in "≥ 100 patients" for that reason)."""
    return cases_of(metric, n, n_positive) * n_patients / n if n else 0.0


def outside_region(metric: str, groups: list[dict], clustered: bool) -> str | None:
    """Why a test of ``metric`` between ``groups`` (each with n, n_positive, n_patients and, for AUROC/AUPRC,
    auroc) lies outside the verified region, in words; None inside it (or for a measure the map does not cover)."""
    rule = VERIFIED.get(metric)
    if rule is None or not groups:
        return None
    why = []
    cases = min(cases_of(metric, g["n"], g["n_positive"]) for g in groups)
    if not clustered and rule["min_cases"] is None:
        why.append("not verified at any number of cases")
    elif not clustered and cases < rule["min_cases"]:
        why.append(f"{int(cases)} cases (verified from {rule['min_cases']})")
    if clustered:
        patients = min(case_patients(metric, g["n"], g["n_positive"], g["n_patients"]) for g in groups)
        per = max(g["n"] / max(g["n_patients"], 1) for g in groups)
        if rule["min_patients"] is None:
            why.append("repeated patients (not verified at any number of patients)")
        elif patients < rule["min_patients"]:
            why.append(f"about {patients:.0f} patients among its cases (verified from {rule['min_patients']})")
        if per > MAX_ROWS_PER_PATIENT:
            why.append(f"{per:.0f} rows per patient (verified to {MAX_ROWS_PER_PATIENT})")
    prev = [g["n_positive"] / g["n"] for g in groups if g["n"]]
    if prev and min(prev) < SPACE_PREVALENCE[0]:
        why.append(f"prevalence {min(prev):.3g} (verified from {SPACE_PREVALENCE[0]})")
    if prev and max(prev) > 1 - SPACE_PREVALENCE[0]:
        why.append(f"prevalence {max(prev):.3g} (verified to {1 - SPACE_PREVALENCE[0]:g})")
    top = rule.get("max_auroc_clustered", rule.get("max_auroc")) if clustered else rule.get("max_auroc")
    aucs = [g.get("auroc") for g in groups if g.get("auroc") is not None and not math.isnan(g.get("auroc"))]
    if top is not None and aucs and max(aucs) >= top:
        why.append(f"AUROC {max(aucs):.3f} (verified below {top:g})")
    return "outside the verified region: " + "; ".join(why) if why else None


def annotate(tests, groups, clustered_tasks: set) -> list:
    """``outside_region`` of every row of an audit's ``tests`` table (None inside), from its ``groups`` table."""
    g = {(str(r["task"]), str(r["attribute"]), str(r["group"])): r for r in groups.to_dict(orient="records")}
    out = []
    for t in tests.to_dict(orient="records"):
        key = (str(t["task"]), str(t["attribute"]))
        members = [g.get((*key, str(t["group"])))]
        comp = t.get("comparison")
        if isinstance(comp, str) and comp and not comp.startswith("not "):
            members.append(g.get((*key, comp)))
        elif isinstance(comp, str) and comp.startswith("not "):  # one-vs-rest: the group and the rest
            rest = [r for (tk, at, name), r in g.items() if (tk, at) == key and r["tested"] and name != t["group"]]
            if rest:
                members.append({"n": sum(r["n"] for r in rest), "n_positive": sum(r["n_positive"] for r in rest),
                                "n_patients": sum(r["n_patients"] for r in rest),
                                "auroc": None})
        members = [m for m in members if m is not None]
        if t["metric"] == "delta_eo" or t.get("p_value") is None or \
                (isinstance(t.get("p_value"), float) and math.isnan(t["p_value"])):
            out.append(None)
            continue
        out.append(outside_region(str(t["metric"]), members, str(t["task"]) in clustered_tasks))
    return out
