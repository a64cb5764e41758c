"""The 004 synthetic SCM with exact counterfactuals, and the synthetic benchmark built on it (METHODS §6):
counterfactuals are exact, oracles have ECA = 1, and — on small fixed-seed runs — the default test flags most
low-ECA classifiers, keeps its false-positive rate near α on oracles and beats DP on the confounded variant."""
from __future__ import annotations

import json

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.core.audits import cit
from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, Cancelled
from fairdesk.core.synthetic import cit_benchmark as bench
from fairdesk.core.synthetic.scm import DATASETS, SyntheticSCM, expected_counterfactual_accuracy


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(limits=1):
        yield


# ----------------------------------------------------------------------------------------------------------------
# The SCM


@pytest.mark.parametrize("name", DATASETS)
def test_structure_follows_the_paper(name):
    scm = SyntheticSCM(name, seed=3)
    assert scm.M.shape == scm.N.shape == (3, 32, 32) and scm.M_x.shape == (32, 32) and scm.r.shape == (32,)
    np.testing.assert_allclose(np.abs(scm.M).sum(axis=-1), 1.0)  # rows L1-normalised
    np.testing.assert_allclose(np.abs(scm.N).sum(axis=-1), 1.0)
    assert np.abs(scm.M_x).max() <= 1 and np.abs(scm.r).max() <= 1
    s = scm.sample(3000, 1)
    assert s.x.shape == (3000, 32) and s.z.shape == (4, 3000, 32)
    assert abs(s.a.mean() - 0.3) < 0.03
    # recompute the structural equations by hand
    i = 5
    z = s.z_root[i]
    for step in (2, 1, 0):
        z = (scm.M[step] if s.a[i] else scm.N[step]) @ z + s.xi[step, i]
        np.testing.assert_allclose(z, s.z[step, i], atol=1e-12)
    np.testing.assert_allclose(scm.M_x @ z + scm.r + s.eps_x[i], s.x[i], atol=1e-12)
    assert np.array_equal(s.y, (s.u_y < s.p_y).astype(int))


def test_f_y_forms_and_weights():
    z = np.random.default_rng(0).standard_normal((50, 32))
    lin = SyntheticSCM("linear", seed=1)
    np.testing.assert_allclose(lin.f_y(z), z @ lin.w_y + lin.b_y)
    inter = SyntheticSCM("interactive", seed=1)
    assert np.all(np.diag(inter.w_y) == 0)
    np.testing.assert_allclose(inter.f_y(z[:2])[0], sum(inter.w_y[i, j] * z[0, i] * z[0, j]
                                                      for i in range(32) for j in range(32) if i != j)
                               + inter.b_y)
    quad = SyntheticSCM("quadratic", seed=1)
    assert quad.w_y.std() > 1.4  # ω ~ N(0, 4 I)
    assert 15 < quad.b_y < 25 and 5 < SyntheticSCM("exponential", seed=1).b_y < 15
    le = SyntheticSCM("log-exponent", seed=1)
    np.testing.assert_allclose(le.f_y(z), np.log(np.exp(z @ le.w_y) + le.b_y))
    sn = SyntheticSCM("sin", seed=1)
    np.testing.assert_allclose(sn.f_y(z), np.sin(z) @ sn.w_y + sn.b_y)


def test_deterministic_and_distinct_per_dataset():
    a, b = SyntheticSCM("sin", seed=2), SyntheticSCM("sin", seed=2)
    assert np.array_equal(a.M, b.M) and np.array_equal(a.sample(100, 4).x, b.sample(100, 4).x)
    assert not np.array_equal(a.M, SyntheticSCM("linear", seed=2).M)
    assert not np.array_equal(a.M, SyntheticSCM("sin", seed=3).M)
    with pytest.raises(DataError, match="Unknown synthetic dataset"):
        SyntheticSCM("cubic")


@pytest.mark.parametrize("delta", [0.0, 0.25])
@pytest.mark.parametrize("hold_root", [True, False])
def test_counterfactuals_are_exact(delta, hold_root):
    scm = SyntheticSCM("linear", seed=0, delta=delta)
    s = scm.sample(500, 7)
    cf = scm.counterfactual(s, hold_root=hold_root)
    back = scm.counterfactual(cf, hold_root=hold_root)
    assert np.array_equal(cf.a, 1 - s.a)
    assert np.array_equal(back.x, s.x) and np.array_equal(back.z, s.z) and np.array_equal(back.a, s.a)
    assert np.array_equal(cf.xi, s.xi) and np.array_equal(cf.eps_x, s.eps_x) and np.array_equal(cf.u_y, s.u_y)
    assert np.all(np.abs(cf.x - s.x).max(axis=1) > 0)  # flipping A changes every unit's X
    if hold_root or not delta:
        assert np.array_equal(cf.z_root, s.z_root) and np.array_equal(cf.y, s.y)
    else:  # total effect: the root moves with A
        np.testing.assert_allclose(cf.z_root - s.z_root, np.broadcast_to(delta * (cf.a - s.a)[:, None], s.z_root.shape))
    same = scm.counterfactual(s, a_new=s.a)  # do(A = observed a) changes nothing
    assert np.array_equal(same.x, s.x)


def test_confounded_variant_associates_a_with_the_root():
    scm = SyntheticSCM("linear", seed=0, delta=0.25)
    s = scm.sample(20000, 1)
    shift = s.z_root[s.a == 1].mean(axis=0) - s.z_root[s.a == 0].mean(axis=0)
    assert abs(shift.mean() - 0.25) < 0.02
    # the propensity formula matches the empirical share of A = 1 in bins of Σ z
    m = scm.propensity(s.z_root)
    bins = np.quantile(m, [0.2, 0.8])
    for sel in (m < bins[0], m > bins[1]):
        assert abs(s.a[sel].mean() - m[sel].mean()) < 0.03
    assert np.all(SyntheticSCM("linear", seed=0).propensity(s.z_root) == 0.3)


@pytest.mark.parametrize("delta", [0.0, 0.25])
def test_oracles_have_eca_one(delta):
    scm = SyntheticSCM("sin", seed=0, delta=delta)
    train, s = scm.sample(800, 1), scm.sample(2000, 2)
    cf = scm.counterfactual(s)
    assert expected_counterfactual_accuracy(scm.bayes_predict(s.z_root), scm.bayes_predict(cf.z_root)) == 1.0
    oracle = bench.make_classifier("random_forest", 0).fit(train.z_root, train.y)
    assert expected_counterfactual_accuracy(oracle.predict(s.z_root), oracle.predict(cf.z_root)) == 1.0
    on_x = bench.make_classifier("logistic", 0).fit(train.x, train.y)  # reads X: depends on A
    assert expected_counterfactual_accuracy(on_x.predict(s.x), on_x.predict(cf.x)) < 0.95


def test_eca_definition():
    assert expected_counterfactual_accuracy(np.array([1, 0, 1, 1]), np.array([1, 1, 1, 0])) == 0.5
    with pytest.raises(DataError):
        expected_counterfactual_accuracy(np.array([1, 0]), np.array([1]))


def test_table_1_model_types():
    assert len(bench.MODEL_TYPES) == 10
    for kind in bench.MODEL_TYPES:
        assert hasattr(bench.make_classifier(kind, 3), "fit")
    with pytest.raises(DataError):
        bench.make_classifier("knn", 0)


# ----------------------------------------------------------------------------------------------------------------
# The benchmark


# contract only: no statistics checked (logistic nuisances: the default's boosted candidates cost 40 of the 60 s;
# the default's statistics are checked in test_cit.py and test_cit_scm_guard.py)
SMALL = dict(n_train=400, n_audit=400, n_eca=400, gap_units=60, gap_reps=8, regressor="logistic")


def test_benchmark_small_run_contract(tmp_path):
    cfg = bench.BenchmarkConfig(datasets=("linear",), n_classifiers=3, model_types=("logistic", "tree_depth5"),
                                oracle_types=("bayes", "logistic"), n_confounded_classifiers=1, **SMALL)
    seen = []
    res = bench.run_cit_benchmark(cfg, progress=lambda f, m: seen.append(f))
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)
    d = json.loads(res.to_json())
    assert len(d["classifiers"]) == 3 + 2 + 1 + 2
    rec = d["classifiers"][0]
    for key in ("eca", "cit_p", "wgcm_p", "dp_p", "eo_p", "cit_cf_p", "gcm_p", "rms_gap", "model_type", "seed"):
        assert key in rec
    assert [r["model_type"] for r in d["classifiers"][:3]] == ["logistic", "tree_depth5", "logistic"]
    assert [r["seed"] for r in d["classifiers"][:3]] == [0, 0, 1]
    summ = {(s["dataset"], s["variant"]): s for s in d["summary"]}
    assert set(summ) == {("linear", "paper"), ("linear", "confounded"), ("all", "paper"), ("all", "confounded")}
    assert set(summ[("linear", "paper")]["spearman_eca"]) == set(bench.TESTS)
    assert all(r["eca"] == 1.0 for r in d["classifiers"] if r["role"] == "oracle")
    assert d["provenance"]["seed"] == 0 and d["default_test"] == "wgcm_p"
    png = res.plot(tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 10_000 and png.endswith("fig.png")
    # deterministic from the seed (checked on the first classifier and oracle only: a second full run would double
    # the test's time)
    part = bench.BenchmarkConfig(datasets=("linear",), n_classifiers=1, model_types=("logistic",),
                                 oracle_types=("bayes",), confounded=False, **SMALL)
    again = bench.run_cit_benchmark(part).records
    first = [res.records[0], next(r for r in res.records if r["role"] == "oracle")]
    assert [(r["model_type"], r["seed"]) for r in again] == [(r["model_type"], r["seed"]) for r in first]
    for key in ("wgcm_p", "cit_p", "eca"):
        assert [r[key] for r in again] == [r[key] for r in first]


def test_benchmark_cancel_and_bad_config():
    token = CancelToken()
    calls = []

    def progress(f, m):
        calls.append(m)
        if len(calls) == 2:
            token.cancel()

    cfg = bench.BenchmarkConfig(datasets=("sin",), n_classifiers=4, model_types=("logistic",),
                                oracle_types=("bayes",), confounded=False, **SMALL)
    with pytest.raises(Cancelled):
        bench.run_cit_benchmark(cfg, progress, token)
    assert len(calls) == 2  # stopped before the third classifier
    with pytest.raises(DataError, match="Unknown synthetic dataset"):
        bench.BenchmarkConfig(datasets=("cubic",))
    with pytest.raises(DataError, match="Unknown model type"):
        bench.BenchmarkConfig(model_types=("knn",))


def _skip_unchecked_tests(monkeypatch):
    """Only the default test (weighted GCM), DP and ECA are checked below: the other p-values (CIT-LR split,
    CIT-LR cross-fitted, plain GCM, the weighted GCM's alternatives) are recorded as NaN instead of fitted, which
    takes most of the run's time (the plain GCM alone about as long as the weighted one). Their computation is
    checked by test_benchmark_small_run_contract and tests/core/test_cit.py; the full study computes all of them."""
    nan = cit.CITResult("skipped", float("nan"), float("nan"), 0, float("nan"), "two-sided", "none", 0)
    real_gcm = cit.gcm_test
    monkeypatch.setattr(cit, "gcm_test", lambda yhat, a, z, weighted=True, regressor=cit.DEFAULT_REGRESSOR, **kw:
                        real_gcm(yhat, a, z, weighted, regressor, **kw)
                        if weighted and regressor == cit.DEFAULT_REGRESSOR and "weight" not in kw else nan)
    monkeypatch.setattr(cit, "cit_test", lambda *args, **kwargs: nan)
    monkeypatch.setattr(cit, "cit_lr_test", lambda *args, **kwargs: nan)


@pytest.mark.full  # make test-full (≈ 100 s CPU); CI runs test_cit_scm_guard.py's linear seed-3 guard
def test_what_must_hold_on_the_scm(monkeypatch):
    """Small fixed-seed version of the study (the full one is benchmarks/bench_cit_synthetic.py):
    the default test flags most classifiers with ECA well below 1, rarely flags oracles (ECA = 1), and on the
    confounded variant passes the oracles that DP fails."""
    _skip_unchecked_tests(monkeypatch)
    cfg = bench.BenchmarkConfig(datasets=("linear", "sin"), n_classifiers=8,
                                model_types=("logistic", "tree_depth5", "random_forest", "linear_svc"),
                                oracle_types=("bayes", "logistic", "tree_depth5", "random_forest", "linear_svc"),
                                n_confounded_classifiers=0, n_train=800, n_audit=2000, n_eca=1500, gap_units=60,
                                gap_reps=8)
    res = bench.run_cit_benchmark(cfg)
    recs = res.records
    low = [r for r in recs if r["role"] == "base" and r["variant"] == "paper" and r["eca"] < 0.8]
    assert len(low) >= 8
    assert np.mean([r["wgcm_p"] < 0.05 for r in low]) >= 0.75
    paper_oracles = [r for r in recs if r["role"] == "oracle" and r["variant"] == "paper"]
    conf_oracles = [r for r in recs if r["role"] == "oracle" and r["variant"] == "confounded"]
    assert all(r["eca"] == 1.0 for r in paper_oracles + conf_oracles)
    fpr = np.mean([r["wgcm_p"] < 0.05 for r in paper_oracles + conf_oracles])
    assert fpr <= 0.15  # 20 oracles: at most 3 rejections at α = 0.05
    dp_conf = np.mean([r["dp_p"] < 0.05 for r in conf_oracles])
    wgcm_conf = np.mean([r["wgcm_p"] < 0.05 for r in conf_oracles])
    assert dp_conf >= 0.8 and wgcm_conf <= 0.2 and dp_conf > wgcm_conf
