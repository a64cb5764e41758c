"""Exports and inputs under fault (issue 10): spreadsheet-safe CSV exports, outputs that never overwrite inputs,
tables as people have them, bad model files and write failures in one sentence, reports whatever the names."""
from __future__ import annotations

import csv
import errno
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairdesk.cli import main
from fairdesk.core.data.loaders import load_table
from fairdesk.core.errors import DataError, ModelError
from fairdesk.core.export import neutralise, os_error_sentence, spreadsheet_safe, table_csv, write_table
from fairdesk.core.guard import guard_outputs

ROOT = Path(__file__).parents[2]
INJECTIONS = ['=HYPERLINK("http://x","y")', "+1+1", "@SUM(A1)", "-cmd", "\t=1", "\r=1"]


# ----------------------------------------------------------------------------------------------------------------
# Spreadsheet-safe exports

def test_neutralise_the_owasp_rule():
    for v in INJECTIONS:
        assert neutralise(v) == "'" + v
    for v in ["F", "a=b", " =1", "", "1+1", "'=already quoted"]:  # not at the start: left alone
        assert neutralise(v) == v
    # plain decimal numbers in text cells stay numbers (a spreadsheet reads them as numbers, nothing runs)
    for v in ["-0.5", "+3", "-1e-5", "+.5", "-2.", "0.25"]:
        assert neutralise(v) == v
    for v in ["-0.5x", "+1-1", "-1e", "--1", "-"]:
        assert neutralise(v) == "'" + v
    assert neutralise(-0.5) == -0.5 and neutralise(None) is None


def test_spreadsheet_safe_keeps_numbers_numeric_and_quotes_text():
    df = pd.DataFrame({"score": [-0.5, 0.25, -1.0, 2.0, 0.0, 1.0], "group": INJECTIONS,
                       "=bad column": ["-0.5", "ok", "+x", "@", "a", "b"]})
    df["cat"] = pd.Categorical(["=x", "y", "=x", "y", "y", "y"])
    safe = spreadsheet_safe(df)
    assert safe["score"].tolist() == df["score"].tolist() and safe["score"].dtype == float
    assert safe["group"].tolist() == ["'" + v for v in INJECTIONS]
    assert list(safe.columns) == ["score", "group", "'=bad column", "cat"]
    assert safe["'=bad column"].tolist() == ["-0.5", "ok", "'+x", "'@", "a", "b"]
    assert safe["cat"].tolist()[:2] == ["'=x", "y"]
    assert df["group"].tolist() == INJECTIONS  # the caller's table is not changed
    rows = list(csv.reader(io.StringIO(table_csv(df), newline="")))
    assert rows[1][0] == "-0.5" and all(cell[0] == "'" for cell in [r[1] for r in rows[1:]])


def test_write_table_parquet_keeps_values(tmp_path):
    df = pd.DataFrame({"g": INJECTIONS, "x": np.arange(6.0)})
    back = pd.read_parquet(write_table(df, tmp_path / "t.parquet"))
    assert back.equals(df)


def test_train_tabular_export_is_spreadsheet_safe(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 240
    sex = np.array(INJECTIONS[:5] + ["-0.5"])[rng.integers(0, 6, n)]
    df = pd.DataFrame({"pid": np.arange(n), "f_1": rng.normal(size=n), "f_2": rng.normal(size=n),
                       "y_a": rng.integers(0, 2, n), "sex": sex})
    df.to_csv(tmp_path / "features.csv", index=False)
    out = tmp_path / "preds.csv"
    assert main(["train", "tabular", str(tmp_path / "features.csv"), "--keep", "sex", "--patient-id", "pid",
                 "--out", str(out), "--quiet"]) == 0
    rows = list(csv.DictReader(out.open(newline="", encoding="utf-8")))
    cells = {r["sex"] for r in rows}
    assert cells <= {"'" + v for v in INJECTIONS[:5]} | {"-0.5"} and len(cells) >= 5
    assert not any(c.startswith(("=", "+", "@", "\t")) or c.startswith("-") and c != "-0.5"
                   for r in rows for c in r.values())
    scores = [float(r["score"]) for r in rows]  # numbers stay numbers
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_every_csv_export_goes_through_the_one_helper():
    """No module but fairdesk/core/export.py writes CSV itself (``to_csv`` or ``csv.writer``)."""
    offenders = []
    for path in (ROOT / "fairdesk").rglob("*.py"):
        if path.name == "export.py":
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in (r"\.to_csv\(", r"csv\.writer\(", r"csv\.DictWriter\("):
            if re.search(pattern, text):
                offenders.append(f"{path.relative_to(ROOT)}: {pattern}")
    assert offenders == []


def test_demo_images_exports_are_safe(tmp_path):
    """The demo's CSVs (labels.csv, exact-counterfactual-predictions.csv) are written by the helper too."""
    from fairdesk.core.synthetic import morpho

    data = morpho.make_morpho(6, seed=0)
    csv_path = morpho.write_folder(data, tmp_path / "imgs")
    assert load_table(csv_path).shape[0] == 6


# ----------------------------------------------------------------------------------------------------------------
# Outputs never overwrite inputs

def test_check_outputs_resolves_links_and_relative_paths(tmp_path, monkeypatch):
    data = tmp_path / "d.csv"
    data.write_text("a\n1\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sym.csv").symlink_to(data)
    (tmp_path / "hard.csv").hardlink_to(data)
    (tmp_path / "sub").mkdir()
    for given in ["d.csv", "./sub/../d.csv", "sym.csv", "hard.csv", str(data)]:
        with pytest.raises(DataError, match="never overwrites"):
            guard_outputs([("--json", given)], inputs=[("the data table", str(data))])
    model = tmp_path / "model"
    model.mkdir()
    with pytest.raises(DataError, match="never writes into a model folder"):
        guard_outputs([("--json", "model/config.json")], models=[("the model folder", str(model))])
    with pytest.raises(DataError, match="are the same file"):
        guard_outputs([("--json", "o.json"), ("--pdf", str(tmp_path / "o.json"))])
    guard_outputs([("--json", "o.json"), ("--pdf", "o.pdf")], inputs=[("the data table", str(data))],
                  models=[("the model folder", str(model))])  # distinct paths pass


def test_json_on_the_project_is_refused_and_the_project_kept(tmp_path, capsys):
    rng = np.random.default_rng(1)
    n = 200
    pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.uniform(size=n), "sex": rng.choice(["F", "M"], n)}).to_csv(
        tmp_path / "d.csv", index=False)
    project = tmp_path / "p.fairdesk"
    base = ["audit", "groups", "--threshold", "0.5", str(tmp_path / "d.csv"), "--label", "y", "--score", "p", "--attribute", "sex",
            "--n-boot", "100", "--quiet"]
    assert main(base + ["--json", str(tmp_path / "a.json"), "--project", str(project)]) == 0
    before = project.read_bytes()
    assert main(base + ["--json", str(project), "--project", str(project)]) == 2
    assert main(["report", "--project", str(project), "--audit", "1", "--pdf", str(project)]) == 2
    assert main(base + ["--json", str(tmp_path / "d.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("FairDesk never overwrites its inputs") == 3 and "Traceback" not in err
    assert project.read_bytes() == before
    from fairdesk.jobs.reports import export_report  # the GUI's report export goes through the same check

    with pytest.raises(DataError, match="never overwrites"):
        export_report(project, 1, tmp_path / "." / "p.fairdesk")
    assert project.read_bytes() == before


# ----------------------------------------------------------------------------------------------------------------
# Tables as people have them

GOOD = "pid,y,p,sex\n1,1,0.5,F\n2,0,0.25,M\n"


@pytest.mark.parametrize("name, data", [
    ("bom.csv", b"\xef\xbb\xbf" + GOOD.encode()),
    ("crlf.csv", GOOD.replace("\n", "\r\n").encode()),
    ("semicolon.csv", GOOD.replace(",", ";").encode()),
    ("excel-unicode.txt", b"\xff\xfe" + GOOD.replace(",", "\t").encode("utf-16-le")),
    ("bom.tsv", b"\xef\xbb\xbf" + GOOD.replace(",", "\t").encode()),
])
def test_tables_as_people_have_them(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    df = load_table(path)
    assert list(df.columns) == ["pid", "y", "p", "sex"]
    assert df["p"].tolist() == [0.5, 0.25] and df["sex"].tolist() == ["F", "M"]


def test_rfc4180_quoted_header_with_line_break_and_commas(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('"patient\nid","score, calibrated","say ""hi"""\n1,0.5,"a\nb"\n2,0.25,c\n', encoding="utf-8")
    df = load_table(path)
    assert list(df.columns) == ["patient\nid", "score, calibrated", 'say "hi"']
    assert len(df) == 2 and df.iloc[0, 2] == "a\nb"


def test_windows_1252_file_is_read(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("sex;y\nFémme;1\nMänn;0\n".encode("cp1252"))
    assert load_table(path)["sex"].tolist() == ["Fémme", "Männ"]


@pytest.mark.parametrize("header, words", [
    ("sex,y,sex", "'sex' (columns 1, 3)"),
    ("\ufeffpid,y,pid , x,x", "'pid' (columns 1, 3); 'x' (columns 4, 5)"),
])
def test_duplicate_column_names_are_refused_with_the_names(tmp_path, header, words):
    path = tmp_path / "dup.csv"
    n = header.count(",") + 1
    path.write_text(header + "\n" + ",".join(["1"] * n) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_table(path)
    assert words in str(info.value) and "more than one column named" in str(info.value)


def test_duplicate_columns_in_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table([[1, 2], [3, 4]], names=["a", "a"]), tmp_path / "d.parquet")
    with pytest.raises(DataError, match="more than one column named 'a'"):
        load_table(tmp_path / "d.parquet")


@pytest.mark.parametrize("data, words", [
    (b"", "is empty (0 bytes)"),
    (b"  \n\r\n\t\n", "is empty"),
    (b"\xef\xbb\xbf", "is empty"),
    (b"a,b\n", "has column names but no rows"),
    (b"\x89PNG\r\n\x1a\n" + bytes(40), "this is a PNG image, not a CSV table"),
    (b"%PDF-1.4\n%..." + bytes(10), "this is a PDF document"),
    (b"PK\x03\x04" + bytes(30), "a ZIP archive (an Excel .xlsx or Word file is one)"),
    (b"SQLite format 3\x00" + bytes(100), "an SQLite database"),
    (b"\xff\xd8\xff\xe0" + bytes(30), "a JPEG image"),
    (b"\x80\x04\x95" + bytes(30), "a Python pickle"),
    (b"abc\x00def\x00" * 10, "a binary file"),
])
def test_empty_and_binary_files_say_what_they_are(tmp_path, data, words):
    path = tmp_path / "table.csv"
    path.write_bytes(data)
    with pytest.raises(DataError) as info:
        load_table(path)
    message = str(info.value)
    assert words in message and "codec" not in message and "\n" not in message


def test_image_table_readers_use_the_loader(tmp_path):
    """The image CSV (cit / generator / import) strips the BOM too, so 'Path' is found."""
    from PIL import Image

    from fairdesk.core.data.images import ImageRoles, open_image_folder

    for i in range(4):
        Image.fromarray(np.full((8, 8), 40 * i, np.uint8)).save(tmp_path / f"i{i}.png")
    (tmp_path / "t.csv").write_bytes(b"\xef\xbb\xbfPath,sex,patient_id\n" + b"".join(
        f"i{i}.png,{'FM'[i % 2]},{i}\n".encode() for i in range(4)))
    ds = open_image_folder(tmp_path / "t.csv", tmp_path, ImageRoles(path="Path", attributes=("sex",),
                                                                    patient_id="patient_id"))
    assert len(ds) == 4
    (tmp_path / "png.csv").write_bytes((tmp_path / "i0.png").read_bytes())
    with pytest.raises(DataError, match="this is a PNG image"):
        open_image_folder(tmp_path / "png.csv", tmp_path)


# ----------------------------------------------------------------------------------------------------------------
# Bad model files and write failures: one sentence

@pytest.fixture
def classifier_folder(tmp_path):
    pytest.importorskip("torch")
    from fairdesk.core.models.image_classifier import ClassifierConfig, ImageClassifier, build_architecture

    cfg = ClassifierConfig(width=4, image_size=8)
    folder = tmp_path / "clf"
    ImageClassifier(build_architecture("small_cnn", 1, 1, 4), cfg).save(folder)
    return folder


def test_classifier_folder_faults(classifier_folder):
    import pickle

    from fairdesk.core.models.image_classifier import load_classifier

    assert load_classifier(classifier_folder).outputs == ("disease",)
    cfg_file = classifier_folder / "config.json"
    good = json.loads(cfg_file.read_text())
    from fairdesk.core.jsonable import NewerKeysNote

    cfg_file.write_text(json.dumps({**good, "trust_remote_code": True}))  # a key this version does not know: ignored
    with pytest.warns(NewerKeysNote, match="ignored: trust_remote_code"):
        assert load_classifier(classifier_folder).outputs == ("disease",)
    cases = [
        ({**good, "width": "wide"}, "'width' must be a positive whole number"),
        ({**good, "outputs": "disease"}, "'outputs' must be a list"),
        ({**good, "extra": {"blocks": 2}}, "does not take the settings"),
        ([1, 2], "must hold a JSON object"),
    ]
    for cfg, words in cases:
        cfg_file.write_text(json.dumps(cfg))
        with pytest.raises(ModelError) as info:
            load_classifier(classifier_folder)
        assert words in str(info.value), str(info.value)
    cfg_file.write_text("{not json")
    with pytest.raises(ModelError, match="is not valid JSON"):
        load_classifier(classifier_folder)
    cfg_file.write_text(json.dumps(good))
    (classifier_folder / "model.safetensors").write_bytes(pickle.dumps({"w": [1.0, 2.0]}))
    with pytest.raises(ModelError) as info:
        load_classifier(classifier_folder)
    assert "not a readable safetensors file (it looks like a Python pickle, which FairDesk never loads)" in \
        str(info.value)
    (classifier_folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelError, match="not a readable safetensors file"):
        load_classifier(classifier_folder)


@pytest.mark.parametrize("code, words", [
    (errno.EFBIG, "the file size limit was reached"), (errno.ENOSPC, "the disk is full"),
    (errno.EROFS, "read-only disk"), (errno.EACCES, "no permission"),
])
def test_os_errors_in_one_sentence(code, words, tmp_path):
    err = OSError(code, "strerror", str(tmp_path / ".out.json.abc123.tmp"))
    text = os_error_sentence(err)
    assert words in text and f"'{tmp_path / 'out.json'}'" in text and "\n" not in text


def test_library_os_error_is_its_first_line():
    assert os_error_sentence(OSError("Can't load tokenizer for 'x'.\nMake sure that:\n- it exists")) == \
        "Can't load tokenizer for 'x'."


def test_read_only_output_folder(tmp_path, capsys, monkeypatch):
    """A read-only folder (simulated: the tests may run as root, who may write anywhere) is refused before the
    command does any work, in one sentence."""
    import os as _os

    real_access = _os.access
    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr("fairdesk.core.guard.os.access",
                        lambda p, mode: False if Path(p) == ro else real_access(p, mode))
    code = main(["bench", "cit-synthetic", "--json", str(ro / "o.json"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "read-only" in err and len(err.strip().splitlines()) == 1


def test_full_disk_during_the_write_keeps_the_earlier_file(tmp_path, capsys, monkeypatch):
    """ENOSPC in the middle of an atomic write: one sentence, the earlier file intact, no temporary file left."""
    from fairdesk.core import atomic

    out = tmp_path / "preds.csv"
    out.write_text("earlier\n")
    real_fdopen = atomic.os.fdopen

    class Full(io.RawIOBase):
        def __init__(self, fd):
            self.handle = real_fdopen(fd, "wb")

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            self.handle.close()

    monkeypatch.setattr(atomic.os, "fdopen", lambda fd, mode: Full(fd))
    with pytest.raises(OSError) as info:
        write_table(pd.DataFrame({"a": [1]}), out)
    assert "the disk is full" in os_error_sentence(info.value) and "preds.csv" in os_error_sentence(info.value)
    assert out.read_text() == "earlier\n" and sorted(p.name for p in tmp_path.iterdir()) == ["preds.csv"]


# ----------------------------------------------------------------------------------------------------------------
# Every stored audit can be reported, whatever its names

LONG = "G" * 160
NAMES = [LONG, "\u202eevil\u202c", "<b>&amp;<font color='red'>x</font>", "عربي \u2067RTL\u2069"]


def _text(pdf: Path) -> str:
    if shutil.which("pdftotext"):
        return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    from fairdesk.core.reports.pdf import visible  # no extractor: check the PDF is well formed at least

    assert pdf.read_bytes().startswith(b"%PDF") and visible("\u202e") == "⟨RLO⟩"
    return ""


def test_group_audit_pdf_with_hostile_names(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.uniform(size=n), "grp": rng.choice(NAMES, n)})
    df.to_csv(tmp_path / "names.csv", index=False)
    pdf = tmp_path / "n.pdf"
    code = main(["audit", "groups", "--threshold", "0.5", str(tmp_path / "names.csv"), "--label", "y", "--score", "p", "--attribute", "grp",
                 "--n-boot", "100", "--json", str(tmp_path / "n.json"), "--pdf", str(pdf),
                 "--project", str(tmp_path / "p.fairdesk"), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert main(["report", "--project", str(tmp_path / "p.fairdesk"), "--audit", "1", "--pdf",
                 str(tmp_path / "again.pdf")]) == 0
    text = _text(pdf)
    if text:
        assert "⟨RLO⟩evil⟨PDF⟩" in text and "\u202e" not in text and "\u2067" not in text and "⟨RLI⟩" in text
        assert "<b>&amp;<font" in text  # markup printed as the name, not applied
        assert "[1] in full: " + LONG[:40] in text
        assert LONG[:30] + "…" in text.replace("\n", "")


def test_cit_report_with_hostile_output_names(tmp_path, capsys):
    """A second report kind: counterfactual invariance from a predictions table whose output and attribute names
    are long, carry bidi controls and markup."""
    rng = np.random.default_rng(2)
    n = 120
    names = ["O" * 150, "<i>out</i>&\u202eput"]
    df = pd.DataFrame({"sex": rng.choice(["F" * 120, "\u202dM"], n), "z_0": rng.normal(size=n)})
    for name in names:
        df[name] = rng.uniform(size=n)
        df[name + "__cf"] = np.clip(df[name] + rng.normal(0, 0.01, n), 0, 1)
    df.to_csv(tmp_path / "cf.csv", index=False)
    pdf = tmp_path / "cit.pdf"
    code = main(["audit", "cit-predictions", "--predictions", str(tmp_path / "cf.csv"), "--attribute", "sex",
                 "--json", str(tmp_path / "cit.json"), "--pdf", str(pdf), "--quiet"])
    assert code == 0, capsys.readouterr().err
    text = _text(pdf)
    if text:
        assert "\u202e" not in text and "\u202d" not in text and "⟨RLO⟩" in text and "<i>out</i>" in text


def test_table_widths_never_go_negative():
    """Many narrow columns plus one unbreakable name: every column keeps room for its padding."""
    from fairdesk.core.reports.document import Report, Section, Table
    from fairdesk.core.reports.pdf import render_bytes

    rows = [[LONG * 2] + [f"{i}" for i in range(13)], ["x"] * 14]
    header = ["Group"] + [f"Column number {i}" for i in range(13)]
    report = Report(title="t", subtitle="", date="", suppress_k=11, footer="", sections=[
        Section(key="s", title="s", blocks=[Table(header, rows, title="wide"), Table(["Item", "Value"],
                                                                                      [["path", LONG * 3]])])])
    assert render_bytes(report).startswith(b"%PDF")
