"""Issue 27: λ is chosen from validation pooled over every inner participant-disjoint split (nested participant-grouped
cross-validation), not from one quarter of the training participants. No torch: the learner is simulated (each fit
draws how much age its representation keeps, as a trained network does), and the probe is the ridge probe only, so
the simulation runs in seconds."""
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits import age_independence as ap
from fairdesk.core.progress import Reporter

#: Simulated learner, per λ: (error rate of its predictions, scale of the age a fit leaves in z; each fit draws its
#: own share, as the networks' training seeds do).
LEARNER = {0.3: (0.25, 0.20), 1.0: (0.30, 0.20), 3.0: (0.45, 0.0)}


def _cohort(rng, n_participants: int = 120, dim: int = 6):
    """Rows of participants with 1–3 sessions; the label does not depend on age. X holds what the simulated learner
    reads: standardised age, the label, a uniform draw per row (which rows it gets wrong), and the participant's
    identity vector plus session noise (which every representation carries)."""
    sessions = rng.integers(1, 4, n_participants)
    pid = np.repeat(np.arange(n_participants), sessions)
    age = rng.normal(68, 9, n_participants)[pid] + np.concatenate([np.arange(k) for k in sessions])
    y = rng.integers(0, 2, n_participants)[pid]
    identity = rng.standard_normal((n_participants, dim))[pid] + rng.normal(0, 0.3, (len(pid), dim))
    X = np.column_stack([(age - 68) / 9, y, rng.uniform(size=len(pid)), identity])
    return X, y, age, pid


def _fake_fit(fits: list):
    """A stand-in for ``fit_method``: each fit draws, from its seed, the share of age its representation keeps."""

    def fit(method, X, y, age, learner, seed=0, progress=None, cancel=None):
        err, scale = LEARNER[learner.lam]
        rng = np.random.default_rng(seed)
        beta = scale * abs(rng.standard_normal())
        w = rng.standard_normal(X.shape[1] - 3)
        w /= np.linalg.norm(w)
        fits.append({"lam": learner.lam, "rows": len(X), "seed": seed, "rows_sum": round(float(X[:, 2].sum()), 9)})
        return SimpleNamespace(
            predict_proba=lambda Z: np.where(Z[:, 2] > err, Z[:, 1], 1 - Z[:, 1]).astype(float),
            represent=lambda Z: Z[:, 3:] + beta * Z[:, :1] * w)

    return fit


def _ridge_only(seed):
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {"ridge": make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))}


@pytest.fixture
def simulated(monkeypatch):
    fits = []
    monkeypatch.setattr(ap, "fit_method", _fake_fit(fits))
    monkeypatch.setattr(ap, "_probes", _ridge_only)
    return fits


def _select(seed: int, n_participants: int = 40):
    X, y, age, pid = _cohort(np.random.default_rng(seed), n_participants)
    settings = ap.AgeProtocolSettings(methods=("dnn", "simple"), lambda_grid=tuple(LEARNER), reference=False)
    return ap.select_lambda("simple", X, y, age, pid, settings, seed, Reporter()), (X, y, age, pid)


def test_every_training_participant_validates_every_lambda(simulated):
    """Each λ is fitted once per inner split and every training participant is in exactly one validation split, so
    the accuracy and the probe's R² each λ is judged by are pooled over all training rows (before: one split of a
    quarter of them)."""
    choice, (X, y, age, pid) = _select(0)
    assert choice["validation_rows"] == len(y) and choice["validation_participants"] == len(pd.unique(pid))
    assert choice["inner_folds"] == ap.SELECTION_FOLDS
    assert len(simulated) == ap.SELECTION_FOLDS * len(LEARNER)
    for lam in LEARNER:  # the inner training sets are the complements of a partition of the rows
        rows = [f["rows"] for f in simulated if f["lam"] == lam]
        assert sum(len(y) - r for r in rows) == len(y)
    by_lam = {p["lambda"]: p for p in choice["points"]}
    for lam, (err, _) in LEARNER.items():  # pooled accuracy = the share of all training rows the learner gets right
        assert by_lam[lam]["accuracy"] == pytest.approx(np.mean(X[:, 2] > err))


def test_every_lambda_is_judged_on_common_random_numbers(simulated):
    """Issue 27, round 5: inner fold j is fitted with the same seed at every λ (and each fold with its own), so the λ
    of the grid differ only by λ, not by which initial weights and minibatch orders they drew. Before, inner fold 0
    kept the seeds of the one-split selection it replaced, which differed per λ."""
    _select(0)
    by_fold: dict = {}
    for f in simulated:  # an inner fold is known by its training rows
        by_fold.setdefault((f["rows"], f["rows_sum"]), {})[f["lam"]] = f["seed"]
    assert len(by_fold) == ap.SELECTION_FOLDS
    for seeds in by_fold.values():
        assert set(seeds) == set(LEARNER) and len(set(seeds.values())) == 1, seeds
    assert len({next(iter(v.values())) for v in by_fold.values()}) == ap.SELECTION_FOLDS


def test_the_protocol_chooses_lambda_from_every_training_participant():
    """The default path with the real (tiny) learner: in every outer fold the λ choice was validated on all of that
    fold's training rows and participants, through every inner fold (a revert to one quarter fails here)."""
    torch = pytest.importorskip("torch")
    from fairdesk.core.models.age_independent import LearnerSettings
    from fairdesk.core.reports.age_independence import build_age_report
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    torch.set_num_threads(1)
    table = make_age_cohort(n_participants=30, n_features=12, seed=2)
    settings = ap.AgeProtocolSettings(methods=("dnn", "simple"), folds=3, seed=5, reference=False,
                                      lambda_grid=(0.3, 1.0), learner=LearnerSettings(
                                          z_dim=3, hidden=(8,), head_hidden=4, epochs=3, batch_size=16, device="cpu"))
    doc = ap.run_age_independence(table, "label", "age", "participant_id", settings=settings).document
    splits = ap.group_folds(table["participant_id"], table["label"], 3, 1, 5)
    chosen = doc["methods"]["simple"]["lambda_selection"]["folds"]
    assert len(chosen) == 3
    for c, sp in zip(chosen, splits):
        assert c["validation_rows"] == len(sp.train) and c["inner_folds"] == ap.SELECTION_FOLDS
        assert c["validation_participants"] == table["participant_id"].iloc[sp.train].nunique()
        assert [p["lambda"] for p in c["points"]] == [0.3, 1.0] and c["lambda"] in (0.3, 1.0)
    methods = " ".join(b.text for b in build_age_report(doc).section("methods").blocks if hasattr(b, "text"))
    assert "by nested participant-grouped cross-validation (every training participant validates once)" in methods


#: Simulated bodies (issue 27, round 10), per (dnn_body, λ): (error rate, age scale). The learner's own layers keep
#: age at every λ but the largest, where they lose accuracy; the DNN's layers shed it at λ = 0.3 at little cost.
BODIES_HARD = {(False, 0.3): (0.25, 0.8), (False, 1.0): (0.30, 0.8), (False, 3.0): (0.45, 0.0),
               (True, 0.3): (0.27, 0.0), (True, 1.0): (0.30, 0.0), (True, 3.0): (0.45, 0.0)}
#: ... and a cohort where the own layers reach the target as cheaply as the DNN's.
BODIES_EASY = {(False, 0.3): (0.25, 0.0), (False, 1.0): (0.30, 0.0), (False, 3.0): (0.45, 0.0),
               (True, 0.3): (0.25, 0.0), (True, 1.0): (0.30, 0.0), (True, 3.0): (0.45, 0.0)}


def _fake_body_fit(fits: list, table: dict):
    """``fit_method`` stand-in whose error and age depend on the body and λ (no draw: the age it keeps is fixed)."""

    def fit(method, X, y, age, learner, seed=0, progress=None, cancel=None):
        err, scale = table[(bool(learner.dnn_body), learner.lam)]
        w = np.random.default_rng(0).standard_normal(X.shape[1] - 3)
        w /= np.linalg.norm(w)
        fits.append({"body": bool(learner.dnn_body), "lam": learner.lam, "seed": seed,
                     "rows": (len(X), round(float(X[:, 2].sum()), 9))})
        return SimpleNamespace(
            predict_proba=lambda Z: np.where(Z[:, 2] > err, Z[:, 1], 1 - Z[:, 1]).astype(float),
            represent=lambda Z: Z[:, 3:] + scale * Z[:, :1] * w)

    return fit


@pytest.mark.parametrize("table, body", [(BODIES_HARD, True), (BODIES_EASY, False)])
def test_the_body_is_chosen_by_the_same_validation(monkeypatch, table, body):
    """With ``select_body`` every (body, λ) is validated on the same inner folds with the same seeds and the same
    rule picks: the DNN's layers where the learner's own cannot reach the target cheaply (their λ = 3 costs 20
    points), its own layers where they reach it as cheaply; without ``select_body`` only ``learner.dnn_body`` is
    validated (λ alone, as before; the DNN's layers by default since round 12)."""
    fits = []
    monkeypatch.setattr(ap, "fit_method", _fake_body_fit(fits, table))
    monkeypatch.setattr(ap, "_probes", _ridge_only)
    X, y, age, pid = _cohort(np.random.default_rng(0), 60)
    settings = ap.AgeProtocolSettings(methods=("dnn", "simple"), lambda_grid=(0.3, 1.0, 3.0), reference=False,
                                      select_body=True)
    choice = ap.select_lambda("simple", X, y, age, pid, settings, 7, Reporter())
    assert choice["reached"] and choice["dnn_body"] is body and choice["lambda"] == 0.3
    assert choice["body"] == ("dnn" if body else "own")
    assert [(p["dnn_body"], p["lambda"]) for p in choice["points"]] == list(table)
    assert ap.choose_point(choice["points"], settings.leakage_target, choice["validation_rows"])[0]["dnn_body"] is body
    seeds = {}
    for f in fits:  # inner fold j: one seed for every (body, λ)
        seeds.setdefault(f["rows"], set()).add(f["seed"])
    assert len(fits) == 6 * ap.SELECTION_FOLDS and len(seeds) == ap.SELECTION_FOLDS
    assert all(len(s) == 1 for s in seeds.values())
    from fairdesk.core.models.age_independent import LearnerSettings

    for fixed in (False, True):  # without select_body: the learner's own body only (the DNN's layers by default)
        fits.clear()
        kept = ap.select_lambda("simple", X, y, age, pid, replace(
            settings, select_body=False, learner=LearnerSettings(dnn_body=fixed)), 7, Reporter())
        assert {f["body"] for f in fits} == {fixed} and len(fits) == 3 * ap.SELECTION_FOLDS
        assert kept["dnn_body"] is fixed and kept["lambda"] == (3.0 if body and not fixed else 0.3)
    assert LearnerSettings().dnn_body is True


def test_with_the_body_chosen_the_document_records_it_and_the_fit_uses_it():
    """The protocol with ``select_body`` (tiny real learner, fixed seeds): each fold records the body and λ that
    :func:`choose_point` takes from its recorded validation points, the words name them, and a fold that took the
    DNN's layers was fitted with them and the DNN's seed (refitting so reproduces its held-out scores); on this
    tiny cohort (one λ, so the choice is the body's) the DNN's layers are taken in 1 of 3 folds (fold 3)."""
    torch = pytest.importorskip("torch")
    from fairdesk.core.models.age_independent import LearnerSettings
    from fairdesk.core.reports.age_independence import age_left_words, build_age_report
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    torch.set_num_threads(1)
    table = make_age_cohort(n_participants=30, n_features=12, seed=2)
    settings = ap.AgeProtocolSettings(methods=("dnn", "simple"), folds=3, seed=5, reference=False,
                                      lambda_grid=(0.3,), select_body=True, learner=LearnerSettings(
                                          z_dim=3, hidden=(8,), head_hidden=4, epochs=3, batch_size=16, device="cpu"))
    res = ap.run_age_independence(table, "label", "age", "participant_id", settings=settings)
    sel = res.document["methods"]["simple"]["lambda_selection"]
    assert sel["bodies"] == ["own", "dnn"] and sel["dnn_body_in_folds"] == 1
    for c in sel["folds"]:
        assert [(p["dnn_body"], p["lambda"]) for p in c["points"]] == [(False, 0.3), (True, 0.3)]
        point, reached = ap.choose_point(c["points"], 0.05, c["validation_rows"])
        assert (c["dnn_body"], c["lambda"], c["reached"]) == (point["dnn_body"], point["lambda"], reached)
        assert c["body"] == ("dnn" if c["dnn_body"] else "own")
    assert [c["body"] for c in sel["folds"]] == ["own", "own", "dnn"]
    words = age_left_words(res.document, "simple")
    assert "λ and body chosen per fold: 0.3 (own layers), 0.3 (own layers), 0.3 (DNN's layers); the DNN's layers " \
           "in 1 of 3 folds" in words
    methods = " ".join(b.text for b in build_age_report(res.document).section("methods").blocks
                       if hasattr(b, "text"))
    assert "the learner's body chosen the same way from its own layers and the DNN's" in methods
    # the fold that took the DNN's layers: refit them with the DNN's seed → the recorded held-out scores
    data = ap._prepare(table, "label", "age", "participant_id", None)
    sp = ap.group_folds(data["groups"], data["y"], 3, 1, 5)[2]
    c = sel["folds"][2]
    fitted = ap.fit_method("simple", data["X"][sp.train], data["y"][sp.train], data["age"][sp.train],
                           replace(settings.learner, lam=c["lambda"], dnn_body=True),
                           seed=ap.fit_seed(settings, sp, "dnn"))
    pred = res.predictions
    got = pred[(pred["method"] == "simple") & (pred["fold"] == 2)].sort_values("row")["score"].to_numpy()
    np.testing.assert_allclose(got, fitted.predict_proba(data["X"][sp.test]), rtol=0, atol=1e-6)
