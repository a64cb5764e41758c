"""Bad input (issue 2, point 2): every problem is named in words a clinician can act on, and the audit refuses
with a DataError — never a KeyError, ValueError or a traceback from pandas/pyarrow."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
from fairdesk.core.data.loaders import load_table
from fairdesk.core.data.schema import ColumnRoles, validate
from fairdesk.core.errors import DataError

ROLES = ColumnRoles(label="y", score="s", task="task", attributes=("sex",), continuous_attributes=("age",),
                    sample_id="id")


def base(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"id": np.arange(n) % (n // 2), "task": np.repeat(["mort", "los"], n // 2),
                         "y": np.tile([0, 1, 0, 0], n // 4), "s": rng.random(n).round(3),
                         "sex": rng.choice(["F", "M"], n), "age": rng.uniform(18, 90, n).round(1)})


def run(df, roles=ROLES, **kw):
    kw.setdefault("threshold", 0.5)
    kw.setdefault("n_boot", 100)
    kw.setdefault("n_permutations", 100)
    return run_group_audit(df, GroupAuditPlan(roles=roles, **kw))


def messages(df, roles=ROLES, level=None, min_group_size=30):
    rep = validate(df, roles, min_group_size)
    return [i.message for i in rep.issues if level is None or i.level == level]


def test_clean_table_has_no_problems_and_audits():
    assert messages(base()) == []
    assert len(run(base()).records) > 0


def _with(**changes):
    def make():
        df = base()
        for col, fn in changes.items():
            df = fn(df)
        return df
    return make


def _set(col, rows, value, dtype=None):
    def fn(df):
        if dtype is not None:
            df[col] = df[col].astype(dtype)
        df.loc[rows, col] = value
        return df
    return fn


ERRORS = {
    # name: (table maker, roles, words that must appear in the message)
    "missing columns": (lambda: base().drop(columns=["s", "sex"]), ROLES,
                        ["'s'", "'sex'", "not in the table", "Map each role"]),
    "label not binary (2)": (_with(y=_set("y", [4], 2)), ROLES, ["'y'", "must hold 0/1", "found 2", "1 row"]),
    "label yes/no": (lambda: base().assign(y=lambda d: d["y"].map({0: "no", 1: "yes"})), ROLES,
                     ["must hold 0/1", "'yes'", "'no'", "Recode"]),
    "label fractional": (_with(y=_set("y", [0, 1], 0.5, float)), ROLES, ["must hold 0/1", "0.5", "2 rows"]),
    "label empty (NaN)": (_with(y=_set("y", [1, 7], np.nan, float)), ROLES,
                          ["Label column 'y' is empty in 2 rows", "data rows 2, 8", "Fill in"]),
    "score outside [0, 1] (logits)": (lambda: base().assign(s=lambda d: d["s"] * 6 - 3), ROLES,
                                      ["must be a probability in [0, 1]", "lie outside", "sigmoid"]),
    "score above 1 (percent)": (_with(s=_set("s", [3], 87.0)), ROLES, ["1 row lie outside", "max 87", "sigmoid"]),
    "score empty (NaN)": (_with(s=_set("s", [5], np.nan)), ROLES, ["Score column 's' is empty in 1 row", "data rows 6"]),
    "score text": (_with(s=_set("s", [2], "high", object)), ROLES, ["'s'", "not a number", "data rows 3"]),
    "duplicated sample ids": (_with(id=_set("id", [7], 6)), ROLES,
                              ["Sample id 'id' repeats", "2 rows", "data rows 7, 8", "Remove the duplicates"]),
    "continuous attribute not numeric": (_with(age=_set("age", [9], "elderly", object)), ROLES,
                                         ["Continuous attribute 'age'", "not numbers", "categorical"]),
    "attribute with a single group": (lambda: base().assign(sex="F"), ROLES, ["'sex'", "fewer than two groups"]),
    "attribute all empty": (lambda: base().assign(sex=""), ROLES, ["'sex'", "fewer than two groups"]),
    "no rows": (lambda: base().iloc[0:0], ROLES, ["no rows"]),
    "task empty": (_with(task=_set("task", [0], None, object)), ROLES, ["Task column 'task' is empty in 1 row"]),
    "split empty": (lambda: base().assign(split=["test"] * 199 + [None]),
                    ColumnRoles(label="y", score="s", task="task", attributes=("sex",), split="split"),
                    ["Split column 'split' is empty in 1 row"]),
    "patient id empty": (lambda: base().assign(pid=[None] + list(range(199))),
                         ColumnRoles(label="y", score="s", task="task", attributes=("sex",), patient_id="pid"),
                         ["Patient id 'pid' is empty in 1 row"]),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_each_problem_is_named_and_the_audit_refuses_with_data_error(name):
    make, roles, words = ERRORS[name]
    df = make()
    errors = messages(df, roles, "error")
    assert errors, f"{name}: no error reported"
    text = " ".join(errors)
    for w in words:
        assert w in text, f"{name}: {w!r} not in {text!r}"
    with pytest.raises(DataError) as info:
        run(df, roles=roles)
    assert type(info.value) is DataError
    assert words[0] in str(info.value)


def test_several_problems_are_all_listed():
    df = base()
    df["y"] = df["y"].astype(float)
    df.loc[3, "y"] = np.nan
    df.loc[4, "s"] = 1.7
    df.loc[8, "id"] = 7
    errors = messages(df, level="error")
    assert len(errors) == 3
    with pytest.raises(DataError) as info:
        run(df)
    assert all(e in str(info.value) for e in errors)


# --------------------------------------------------------------------------------------------------------------
# Warnings: the audit runs, the problem is named, and the result says it again

def test_single_class_group_is_a_warning_and_recall_not_estimable():
    df = base()
    df.loc[(df["task"] == "mort") & (df["sex"] == "F"), "y"] = 0
    warns = messages(df, level="warning")
    assert any("Task 'mort', sex = 'F'" in w and "negative" in w and "recall is not estimable" in w for w in warns)
    res = run(df, min_group_size=10)
    r = res.records
    f = r[(r["task"] == "mort") & (r["group"] == "F") & (r["metric"] == "recall")].iloc[0]
    assert pd.isna(f["rate"]) and "no positive" in f["reason"] and pd.isna(f["gap"])
    m = r[(r["task"] == "mort") & (r["group"] == "M") & (r["metric"] == "recall")].iloc[0]
    assert pd.isna(m["gap"]) and m["reason"]  # nothing left to compare M with
    assert any("recall is not estimable" in w for w in res.warnings)


def test_single_class_task_is_a_warning():
    df = base()
    df.loc[df["task"] == "los", "y"] = 1
    warns = messages(df, level="warning")
    assert any("Task 'los' has only positive labels" in w for w in warns)
    res = run(df, min_group_size=10)
    spec = res.records[(res.records["task"] == "los") & (res.records["metric"] == "specificity")]
    assert spec["rate"].isna().all() and spec["reason"].str.contains("no negative").all()
    delta = res.records[(res.records["task"] == "los") & (res.records["metric"] == "delta_eo")]
    assert delta["gap"].isna().all() and delta["reason"].str.contains("both classes").all()


def test_empty_group_in_a_task_is_named():
    df = base()
    df.loc[df["task"] == "los", "sex"] = "F"  # no M rows in task 'los'
    warns = messages(df, level="warning")
    assert any("Task 'los', sex = 'M'" in w and "no rows" in w for w in warns), warns
    res = run(df, min_group_size=10)
    assert any("Task 'los', sex = 'M'" in w for w in res.warnings)
    d = res.dropped[res.dropped["task"] == "los"]
    assert "fewer than two groups" in " ".join(d["reason"])


def test_declared_but_unused_category_is_an_empty_group():
    df = base()
    df["sex"] = pd.Categorical(df["sex"], categories=["F", "M", "X"])
    warns = messages(df, level="warning")
    assert any("sex = 'X'" in w and "no rows" in w for w in warns)
    assert len(run(df).records) > 0


def test_missing_and_blank_attribute_values_form_the_missing_group():
    df = base()
    df["sex"] = df["sex"].astype(object)
    df.loc[[0, 1], "sex"] = None
    df.loc[[2], "sex"] = "  "
    warns = messages(df, level="warning")
    assert any("Attribute 'sex' is missing" in w and "3 rows" in w and "(missing)" in w for w in warns)
    res = run(df, min_group_size=1)
    d = res.dropped.set_index(["task", "group"])
    assert d.loc[("mort", "(missing)"), "n"] == 3
    assert not {"", "  "} & set(res.records["group"])


def test_small_group_warning_and_missing_continuous_values():
    df = base()
    df.loc[df.index[:95], "sex"] = "F"  # task 'mort' (rows 0–99): exactly 5 M rows
    df.loc[df.index[95:100], "sex"] = "M"
    df.loc[[10, 11], "age"] = np.nan
    warns = messages(df, level="warning")
    assert any("Task 'mort', sex = 'M': only 5 rows (< 30)" in w and "not tested" in w for w in warns)
    assert any("Continuous attribute 'age' is missing in 2 rows" in w for w in warns)
    res = run(df)
    d = res.dropped
    assert ((d["task"] == "mort") & (d["group"] == "M") & (d["n"] == 5)).any()


def test_repeated_patients_and_exact_duplicate_rows_are_warnings():
    df = base()
    df["pid"] = df["id"] // 2  # two rows per patient and task
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("sex",), patient_id="pid")
    warns = messages(df, roles, level="warning")
    assert any("several rows in a task" in w and "resample whole patients" in w for w in warns)
    dup = pd.concat([base(), base().iloc[[5]]], ignore_index=True)
    warns = messages(dup, ColumnRoles(label="y", score="s", task="task", attributes=("sex",)), level="warning")
    assert any("1 row are exact copies" in w or "exact copies" in w for w in warns)


# --------------------------------------------------------------------------------------------------------------
# Plan problems are DataErrors too

ROLES_SPLIT = ColumnRoles(label="y", score="s", task="task", attributes=("sex",), split="split")


@pytest.mark.parametrize("plan_kw, table_fn, words", [
    (dict(threshold=1.5), base, "outside (0, 1)"),
    (dict(threshold="high"), base, "Threshold must be a number"),
    (dict(gap_rule="median"), base, "Unknown multi-group rule"),
    (dict(metrics=("accuracy",)), base, "Unknown gap metric"),
    (dict(n_boot=10), base, "--n-boot 10 is outside the limits"),
    (dict(bins=(0,)), base, "--bins 0 is outside the limits"),
    (dict(tasks=("sepsis",)), base, "'sepsis'"),
    (dict(intersections=(("sex", "race"),)), base, "'race'"),
    (dict(intersections=(("sex",),)), base, "at least two attribute columns"),
    (dict(threshold="best_f1"), base, "validation"),
])
def test_plan_problems_raise_data_error(plan_kw, table_fn, words):
    with pytest.raises(DataError) as info:
        run(table_fn(), **plan_kw)
    assert type(info.value) is DataError and words in str(info.value)


def test_split_problems_raise_data_error():
    df = base().assign(split=np.where(np.arange(200) % 4 == 0, "val", "train"))
    with pytest.raises(DataError, match="no 'test' rows"):
        run(df, roles=ROLES_SPLIT)
    df = base().assign(split=np.where(np.arange(200) % 4 == 0, "val", "test"))
    df.loc[df["split"] == "val", "y"] = 0  # validation rows of one class only: no best-F1 threshold
    with pytest.raises(DataError, match="validation split needs both classes"):
        run(df, roles=ROLES_SPLIT, threshold="best_f1")
    with pytest.raises(DataError, match="at least one protected attribute"):
        run(base(), roles=ColumnRoles(label="y", score="s"))


# --------------------------------------------------------------------------------------------------------------
# Files

def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name, data, words", [
    ("garbage.parquet", os.urandom(4096), ["garbage.parquet could not be read as Parquet", "save it again"]),
    ("truncated.parquet", None, ["truncated.parquet could not be read as Parquet"]),
    ("binary.csv", bytes(range(128, 256)) * 20, ["binary.csv could not be read as CSV", "save it again as CSV"]),
    ("ragged.csv", b"y,s,sex\n1,0.5,F\n0,0.2,M,extra,cells\n", ["ragged.csv could not be read as CSV", "line 3"]),
    ("quote.csv", b'y,s\n"1,0.5\n0,0.2\n', ["quote.csv could not be read as CSV"]),
    ("header_only.csv", b"y,s,sex\n", ["has column names but no rows"]),
    ("predictions.xlsx", b"PK\x03\x04", ["'.xlsx' is not one of them", "Export the table as CSV or Parquet"]),
    ("predictions", b"y,s\n1,0.5\n", ["'no extension'"]),
])
def test_unreadable_files_give_data_error(tmp_path, name, data, words):
    if data is None:  # a real Parquet file cut in half
        good = tmp_path / "good.parquet"
        base().to_parquet(good)
        data = good.read_bytes()[: good.stat().st_size // 2]
    path = _write(tmp_path / name, data)
    with pytest.raises(DataError) as info:
        load_table(path)
    assert type(info.value) is DataError
    for w in words:
        assert w in str(info.value), str(info.value)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_table(tmp_path / "nope.csv")
    with pytest.raises(DataError, match="is a folder"):
        load_table(tmp_path)


def test_empty_csv_file_gives_data_error(tmp_path):
    with pytest.raises(DataError, match="empty|could not be read"):
        load_table(_write(tmp_path / "empty.csv", b""))
    with pytest.raises(DataError, match="empty|could not be read"):
        load_table(_write(tmp_path / "blank.csv", b"\n\n\n"))


def test_good_files_round_trip_and_audit(tmp_path):
    df = base()
    df.to_csv(tmp_path / "p.csv", index=False)
    df.to_parquet(tmp_path / "p.parquet")
    (tmp_path / "p.tsv").write_text(df.to_csv(sep="\t", index=False))
    for name in ("p.csv", "p.parquet", "p.tsv"):
        back = load_table(tmp_path / name)
        assert list(back.columns) == list(df.columns) and len(back) == len(df)
        assert messages(back) == []
    assert len(load_table(tmp_path / "p.csv", nrows=10)) == 10
    # a CSV with a problem loads, then validation names the problem
    bad = df.assign(s=df["s"] * 100)
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError, match="sigmoid"):
        run(load_table(tmp_path / "bad.csv"))
