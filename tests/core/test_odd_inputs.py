"""Odd inputs from real workstations give a result or a listed reason, never a traceback or a wrong word:

* an image folder with a symbolic link loop, PNGs declaring 50,000–60,000 pixels a side, truncated images (Hypothesis
  over image lists): every bad image is listed as unreadable with its reason, the good ones are kept;
* a safetensors file whose 8-byte header length starts with byte 0x80 is not called "a Python pickle" (Hypothesis over
  header lengths); a real pickle still is;
* a table whose file name has bytes that are not UTF-8 is audited;
* a dataset whose stored roles are not JSON gets a model card that says what is missing.
"""
from __future__ import annotations

import json
import os
import pickle
import sqlite3
import struct
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.core.errors import ModelError


def _png_header(path: Path, w: int, h: int) -> None:
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                     chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))


IMAGES = st.lists(st.one_of(st.just(("ok",)), st.tuples(st.just("big"), st.integers(50_000, 60_000),
                                                         st.integers(50_000, 60_000)),
                            st.tuples(st.just("truncated"), st.floats(0.05, 0.9)), st.just(("loop",))),
                  min_size=1, max_size=6)


@settings(max_examples=15, deadline=None)
@given(kinds=IMAGES)
def test_every_odd_image_is_listed_as_unreadable(kinds):
    from PIL import Image

    from fairdesk.core.data.images import ImageRoles, open_image_folder

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        good = (np.arange(256).reshape(16, 16) % 251).astype(np.uint8)
        rows = []
        for i, kind in enumerate(kinds):
            name = f"img{i}.png"
            if kind[0] == "ok":
                Image.fromarray(good).save(root / name)
            elif kind[0] == "big":
                _png_header(root / name, kind[1], kind[2])
            elif kind[0] == "truncated":
                Image.fromarray(good).save(root / "full.png")
                data = (root / "full.png").read_bytes()
                (root / name).write_bytes(data[:max(1, int(len(data) * kind[1]))])
            else:
                os.symlink(f"loop{i}b", root / name)
                os.symlink(name, root / f"loop{i}b")
            rows.append({"path": name, "y": i % 2, "patient": f"p{i}"})
        pd.DataFrame(rows).to_csv(root / "t.csv", index=False)
        ds = open_image_folder(root / "t.csv", root, ImageRoles("path", ("y",), (), "patient"))
        bad = {u["row"] for u in ds.unreadable}
        assert bad == {i for i, k in enumerate(kinds) if k[0] != "ok"}
        assert len(ds) == sum(k[0] == "ok" for k in kinds)
        assert all(u["reason"] for u in ds.unreadable)


@settings(max_examples=20, deadline=None)
@given(k=st.integers(0, 2 ** 16), cut=st.integers(0, 64), proto=st.integers(2, 5))
def test_a_safetensors_header_starting_with_0x80_is_not_a_pickle(k, cut, proto):
    pytest.importorskip("torch")
    from fairdesk.core.models.image_classifier import load_state_dict_file

    length = 0x80 + 256 * k
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.safetensors"
        header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
        path.write_bytes(struct.pack("<Q", length) + header.ljust(length, b" ")[:cut])  # damaged: cut short
        with pytest.raises(ModelError) as err:
            load_state_dict_file(path)
        assert "pickle" not in str(err.value)
        path.write_bytes(pickle.dumps({"w": [1.0]}, protocol=proto))
        with pytest.raises(ModelError, match="Python pickle"):
            load_state_dict_file(path)


def _table(path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 300
    pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n), "sex": rng.choice(["F", "M"], n)}).to_csv(
        path, index=False)


def test_a_table_whose_name_is_not_utf8_is_audited(tmp_path, capsys):
    from fairdesk.cli import main

    name = Path(os.fsdecode(bytes(tmp_path) + b"/tab\xe9le.csv"))
    _table(name)
    code = main(["audit", "groups", str(name), "--label", "y", "--score", "p", "--attribute", "sex", "--threshold",
                 "0.5", "--n-boot", "100", "--quiet", "--json", str(tmp_path / "o.json")])
    assert code == 0, capsys.readouterr().err
    assert "tab\\\\xe9le.csv" in (tmp_path / "o.json").read_text(encoding="utf-8")


def test_a_model_card_says_what_damaged_roles_leave_out(tmp_path):
    from fairdesk.cli import main
    from fairdesk.jobs.reports import export_model_card

    _table(tmp_path / "t.csv")
    assert main(["audit", "groups", str(tmp_path / "t.csv"), "--label", "y", "--score", "p", "--attribute", "sex",
                 "--threshold", "0.5", "--n-boot", "100", "--quiet", "--project", str(tmp_path / "p.fairdesk"),
                 "--json", str(tmp_path / "o.json")]) == 0
    with sqlite3.connect(tmp_path / "p.fairdesk") as con:
        con.execute("UPDATE datasets SET roles='{not json'")
    export_model_card(tmp_path / "p.fairdesk", 1, tmp_path / "c.json", intended_use=None,
                      out_markdown=tmp_path / "c.md")
    card = (tmp_path / "c.md").read_text(encoding="utf-8")
    assert "damaged" in card and "missing" in card
