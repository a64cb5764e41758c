"""A table taken away: the small-cell stand-in rule, the clipboard text and the hand-written Excel workbook read back
by an independent reader (zipfile + ElementTree)."""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
import zipfile
from io import BytesIO

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.core.export import spreadsheet_safe
from fairdesk.core.table_export import clipboard_text, released, xlsx_bytes

NS = {"s": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
cells = st.one_of(st.none(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False,
                                                                   width=32), texts)


def _read(data: bytes) -> list[list[str | None]]:
    with zipfile.ZipFile(BytesIO(data)) as z:
        assert z.testzip() is None
        root = ET.fromstring(z.read("xl/worksheets/sheet1.xml"))
    out = []
    for row in root.iterfind(".//s:row", NS):
        out.append({c.get("r"): "".join(c.itertext()) for c in row.iterfind("s:c", NS)})
    return out


@given(rows=st.lists(st.tuples(cells, cells), min_size=0, max_size=6))
@settings(max_examples=60, deadline=None)
def test_xlsx_reads_back_cell_for_cell(rows):
    df = pd.DataFrame(rows, columns=["a", "b <&>"], dtype=object)
    back = _read(xlsx_bytes(df))
    safe = spreadsheet_safe(df)
    assert back[0] == {"A1": "a", "B1": "b <&>"} and len(back) == len(df) + 1
    for r, row in enumerate(safe.itertuples(index=False, name=None), start=2):
        for col, v in zip("AB", row):
            got = back[r - 1].get(f"{col}{r}")
            if v is None or (isinstance(v, float) and math.isnan(v)):
                assert got is None
            elif isinstance(v, (int, float)):
                assert math.isclose(float(got), float(v), rel_tol=1e-12, abs_tol=0)
            else:
                assert got == re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", " ", str(v))


@given(counts=st.lists(st.integers(0, 40), min_size=1, max_size=20), k=st.integers(2, 20))
@settings(max_examples=60, deadline=None)
def test_an_exported_table_shows_no_small_count_and_no_way_back_to_one(counts, k):
    """The export goes through the one disclosure rule: no count from 1 to k − 1 is shown, a row resting on one
    shows no rate either, and the column total minus the shown rows (a reader knows the total) is never 1..k − 1."""
    df = pd.DataFrame({"group": [f"g{i}" for i in range(len(counts))], "n": counts, "rate": [0.5] * len(counts)})
    out, sentence = released(df, k)
    shown = pd.to_numeric(out["n"], errors="coerce")
    assert not ((shown >= 1) & (shown < k)).any()
    small = [i for i, c in enumerate(counts) if 0 < c < k]
    assert all(pd.isna(out["rate"].iloc[i]) for i in small)
    withheld = sum(c for c, v in zip(counts, shown) if pd.isna(v))
    if sum(counts) >= k:  # a total below k is itself a small count, outside what the table can protect
        assert not (0 < withheld < k) or len([v for v in shown if pd.isna(v)]) > 1
    assert f"k = {k}" in sentence


def test_clipboard_text_is_cells():
    df = pd.DataFrame({"x": ["a\tb", None], "y": [1, 2.5]})
    assert clipboard_text(df) == "x\ty\na b\t1.0\n\t2.5\n"
