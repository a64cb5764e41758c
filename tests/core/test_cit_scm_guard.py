"""Issue 27 regression guards for the counterfactual-invariance default, so that neither its size nor its power can
be traded back unseen: its power on the 004 SCM (linear data set, seed 3), its power on a constant effect under
non-linear nuisances (the design where the first issue-27 default lost power), and — the other side of the trade —
its size under non-linear nuisances (here, and in
tests/core/test_cit.py::test_logistic_nuisances_false_alarm_under_nonlinear_nuisances_and_the_default_does_not and
tests/core/test_validity.py), and the confounded SCM, where A and Y are associated through a legitimate path
(A → Z_3 → Y): there the default flags dependent classifiers and not the oracles that the published CIT-LR flags.
The suite runs one SCM classifier per model type (10), three oracles, three confounded classifiers and two
oracles, and a few nuisance runs; the full-size guard (20 classifiers and 11 oracles per data set, held-back seeds, n = 1,000 and
4,000) is ``benchmarks/bench_cit_default.py --check``, and ``fairdesk-cli bench cit-synthetic --dataset linear
--classifiers 20 --seed 3 --no-confounded`` reproduces the SCM rows of docs/cit_synthetic_findings.md §2b."""
from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.core.audits import cit
from fairdesk.core.synthetic.cit_benchmark import BenchmarkConfig, classifier_outputs, nuisance_scenario
from fairdesk.core.validity import cit_designs, cit_run


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def scm_linear_seed3():
    cfg = BenchmarkConfig(datasets=("linear",), n_classifiers=10, seed=3, confounded=False, n_eca=1000,
                          oracle_types=("bayes", "logistic", "tree"))  # the audit sample is the study's
    return classifier_outputs(cfg)


def test_default_flags_the_scm_classifiers_with_low_eca(scm_linear_seed3):
    """The issue-9 default flagged 6 of these 10 (it missed the unpruned tree, the depth-5 tree and both MLPs:
    "auto" picked boosting when it won held-out log-loss by a little, and Bonferroni halved α); the requirement is
    75 %. The oracles read Z_3 only (ECA = 1) and must stay unflagged."""
    low = [o for o in scm_linear_seed3 if o["role"] == "base" and o["eca"] < 0.8]
    assert len(low) == 10
    flagged = [cit.cit_test(o["yhat"], o["a"], o["z"], seed=3).p_value < 0.05 for o in low]
    assert np.mean(flagged) >= 0.8
    oracles = [o for o in scm_linear_seed3 if o["role"] == "oracle"]
    assert all(o["eca"] == 1.0 for o in oracles) and len(oracles) == 3
    assert sum(cit.cit_test(o["yhat"], o["a"], o["z"], seed=3).p_value < 0.05 for o in oracles) <= 1


def test_default_weights_its_folds_by_the_rows_their_weights_saw():
    """Issue 27, §2e: the default sums its tested folds' statistics with c_k = √(rows fold k's weight was fitted
    on). The SCM's interactive data set, seed 3: its depth-unlimited random forest (seed 0, ECA 0.63; its effect
    changes sign across Z) is flagged at p 0.037 by the fold-weighted sum and missed by the equal one (p 0.060) —
    one of the six classifiers the fold weights gained over 10 SCM designs, none lost. The trade, measured on the
    same designs: one more oracle flagged of 110 (this data set's polynomial-SVC oracle, p 0.064 → 0.033), and
    4/100 false alarms instead of 3/100 at n = 4,000 with both nuisances non-linear; the size guards are below and
    in tests/core/test_cit.py."""
    cfg = BenchmarkConfig(datasets=("interactive",), n_classifiers=1, model_types=("random_forest",), seed=3,
                          confounded=False, n_eca=1000, oracle_types=())
    (rf,) = classifier_outputs(cfg)
    assert rf["model_type"] == "random_forest" and rf["eca"] < 0.8
    res = cit.cit_test(rf["yhat"], rf["a"], rf["z"], seed=3)
    assert cit.DEFAULT_FOLD_WEIGHTS == "sqrt_train" and res.details["fold_weights"]["rule"] == "sqrt_train"
    assert res.p_value < 0.05
    assert cit.cit_test(rf["yhat"], rf["a"], rf["z"], seed=3, fold_weights="equal").p_value > 0.05


@pytest.mark.full  # make test-full (about 2 min CPU); the classifier above runs in CI
def test_default_flags_the_interactive_scm_study_at_seed_3():
    """The SCM's interactive data set at seed 3 at the study's size (20 base classifiers, 11 oracles, n = 2,000):
    the fold-weighted default flags 11 of the 17 with ECA < 0.8 (equal fold weights: 10; the issue-9 default
    fewer) and 1 of the 11 oracles (the polynomial SVC, p 0.033; equal folds: 0). The data set where the default
    still misses issue 27's 0.80 (docs/cit_synthetic_findings.md §2c–§2e): a guard that it does not lose more."""
    outs = classifier_outputs(BenchmarkConfig(datasets=("interactive",), n_classifiers=20, seed=3, confounded=False))
    low = [o for o in outs if o["role"] == "base" and o["eca"] < 0.8]
    oracles = [o for o in outs if o["role"] == "oracle"]
    assert len(low) == 17 and len(oracles) == 11
    assert sum(cit.cit_test(o["yhat"], o["a"], o["z"], seed=3).p_value < 0.05 for o in low) >= 11
    assert sum(cit.cit_test(o["yhat"], o["a"], o["z"], seed=3).p_value < 0.05 for o in oracles) <= 1


def test_auto_weights_logistic_on_near_logistic_nuisances_and_flexible_fits_on_clear_non_linearity():
    """The mechanism: on the SCM's 32-dimensional, near-logistic nuisance the held-out-loss mixture keeps most of
    its weight on logistic regression (boosting alone would add variance and cost power), while a z₀² propensity
    at n = 1,000 gets its weight on the flexible learners — which the previous "auto" kept logistic for unless
    boosting won by a paired-test margin."""
    rng = np.random.default_rng(5)
    z = rng.standard_normal((1600, 32))
    y = (rng.random(1600) < 1 / (1 + np.exp(-(z[:, :8].sum(axis=1) * 0.4)))).astype(float)
    weights = [cit.fit_prob_model(z, y, "auto", seed=s).selection["weights"] for s in range(2)]
    assert all(w["logistic"] >= 0.6 for w in weights), weights
    yhat, a, zz = nuisance_scenario(1000, 11, h_nonlinear=True, m_nonlinear=True)
    m = cit.fit_prob_model(zz, a, "auto", seed=0)
    assert m.selection["weights"]["logistic"] <= 0.1
    assert m.selection["held_out_log_loss"] < m.selection["log_loss_logistic"] - 0.1


def test_offset_weight_adds_squares_only_where_they_win_held_out_loss():
    """The weight's effect model takes the a·z² terms when they lower the held-out log-loss: on drawn designs with
    an even effect A·(z₁² − 1) (the first two of ``bench validity``'s runs) it does; on the SCM's 32 coordinates
    with a linear effect it keeps [z, a, a·z] (always adding the squares there cost 2 of 10 low-ECA classifiers)."""
    from fairdesk.core.validity import cit_drawn_run

    for i in range(2):
        _, _, (yh, aa, zq) = cit_drawn_run(0, "even", 1.0, i, 1000)
        w, _ = cit._offset_weight(zq[:800], aa[:800], yh[:800].astype(float), "auto", 1)
        assert w.effect_model == "quadratic"
    rng = np.random.default_rng(2)
    z = rng.standard_normal((1200, 32))
    a = (rng.random(1200) < 0.4).astype(int)
    y = (rng.random(1200) < 1 / (1 + np.exp(-(0.3 * z[:, :8].sum(axis=1) + 0.6 * a)))).astype(float)
    w, _ = cit._offset_weight(z, a, y, "auto", 1)
    assert w.effect_model == "linear"


def _validity_runs(n: int, which: str, runs: range):
    """Runs of a design of ``fairdesk-cli bench validity --family cit`` (seed 0): (its seed, (ŷ, a, z))."""
    design = next(d for d in cit_designs(n) if which in d[0])
    return [cit_run(0, design[0], design[2], i, n) for i in runs]


def test_default_keeps_its_power_on_a_constant_effect_under_non_linear_nuisances():
    """β = 0.5 on the logit of Ŷ, E[Ŷ|Z] and P(A|Z) both non-linear, n = 1,000 (runs 0–4 of the validity design).
    The first issue-27 default (one weight model per group, the plain GCM on the weighted test's 80 % of rows)
    flagged 2 of these 5 (p 0.069, 0.106, 0.026, 0.065, 0.007): the combination with a weak weight cost more than
    it gave. The default flags at least 4."""
    p = [cit.cit_test(*data, seed=s).p_value for s, data in _validity_runs(1000, "β = 0.5, both", range(5))]
    assert sum(v < 0.05 for v in p) >= 4, p


def test_default_keeps_its_size_under_non_linear_nuisances_in_the_validity_runs():
    """Ŷ ⟂ A | Z with E[Ŷ|Z] and P(A|Z) both non-linear in z₀² (runs 0–7 of the validity design, n = 1,000): the
    logistic-nuisance test rejects in every run; the default in at most 1 of 8."""
    runs = _validity_runs(1000, "E[Ŷ|Z] non-lin., P(A|Z) non-lin.", range(8))
    assert sum(cit.cit_test(*data, seed=s).p_value < 0.05 for s, data in runs) <= 1
    assert all(cit.gcm_test(*data, regressor="logistic", seed=s).p_value < 0.05 for s, data in runs[:2])


@pytest.mark.full  # make test-full (51 s CPU); the SCM guard above runs in CI
def test_default_separates_a_legitimate_path_from_dependence_on_the_confounded_scm():
    """The confounded variant (A shifts Z_3: A and Y are associated through the legitimate path A → Z_3 → Y; the
    test holds Z = Z_3 fixed), seed 3 at the study's size (n = 2,000): the first 3 base classifiers (ECA 0.70–0.75)
    are flagged (p ≤ 1e-4 in the benchmark rows) and neither of 2 oracles (ECA = 1; p 0.79, 0.48), where the published
    CIT-LR flags the Bayes oracle (p < 1e-4; it flagged 11 of 11 oracles in the full row set,
    docs/cit_synthetic_findings.md §2c)."""
    cfg = BenchmarkConfig(datasets=("linear",), n_classifiers=0, seed=3, n_confounded_classifiers=3, n_eca=1000,
                          oracle_types=("bayes", "tree"))
    outs = [o for o in classifier_outputs(cfg) if o["variant"] == "confounded"]
    base = [o for o in outs if o["role"] == "base"]
    oracles = [o for o in outs if o["role"] == "oracle"]
    assert len(base) == 3 and all(o["eca"] < 0.8 for o in base)
    assert len(oracles) == 2 and all(o["eca"] == 1.0 for o in oracles)
    assert all(cit.cit_test(o["yhat"], o["a"], o["z"], seed=3).p_value < 0.05 for o in base)
    assert sum(cit.cit_test(o["yhat"], o["a"], o["z"], seed=3).p_value < 0.05 for o in oracles) == 0
    bayes = oracles[0]
    assert bayes["model_type"] == "bayes"
    assert cit.cit_test(bayes["yhat"], bayes["a"], bayes["z"], "cit_lr_split", "mlp_release", seed=3).p_value < 0.05


def test_default_detects_an_even_sign_changing_effect_on_drawn_designs():
    """β·A·(z₁² − 1) on the latent score (β = 1, n = 1,000): no average effect and none along any linear direction
    of z, so a weight whose effect model is linear in z cannot see it (the previous default flagged 4 of 30 drawn
    designs, an oracle weight all). Runs 0–3 of ``bench validity --family cit``'s drawn designs: the default, whose
    effect model has a·z² terms, flags at least 3."""
    from fairdesk.core.validity import cit_drawn_run

    p = [cit.cit_test(*data, seed=s).p_value for s, _, data in (cit_drawn_run(0, "even", 1.0, i, 1000)
                                                                for i in range(4))]
    assert sum(v < 0.05 for v in p) >= 3, p
