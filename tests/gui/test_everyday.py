"""The analyst's everyday in the window: export and copy a table (small-cell rule first), Help › User guide offline,
File › Manage audits (rename, delete with undo until the project closes, compare two audits)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
import zipfile

import pandas as pd
import pytest
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox

from fairdesk.core import table_export
from fairdesk.gui.widgets.tables import DataFrameView
from fairdesk.gui.widgets.table_export import copy_table, export_table

FRAME = pd.DataFrame({"group": ["F", "M", "=cmd()"], "n": [5, 120, 40], "rate": [0.5, 0.25, 0.125],
                      "verdict": ["differs", "equivalent", None]})


def _xlsx_cells(path) -> list[list[str]]:
    """The workbook read back with zipfile and ElementTree (an independent reader; no Excel library is installed)."""
    ns = {"s": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        root = ET.fromstring(z.read("xl/worksheets/sheet1.xml"))
    rows = []
    for row in root.iterfind(".//s:row", ns):  # cells by their column letter: a blank cell is not written
        cells = {"".join(ch for ch in c.get("r") if ch.isalpha()): "".join(c.itertext()) for c in row.iterfind("s:c", ns)}
        width = max((ord(col) - 64 for col in cells), default=0)
        rows.append([cells.get(chr(65 + i), "") for i in range(width)])
    return rows


def test_export_and_copy_apply_the_small_cell_rule(window, tmp_path):
    view = DataFrameView(window)
    view.set_frame(FRAME)
    csv = export_table(view, tmp_path / "t.csv", "csv")
    xlsx = export_table(view, tmp_path / "t", "xlsx")
    assert xlsx == tmp_path / "t.xlsx"
    back = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert list(back["n"]) == ["", "120", ""]  # 5 < k = 11 is withheld, and 40 with it (120 + 40 + 5 is known)
    assert back["group"][2] != "=cmd()"  # a formula-like cell is made inert
    cells = _xlsx_cells(xlsx)
    assert cells[0] == ["group", "n", "rate", "verdict"] and cells[1][:3] == ["F", "", ""]
    assert cells[2] == ["M", "120", "0.25", "equivalent"] and len(cells) == 4
    text = copy_table(view)
    assert QGuiApplication.clipboard().text() == text
    assert text.splitlines()[1].split("\t")[:3] == ["F", "", ""]
    assert "k = 11" in window.statusBar().currentMessage()
    # the filter shown is what is exported
    view.filter.setText("equivalent")
    assert pd.read_csv(export_table(view, tmp_path / "f.csv"))["group"].tolist() == ["M"]


def test_release_table_is_the_rule_when_present():
    table, sentence = table_export.released(FRAME, 11)
    assert "5" not in table["n"].astype(str).tolist() and sentence


def test_user_guide_opens_offline_and_follows_its_links(window):
    from PySide6.QtCore import QUrl

    dialog = window.show_guide()
    assert "FairDesk user guide" in dialog.browser.toPlainText()
    dialog.follow(QUrl("from-fairlearn.md"))
    assert dialog.page == "from-fairlearn.md" and "MetricFrame" in dialog.browser.toPlainText()
    dialog.follow(QUrl("https://example.org/x.md"))  # a web link is never fetched: still the page it was
    assert dialog.page == "from-fairlearn.md" and "MetricFrame" in dialog.browser.toPlainText()
    assert not dialog.show_page("../../README.md")  # nothing outside the guide folder
    dialog.close()


@pytest.fixture
def two_audits(window, tmp_path):
    import numpy as np

    from fairdesk.core.project import Project
    import fairdesk as fd

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"y": rng.integers(0, 2, 400), "sex": rng.choice(["F", "M"], 400)})
    df["p"] = np.clip(0.3 * df["y"] + rng.uniform(0, 0.7, 400), 0, 1)
    project = Project(tmp_path / "m.fairdesk")
    ids = [project.add_audit(f"at {t}", "groups", fd.audit_groups(df, label="y", score="p", attributes=["sex"],
                                                                  threshold=t, n_boot=200).document)
           for t in (0.3, 0.6)]
    window.open_project(project.path)
    return project, ids


def _select(dialog, ids):
    from PySide6.QtCore import Qt

    for i in range(dialog.list.count()):
        item = dialog.list.item(i)
        item.setSelected(item.data(Qt.ItemDataRole.UserRole)[0] in ids)


def test_rename_delete_undo_and_compare(window, two_audits, monkeypatch, run_and_wait, tmp_path):
    project, (a, b) = two_audits
    dialog = window.manage_audits()
    assert dialog.list.count() == 2
    _select(dialog, [a])
    dialog.rename_selected("threshold 0.3")
    assert project.audits()[0].name == "threshold 0.3"
    text = project.audit_json(a)
    _select(dialog, [a])
    monkeypatch.setattr(QMessageBox, "question", lambda *args, **kw: QMessageBox.StandardButton.No)
    dialog.delete_selected()
    assert len(project.audits()) == 2  # "No": nothing deleted
    monkeypatch.setattr(QMessageBox, "question", lambda *args, **kw: QMessageBox.StandardButton.Yes)
    dialog.delete_selected()
    assert [x.id for x in project.audits()] == [b] and dialog.undo_button.isEnabled()
    assert dialog.undo_delete() == a and project.audit_json(a) == text
    # compare the two: the job runs, the dialog shows the words and the rows, the PDF is written
    _select(dialog, [a, b])
    assert dialog.compare_button.isEnabled()
    import time

    from layout_walk import settle

    cmp_dialog = dialog.compare_selected()
    deadline = time.time() + 60
    while cmp_dialog.comparison is None and time.time() < deadline:
        settle()
        time.sleep(0.05)
    assert "changed verdict" in cmp_dialog.words.text() and cmp_dialog.table.row_count() > 0
    run_and_wait(window, lambda: cmp_dialog.export_pdf(tmp_path / "cmp.pdf"))
    assert (tmp_path / "cmp.pdf").read_bytes()[:5] == b"%PDF-"
    # a deleted audit's undo ends when another project opens
    _select(dialog, [b])
    dialog.delete_selected()
    from fairdesk.core.project import Project

    window.open_project(Project(tmp_path / "other.fairdesk").path)
    assert window.deleted_audits == []
