"""Role guessing (fairdesk.core.data.roles): the defaults every front end offers for a table's columns."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from fairdesk.core.data import roles
from fairdesk.core.data.roles import is_binary


def test_guess_roles_of_a_predictions_table():
    rng = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"Patient ID": np.arange(n), "stay_id": np.arange(n) + 100, "Task": "mortality",
                       "y_true": rng.integers(0, 2, n), "risk_prob": rng.random(n), "Sex": rng.choice(["F", "M"], n),
                       "ethnicity_group": rng.choice(["A", "B", "C"], n), "age": rng.uniform(18, 90, n),
                       "fold": rng.choice(["val", "test"], n), "ward": rng.choice(["x", "y"], n)})
    g = roles.guess_roles(df)
    assert (g["label"], g["task"], g["patient_id"], g["sample_id"], g["split"]) == (
        "y_true", "Task", "Patient ID", "stay_id", "fold")
    assert g["score"] == "risk_prob"  # no exact name: a numeric column named like a probability
    assert g["attributes"] == ["Sex", "ethnicity_group"] and g["continuous_attributes"] == ["age"]
    cat, cont = roles.attribute_candidates(df, {"y_true", "risk_prob", "Patient ID", "stay_id"})
    assert "ward" in cat and "Sex" in cat and cont == ["age"]


def test_ids_and_attributes_are_never_outcomes():
    cols = ["patient_id", "f_hr", "f_lactate", "y_mortality", "sex", "age", "insurance", "note_id", "los_days"]
    g = roles.guess_feature_roles(cols)
    assert g["features"] == ["f_hr", "f_lactate"] and g["labels"] == ["y_mortality"]
    assert g["patient_id"] == "patient_id"
    assert g["label_candidates"] == ["y_mortality", "los_days"]
    assert set(g["attributes"]) == {"sex", "age", "insurance"}
    assert roles.not_outcomes(["Path", "disease", "patient_id", "sex", "image_id"]) == {"patient_id", "sex",
                                                                                       "image_id"}


def test_guess_note_roles_uses_names_and_contents():
    sample = pd.DataFrame({"note_id": [0, 1, 0, 1], "subject_id": [1, 2, 3, 4],
                           "body": ["a long enough clinical note text " * 2] * 4, "mortality": [0, 1, 0, 1],
                           "gender": ["F", "M", "F", "M"], "sofa": [3.0, 5.0, 7.5, 2.0]})
    g = roles.guess_note_roles(sample)
    assert g["text"] == "body" and g["patient_id"] == "subject_id"
    assert g["tasks"] == ["mortality"]  # note_id holds only 0/1 but is an identifier
    assert g["attributes"] == ["gender"] and g["numeric_columns"] == ["sofa"]


def _is_binary_cell_by_cell(s: pd.Series) -> bool:
    """The reference: every non-missing cell converted (what ``is_binary`` did before it looked at distinct values)."""
    v = pd.to_numeric(s.dropna(), errors="coerce")
    return len(v) > 0 and not v.isna().any() and bool(v.isin([0, 1]).all())


_CELLS = st.one_of(st.sampled_from([0, 1, 2, -1, 0.0, 1.0, 0.5, True, False, None, float("nan"), "0", "1", "1.0",
                                    " 1", "01", "2", "x", "", "yes", "NaN"]),
                   st.integers(-3, 3), st.text(alphabet="01.x ", max_size=3))


@given(cells=st.lists(_CELLS, max_size=40), dtype=st.sampled_from([None, "object", "string", "category", "float",
                                                                    "Int64", "bool"]))
def test_is_binary_on_distinct_values_agrees_with_converting_every_cell(cells, dtype):
    """``is_binary`` decides on a column's distinct values (the first few first); it must say what converting every
    cell says, for any mix of numbers, booleans, number-like text, other text and missing values, in any dtype the
    loaders give."""
    try:
        s = pd.Series(cells, dtype=dtype)
    except (TypeError, ValueError):
        return  # cells this dtype cannot hold
    assert is_binary(s) == _is_binary_cell_by_cell(s)


def test_is_binary_refuses_a_text_column_on_its_first_distinct_values(monkeypatch):
    """A text column of many distinct values (an id) is refused from its first distinct values: no call converts
    more than 16 of them (converting every cell cost 5–50 ms a column, in one call holding the interpreter lock)."""
    sizes: list = []
    real = pd.to_numeric
    monkeypatch.setattr(pd, "to_numeric", lambda arg, *a, **k: sizes.append(len(arg)) or real(arg, *a, **k))
    ids = pd.Series([f"P{i:06d}" for i in range(20_000)], dtype="string")
    assert not is_binary(ids) and max(sizes) <= 16
    sizes.clear()
    assert is_binary(pd.Series(np.tile(["0", "1"], 10_000), dtype="string")) and max(sizes) <= 2
