"""A result table as the user takes it away: CSV, Excel (.xlsx) or the clipboard's tab-separated text, with the
small-cell rule applied first.

The rule is :func:`fairdesk.core.disclosure.release_table` ``(df, k) -> (table, sentence)``, the one place the
small-cell rules for tables live.

The Excel file is written by hand (an Office Open XML workbook of one sheet, inline strings, numbers as numbers):
no Excel library is a FairDesk dependency (openpyxl is not installed), and one sheet of values needs ~40 lines.
Text cells pass through :func:`fairdesk.core.export.spreadsheet_safe` first (formula-like text made inert), as CSV.
"""
from __future__ import annotations

import io
import math
import re
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import pandas as pd

from fairdesk.core import atomic
from fairdesk.core.export import spreadsheet_safe, table_csv

def released(df: pd.DataFrame, k: int) -> tuple[pd.DataFrame, str]:
    """``(table, sentence)``: ``df`` with the small-cell rule at ``k`` applied, and one sentence saying what it
    did."""
    from fairdesk.core.disclosure import release_table

    return release_table(df, k)


def clipboard_text(df: pd.DataFrame) -> str:
    """Tab-separated text with a header row (what spreadsheets paste as cells); tabs and line breaks inside a cell
    become spaces."""
    def cell(v) -> str:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return ""
        return re.sub(r"[\t\r\n]+", " ", str(v))

    rows = ["\t".join(cell(c) for c in df.columns)]
    rows += ["\t".join(cell(v) for v in row) for row in df.itertuples(index=False, name=None)]
    return "\n".join(rows) + "\n"


def write_csv(df: pd.DataFrame, path) -> Path:
    return atomic.write_text(Path(path), table_csv(df))


def _column_letter(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def _cell_xml(ref: str, v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)) or v is pd.NA:
        return ""
    if isinstance(v, bool):
        return f'<c r="{ref}" t="b"><v>{int(v)}</v></c>'
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f'<c r="{ref}"><v>{repr(float(v)) if isinstance(v, float) else int(v)}</v></c>'
    # characters XML 1.0 cannot hold become spaces; a carriage return is written as a reference (an XML reader
    # would turn a literal one into a line feed)
    text = escape(re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", " ", str(v)), {"\r": "&#13;"})
    return f'<c r="{ref}" t="inlineStr"><is><t xml:space="preserve">{text}</t></is></c>'


def xlsx_bytes(df: pd.DataFrame, sheet: str = "Table") -> bytes:
    """One-sheet workbook of ``df`` (header row in bold-free text, then values)."""
    safe = spreadsheet_safe(df)
    rows = [list(map(str, safe.columns))] + [[v.item() if hasattr(v, "item") else v for v in row]
                                               for row in safe.itertuples(index=False, name=None)]
    body = "".join(f'<row r="{r + 1}">' + "".join(_cell_xml(f"{_column_letter(c)}{r + 1}", v)
                                                   for c, v in enumerate(row)) + "</row>"
                   for r, row in enumerate(rows))
    ns = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    files = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/xl/workbook.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
            '<Override PartName="/xl/worksheets/sheet1.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>'),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{rel}/officeDocument" Target="xl/workbook.xml"/></Relationships>'),
        "xl/workbook.xml": (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><workbook xmlns="{ns}" xmlns:r="{rel}">'
            f'<sheets><sheet name="{escape(sheet[:31])}" sheetId="1" r:id="rId1"/></sheets></workbook>'),
        "xl/_rels/workbook.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'),
        "xl/worksheets/sheet1.xml": (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet xmlns="{ns}">'
            f"<sheetData>{body}</sheetData></worksheet>"),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # the same table, the same bytes
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text.encode("utf-8"))
    return buf.getvalue()


def write_xlsx(df: pd.DataFrame, path, sheet: str = "Table") -> Path:
    return atomic.write_bytes(Path(path), xlsx_bytes(df, sheet))
