"""Issue 27: λ is chosen from validation pooled over every inner participant-disjoint split (nested participant-grouped
cross-validation), not from one quarter of the training participants. No torch: the learner is simulated (each fit
draws how much age its representation keeps, as a trained network does), and the probe is the ridge probe only, so
the simulation runs in seconds."""
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
