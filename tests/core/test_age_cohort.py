"""The generated demo cohort for the age-independent learners (METHODS §3): design, seeding, known age signal."""
import numpy as np
import pandas as pd
import pytest

from fairdesk.core.errors import DataError
from fairdesk.core.synthetic.age_cohort import _loadings, make_age_cohort, oracle_age_r2


def _features(df):
    return df.drop(columns=["participant_id", "age", "label"]).to_numpy()


def test_columns_sessions_and_seed():
    df = make_age_cohort(n_participants=60, n_features=30, seed=3)
    assert list(df.columns[:3]) == ["participant_id", "age", "label"]
    assert df.shape[1] == 33 and df.columns[3] == "f000"
    sizes = df.groupby("participant_id").size()
    assert sizes.max() > 1 and sizes.min() >= 1 and sizes.max() <= 4
    assert (df.groupby("participant_id")["label"].nunique() == 1).all()  # diagnosis fixed per participant
    steps = df.groupby("participant_id")["age"].apply(lambda a: np.round(np.diff(a.to_numpy()), 1))
    assert all((s == 1.0).all() for s in steps if len(s))  # sessions one year apart
    pd.testing.assert_frame_equal(df, make_age_cohort(n_participants=60, n_features=30, seed=3))
    assert not make_age_cohort(n_participants=60, n_features=30, seed=4).equals(df)


def test_v_structure_directions_and_known_age_signal():
    """Regressing the features on (standardised age, diagnosis) recovers two directions at the stated cosine, and
    the age signal matches the stated loading; with age_signal = 0 the features carry no age."""
    df = make_age_cohort(n_participants=400, n_features=200, cosine=0.3, seed=1)
    X = _features(df)
    age_z = (df["age"].to_numpy() - 68.0) / 9.0
    D = np.column_stack([np.ones(len(df)), age_z, df["label"].to_numpy() - 0.5])
    coef = np.linalg.lstsq(D, X, rcond=None)[0]
    b_age, b_dx = coef[1], coef[2]
    u_age, u_dx = _loadings(np.random.default_rng(1), 200, 0.3, 0.6)  # the generator's first draw
    assert u_age @ u_dx / 200 == pytest.approx(0.3) and u_age @ u_age == pytest.approx(200)
    assert (u_age != 0).sum() == 120  # 60 % of the features load on age
    assert b_age @ u_age / np.linalg.norm(b_age) / np.sqrt(200) > 0.9  # the data follow those directions
    assert b_dx @ u_dx / np.linalg.norm(b_dx) / np.sqrt(200) > 0.6
    # the projections on the true directions recover the stated strengths (‖u‖ = √d): age 0.15, diagnosis 0.12
    assert b_age @ u_age / np.sqrt(200) == pytest.approx(0.15 * np.sqrt(200), rel=0.1)
    assert b_dx @ u_dx / np.sqrt(200) == pytest.approx(0.12 * np.sqrt(200), rel=0.25)
    older = df.groupby("participant_id").first()
    assert older.loc[older.age > 72, "label"].mean() > older.loc[older.age < 64, "label"].mean() + 0.3

    null = make_age_cohort(n_participants=400, n_features=200, age_signal=0.0, seed=1)
    assert (null[["participant_id", "age", "label"]] == df[["participant_id", "age", "label"]]).all().all()
    coef0 = np.linalg.lstsq(D, _features(null), rcond=None)[0]
    assert abs(coef0[1] @ u_age / np.sqrt(200)) < 0.1 * (b_age @ u_age / np.sqrt(200))
    assert oracle_age_r2(0.0, 200) == 0.0
    assert 0.8 < oracle_age_r2(0.15, 300) < 0.9


def test_bad_settings_are_refused():
    with pytest.raises(DataError):
        make_age_cohort(n_participants=5)
    with pytest.raises(DataError):
        make_age_cohort(cosine=1.0)
    with pytest.raises(DataError):
        make_age_cohort(age_signal=-1)


def test_diagnosis_independent_of_age_on_request():
    """``dx_age_scale=None`` (issue 27's fresh cohort: age and diagnosis independent causes of the features): the
    label carries no age, the features still carry both; the default link is unchanged."""
    from scipy.stats import pointbiserialr

    kw = dict(n_participants=600, n_features=30, seed=7)
    linked, free = make_age_cohort(**kw), make_age_cohort(dx_age_scale=None, **kw)
    first = free.groupby("participant_id").first()
    assert pointbiserialr(first.label, first.age).pvalue > 0.01 and 0.4 < first.label.mean() < 0.6
    first_linked = linked.groupby("participant_id").first()
    assert pointbiserialr(first_linked.label, first_linked.age).statistic > 0.4
    assert (free.age == linked.age).all()  # same people, same ages: only the diagnosis draw's link differs
    X = _features(free)
    age_z = (free["age"].to_numpy() - 68.0) / 9.0
    coef = np.linalg.lstsq(np.column_stack([np.ones(len(free)), age_z, free.label - 0.5]), X, rcond=None)[0]
    assert np.linalg.norm(coef[1]) > 0.5 and np.linalg.norm(coef[2]) > 0.3
    with pytest.raises(DataError):
        make_age_cohort(dx_age_scale=0.0)
