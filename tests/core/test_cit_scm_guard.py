"""Issue 27 regression guard for the counterfactual-invariance default: its power on the 004 SCM (linear data set,
seed 3). Its size under non-linear nuisances — the other side of the trade — is guarded by
tests/core/test_cit.py::test_logistic_nuisances_false_alarm_under_nonlinear_nuisances_and_the_default_does_not
(12 runs, at most 2 rejections) and tests/core/test_validity.py, so a change cannot trade one back for the other
unseen. The suite runs one classifier per model type (10) and three oracles; the full-size study (20 classifiers
and 11 oracles per data set, held-back seeds, the non-linear and sign-changing designs) is
``benchmarks/bench_cit_default.py``, and ``fairdesk-cli bench cit-synthetic --dataset linear --classifiers 20
--seed 3 --no-confounded`` reproduces the SCM table of docs/cit_synthetic_findings.md §2b."""
from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.core.audits import cit
from fairdesk.core.synthetic.cit_benchmark import BenchmarkConfig, classifier_outputs, nuisance_scenario


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


def test_auto_keeps_logistic_on_near_logistic_nuisances_and_switches_on_clear_non_linearity():
    """The mechanism: on the SCM's 32-dimensional, near-logistic nuisance boosting sometimes wins held-out
    log-loss by a little; "auto" must then keep logistic (the paired test's p is not small), while a z₀² nuisance
    is detected at n = 1,000."""
    rng = np.random.default_rng(5)
    z = rng.standard_normal((1600, 32))
    y = (rng.random(1600) < 1 / (1 + np.exp(-(z[:, :8].sum(axis=1) * 0.4)))).astype(float)
    kinds = [cit.fit_prob_model(z, y, "auto", seed=s).kind for s in range(3)]
    assert kinds == ["logistic"] * 3
    yhat, a, zz = nuisance_scenario(1000, 11, h_nonlinear=True, m_nonlinear=True)
    m = cit.fit_prob_model(zz, a, "auto", seed=0)
    assert m.kind == "hgb" and m.selection["p"] < cit.AUTO_SELECTION_ALPHA and m.selection["z"] > 0
