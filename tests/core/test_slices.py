"""The slice audit (issue 26): hand-computed counts and tests, the split, the search and its pruning, the verdicts
from the confirmation rows only, a planted 3-way slice found in most seeds and null data rarely "differs"."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.core.audits.groups import THRESHOLD_REQUIRED
from fairdesk.core.audits.slices import (OVERLAP, SliceAuditPlan, carry_forward, run_slice_audit, search,
                                         slice_mask, slice_rate, split_rows)
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.errors import DataError
from fairdesk.core.synthetic.slice_sim import found, simulate_slice_table

ATTRS8 = tuple(f"a{j + 1}" for j in range(8))


def _roles(attrs=ATTRS8, **kw):
    return ColumnRoles(label="y", score="p", attributes=attrs, **kw)


def test_search_counts_and_score_by_hand():
    # 12 rows, one attribute: slice s = "x" holds 6 positives (2 found), the rest 6 positives (5 found)
    a = np.array([0] * 8 + [1] * 8)
    y = np.array([1, 1, 1, 1, 1, 1, 0, 0] + [1, 1, 1, 1, 1, 1, 0, 0])
    yhat = np.array([1, 1, 0, 0, 0, 0, 0, 1] + [1, 1, 1, 1, 1, 0, 0, 0])
    cand = search(a[:, None], 2 * y + yhat, "recall", 1, 1, 1)
    assert len(cand) == 2 and cand.by_order == {1: 2}
    i = cand.values.index((0,))
    assert cand.n[i] == 8 and cand.cases[i] == 6
    assert cand.value[i] == pytest.approx(2 / 6) and cand.rest_value[i] == pytest.approx(5 / 6)
    # score statistic of slice vs rest, by hand: pooled (2 + 5 + ½)/(6 + 6 + 1), harm sign: lower recall is worse
    pooled = 7.5 / 13
    z = (2 / 6 - 5 / 6) / math.sqrt(pooled * (1 - pooled) * (1 / 6 + 1 / 6))
    assert cand.score[i] == pytest.approx(-z)
    assert cand.score[cand.values.index((1,))] == pytest.approx(z)  # the other side is the better served
    assert carry_forward(cand, a[:, None], 5) == [i]  # only the worse-served slice is carried
    # the error rate: (FP + FN) / N
    r, num, den = slice_rate(np.array([[3, 1, 2, 4]]), "error")
    assert (num[0], den[0], r[0]) == (3, 10, 0.3)


def test_confirmation_numbers_by_hand():
    df, planted = simulate_slice_table(3000, 3, order=1, gap=0.3, seed=4, slice_share=0.3)
    plan = SliceAuditPlan(roles=_roles(("a1", "a2", "a3")), threshold=0.5, max_order=1, carry=3, seed=2,
                          n_boot=400)
    res = run_slice_audit(df, plan)
    disc = split_rows(df["y"].to_numpy(), None, 0.5, 2)
    conf = df[~disc]
    row = res.slices.iloc[0]
    assert row["definition"] == planted and row["order"] == 1
    inside = conf["a1"] == "v0"
    pos = conf["y"] == 1
    hit = conf["p"] >= 0.5
    x_a, n_a = int((inside & pos & hit).sum()), int((inside & pos).sum())
    x_b, n_b = int((~inside & pos & hit).sum()), int((~inside & pos).sum())
    assert (row["n"], row["cases"], row["rest_n"], row["rest_cases"]) == (int(inside.sum()), n_a,
                                                                        int((~inside).sum()), n_b)
    assert row["value"] == pytest.approx(x_a / n_a) and row["rest_value"] == pytest.approx(x_b / n_b)
    assert row["gap"] == pytest.approx(x_a / n_a - x_b / n_b)
    # Agresti–Caffo: the interval's centre is (x_a+1)/(n_a+2) − (x_b+1)/(n_b+2) whatever the design effect
    centre = (x_a + 1) / (n_a + 2) - (x_b + 1) / (n_b + 2)
    assert (row["ci_low_unadjusted"] + row["ci_high_unadjusted"]) / 2 == pytest.approx(centre)
    # the score test with a design effect near 1 for independent rows: z² = gap² / (deff · V0)
    pooled = (x_a + x_b + 0.5) / (n_a + n_b + 1)
    v0 = pooled * (1 - pooled) * (1 / n_a + 1 / n_b)
    from scipy.stats import norm

    z = norm.isf(row["p_value"] / 2)
    assert 0.75 < row["gap"] ** 2 / v0 / z ** 2 < 1.3
    # the discovery numbers are the search's, on the other rows
    d = df[disc]
    d_in = (d["a1"] == "v0") & (d["y"] == 1)
    assert row["discovery_value"] == pytest.approx(((d["p"] >= 0.5) & d_in).sum() / d_in.sum())
    assert row["verdict"] == "differs"


def test_split_is_stratified_patient_disjoint_and_recorded():
    rng = np.random.default_rng(0)
    pid = rng.integers(0, 500, 2000).astype(str)
    y = (rng.random(2000) < 0.2).astype(int)
    disc = split_rows(y, pid, 0.3, 7)
    assert not set(pid[disc]) & set(pid[~disc])  # no patient on both sides
    pos_patients = {p for p, v in zip(pid, y) if v}
    share = len(pos_patients & set(pid[disc])) / len(pos_patients)
    assert share == pytest.approx(0.3, abs=0.01)
    rows = split_rows(y, None, 0.5, 1)
    assert rows[y == 1].sum() == round(0.5 * y.sum()) and rows[y == 0].sum() == round(0.5 * (y == 0).sum())
    assert (split_rows(y, None, 0.5, 1) == rows).all() and not (split_rows(y, None, 0.5, 2) == rows).all()
    df, _ = simulate_slice_table(1500, 3, seed=1, n_patients=600)
    res = run_slice_audit(df, SliceAuditPlan(roles=_roles(("a1", "a2", "a3"), patient_id="pid"), threshold=0.5,
                                             discovery_fraction=0.4, seed=5, n_boot=100))
    assert res.split["fraction"] == 0.4 and res.split["seed"] == 5 and res.split["unit"] == "patient"
    assert res.split["discovery_rows"] + res.split["confirmation_rows"] == len(df)
    assert res.split["discovery_patients"] + res.split["confirmation_patients"] == df["pid"].nunique()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), carry=st.integers(1, 30))
def test_carried_slices_do_not_overlap_and_are_the_best_scored(seed, carry):
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1, 4, (600, 4))
    cells = rng.integers(0, 4, 600)
    cand = search(codes, cells, "recall", 3, 20, 5)
    chosen = carry_forward(cand, codes, carry)
    assert len(chosen) <= carry
    masks = [slice_mask(codes, cand.attrs[i], cand.values[i]) for i in chosen]
    for i, a in enumerate(masks):
        for b in masks[:i]:  # a carried slice is never mostly inside a better one carried before it
            assert (a & b).sum() < OVERLAP * a.sum()
    assert all(cand.score[i] > 0 for i in chosen)
    if chosen:
        assert cand.score[chosen[0]] == cand.score.max()
        assert list(cand.score[chosen]) == sorted(cand.score[chosen], reverse=True)
    assert all(n >= 20 for n in cand.n)  # nothing below the minimum size is searched


def test_the_search_never_sees_confirmation_rows(monkeypatch):
    """Changing only the confirmation rows' predictions leaves the carried list as it was (fixed before them)."""
    df, _ = simulate_slice_table(3000, 4, order=2, gap=0.2, seed=3)
    plan = SliceAuditPlan(roles=_roles(("a1", "a2", "a3", "a4")), threshold=0.5, seed=9, n_boot=100)
    first = run_slice_audit(df, plan).slices
    disc = split_rows(df["y"].to_numpy(), None, 0.5, 9)
    other = df.copy()
    other.loc[~disc, "p"] = np.random.default_rng(0).random(int((~disc).sum()))
    second = run_slice_audit(other, plan).slices
    assert list(first["description"]) == list(second["description"])
    assert list(first["discovery_gap"]) == list(second["discovery_gap"])
    assert list(first["value"]) != list(second["value"])


def test_planted_three_way_slice_is_found_in_most_seeds():
    hits = []
    for seed in range(6):
        df, planted = simulate_slice_table(8000, 8, order=3, gap=0.3, seed=100 + seed, slice_share=0.05)
        res = run_slice_audit(df, SliceAuditPlan(roles=_roles(), threshold=0.5, seed=seed, n_boot=200))
        hits.append(found(res.slices, planted))
        assert res.searched > 1000 and len(res.slices) == 20
    assert sum(hits) >= 5, hits


def test_null_data_rarely_differs():
    """No slice is served differently: across 12 audits at most 2 report any "differs" (expected: about 0.6 at
    α = 0.05 with the correction over the carried slices; P(≥ 3) = 0.02 if the size is right)."""
    flagged = 0
    for seed in range(12):
        df, _ = simulate_slice_table(2500, 4, seed=500 + seed)
        res = run_slice_audit(df, SliceAuditPlan(roles=_roles(ATTRS8[:4]), threshold=0.5, seed=seed, n_boot=200))
        flagged += bool((res.slices["verdict"] == "differs").any())
        # the search always finds slices that look bad on its own rows
        assert (res.slices["discovery_gap"] < 0).all()
    assert flagged <= 2, flagged


def test_threshold_is_required_and_inputs_are_checked():
    with pytest.raises(DataError) as err:
        SliceAuditPlan(roles=_roles())
    assert str(err.value) == THRESHOLD_REQUIRED
    for kw, option in (({"discovery_fraction": 1.0}, "--discovery-fraction"), ({"max_order": 0}, "--max-order"),
                       ({"carry": 0}, "--carry"), ({"min_size": 0.5}, "--min-size"), ({"metric": "auc"}, "--metric"),
                       ({"threshold": 1.5}, "--threshold"), ({"bins": 1}, "--bins")):
        with pytest.raises(DataError, match=option):
            SliceAuditPlan(roles=_roles(), **{"threshold": 0.5, **kw})
    with pytest.raises(DataError, match="--attribute"):
        SliceAuditPlan(roles=ColumnRoles(label="y", score="p"), threshold=0.5)


def test_continuous_attribute_bins_come_from_discovery_rows_and_best_f1_too():
    df, _ = simulate_slice_table(3000, 2, seed=2)
    df["age"] = np.random.default_rng(1).uniform(18, 95, len(df))
    plan = SliceAuditPlan(roles=_roles(("a1", "a2"), continuous_attributes=("age",)), threshold="best_f1", bins=3,
                          seed=4, n_boot=100)
    res = run_slice_audit(df, plan)
    disc = split_rows(df["y"].to_numpy(), None, 0.5, 4)
    edges = res.tasks.iloc[0]["bins"]["age"]
    assert edges[0] == pytest.approx(df.loc[disc, "age"].min()) and len(edges) == 4
    from fairdesk.core.stats.thresholds import best_f1_threshold

    assert res.thresholds["(all)"] == best_f1_threshold(df.loc[disc, "y"].to_numpy(), df.loc[disc, "p"].to_numpy())
    ages = [v for d in res.slices["definition"] for c, v in d.items() if c == "age"]
    assert all(v.startswith(("<", "≥")) or " to < " in v for v in ages)


def test_each_task_is_searched_and_the_document_validates():
    from fairdesk.core.kinds import check_document

    df, _ = simulate_slice_table(800, 2, order=1, gap=0.3, seed=6, slice_share=0.3)
    two = pd.concat([df.assign(t="sepsis"), df.assign(t="aki")], ignore_index=True)
    res = run_slice_audit(two, SliceAuditPlan(roles=_roles(("a1", "a2"), task="t"), threshold=0.5,
                                              metric="error", carry=5, n_boot=100))
    assert set(res.slices["task"]) == {"aki", "sepsis"} and set(res.tasks["task"]) == {"aki", "sepsis"}
    assert res.searched == int(res.tasks["searched"].sum())
    doc = res.to_dict()
    assert check_document("slices", doc) == []
    assert doc["counts"]["total"] == len(doc["slices"]) == sum(doc["counts"][v] for v in
                                                               ("differs", "equivalent", "inconclusive"))
    for r in doc["slices"]:
        assert set(r) >= {"definition", "metric", "n", "value", "rest_value", "gap", "ci_low", "ci_high", "p_value",
                          "q_value", "verdict"}


def test_validity_family_slices_small_fixed_seed():
    """The CI version of ``bench validity --family slices``: 3 audits per design at 6,000 rows."""
    from fairdesk.core.progress import Reporter
    from fairdesk.core.synthetic.slice_sim import validity_runs

    notes: list[str] = []
    rows = validity_runs(3, 0, Reporter(), notes, n_rows=6000, planted=((3, 0.05, 0.3),))
    null, planted = rows
    assert null["kind"] == "null" and null["target_max"] == pytest.approx(0.07) and len(null["flags"]) == 3
    assert planted["kind"] == "planted" and sum(planted["flags"]) >= 2
    assert notes and "6,000 rows" in notes[0]


def test_bench_validity_runs_the_slices_family(monkeypatch):
    """``run_validity("slices")`` (``fairdesk-cli bench validity --family slices``) reports the family's rows."""
    from fairdesk.core import validity
    from fairdesk.core.synthetic import slice_sim

    def fake(runs, seed, rep, notes):
        return [dict(design="null", kind="null", flags=[False] * runs, target_max=0.07, meaning="m",
                     tests_flagged=0, n_tests=20 * runs)]

    monkeypatch.setattr(slice_sim, "validity_runs", fake)
    res = validity.run_validity("slices", runs=4, seed=1)
    [row] = res.rows
    assert (row.family, row.kind, row.runs, row.rejections, row.verdict) == ("slices", "null", 4, 0, "meets")
    assert "slices" in validity.FAMILIES and res.config["runs_per_family"] == {"slices": 4}


def test_slices_judged_on_the_evaluation_rows_and_patients_counted_once():
    """With a split column the search and the confirmation see only the --evaluate-on rows (default test); a
    patient with rows in two tasks counts once in each part's patients, not once per task."""
    import numpy as np
    import pandas as pd

    from fairdesk.core.audits.slices import SliceAuditPlan, run_slice_audit
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.errors import DataError

    rng = np.random.default_rng(0)
    n = 3000
    pid = rng.integers(0, 1000, n)
    frames = []
    for t in ("a", "b"):
        y = rng.random(n) < 0.3
        frames.append(pd.DataFrame({"task": t, "pid": pid.astype(str), "y": y.astype(int),
                                    "s": np.clip(0.5 * y + rng.random(n) * 0.6, 0, 1), "g": rng.choice(list("xyz"), n),
                                    "split": np.where(pid % 5 == 0, "train", "test")}))
    df = pd.concat(frames, ignore_index=True)
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("g",), patient_id="pid", split="split")
    r = run_slice_audit(df, SliceAuditPlan(roles=roles, threshold=0.5, n_boot=100, min_size=20))
    test = df[df["split"] == "test"]
    assert r.split["discovery_rows"] + r.split["confirmation_rows"] == len(test)
    assert "'test' rows" in r.split["evaluated_on"]
    assert max(r.split["discovery_patients"], r.split["confirmation_patients"]) <= test["pid"].nunique()
    assert r.split["discovery_patients"] + r.split["confirmation_patients"] < 2 * test["pid"].nunique()
    no_split = run_slice_audit(df, SliceAuditPlan(roles=ColumnRoles(label="y", score="s", task="task",
                                                                    attributes=("g",), patient_id="pid"),
                                                  threshold=0.5, n_boot=100, min_size=20))
    assert no_split.split["evaluated_on"] == "all rows" and no_split.split["discovery_rows"] + \
        no_split.split["confirmation_rows"] == len(df)
    with pytest.raises(DataError, match="evaluate-on"):
        run_slice_audit(df, SliceAuditPlan(roles=roles, threshold=0.5, n_boot=100, evaluate_on="holdout"))
