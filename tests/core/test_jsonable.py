"""fairdesk.core.jsonable: the one conversion of results into what the stored JSON documents hold (``jsonable``), and
the decoding of a stored document in pieces (``loads_in_pieces``, equal to ``json.loads``)."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairdesk.core.jsonable import jsonable, loads_in_pieces


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.nan, np.float32("nan"), np.float64("inf"),
                                   np.float16("-inf"), pd.NA, pd.NaT, None])
def test_missing_and_non_finite_values_become_none(value):
    assert jsonable(value) is None


@pytest.mark.parametrize("value, expected, kind", [
    (np.int8(-3), -3, int), (np.int64(2**40), 2**40, int), (np.uint16(7), 7, int),
    (np.float64(0.25), 0.25, float), (np.float32(0.5), 0.5, float), (np.bool_(True), True, bool),
    (np.bool_(False), False, bool), (np.str_("F"), "F", str), (1.5, 1.5, float), (3, 3, int), (True, True, bool),
])
def test_numpy_scalars_become_plain_python_values(value, expected, kind):
    out = jsonable(value)
    assert out == expected and type(out) is kind


def test_float32_keeps_its_exact_value_as_a_python_float():
    assert jsonable(np.float32(0.1)) == float(np.float32(0.1)) != 0.1


def test_arrays_become_nested_lists_with_nan_as_none():
    assert jsonable(np.array(2.5)) == 2.5 and type(jsonable(np.array(2.5))) is float  # 0-d: the scalar
    assert jsonable(np.array(np.nan)) is None
    assert jsonable(np.array([[1, 2], [3, 4]], dtype=np.int32)) == [[1, 2], [3, 4]]
    assert jsonable(np.array([0.5, np.nan, np.inf])) == [0.5, None, None]
    assert jsonable(np.array([True, False])) == [True, False]
    assert jsonable(np.zeros((2, 0))) == [[], []]
    assert jsonable(np.array(["a", "b"])) == ["a", "b"]


def test_nested_containers_tuples_and_keys():
    doc = {"a": (1, np.int64(2), [np.float32(0.5), {"b": np.nan}]), 3: "three", 0.5: "half", np.int64(4): "four",
           ("x", 1): "pair", None: "none"}
    out = jsonable(doc)
    assert out == {"a": [1, 2, [0.5, {"b": None}]], "3": "three", "0.5": "half", "4": "four", "('x', 1)": "pair",
                   "None": "none"}
    assert all(type(k) is str for k in out)
    assert type(out["a"]) is list and type(out["a"][1]) is int


def test_the_input_is_not_changed_and_plain_values_pass_through():
    doc = {"v": [1.0, math.nan], "t": (1, 2)}
    jsonable(doc)
    assert math.isnan(doc["v"][1]) and doc["t"] == (1, 2)
    assert jsonable("text") == "text" and jsonable(0) == 0 and jsonable([]) == [] and jsonable({}) == {}


def test_dataframe_records_as_stored():
    """What the group audit stores: ``DataFrame.to_dict(orient="records")`` rows with NaN, pd.NA, numpy ints."""
    df = pd.DataFrame({"n": pd.array([3, None], dtype="Int64"), "rate": [0.5, np.nan], "ok": [True, False],
                       "group": ["F", None]})
    df["k"] = np.array([1, 2], dtype=np.int64)
    out = jsonable(df.to_dict(orient="records"))
    assert out == [{"n": 3, "rate": 0.5, "ok": True, "group": "F", "k": 1},
                   {"n": None, "rate": None, "ok": False, "group": None, "k": 2}]


def test_json_dumps_without_nan_never_fails_on_the_result():
    doc = {"scalars": [np.nan, np.inf, -np.inf, np.float32(1.5), np.int64(2), np.bool_(True), pd.NA, pd.NaT],
           "arrays": {"zero_d": np.array(np.inf), "two_d": np.array([[np.nan, 1.0], [2.0, -np.inf]])},
           "tuple": (np.uint8(1), (np.float16(0.5),)), 7: {np.int32(8): np.nan}}
    with pytest.raises((TypeError, ValueError)):
        json.dumps(doc, allow_nan=False)
    text = json.dumps(jsonable(doc), allow_nan=False)
    assert json.loads(text) == {"scalars": [None, None, None, 1.5, 2, True, None, None],
                                "arrays": {"zero_d": None, "two_d": [[None, 1.0], [2.0, None]]},
                                "tuple": [1, [0.5]], "7": {"8": None}}


def test_the_result_reads_back_from_json_unchanged():
    """A document in memory equals the stored one read back (keys str, tuples lists, no NaN)."""
    doc = jsonable({"a": (1, 2.5), 1: {"b": [np.nan, np.int16(3)]}, "c": np.arange(3)})
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc


# ---- loads_in_pieces: json.loads, decoded member by member ----------------------------------------------------------
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6),
    max_leaves=40)


@given(value=_JSON, indent=st.sampled_from([None, 0, 2]), depth=st.integers(0, 4), as_bytes=st.booleans())
def test_loads_in_pieces_equals_json_loads(value, indent, depth, as_bytes):
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    data = text.encode("utf-8") if as_bytes else text
    assert loads_in_pieces(data, depth=depth) == json.loads(data)


@pytest.mark.parametrize("bad", ["", "   ", "{", "[1, 2", '{"a" 1}', '{"a": 1,}', "[1 2]", "{1: 2}", '{"a": 1} x',
                                 "[1,]", '{"a": [1, {"b": }]}', "nul", '"unterminated'])
def test_loads_in_pieces_refuses_what_json_loads_refuses(bad):
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad)
    for depth in (0, 1, 2, 3):
        with pytest.raises(json.JSONDecodeError):
            loads_in_pieces(bad, depth=depth)
