"""Baseline tabular models: patient-disjoint splits, the four model kinds, long-format output, determinism,
cancellation and the error messages for unusable inputs."""
from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

from fairdesk.core.errors import ModelError
from fairdesk.core.models import (
    DEFAULT_PARAMS,
    MODEL_KINDS,
    MODEL_LABELS,
    TrainSpec,
    patient_disjoint_split,
    train_and_predict,
)
from fairdesk.core.progress import CancelToken, Cancelled

torch.set_num_threads(1)

FEATURES = ["x1", "x2", "x3", "x4", "x5"]
FAST_PARAMS = {
    "logistic_regression": {},
    "gradient_boosting": {"max_iter": 60},
    "random_forest": {"n_estimators": 60},
    "mlp": {"max_epochs": 40, "patience": 5},
}


def make_problem(n_patients: int = 700, seed: int = 0) -> pd.DataFrame:
    """A small problem with repeated patients, two tasks with planted signal and a passthrough attribute."""
    rng = np.random.default_rng(seed)
    stays = rng.choice([1, 2, 3], size=n_patients, p=[0.7, 0.2, 0.1])
    pid = np.repeat([f"p{i:04d}" for i in range(n_patients)], stays)
    n = len(pid)
    X = rng.normal(size=(n, len(FEATURES)))
    df = pd.DataFrame(X, columns=FEATURES)
    df.insert(0, "stay_id", [f"s{i:05d}" for i in range(n)])
    df.insert(1, "pid", pid)
    df["group"] = rng.choice(["A", "B"], size=n)
    logit_a = 2.0 * X[:, 0] - 1.5 * X[:, 1] + 1.0 * X[:, 0] * (X[:, 2] > 0) - 0.5
    logit_b = 2.0 * X[:, 3] + 1.0 * X[:, 4] + 0.8 * X[:, 4] ** 2 - 2.0
    df["y_a"] = (rng.random(n) < 1 / (1 + np.exp(-logit_a))).astype(int)
    df["y_b"] = (rng.random(n) < 1 / (1 + np.exp(-logit_b))).astype(int)
    return df


def spec_for(kind: str, **kw) -> TrainSpec:
    base = dict(kind=kind, features=list(FEATURES), tasks={"a": "y_a", "b": "y_b"}, patient_id="pid",
                id_columns=["stay_id"], passthrough=["group"], seed=0, params=dict(FAST_PARAMS[kind]))
    base.update(kw)
    return TrainSpec(**base)


@pytest.fixture(scope="module")
def problem() -> pd.DataFrame:
    return make_problem()


# ---------------------------------------------------------------------------------------------------------------
# splits


def test_split_is_patient_disjoint_with_requested_proportions():
    df = make_problem(n_patients=2500, seed=3)
    split = patient_disjoint_split(df, "pid", val_size=0.15, test_size=0.25, seed=7)
    assert list(split.index) == list(df.index)
    assert set(split.unique()) == {"train", "val", "test"}
    per_patient = df.assign(split=split).groupby("pid")["split"].nunique()
    assert per_patient.max() == 1, "a patient appears in two splits"
    shares = split.value_counts(normalize=True)
    assert shares["test"] == pytest.approx(0.25, abs=0.02)
    assert shares["val"] == pytest.approx(0.15, abs=0.02)
    assert shares["train"] == pytest.approx(0.60, abs=0.02)


def test_split_depends_on_patients_not_row_order_and_on_seed():
    df = make_problem(n_patients=600, seed=4)
    a = patient_disjoint_split(df, "pid", seed=1)
    shuffled = df.sample(frac=1.0, random_state=0)
    b = patient_disjoint_split(shuffled, "pid", seed=1)
    pd.testing.assert_series_equal(a, b.loc[a.index])
    c = patient_disjoint_split(df, "pid", seed=2)
    assert (a != c).mean() > 0.2


def test_split_without_patient_id_uses_rows():
    df = make_problem(n_patients=1000, seed=5)
    split = patient_disjoint_split(df, None, val_size=0.1, test_size=0.3, seed=0)
    shares = split.value_counts(normalize=True)
    assert shares["test"] == pytest.approx(0.3, abs=0.01)
    assert shares["val"] == pytest.approx(0.1, abs=0.01)


def test_split_rejects_bad_shares_and_missing_patient_ids():
    df = make_problem(n_patients=50)
    with pytest.raises(ModelError, match="shares"):
        patient_disjoint_split(df, "pid", val_size=0.5, test_size=0.5)
    bad = df.copy()
    bad.loc[3, "pid"] = None
    with pytest.raises(ModelError, match=r"'pid' is empty in 1 row"):
        patient_disjoint_split(bad, "pid")


# ---------------------------------------------------------------------------------------------------------------
# the four model kinds


def test_model_kinds_have_labels_and_defaults():
    assert MODEL_KINDS == ("logistic_regression", "gradient_boosting", "random_forest", "mlp")
    assert set(MODEL_LABELS) == set(MODEL_KINDS) == set(DEFAULT_PARAMS)


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_each_kind_learns_the_signal_and_writes_long_format(problem, kind):
    seen: list[float] = []
    res = train_and_predict(problem, spec_for(kind), progress=lambda f, m: seen.append(f))
    pred = res.predictions
    assert list(pred.columns) == ["stay_id", "pid", "group", "task", "label", "score", "split"]
    assert len(pred) == 2 * len(problem)
    assert set(pred["task"]) == {"a", "b"}
    assert pred["label"].dtype == np.int64 and set(pred["label"].unique()) <= {0, 1}
    assert pred["score"].between(0.0, 1.0).all() and np.isfinite(pred["score"]).all()
    assert pred["score"].nunique() > 50  # real probabilities, not hard labels
    # labels and passthrough columns line up with the input rows
    a = pred[pred.task == "a"].set_index("stay_id")
    src = problem.set_index("stay_id")
    assert (a["label"] == src.loc[a.index, "y_a"]).all()
    assert (a["group"] == src.loc[a.index, "group"]).all()
    assert (a["pid"] == src.loc[a.index, "pid"]).all()
    assert pred.groupby("pid")["split"].nunique().max() == 1
    # learned the planted signal
    m = res.metrics.set_index("task")
    assert m.loc["a", "test_auroc"] > 0.75, m
    assert m.loc["b", "test_auroc"] > 0.75, m
    assert {"val_auroc", "val_auprc", "test_auprc", "prevalence_test", "n_test"} <= set(m.columns)
    # provenance
    assert set(res.model_hashes) == {"a", "b"}
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in res.model_hashes.values())
    assert res.model_hashes["a"] != res.model_hashes["b"]
    assert res.kind == kind and res.seed == 0 and res.device == "cpu"
    assert res.params == {**DEFAULT_PARAMS[kind], **FAST_PARAMS[kind]}
    prov = res.provenance()
    assert prov["model_hashes"] == res.model_hashes and prov["features"] == FEATURES
    # progress: monotone, ends at 1
    assert seen and seen[-1] == pytest.approx(1.0)
    assert all(b >= a - 1e-12 for a, b in zip(seen, seen[1:]))


def test_tasks_default_to_y_columns_and_rows_without_label_are_left_out(problem):
    df = problem.copy()
    df["y_b"] = df["y_b"].astype(float)
    df.loc[df.index[:30], "y_b"] = np.nan
    res = train_and_predict(df, spec_for("logistic_regression", tasks=None, id_columns=[], passthrough=[]))
    assert res.tasks == {"a": "y_a", "b": "y_b"}
    counts = res.predictions["task"].value_counts()
    assert counts["a"] == len(df) and counts["b"] == len(df) - 30
    assert any("30 row(s) without a label" in n for n in res.notes)
    assert list(res.predictions.columns) == ["pid", "task", "label", "score", "split"]


# ---------------------------------------------------------------------------------------------------------------
# determinism


@pytest.mark.parametrize("kind", ["logistic_regression", "gradient_boosting", "random_forest", "mlp"])
def test_training_is_deterministic_given_the_seed(problem, kind):
    small = {"gradient_boosting": {"max_iter": 30}, "random_forest": {"n_estimators": 20},
             "mlp": {"max_epochs": 8, "patience": 3}}.get(kind, {})
    r1 = train_and_predict(problem, spec_for(kind, params=small))
    r2 = train_and_predict(problem, spec_for(kind, params=small))
    pd.testing.assert_frame_equal(r1.predictions, r2.predictions)
    assert r1.model_hashes == r2.model_hashes
    r3 = train_and_predict(problem, spec_for(kind, params=small, seed=1))
    assert r3.model_hashes != r1.model_hashes
    assert (r3.predictions["split"] != r1.predictions["split"]).any()


@pytest.mark.parametrize("kind", ["gradient_boosting", "random_forest"])
def test_chunked_ensembles_do_not_depend_on_chunk_sizes(problem, kind, monkeypatch):
    """Trees / rounds are fitted in timing-dependent chunks (for cancel); the model must not depend on them."""
    import fairdesk.core.models.tabular as tabular

    small = {"gradient_boosting": {"max_iter": 40}, "random_forest": {"n_estimators": 30}}[kind]
    r1 = train_and_predict(problem, spec_for(kind, params=small))
    monkeypatch.setattr(tabular, "_FIRST_CHUNK", 3)
    monkeypatch.setattr(tabular, "_CHUNK_SECONDS", 1e-6)  # then one tree / round per chunk
    r2 = train_and_predict(problem, spec_for(kind, params=small))
    assert r1.model_hashes == r2.model_hashes
    np.testing.assert_array_equal(r1.predictions["score"], r2.predictions["score"])


# ---------------------------------------------------------------------------------------------------------------
# cancellation


@pytest.mark.parametrize("kind,params", [
    ("mlp", {"max_epochs": 500, "patience": 500}),
    ("random_forest", {"n_estimators": 400}),
    ("gradient_boosting", {"max_iter": 400}),
])
def test_cancel_from_progress_callback_stops_quickly(problem, kind, params):
    token = CancelToken()
    state: dict[str, float] = {}

    def progress(fraction: float, message: str) -> None:
        if fraction > 0.1 and "cancelled_at" not in state:
            state["cancelled_at"] = time.perf_counter()
            token.cancel()

    with pytest.raises(Cancelled):
        train_and_predict(problem, spec_for(kind, params=params), progress=progress, cancel=token)
    assert "cancelled_at" in state
    assert time.perf_counter() - state["cancelled_at"] < 1.0
    assert torch.get_num_threads() == 1  # the MLP restores the thread setting


def test_already_cancelled_token_raises_before_any_work(problem):
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        train_and_predict(problem, spec_for("logistic_regression"), cancel=token)


# ---------------------------------------------------------------------------------------------------------------
# unusable inputs: the message names the problem and says how to fix it


def test_missing_feature_and_label_columns_are_named(problem):
    with pytest.raises(ModelError) as err:
        train_and_predict(problem, spec_for("logistic_regression", features=FEATURES + ["x9"],
                                            tasks={"a": "y_a", "c": "y_c"}))
    msg = str(err.value)
    assert "feature 'x9'" in msg and "label 'y_c'" in msg and "not in the table" in msg


def test_non_numeric_features_are_named(problem):
    df = problem.copy()
    df["x2"] = df["x2"].map(lambda v: f"{v:.2f}")
    df["ward"] = "ICU"
    with pytest.raises(ModelError) as err:
        train_and_predict(df, spec_for("logistic_regression", features=FEATURES + ["ward"]))
    msg = str(err.value)
    assert "not numeric" in msg and "x2" in msg and "ward" in msg and "x1" not in msg


def test_nan_in_features_names_columns_and_fix(problem):
    df = problem.copy()
    df.loc[df.index[:4], "x3"] = np.nan
    df.loc[df.index[10], "x5"] = np.nan
    with pytest.raises(ModelError) as err:
        train_and_predict(df, spec_for("logistic_regression"))
    msg = str(err.value)
    assert "x3 (4 rows)" in msg and "x5 (1 row)" in msg
    assert "Impute" in msg and "drop those rows" in msg


def test_single_class_task_in_training_split(problem):
    df = problem.copy()
    df["y_b"] = 0
    with pytest.raises(ModelError) as err:
        train_and_predict(df, spec_for("logistic_regression"))
    msg = str(err.value)
    assert "task 'b'" in msg and "label 0" in msg and "one class" in msg


def test_too_few_rows(problem):
    with pytest.raises(ModelError, match="only 12 row"):
        train_and_predict(problem.head(12), spec_for("logistic_regression"))
    tiny = problem.head(25).copy()
    tiny["pid"] = "same patient"  # one patient: no disjoint split possible
    with pytest.raises(ModelError, match="Too few patients"):
        train_and_predict(tiny, spec_for("logistic_regression"))


def test_labels_must_be_zero_one_and_not_features(problem):
    df = problem.copy()
    df["y_a"] = df["y_a"] * 2
    with pytest.raises(ModelError, match="only 0 and 1"):
        train_and_predict(df, spec_for("logistic_regression"))
    with pytest.raises(ModelError, match="see the answer"):
        train_and_predict(problem, spec_for("logistic_regression", features=FEATURES + ["y_a"]))


def test_unknown_kind_and_settings(problem):
    with pytest.raises(ModelError, match="Unknown model kind 'svm'"):
        train_and_predict(problem, TrainSpec(kind="svm", features=FEATURES))
    with pytest.raises(ModelError, match="n_layers"):
        train_and_predict(problem, spec_for("mlp", params={"n_layers": 3}))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_requesting_a_missing_gpu_is_explained(problem):
    with pytest.raises(ModelError, match="no(ne)? .*available"):
        train_and_predict(problem, spec_for("mlp", device="cuda"))
    res = train_and_predict(problem, spec_for("mlp", device="auto", params={"max_epochs": 2}))
    assert res.device == "cpu"


def test_importing_models_and_demo_stays_light():
    code = ("import sys, fairdesk.core.models, fairdesk.core.demo; "
            "print(sorted(m for m in ('torch', 'sklearn', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
