"""Issue 21: the recall gap with fewer than 10 patients among the positives (whole patients) was valid but far too
conservative — size 0.007 at 5 case patients per group, power 0.09 where the statistic at exact α reached 0.37.
Mechanism: its design effect was the whole-patient bootstrap's variance times G/(G − 1), but the bootstrap redraws
how many patients a rate rests on (E[1/G*] > 1/G), which already lifts its variance about as far above the plain
sandwich as G/(G − 1) does: the correction counted twice. Now the design effect is the closed-form whole-patient
sandwich of each rate given its patients with G/(G − 1) once (``gaps.cluster_rate_variance``).
Fixed-seed simulations through ``run_group_audit`` (many data sets as tasks of one audit), each failing on the code
before the fix; the full-size study is ``python -m benchmarks.bench_conservative_tests --part recall``."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bench_conservative_tests import recall_pair, replicate_p_values
from fairdesk.core.stats import gaps as G


def _recall_p(runs, pos, recall_b, seed):
    rng = np.random.default_rng(seed)
    return replicate_p_values(lambda r: recall_pair(r, 0.7, recall_b, pos, neg_patients=20), runs, rng, "recall",
                              {"patient_id": "pid"})


def test_recall_gap_with_five_case_patients_holds_its_size_near_alpha():
    """Null (recall 0.7 in both groups), 5 positive patients of 1–30 rows per group, strong patient effect; 300
    data sets. Before: p ≤ 0.05 in 0.007 and p ≤ 0.2 in 0.09 (far below their levels); after 0.017 and 0.167 (the
    400-set study: 0.005 → 0.025) — never above α + 0.02."""
    p = _recall_p(300, 5, 0.7, 11)
    assert p.size == 300
    assert 0.015 <= (p <= 0.05).mean() <= 0.07, (p <= 0.05).mean()
    assert 0.14 <= (p <= 0.2).mean() <= 0.25, (p <= 0.2).mean()


def test_recall_gap_power_with_few_case_patients_is_recovered():
    """The trade guarded from the other side: recall 0.7 vs 0.25 with 8 positive patients per group, 150 data sets.
    Before: p ≤ 0.05 in 0.353 of them; after 0.473 (the 400-set study: 0.350 → 0.425)."""
    p = _recall_p(150, 8, 0.25, 12)
    assert (p <= 0.05).mean() >= 0.42, (p <= 0.05).mean()


def test_cluster_rate_variance_by_hand_and_for_single_row_patients():
    # hits 1, 2, 0 of rows 1, 3, 2 (a patient with no row drops out): r = 1/2, residuals ½, ½, −1
    assert np.isclose(G.cluster_rate_variance([1, 2, 0, 0], [1, 3, 2, 0]), 3 / 2 * 1.5 / 36)
    assert G.cluster_rate_variance([], []) == 0.0


@given(st.lists(st.booleans(), min_size=2, max_size=60))
def test_cluster_rate_variance_of_one_row_patients_is_binomial_times_g_over_g_minus_1(hits):
    h = np.array(hits, float)
    g, r = h.size, h.mean()
    assert np.isclose(G.cluster_rate_variance(h, np.ones(g)), g / (g - 1) * r * (1 - r) / g)


def test_auroc_pair_test_keeps_its_size_when_the_groups_score_shapes_differ_near_1():
    """Why the AUROC test's Hanley–McNeil floor stays (docs/methods.md "The two conservative tests"): null pairs at
    AUROC 0.99, 30 positives / 270 negatives per group, positives' latent SD 0.5 in one group and 2 in the other.
    Through the audit: p ≤ 0.05 in ≤ 0.05 of them (0.016 in 965 formula-level pairs); every alternative that gained
    power near 1 rejected 0.08–0.22 here — a change of the test that passes this and gains power is the fix."""
    import pandas as pd
    from scipy.special import expit

    from benchmarks.bench_conservative_tests import score_group

    def make(rng):
        frames = []
        for name, sd in (("A", 0.5), ("B", 2.0)):
            y, s = score_group(rng, 0.99, 30, 270, "binormal", sd)
            frames.append(pd.DataFrame({"y": y.astype(int), "s": expit(s - 3), "g": name}))
        return pd.concat(frames, ignore_index=True)

    p = replicate_p_values(make, 150, np.random.default_rng(4), "auroc", {}, calibration=True)
    assert p.size >= 110
    assert (p <= 0.05).mean() <= 0.05, (p <= 0.05).mean()


def test_candidate_study_uses_the_audits_auroc_and_delong_variance():
    """The candidate study's placement-value components (benchmarks) against sklearn's AUROC and the audit's DeLong
    variance (itself checked by hand in test_discrimination), on tied and untied scores."""
    from sklearn.metrics import roc_auc_score

    from benchmarks.bench_conservative_tests import _components, score_group
    from fairdesk.core.stats import discrimination as D

    rng = np.random.default_rng(2)
    for shape in ("binormal", "tied", "exp"):
        y, s = score_group(rng, 0.95, 25, 60, shape)
        a, comps, _, _ = _components(y, s)
        auc, var = D.auroc_delong(y, s)
        assert np.isclose(a, roc_auc_score(y, s), atol=1e-12) and np.isclose(a, auc, atol=1e-12)
        assert np.isclose(sum(c for c, _ in comps), var, rtol=1e-10)
