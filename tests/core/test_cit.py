"""Counterfactual-invariance tests on arrays (METHODS §6): the published CIT-LR statistic, the default weighted
GCM (size and power), the DP / EO baselines (EO is not DP), and the oriented effect with its TOST verdicts."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from threadpoolctl import threadpool_limits

from fairdesk.core.audits import cit
from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, Cancelled


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(limits=1):
        yield


def _sigmoid(s):
    return 1.0 / (1.0 + np.exp(-s))


def invariant_data(n, seed, confounded=False):
    """Ŷ depends on Z only; A is independent of Z (or, confounded, shifts Z)."""
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < 0.3).astype(int)
    z = rng.standard_normal((n, 4))
    if confounded:
        z[:, 0] += 1.0 * a
    yhat = (rng.random(n) < _sigmoid(1.5 * z[:, 0] - z[:, 1])).astype(int)
    return yhat, a, z


def sign_changing_data(n, seed):
    """Ŷ depends on A through an effect whose sign changes with Z: E[Ŷ | A] is the same in both groups."""
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < 0.3).astype(int)
    z = rng.standard_normal((n, 4))
    yhat = (rng.random(n) < _sigmoid(0.5 * z[:, 0] + 2.0 * (2 * a - 1) * z[:, 1])).astype(int)
    return yhat, a, z


# ----------------------------------------------------------------------------------------------------------------
# The published statistic


def test_cit_lr_is_the_paired_t_test_of_u_against_v():
    yhat, a, z = sign_changing_data(400, 0)
    g = lambda aa, zz: _sigmoid(0.5 * zz[:, 0] + 2.0 * (2 * np.asarray(aa) - 1) * zz[:, 1])  # noqa: E731
    h = lambda zz: 0.7 * g(0, zz) + 0.3 * g(1, zz)  # noqa: E731
    t, p = cit.cit_lr(yhat, a, z, g, h)
    ref = stats.ttest_rel(yhat * g(a, z), yhat * h(z))
    assert t == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)
    assert p < 1e-6 and t > 0  # with the true g, h the statistic estimates E[(g − h)²] > 0


def test_cit_lr_identical_pairs_mean_no_evidence():
    yhat, a, z = invariant_data(100, 1)
    h = lambda zz: np.full(len(zz), 0.4)  # noqa: E731
    assert cit.cit_lr(yhat, a, z, lambda aa, zz: h(zz), h) == (0.0, 1.0)


def test_published_statistic_false_alarms_on_an_invariant_classifier():
    """Known behaviour recorded in docs/cit_synthetic_findings.md: with estimated ĝ (one model per a, fitted on
    fewer rows) and ĥ, the paired t-test sees their systematic difference, not a dependence on A."""
    rng = np.random.default_rng(3)
    n = 2000
    a = (rng.random(n) < 0.3).astype(int)
    z = rng.standard_normal((n, 8))
    yhat = (z @ np.linspace(1, -1, 8) > 0).astype(int)  # a deterministic function of Z: invariant
    res = cit.cit_lr_test(yhat, a, z, "logistic", n_folds=5, seed=0)
    assert res.p_value < 0.01
    assert cit.gcm_test(yhat, a, z, seed=0).p_value > 0.05


# ----------------------------------------------------------------------------------------------------------------
# Regressors


@pytest.mark.parametrize("kind", cit.REGRESSOR_KINDS)
def test_regressors_fit_and_are_deterministic(kind):
    yhat, a, z = sign_changing_data(500, 2)
    f1 = cit.fit_cit_regressors(yhat, a, z, kind, seed=4)
    f2 = cit.fit_cit_regressors(yhat, a, z, kind, seed=4)
    g1 = f1.g(1, z)
    assert np.array_equal(g1, f2.g(1, z)) and np.array_equal(f1.h(z), f2.h(z))
    assert np.all((g1 >= 0) & (g1 <= 1))
    # they learn the planted sign change: ĝ(1, z) − ĝ(0, z) follows z_1
    assert np.corrcoef(f1.g(1, z) - f1.g(0, z), z[:, 1])[0, 1] > 0.5


def test_logistic_regressor_matches_scikit_learn():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    yhat, _, z = invariant_data(600, 5)
    ours = cit.fit_prob_model(z * 0.03 + 1.0, yhat, "logistic")(z * 0.03 + 1.0)
    ref = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, tol=1e-10, max_iter=1000)).fit(
        z * 0.03 + 1.0, yhat).predict_proba(z * 0.03 + 1.0)[:, 1]
    assert np.max(np.abs(ours - ref)) < 1e-5


def test_constant_predictions_give_no_evidence():
    _, a, z = invariant_data(300, 6)
    ones = np.ones(300)
    assert cit.gcm_test(ones, a, z).p_value == 1.0
    assert cit.cit_lr_test(ones, a, z).p_value == 1.0
    assert cit.dp_test(ones, a) == (0.0, 1.0)


# ----------------------------------------------------------------------------------------------------------------
# The default test: weighted GCM with sequential fitting


def _level_on_invariant_classifiers(runs: int):
    p = np.array([cit.gcm_test(*invariant_data(800, 100 + s), seed=s).p_value for s in range(runs)])
    assert np.mean(p < 0.05) <= 0.10
    assert np.all((p >= 0) & (p <= 1))


def test_default_test_keeps_its_level_on_invariant_classifiers():
    """CI size: the first 20 of the 30 runs below (1 of 20 rejects, p 0.041; the next smallest p is 0.073)."""
    _level_on_invariant_classifiers(20)


@pytest.mark.full  # make test-full
def test_default_test_keeps_its_level_on_invariant_classifiers_30_runs():
    _level_on_invariant_classifiers(30)


def _level_when_a_shifts_z(runs: int):
    p = [cit.gcm_test(*invariant_data(800, 200 + s, confounded=True), seed=s).p_value for s in range(runs)]
    dp = [cit.dp_test(*invariant_data(800, 200 + s, confounded=True)[:2])[1] for s in range(runs)]
    assert np.mean(np.array(p) < 0.05) <= 0.12
    assert np.mean(np.array(dp) < 0.05) == 1.0  # DP fails every invariant classifier here


def test_default_test_keeps_its_level_when_a_shifts_z():
    """CI size: the first 12 of the 20 runs below (none rejects, smallest p 0.11; DP's largest p 2e-4)."""
    _level_when_a_shifts_z(12)


@pytest.mark.full  # make test-full
def test_default_test_keeps_its_level_when_a_shifts_z_20_runs():
    _level_when_a_shifts_z(20)


def test_learned_weight_needs_sequential_fitting():
    """Cross-fitting a learned weight inflates the level (degenerate U-statistic); fitting the weight on the earlier
    folds only (the default scheme) does not. Logistic nuisances and the weighted statistic alone (no plain-GCM
    combination): this is about the scheme, not the regressor."""
    seq, xfit = [], []
    for s in range(30):
        yhat, a, z = invariant_data(600, 300 + s)
        yhat = (z[:, 0] + 0.3 * z[:, 2] > 0).astype(int)  # deterministic in Z: the weight is pure noise
        folds = cit.make_folds(a, 5, s)
        seq.append(cit.gcm_test(yhat, a, z, folds=folds, regressor="logistic", combine="none").p_value)
        xfit.append(cit.gcm_test(yhat, a, z, folds=folds, regressor="logistic", scheme="crossfit",
                                 combine="none").p_value)
    assert np.mean(np.array(seq) < 0.05) <= 0.1
    assert np.mean(np.array(xfit) < 0.05) > np.mean(np.array(seq) < 0.05)


def test_default_test_detects_an_effect_that_changes_sign():
    yhat, a, z = sign_changing_data(1500, 7)
    assert cit.cit_test(yhat, a, z).p_value < 1e-6  # default: weighted GCM
    assert cit.gcm_test(yhat, a, z, weighted=False).p_value > 1e-3  # the plain GCM sees only the average
    assert cit.dp_test(yhat, a)[1] > 1e-3  # and so does DP


def test_cit_test_dispatch_and_result_record():
    yhat, a, z = sign_changing_data(600, 8)
    for method in cit.METHODS:
        res = cit.cit_test(yhat, a, z, method=method, seed=1)
        assert res.method == method and 0.0 <= res.p_value <= 1.0
        d = res.to_dict()
        assert d["method"] == method and isinstance(d["details"], dict)
    with pytest.raises(DataError):
        cit.cit_test(yhat, a, z, method="nope")


def test_cancel_stops_between_folds():
    yhat, a, z = sign_changing_data(300, 9)
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        cit.cit_test(yhat, a, z, cancel=token)


def test_bad_inputs_are_refused_with_a_message():
    yhat, a, z = invariant_data(100, 10)
    with pytest.raises(DataError, match="length"):
        cit.gcm_test(yhat[:-1], a, z)
    with pytest.raises(DataError, match="0/1"):
        cit.gcm_test(yhat, a + 2, z)
    with pytest.raises(DataError, match="missing"):
        cit.gcm_test(np.where(np.arange(100) == 3, np.nan, yhat), a, z)
    with pytest.raises(DataError, match="smallest group"):
        cit.make_folds(np.r_[np.zeros(50), np.ones(2)], 5)


# ----------------------------------------------------------------------------------------------------------------
# Baselines


def test_dp_is_welch():
    rng = np.random.default_rng(11)
    pred = rng.random(300)
    a = (rng.random(300) < 0.4).astype(int)
    ref = stats.ttest_ind(pred[a == 1], pred[a == 0], equal_var=False)
    assert cit.dp_test(pred, a) == pytest.approx((ref.statistic, ref.pvalue))


def test_eo_differs_from_dp_when_base_rates_differ():
    """The release's EO test was a copy of its DP test. With different base rates, a classifier that follows Y
    fails DP but passes EO (its true-positive rates are equal)."""
    rng = np.random.default_rng(12)
    n = 3000
    a = (rng.random(n) < 0.5).astype(int)
    y = (rng.random(n) < np.where(a == 1, 0.6, 0.2)).astype(int)
    pred = np.where(rng.random(n) < 0.9, y, 1 - y)  # 90 % accurate in both groups
    dp_t, dp_p = cit.dp_test(pred, a)
    eo_t, eo_p = cit.eo_test(pred, a, y)
    assert dp_p < 1e-20 and eo_p > 0.01
    assert (dp_t, dp_p) != (eo_t, eo_p)
    pos = y == 1
    ref = stats.ttest_ind(pred[pos & (a == 1)], pred[pos & (a == 0)], equal_var=False)
    assert eo_p == pytest.approx(ref.pvalue)


def test_welch_degenerate_cases():
    assert cit.welch_test([1, 1, 1], [1, 1]) == (0.0, 1.0)
    t, p = cit.welch_test([1, 1, 1], [0, 0])
    assert p == 0.0 and t > 0
    assert np.isnan(cit.welch_test([1], [0, 1])[1])
    with pytest.raises(DataError, match="two groups"):
        cit.dp_test([0, 1, 1], [0, 1, 2])


# ----------------------------------------------------------------------------------------------------------------
# Oriented effect and equivalence verdicts (exact counterfactuals)


def test_planted_dependent_classifier_is_dependent():
    rng = np.random.default_rng(13)
    n = 2000
    a = (rng.random(n) < 0.3).astype(int)
    pred = (rng.random(n) < 0.4).astype(int)
    # moving a unit to group 1 switches 20 % of negatives on; moving to group 0 switches them off
    bump = rng.random(n) < 0.2
    pred_cf = np.where((a == 0) & bump, 1, np.where((a == 1) & bump, 0, pred))
    res = cit.oriented_effect(pred, pred_cf, a, margin=0.02)
    assert res.verdict == "dependent"
    up = next(d for d in res.directions if d.source == 0)
    down = next(d for d in res.directions if d.source == 1)
    assert up.mean_shift > 0.05 and down.mean_shift < -0.05  # oriented: the two directions do not cancel
    assert up.ci_low > 0 and down.ci_high < 0
    assert up.flip_rate == pytest.approx(np.mean(pred_cf[a == 0] != pred[a == 0]))


def test_invariant_classifier_is_equivalent_within_margin():
    rng = np.random.default_rng(14)
    a = (rng.random(3000) < 0.3).astype(int)
    pred = (rng.random(3000) < 0.5).astype(int)
    res = cit.oriented_effect(pred, pred.copy(), a, margin=0.02)
    assert res.verdict == "equivalent within margin"
    assert all(d.verdict == "equivalent within margin" and d.flip_rate == 0 for d in res.directions)
    # scores that move by far less than the margin
    s = rng.random(3000)
    res = cit.oriented_effect(s, np.clip(s + rng.normal(0, 0.002, 3000), 0, 1), a, margin=0.02)
    assert res.verdict == "equivalent within margin"


def test_too_few_units_is_inconclusive():
    a = np.array([0] * 10 + [1] * 10)
    pred = np.array([0, 1] * 10)
    res = cit.oriented_effect(pred, pred.copy(), a, margin=0.02)
    assert res.verdict == "inconclusive"  # 0 flips out of 10 does not bound the flip rate below 2 %


def test_flips_that_cancel_within_a_direction_are_still_dependent():
    rng = np.random.default_rng(15)
    n = 3000
    a = np.zeros(n, int)
    pred = (rng.random(n) < 0.5).astype(int)
    flip = rng.random(n) < 0.2
    pred_cf = np.where(flip, 1 - pred, pred)  # as many 0→1 as 1→0: mean shift ≈ 0
    res = cit.oriented_effect(pred, pred_cf, a, a_cf=np.ones(n, int), margin=0.02)
    assert abs(res.directions[0].mean_shift) < 0.03
    assert res.verdict == "dependent"


def test_shift_inside_the_negative_control_band_is_inconclusive():
    rng = np.random.default_rng(16)
    n = 20000
    a = (rng.random(n) < 0.5).astype(int)
    s = rng.random(n)
    s_cf = s + 0.03 + rng.normal(0, 0.01, n)  # small but very significant shift, above a 0.02 margin
    assert cit.oriented_effect(s, s_cf, a, margin=0.02).verdict == "dependent"
    res = cit.oriented_effect(s, s_cf, a, margin=0.02, control_band=0.05)
    assert res.verdict == "inconclusive"
    assert "negative-control" in res.directions[0].reason
    d = res.to_dict()
    assert d["verdict"] == "inconclusive" and len(d["directions"]) == 2


def test_multi_valued_attribute_with_rows_per_target():
    rng = np.random.default_rng(17)
    n = 600
    a = rng.integers(0, 3, n)
    pred = rng.random(n)
    rows_a, rows_t, rows_p, rows_cf = [], [], [], []
    for target in range(3):
        keep = a != target
        rows_a.append(a[keep]); rows_t.append(np.full(keep.sum(), target))  # noqa: E702
        rows_p.append(pred[keep]); rows_cf.append(pred[keep] + (0.2 if target == 2 else 0.0))  # noqa: E702
    res = cit.oriented_effect(np.concatenate(rows_p), np.concatenate(rows_cf), np.concatenate(rows_a),
                              np.concatenate(rows_t), margin=0.02)
    verdicts = {(d.source, d.target): d.verdict for d in res.directions}
    assert len(verdicts) == 6
    assert verdicts[(0, 2)] == "dependent" and verdicts[(0, 1)] == "equivalent within margin"
    assert res.verdict == "dependent"


def test_invariance_table_per_output_with_bh():
    yhat_dep, a, z = sign_changing_data(800, 18)
    rng = np.random.default_rng(1018)  # not 18: those uniforms drew A
    yhat_inv = (rng.random(800) < _sigmoid(z[:, 0])).astype(int)
    labels = (rng.random(800) < 0.5).astype(int)
    seen = []
    rows = cit.invariance_table({"dependent": yhat_dep, "invariant": yhat_inv}, a, z,
                                y={"dependent": labels, "invariant": labels}, progress=lambda f, m: seen.append(f))
    assert [r["output"] for r in rows] == ["dependent", "invariant"]
    for r in rows:
        for key in ("p", "q", "cit_lr_p", "cit_lr_q", "dp_p", "dp_q", "eo_p", "eo_q"):
            assert 0.0 <= r[key] <= 1.0
        assert r["q"] >= r["p"]
    assert rows[0]["q"] < 1e-4 and rows[1]["p"] > 0.05
    assert seen[-1] == pytest.approx(1.0)
    with pytest.raises(DataError, match="probabilities"):
        cit.invariance_table({"logits": np.linspace(-3, 3, 800)}, a, z)


def test_propensity_is_shared_by_calls_with_the_same_inputs_only():
    """The out-of-fold m̂ is kept for the next classifier on the same (A, Z, folds, learner, seed, scheme): a repeat
    equals a fresh fit, a caller changing its copy does not change the next one, and any other input is refitted
    (a key that left one out would return the cached m̂ for it). Boosting, whose fit depends on the seed."""
    _, a, z = sign_changing_data(300, 5)
    base = {"a": a, "z": z, "folds": cit.make_folds(a, 5, 0), "kind": "hgb"}

    def fresh(**kw):
        cit._PROPENSITY_CACHE.clear()
        return cit.crossfit_propensity(**{**base, "return_kinds": True, **kw})

    m, kinds = fresh()
    again, kinds_again = cit.crossfit_propensity(**base, return_kinds=True)
    assert np.array_equal(again, m) and kinds_again == kinds
    again[:] = -1.0
    assert np.array_equal(cit.crossfit_propensity(**base), m)
    z2 = z + np.random.default_rng(0).normal(0, 0.5, z.shape)
    for kw in ({"z": z2}, {"a": 1 - a}, {"folds": cit.make_folds(a, 5, 1)}, {"kind": "logistic"}, {"seed": 1},
               {"scheme": "sequential"}):
        expected = fresh(**kw)[0]
        assert not np.array_equal(expected, m, equal_nan=True), kw
        cit._PROPENSITY_CACHE.clear()
        cit.crossfit_propensity(**base)             # the cache now holds the first inputs' m̂
        got = cit.crossfit_propensity(**{**base, **kw})
        assert np.array_equal(got, expected, equal_nan=True), kw
    # a whole test: the second classifier on the same data gives the same result as with a cleared cache
    yhat = (np.random.default_rng(3).random(300) < 0.4).astype(int)
    cit._PROPENSITY_CACHE.clear()
    cold = cit.cit_test(yhat, a, z, seed=2)
    warm = cit.cit_test(yhat, a, z, seed=2)
    assert warm.p_value == cold.p_value and warm.details == cold.details


# ----------------------------------------------------------------------------------------------------------------
# Issue 9, finding 4: the default's size under non-linear nuisances, and its nuisance diagnostics


def test_logistic_nuisances_false_alarm_under_nonlinear_nuisances_and_the_default_does_not():
    """Reproduces finding 4: Ŷ ⟂ A | Z, but E[Ŷ|Z] and P(A|Z) both depend on z₀². With logistic nuisances fitted
    on the earlier folds (the pre-issue-9 default) the weighted GCM rejects almost always; the default ("auto"
    nuisances, ĥ and m̂ cross-fitted, the weight fitted sequentially) keeps its level. Eight runs (measured: the
    old scheme rejects 8 of 8, the default 0 of 8, smallest p 0.06; the size studies are tests/core/test_validity.py
    and ``fairdesk-cli bench validity --family cit``); the 12-run version runs in make test-full."""
    old, new = _old_and_default_under_nonlinear_nuisances(8)
    assert np.mean(np.array(old) < 0.05) >= 7 / 8
    assert np.mean(np.array(new) < 0.05) <= 1 / 8


@pytest.mark.full  # make test-full
def test_logistic_nuisances_false_alarm_under_nonlinear_nuisances_and_the_default_does_not_12_runs():
    old, new = _old_and_default_under_nonlinear_nuisances(12)
    assert np.mean(np.array(old) < 0.05) >= 10 / 12
    assert np.mean(np.array(new) < 0.05) <= 2 / 12


def _old_and_default_under_nonlinear_nuisances(runs: int):
    from fairdesk.core.synthetic.cit_benchmark import nuisance_scenario

    old, new = [], []
    for s in range(runs):
        yhat, a, z = nuisance_scenario(1000, 500 + s, h_nonlinear=True, m_nonlinear=True)
        old.append(cit.gcm_test(yhat, a, z, regressor="logistic", scheme="sequential", seed=s).p_value)
        new.append(cit.cit_test(yhat, a, z, seed=s).p_value)
    return old, new


def test_default_test_finds_a_planted_dependence_under_nonlinear_nuisances():
    from fairdesk.core.synthetic.cit_benchmark import nuisance_scenario

    p = [cit.cit_test(*nuisance_scenario(2000, 600 + s, True, True, beta=1.2), seed=s).p_value for s in range(4)]
    assert np.sum(np.array(p) < 0.05) >= 3


def test_auto_regressor_is_the_convex_mixture_with_the_lowest_held_out_log_loss():
    """"auto" mixes logistic regression, an additive spline logistic fit and boosting with the simplex weights whose
    cross-fitted predictions have the lowest held-out log-loss (checked here against sklearn's log_loss on every
    grid point): a U-shaped propensity puts the weight on the flexible learners, a logistic truth mostly on logistic
    regression, and the refitted mixture predicts the weighted sum of its refitted learners."""
    from sklearn.metrics import log_loss

    from fairdesk.core.synthetic.cit_benchmark import nuisance_scenario

    grid = cit._simplex_grid(3, 0.1)
    assert grid.shape == (66, 3) and np.allclose(grid.sum(axis=1), 1.0) and (grid >= 0).all()
    yhat, a, z = nuisance_scenario(1500, 7, h_nonlinear=False, m_nonlinear=True)
    m = cit.fit_prob_model(z, a, "auto", seed=1)
    h = cit.fit_prob_model(z, yhat, "auto", seed=1)
    assert m.selection["weights"]["logistic"] <= 0.2  # z₀² is not logistic in z
    assert m.selection["log_loss_logistic"] > m.selection["held_out_log_loss"]
    assert h.selection["weights"]["logistic"] >= 0.5  # a logistic truth: the flexible fits add variance
    # the choice, recomputed: the learners' held-out predictions on the same folds, every grid point's log-loss
    folds = cit._selection_folds(a.astype(float), cit.AUTO_SELECTION_FOLDS, 1)
    held = np.empty((len(a), 3))
    for k in range(cit.AUTO_SELECTION_FOLDS):
        for j, kind in enumerate(cit.AUTO_LEARNERS):
            held[folds == k, j] = cit._FITTERS[kind](z[folds != k], a[folds != k].astype(float), 1 + k)(z[folds == k])
    losses = [log_loss(a, np.clip(held @ g, 1e-9, 1 - 1e-9), labels=[0, 1]) for g in grid]
    best = grid[int(np.argmin(losses))]
    assert np.allclose([m.selection["weights"][k] for k in cit.AUTO_LEARNERS], best)
    assert m.selection["held_out_log_loss"] == pytest.approx(min(losses), rel=1e-9)
    refit = [cit._FITTERS[k](z, a.astype(float), 1)(z[:50]) for k in cit.AUTO_LEARNERS]
    assert np.allclose(m(z[:50]), sum(w * r for w, r in zip(best, refit)))
    assert cit.model_kind(cit.fit_prob_model(z, np.ones(1500), "auto"), "auto") == "constant"


def test_nuisance_diagnostic_matches_hand_values_and_scikit_learn():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(21)
    p_true = rng.uniform(0.05, 0.95, 4000)
    y = (rng.random(4000) < p_true).astype(float)
    logit = np.log(p_true / (1 - p_true))
    too_extreme = _sigmoid(2.0 * logit)  # over-fitted predictions: the true slope on them is 0.5
    d = cit.nuisance_diagnostic(y, too_extreme)
    assert d["brier"] == pytest.approx(np.mean((y - too_extreme) ** 2))
    assert d["calibration_in_the_large"] == pytest.approx(y.mean() - too_extreme.mean())
    ref = LogisticRegression(C=np.inf, tol=1e-10, max_iter=1000).fit(2.0 * logit[:, None], y)
    assert d["calibration_slope"] == pytest.approx(ref.coef_[0, 0], abs=1e-5)
    assert d["calibration_intercept"] == pytest.approx(ref.intercept_[0], abs=1e-5)
    assert 0.4 < d["calibration_slope"] < 0.6 and not d["ok"] and "over-fitted" in d["note"]
    good = cit.nuisance_diagnostic(y, p_true)
    assert good["ok"] and abs(good["calibration_slope"] - 1) < 0.15 and good["skill"] > 0
    flat = cit.nuisance_diagnostic(y, np.full(4000, y.mean()))
    assert flat["calibration_slope"] is None and flat["ok"]


def test_default_result_reports_each_nuisance_fit():
    from fairdesk.core.synthetic.cit_benchmark import nuisance_scenario

    res = cit.cit_test(*nuisance_scenario(800, 3, True, True), seed=0)
    d = res.to_dict()["details"]
    assert d["scheme"] == "sequential-weight" and res.regressor == "auto"
    assert set(d["nuisance_fit"]) == {"E[Ŷ|Z]", "P(A=1|Z)"}
    for diag in d["nuisance_fit"].values():
        assert diag["n"] == d["n_tested"] and 0 <= diag["brier"] <= 1 and isinstance(diag["ok"], bool)
    assert len(d["regressors_chosen"]["P(A=1|Z)"]) == 5 and len(d["fold_statistics"]) == 4
    # the reported p is the min-p of the weighted test and the plain GCM on the same residuals, referred to their
    # joint normal law with the estimated correlation (between min p and Bonferroni's 2·min p)
    comb = d["combined_with_plain_gcm"]
    assert comb["rule"] == "maxT" and -1 <= comb["correlation"] <= 1
    assert comb["p_weighted"] == pytest.approx(stats.norm.sf(res.statistic))
    assert comb["p_plain"] == pytest.approx(2 * stats.norm.sf(abs(comb["t_plain"])))
    pmin = min(comb["p_weighted"], comb["p_plain"])
    cw, cp = stats.norm.isf(pmin), stats.norm.isf(pmin / 2)
    mvn = stats.multivariate_normal([0, 0], [[1, comb["correlation"]], [comb["correlation"], 1]])
    assert res.p_value == pytest.approx(1 - (mvn.cdf([cw, cp]) - mvn.cdf([cw, -cp])), abs=2e-4)
    assert pmin <= res.p_value <= min(1.0, 2 * pmin)


def test_min_p_combination_by_simulation_and_by_hand():
    """Under the null the combined p is uniform: simulate (T_W, T_P) with correlation ρ, and check the rate at 5 %
    (Bonferroni's would be below it); with ρ = 0 it is 1 − (1 − p_min)² by hand."""
    rng = np.random.default_rng(4)
    for rho in (0.0, 0.6, 0.95):
        t = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=4000)
        pw, pp = stats.norm.sf(t[:, 0]), 2 * stats.norm.sf(np.abs(t[:, 1]))
        comb = np.array([cit.gcm_min_p(a, b, rho) for a, b in zip(pw[:800], pp[:800])])
        assert abs(np.mean(comb < 0.05) - 0.05) < 0.025
        bonf = np.minimum(1, 2 * np.minimum(pw, pp))[:800]
        assert np.all(comb <= bonf + 1e-12)
    assert cit.gcm_min_p(0.01, 0.3, 0.0) == pytest.approx(1 - 0.99 ** 2, abs=1e-5)
    assert cit.gcm_min_p(1e-9, 0.5, 0.3) == pytest.approx(2e-9)  # below 1e-6: Bonferroni's bound


def test_first_fold_share():
    a = np.r_[np.zeros(700, int), np.ones(300, int)]
    folds = cit.make_folds(a, 5, 0, first_fraction=0.4)
    assert np.mean(folds == 0) == pytest.approx(0.4, abs=0.002)
    assert all(np.sum((folds == k) & (a == 1)) >= 44 for k in range(1, 5))
    with pytest.raises(DataError, match="between 0 and 1"):
        cit.make_folds(a, 5, 0, first_fraction=1.2)


# ----------------------------------------------------------------------------------------------------------------
# Issue 27: the weight "offset" (flexible baseline, logistic effect model) and the plain GCM on every row


def test_logistic_with_offset_by_hand_and_by_scipy():
    """sigmoid(offset + x·β), L2 on the standardised slopes: a constant offset only moves the (unpenalised)
    intercept, so the predictions equal the fit without it; a varying offset gives the minimiser of the same
    penalised log-likelihood found by scipy.optimize."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(2)
    z = rng.standard_normal((400, 3))
    off = 1.5 * (z[:, 0] ** 2 - 1)
    y = (rng.random(400) < _sigmoid(off + 0.7 * z[:, 1])).astype(float)
    plain = cit._fit_logistic(z, y, 0)
    shifted = cit._fit_logistic(z, y, 0, offset=np.full(400, 2.0))
    assert np.max(np.abs(shifted(z, 2.0) - plain(z))) < 1e-6
    fit = cit._fit_logistic(z, y, 0, offset=off)
    x = np.hstack([np.ones((400, 1)), (z - z.mean(0)) / z.std(0)])

    def objective(b):
        s = x @ b + off
        return np.sum(np.logaddexp(0, s) - y * s) + 0.5 * np.sum(b[1:] ** 2) / cit.LOGISTIC_C

    ref = minimize(objective, np.zeros(4), method="BFGS", options={"gtol": 1e-8}).x
    assert np.max(np.abs(fit(z, off) - _sigmoid(x @ ref + off))) < 1e-5
    assert ref[2] / z[:, 1].std() == pytest.approx(0.7, abs=0.25)  # the planted slope, seen through the offset


def test_default_weight_follows_a_constant_effect_under_non_linear_nuisances():
    """The mechanism of the non-linear power loss (issue 27): with one model per group, "auto" often fits one group
    by logistic regression and the other by boosting, and ŵ = ĝ(1,·) − ĝ(0,·) is then mostly the difference of
    their misspecifications, not the effect. The default's weight shares the flexible part between the groups and
    lets A enter through a logistic effect model, so it points the way of the planted constant effect. Alignment
    = E[w·ŵ]/√E[ŵ²] on held-out rows (the weighted statistic's drift); measured over 6 seeds once: per group
    0.043, default 0.069 (at most √E[w²] ≈ 0.08), share of rows with ŵ > 0: 0.74 vs 0.90. With "auto" a held-out-loss
    mixture of logistic, spline and boosted fits, both groups' models are mixtures and the gap narrows (these 4
    seeds: per group 0.043, default 0.053; share of rows with ŵ > 0: 0.76, where the previous "auto" gave 0.90 — the
    mixture offset is noisier at 400 training rows), so the default must still lead by 10 % and point the right
    way on most rows."""
    from fairdesk.core.synthetic.cit_benchmark import nuisance_scenario

    align = {"difference": [], "offset": []}
    positive = []
    for s in range(4):
        yhat, a, z = nuisance_scenario(1000, 900 + s, True, True, beta=0.5)
        lh = (1.5 * (z[:, 0] ** 2 - 1) + np.sin(2 * z[:, 1]))[400:]
        w = _sigmoid(lh + 0.5) - _sigmoid(lh)
        tr, te = slice(0, 400), slice(400, None)
        g = {v: cit.fit_prob_model(z[tr][a[tr] == v], yhat[tr][a[tr] == v], "auto", 1 + v) for v in (0, 1)}
        w_offset, _ = cit._offset_weight(z[tr], a[tr], yhat[tr], "auto", 1)
        for name, wh in (("difference", g[1](z[te]) - g[0](z[te])), ("offset", w_offset(z[te]))):
            align[name].append(np.mean(w * wh) / np.sqrt(np.mean(wh ** 2)))
        positive.append(np.mean(w_offset(z[te]) > 0))
    assert cit.DEFAULT_WEIGHT == "offset"
    assert np.mean(align["offset"]) > 1.1 * np.mean(align["difference"])
    assert np.mean(positive) > 0.7


def test_plain_gcm_uses_every_row_and_the_combination_keeps_its_level():
    """The weighted statistic tests 4 of 5 folds (fold 0 only trains the weight); the plain GCM needs no weight
    and uses all rows (issue 27). Under the null (A shifts Z; logistic nuisances, well specified here, so the runs
    are cheap) the min-p combination keeps its level, and the correlation it assumes is not above the one
    simulated (the shared nuisance errors add a little positive correlation, which only makes it conservative;
    assuming more than there is would make it liberal)."""
    t_w, t_p, rho, p = [], [], [], []
    for s in range(150):
        yhat, a, z = invariant_data(400, 3000 + s, confounded=True)
        res = cit.gcm_test(yhat, a, z, regressor="logistic", seed=s)
        comb = res.details["combined_with_plain_gcm"]
        assert comb["n_plain"] == 400 and res.details["n_tested"] < 400
        # the per-fold terms (for other fixed combinations of the T_k) add up to the correlation used
        assert len(comb["fold_correlations"]) == len(res.details["fold_statistics"]) == 4
        coef = res.details["fold_weights"]["coefficients"]
        assert np.dot(coef, comb["fold_correlations"]) == pytest.approx(comb["correlation"], abs=1e-12)
        t_w.append(res.statistic)
        t_p.append(comb["t_plain"])
        rho.append(comb["correlation"])
        p.append(res.p_value)
    assert np.mean(rho) <= np.corrcoef(t_w, t_p)[0, 1] + 0.1
    assert np.mean(np.array(p) < 0.05) <= 0.09


def test_fold_weights_by_hand_and_their_null_law():
    """"sqrt_train" sums the tested folds' statistics with c_k = √(rows of the earlier folds, on which fold k's
    weight was fitted), fixed by the fold sizes before any fit: by hand from the recorded T_k and the folds, the
    statistic is Σ c_k T_k/‖c‖ and its correlation with the plain GCM Σ c_k ρ_k/‖c‖ ("equal": c_k = 1). Under the
    null (150 runs, A shifts Z, logistic nuisances) both sums are N(0, 1) — mean, sd and the combined test's
    level; a coefficient that looked at the data (e.g. weighting the largest T_k) would not be."""
    from scipy.stats import norm

    stats = {"equal": [], "sqrt_train": []}
    p = []
    for s in range(150):
        yhat, a, z = invariant_data(400, 7000 + s, confounded=True)
        res = cit.gcm_test(yhat, a, z, regressor="logistic", seed=s, fold_weights="sqrt_train")
        folds = cit.make_folds(a, 5, s)
        train = np.array([np.sum(folds < k) for k in range(1, 5)], float)
        assert res.details["fold_weights"]["training_rows"] == train.tolist()
        t = np.array(res.details["fold_statistics"])
        comb = res.details["combined_with_plain_gcm"]
        c = np.sqrt(train) / np.linalg.norm(np.sqrt(train))
        assert res.statistic == pytest.approx(c @ t, abs=1e-12)
        assert comb["p_weighted"] == pytest.approx(norm.sf(c @ t), abs=1e-12)
        assert comb["correlation"] == pytest.approx(c @ np.array(comb["fold_correlations"]), abs=1e-12)
        stats["sqrt_train"].append(res.statistic)
        stats["equal"].append(t.sum() / 2.0)
        p.append(res.p_value)
    for rule, v in stats.items():
        assert abs(np.mean(v)) < 0.25 and 0.8 < np.std(v) < 1.2, (rule, np.mean(v), np.std(v))
    assert np.mean(np.array(p) < 0.05) <= 0.09
    with pytest.raises(DataError, match="fold weights"):
        cit.gcm_test(yhat, a, z, regressor="logistic", fold_weights="largest")
