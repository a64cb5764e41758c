"""The AUROC pair test near AUROC 1 over score shapes (issue 21; docs/methods.md "The AUROC pair test near 1: the
cube-root scale"): the audit's test (:func:`fairdesk.core.stats.discrimination.auroc_pair_z`) against the logit-scale
test it replaced, at the formula level the audit uses (``benchmarks/bench_conservative_tests.py``; the audit's p
equals it, ``test_discrimination.py::test_test_matches_a_hand_computation``). Full study: ``python -m
benchmarks.bench_conservative_tests --part auroc-scale``."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bench_conservative_tests import _pair_row, draw_auroc_design
from fairdesk.core.stats import discrimination as D

ALPHA = 0.05


def _null_rows(seed, n, make):
    rng = np.random.default_rng(seed)
    return [make(rng) for _ in range(n)]


def _size(rows, key):
    p = np.array([r[key] for r in rows if not math.isnan(r[key])])
    return float((p <= ALPHA).mean()), p.size


def test_exponential_scores_near_1_keep_the_size():
    """Hanley & McNeil's own model (exponential scores) at AUROC 0.995, 60 positives / 540 negatives per group: the
    logit-scale test rejected 0.116 of 774 tested null pairs (`--part auroc-scale`) — a group whose sample misses
    the rare deep discordant positives gets a tiny deficit 1 − Â and a huge logit. Here 300 fixed-seed null pairs:
    the logit test rejects > 0.07 of those it tests (the defect, as before), the audit's cube-root test ≤ 0.05."""
    rows = _null_rows(11, 300, lambda rng: _pair_row(rng, False, 0.995, 0.995, (60, 60), (540, 540),
                                                     ("exp", "exp"), (1, 1)))
    before, n = _size(rows, "logit score-type (before)")
    now, _ = _size(rows, "current")
    assert n >= 200 and before > 0.07, (before, n)
    assert now <= 0.05, (now, n)


def test_size_over_drawn_score_shapes_near_1():
    """Over the class: 500 null designs drawn near AUROC 1 (0.95–0.999; 10–150 positives; each group's score shape
    binormal with positives' SD 0.5–2, exponential, tied or Lehmann, so the groups may differ in shape at the same
    AUROC): size ≤ α + 0.02 among tested pairs, also among those with exponential tails in a group (here 0.035 of 346
    and 0.045 of 111; the logit test 0.038 and 0.063)."""
    def make(rng):
        auc, low, n1, n0, shapes, sds = draw_auroc_design(rng)
        return {**_pair_row(rng, False, auc, auc, n1, n0, shapes, sds), "exp": "exp" in shapes}

    rows = _null_rows(12, 500, make)
    size, n = _size(rows, "current")
    assert n >= 300 and size <= ALPHA + 0.02, (size, n)
    exp_size, m = _size([r for r in rows if r["exp"]], "current")
    assert m >= 100 and exp_size <= ALPHA + 0.02, (exp_size, m)


def test_power_is_kept_below_auroc_099_and_near_1():
    """The guard on the other side of the trade (exact-α power where the logit test held its size): 0.9 vs 0.8 with
    12 and 26 positives and 0.998 vs 0.99 with 60 and 120 positives (binormal), 300 planted data sets each: found at
    least as often as by the logit test (here 0.297 and 0.353 against 0.243 and 0.290; 1,000 sets: 0.361 / 0.331
    against 0.286 / 0.287, `--part auroc-scale`). Hanley–McNeil's full variance as the floor gave 0.240 / 0.067."""
    rng = np.random.default_rng(13)
    mid = [_pair_row(rng, True, 0.9, 0.8, (12, 26), (48, 104), ("binormal",) * 2, (1, 1)) for _ in range(300)]
    near = [_pair_row(rng, True, 0.998, 0.99, (60, 120), (240, 480), ("binormal",) * 2, (1, 1))
            for _ in range(300)]
    for rows in (mid, near):
        power = {k: float(np.mean([r[k] <= ALPHA for r in rows])) for k in ("current", "logit score-type (before)")}
        assert power["current"] >= power["logit score-type (before)"] >= 0.2, power


@given(a=st.floats(0.5, 0.9999), b=st.floats(0.5, 0.9999), n1=st.integers(10, 500), n0=st.integers(10, 5000),
       pa=st.tuples(st.floats(0, 0.1), st.floats(0, 0.1)), pb=st.tuples(st.floats(0, 0.1), st.floats(0, 0.1)))
def test_pair_z_is_antisymmetric_with_the_sign_of_the_gap(a, b, n1, n0, pa, pb):
    """Swapping the groups flips z; z = 0 at equal AUROCs and has the sign of A_a − A_b, also for AUROCs below ½
    (tested on 1 − AUROC by symmetry)."""
    z = D.auroc_pair_z(a, b, pa, pb, (n1, n0), (n0, n1))
    assert math.isclose(D.auroc_pair_z(b, a, pb, pa, (n0, n1), (n1, n0)), -z, rel_tol=1e-9, abs_tol=1e-12)
    zr = D.auroc_pair_z(1 - a, 1 - b, pa, pb, (n1, n0), (n0, n1))
    assert zr == 0.0 or (zr > 0) == (a < b)
    assert D.auroc_pair_z(a, a, pa, pb, (n1, n0), (n0, n1)) == 0.0
    assert z == 0.0 or (z > 0) == (a > b)


def test_pair_z_by_hand():
    """0.99 vs 0.97, 30/270 each: tiny own placement variances, so half Hanley–McNeil's at the pooled 0.98 decides;
    large ones (pooled over the groups) decide instead; a design effect of 2 halves z²."""
    hm = D.hanley_mcneil_variance(0.98, 30, 270)
    num, der = 0.03 ** (1 / 3) - 0.01 ** (1 / 3), 0.02 ** (-2 / 3) / 3
    tiny = (1e-6, 1e-6)
    assert math.isclose(D.auroc_pair_z(0.99, 0.97, tiny, tiny, (30, 270), (30, 270)), num / (der * math.sqrt(hm)),
                        rel_tol=1e-12)
    assert math.isclose(D.auroc_pair_z(0.99, 0.97, tiny, tiny, (30, 270), (30, 270), 2.0, 2.0),
                        num / (der * math.sqrt(2 * hm)), rel_tol=1e-12)
    big_a, big_b = (0.02, 0.01), (0.04, 0.03)  # pooled: (0.03, 0.02); A's pooled and B's own variance decide
    v = (0.03 / 30 + 0.02 / 270) + (0.04 / 30 + 0.03 / 270)
    assert 0.03 / 30 + 0.02 / 270 > max(0.02 / 30 + 0.01 / 270, hm / 2)
    assert math.isclose(D.auroc_pair_z(0.99, 0.97, big_a, big_b, (30, 270), (30, 270)), num / (der * math.sqrt(v)),
                        rel_tol=1e-12)
