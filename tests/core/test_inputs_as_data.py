"""Inputs are read as data, never trusted as structure (issue 20, item 4).

Texts such as "NA", "null" and "None" stay text unless the user says they mean missing; Unicode spellings are
normalised (NFC) and merges said; Parquet nested and binary columns are left out and listed; every numeric parameter
of a group audit is checked against its stated limit, naming the CLI option; an id column chosen as an attribute is
refused at once; a string is one column name; image lists stay inside their folder and huge images are refused
before decoding; names cannot inject structure into the model card's Markdown. A Hypothesis fuzz test feeds
generated tables and parameters through ``fairdesk-cli validate`` and ``audit groups``: exit 0 or 2, never a
traceback, and on 2 the message names the column, the option or the file.
"""
from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.cli import main
from fairdesk.core.audits.groups import PLAN_LIMITS, GroupAuditPlan
from fairdesk.core.data.loaders import load_table, table_notes
from fairdesk.core.data.schema import MAX_GROUPS, ColumnRoles
from fairdesk.core.errors import DataError
from fairdesk.core.escape import html_text, markdown_text


def _table(n=80, seed=0, groups=("F", "M")) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.binomial(1, 0.4, n)
    return pd.DataFrame({"y": y, "p": np.clip(0.3 + 0.4 * y + rng.normal(0, 0.2, n), 0, 1),
                         "g": rng.choice(list(groups), n)})


def _run(argv, capsys) -> tuple[int, str]:
    argv = [str(a) for a in argv]
    if argv[:2] == ["audit", "groups"] and "--threshold" not in argv:  # no silent threshold (issue 21): give one
        argv += ["--threshold", "0.5"]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse: a malformed option value
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out + out.err


# ---- texts kept as text ------------------------------------------------------------------------------------------

def test_na_like_texts_are_groups_unless_the_user_says_they_mean_missing(tmp_path, capsys):
    df = _table(90, groups=("NA", "None", "null"))
    df.loc[0, "p"] = np.nan
    csv = tmp_path / "t.csv"
    df.to_csv(csv, index=False, na_rep="NA")  # the score's missing value is written "NA" too
    loaded = load_table(csv)
    assert set(loaded["g"]) == {"NA", "None", "null"}  # pandas' default would have made all of them missing
    assert loaded["p"].dtype.kind == "f" and loaded["p"].isna().sum() == 1  # a number column: "NA" is missing
    assert set(load_table(csv, missing=["NA"])["g"].dropna()) == {"None", "null"}
    code, text = _run(["validate", str(csv), "--label", "y", "--score", "p", "--attribute", "g"], capsys)
    assert code == 2 and "Score column 'p' is empty in 1 row" in text and "Attribute 'g' is missing" not in text


def test_unicode_spellings_are_merged_with_a_warning(tmp_path, capsys):
    df = _table(80)
    df["g"] = np.where(df["g"] == "F", "Am\u00e9lie", "Ame\u0301lie")  # composed and decomposed é
    df.loc[:3, "g"] = "Other"
    csv = tmp_path / "t.csv"
    df.to_csv(csv, index=False)
    loaded = load_table(csv)
    assert set(loaded["g"]) == {"Amélie", "Other"} and all(unicodedata.is_normalized("NFC", v) for v in loaded["g"])
    assert any("'Amélie'" in note and "NFC" in note for note in table_notes(loaded))
    code, text = _run(["validate", str(csv), "--label", "y", "--score", "p", "--attribute", "g",
                       "--min-group-size", "2"], capsys)
    assert "WARNING: Column 'g': 'Amélie' came in more than one Unicode spelling" in text
    # two column names that are one name in NFC are duplicates, refused by name
    (tmp_path / "d.csv").write_text("y,p,Am\u00e9lie,Ame\u0301lie\n1,0.5,a,b\n", encoding="utf-8")
    with pytest.raises(DataError, match="more than one column named 'Amélie'"):
        load_table(tmp_path / "d.csv")


def test_parquet_nested_and_binary_columns_are_left_out_and_listed(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = _table(80)
    table = pa.table({"y": df["y"], "p": df["p"], "g": df["g"], "vec": [[1.0, 2.0]] * 80,
                      "blob": [b"\x00\x01"] * 80, "meta": [{"a": 1}] * 80})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    loaded = load_table(path)
    assert list(loaded.columns) == ["y", "p", "g"]
    assert "'vec' (list<element: double>)" in table_notes(loaded)[0] and "'blob' (binary)" in table_notes(loaded)[0]
    code, text = _run(["validate", str(path), "--label", "y", "--score", "p", "--attribute", "g"], capsys)
    assert code == 0 and "were not read" in text
    code, text = _run(["validate", str(path), "--label", "y", "--score", "p", "--attribute", "vec"], capsys)
    assert code == 2 and "column 'vec' holds list<element: double> values" in text and "Traceback" not in text
    out = tmp_path / "o.json"
    code, text = _run(["audit", "groups", str(path), "--label", "y", "--score", "p", "--attribute", "g", "--n-boot",
                       "100", "--min-group-size", "5", "--quiet", "--json", str(out)], capsys)
    assert code == 0 and "note:" in text and "'meta' (struct<a: int64>)" in text


# ---- parameters at the plan --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,option,low,high,whole,what", PLAN_LIMITS)
def test_every_numeric_plan_parameter_is_checked_naming_its_option(name, option, low, high, whole, what):
    roles = ColumnRoles(label="y", score="p", attributes=("g",))
    for bad in (low - 1 if whole else low, high + 1 if whole else high, float("nan"), float("inf"), "5", None, True):
        with pytest.raises(DataError) as err:
            GroupAuditPlan(roles=roles, **{name: bad})
        assert str(err.value).startswith(f"{option} ") and "\n" not in str(err.value)


@pytest.mark.parametrize("option,value", [("--alpha", "1.5"), ("--alpha", "0"), ("--margin", "-0.1"),
                                          ("--margin", "nan"), ("--n-boot", "10"), ("--n-boot", "10000000"),
                                          ("--seed", "-3"), ("--bins", "1"), ("--bins", "500"),
                                          ("--min-group-size", "0"), ("--min-denominator", "0")])
def test_cli_refuses_out_of_range_parameters_in_one_sentence_naming_the_option(option, value, tmp_path, capsys):
    csv = tmp_path / "t.csv"
    _table(80).assign(age=np.arange(80)).to_csv(csv, index=False)
    code, text = _run(["audit", "groups", str(csv), "--label", "y", "--score", "p", "--attribute", "g",
                       "--continuous-attribute", "age", "--quiet", "--json", str(tmp_path / "o.json"),
                       option, value], capsys)
    assert code == 2 and option in text and "Traceback" not in text and text.count("\n") == 1, text
    assert not (tmp_path / "o.json").exists()


def test_an_id_column_as_attribute_is_refused_at_once_naming_it(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    _table(MAX_GROUPS + 50).assign(pid=lambda d: [f"P{i:05d}" for i in range(len(d))]).to_csv(csv, index=False)
    code, text = _run(["audit", "groups", str(csv), "--label", "y", "--score", "p", "--attribute", "pid", "--quiet",
                       "--json", str(tmp_path / "o.json")], capsys)
    assert code == 2 and f"Attribute 'pid' has {MAX_GROUPS + 50} distinct values" in text


def test_a_string_where_a_list_of_names_is_expected_is_one_name():
    from fairdesk.core.data.images import ImageRoles

    roles = ColumnRoles(label="y", score="p", attributes="sex", continuous_attributes="age")
    assert roles.attributes == ("sex",) and roles.continuous_attributes == ("age",)
    assert roles.all_columns() == ["y", "p", "sex", "age"]
    plan = GroupAuditPlan(roles=roles, metrics="recall", tasks="sepsis", intersections=("sex", "race"), threshold=0.5)
    assert plan.metrics == ("recall",) and plan.tasks == ("sepsis",) and plan.intersections == (("sex", "race"),)
    assert GroupAuditPlan(roles=roles, intersections="sex,race", threshold=0.5).intersections == (("sex", "race"),)
    assert ImageRoles(path="p", labels="disease", attributes="sex").labels == ("disease",)
    with pytest.raises(DataError, match="attributes must be column names"):
        ColumnRoles(label="y", score="p", attributes=("sex", 3))


# ---- image lists -------------------------------------------------------------------------------------------------

def test_image_lists_stay_in_their_folder_and_huge_images_are_refused_before_decoding(tmp_path, monkeypatch):
    from PIL import Image

    from fairdesk.core.data import images
    from fairdesk.core.data.images import ImageRoles, open_image_folder

    root, outside = tmp_path / "imgs", tmp_path / "secret.png"
    root.mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / "a.png")
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(outside)
    os.symlink(outside, root / "link.png")
    os.symlink(tmp_path, root / "up")
    Image.new("L", (40, 30)).save(root / "big.png")
    monkeypatch.setattr(images, "MAX_PIXELS", 1000)  # 40 × 30 = 1,200 pixels
    decoded = []
    real_load = Image.Image.load
    monkeypatch.setattr(Image.Image, "load", lambda self: decoded.append(self.size) or real_load(self))
    paths = ["a.png", "../secret.png", str(outside), "link.png", "up/secret.png", "big.png"]
    df = pd.DataFrame({"path": paths, "patient_id": [f"p{i}" for i in range(len(paths))], "y": 0})
    ds = open_image_folder(df, root, ImageRoles(path="path", labels="y", patient_id="patient_id"))
    assert list(ds.table["path"]) == ["a.png"]
    reasons = {b["path"]: b["reason"] for b in ds.unreadable}
    assert all("outside the image folder" in reasons[p] for p in paths[1:5])
    assert "40 × 30 pixels, more than the 1,000" in reasons["big.png"] and (40, 30) not in decoded


# ---- escaping for each target ------------------------------------------------------------------------------------

NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30) | st.sampled_from(
    ["a|b", "x\n# Heading", "| F | 1 |\n|---|", "*bold* _it_", "[link](http://x)", "<b>&amp;", "1. item",
     "- list", "> quote", "`code`", "line\r\nbreak", "a\u2028b", "===", "---", "#", "\\|", "![i](x)"])


def _card_tokens(card):
    from markdown_it import MarkdownIt

    from fairdesk.core.model_card import card_markdown

    md = MarkdownIt("commonmark").enable("table")
    return [t.type for t in md.parse(card_markdown(card))]


@pytest.fixture(scope="module")
def base_card(tmp_path_factory):
    from fairdesk.core.model_card import model_card
    from fairdesk.core.project import Project

    path = tmp_path_factory.mktemp("card") / "p.fairdesk"
    doc = (Path(__file__).resolve().parents[1] / "data" / "documents" / "groups.json").read_text()
    project = Project(path)
    return model_card(project, project.add_audit("audit", "groups", doc), intended_use="Triage of adults.")


@settings(max_examples=60)
@given(name=NAMES)
def test_names_cannot_inject_structure_into_the_model_card_markdown(base_card, name):
    pytest.importorskip("markdown_it")
    card = json.loads(json.dumps(base_card))
    plain = json.loads(json.dumps(base_card))
    for c, value in ((card, name), (plain, "g")):
        c["subgroups"]["groups"][0]["group"] = value
        c["subgroups"]["groups"][0]["attribute"] = value
        c["model"]["name"] = value
        c["intended_use"]["statement"] = value
        c["findings"]["items"][0]["sentence"] = value
        c["limitations"] = [value]
    assert _card_tokens(card) == _card_tokens(plain)  # the same headings, table cells, lists and emphasis


@given(name=NAMES)
def test_html_and_markdown_helpers_keep_text_literal(name):
    out = html_text(name)
    assert "<" not in out.replace("<br>", "") and "\n" not in out and "\r" not in out
    md = markdown_text(name)
    assert not any(c in md for c in "\r\n\u2028\u2029\x0b\x0c\x85")


# ---- the fuzz test: generated tables and parameters through validate and audit groups ----------------------------

ODD_NAMES = st.sampled_from(["y", "label", "Ünïcödé", "e\u0301", "NA", "null", "", " ", "=cmd", "a,b", "a;b",
                             "\u202eRLO", "x" * 80, "名前", "𝔘", "0", "None", "tab\tname"])
VALUES = st.sampled_from(["0", "1", "NA", "null", "None", "", "0.5", "-1", "1e400", "nan", "inf", "abc", "é", "e\u0301",
                          "=1+1", "true", "2", "0.999", "\u200b"])


@st.composite
def tables(draw):
    wellformed = draw(st.sampled_from([True, True, False]))  # label, score, group first: odd names, odd groups
    n = draw(st.integers(30, 60) if wellformed else st.integers(0, 40))
    names = draw(st.lists(ODD_NAMES.filter(str.strip) if wellformed else ODD_NAMES, min_size=3 if wellformed else 1,
                          max_size=5, unique=wellformed))
    columns = {}
    for i, name in enumerate(names):
        kind = (["label", "score", "group"][i] if wellformed and i < 3 else
                draw(st.sampled_from(["label", "score", "group", "text", "ints"])))
        rng = np.random.default_rng(draw(st.integers(0, 1000)))
        if kind == "label":
            col = [str(v) for v in rng.integers(0, 2, n)]
        elif kind == "score":
            col = [f"{v:.3f}" for v in rng.random(n)]
        elif kind == "group":
            col = list(rng.choice(["A", "B", "NA", "é", "e\u0301"], n))
        elif kind == "ints":
            col = [str(v) for v in rng.integers(0, 10**6, n)]
        else:
            col = [draw(VALUES) for _ in range(min(n, 3))] + ["x"] * max(0, n - 3)
        for j in draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=3)):
            if n and not (wellformed and kind in ("label", "score")):
                col[j] = draw(VALUES)
        columns[(i, name)] = col
    fmt = draw(st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "cp1252", "parquet"]))
    return names, columns, n, fmt, wellformed


def _write(tmp: Path, names, columns, n, fmt) -> Path:
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays, fields = [], []
        for (i, name), col in columns.items():
            arrays.append(pa.array(col, pa.string()))
            fields.append(name if name not in fields else f"{name}_{i}")  # Parquet writers refuse duplicates
        arrays.append(pa.array([[1, 2]] * n, pa.list_(pa.int64())))
        fields.append("nested")
        path = tmp / "t.parquet"
        pq.write_table(pa.table(arrays, names=fields), path)
        return path
    header = ",".join(f'"{name}"' for name in names)
    rows = [",".join(f'"{columns[(i, name)][r]}"' for i, name in enumerate(names)) for r in range(n)]
    path = tmp / "t.csv"
    text = "\n".join([header, *rows]) + "\n"
    try:
        path.write_bytes(text.encode(fmt))
    except UnicodeEncodeError:
        path.write_bytes(text.encode("utf-8"))
    return path


def _option(good: list[str], bad: list[str]):
    return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(good), st.sampled_from(bad))


@settings(max_examples=20)
@given(table=tables(), params=st.fixed_dictionaries({"--n-boot": _option(["100"], ["99", "1e3", "x"])}, optional={
    "--alpha": _option(["0.05", "0.1"], ["1", "-1", "nan", "x"]), "--margin": _option(["0.05", "0.2"], ["0", "2"]),
    "--bins": _option(["2", "3"], ["1", "9999"]), "--min-group-size": _option(["5", "10"], ["0", "-2"])}),
    data=st.data())
def test_generated_tables_and_parameters_exit_0_or_2_never_a_traceback(table, params, data, tmp_path_factory, capsys):
    tmp = tmp_path_factory.mktemp("fuzz")
    names, columns, n, fmt, wellformed = table
    path = _write(tmp, names, columns, n, fmt)
    pick = lambda: data.draw(st.sampled_from(names))  # noqa: E731
    roles = (["--label", names[0], "--score", names[1], "--attribute", names[2], "--min-group-size", "5"] if wellformed
             else ["--label", pick(), "--score", pick(), "--attribute", pick()])
    if not wellformed and data.draw(st.booleans()):
        roles += ["--continuous-attribute", pick()]
    if data.draw(st.booleans()):
        roles += ["--missing-value", "NA"]
    extra = [x for option, value in params.items() for x in (option, value)]
    command = data.draw(st.sampled_from(["validate", "audit"]))
    argv = (["validate", str(path), *roles] if command == "validate" else ["audit", "groups", str(path), *roles, *extra, "--quiet", "--json", str(tmp / "o.json")])
    code, text = _run(argv, capsys)
    assert "Traceback" not in text
    assert code in (0, 2), (code, text)
    if code == 2:
        named = [path.name, "--", *names, "Column", "column", "table"]
        assert any(word and word in text for word in named), text
