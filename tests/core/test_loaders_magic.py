"""A file renamed .csv that is not a table is named by what it is (from its first bytes), in one sentence."""
from __future__ import annotations

import pytest

from fairdesk.core.data.loaders import load_table
from fairdesk.core.errors import DataError

CASES = [(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "a PNG image"), (b"\xff\xd8\xff\xe0\x00\x10JFIF", "a JPEG image"),
         (b"%PDF-1.7\n%\xe2\xe3", "a PDF document"), (b"PK\x03\x04\x14\x00\x06\x00", "a ZIP archive"),
         (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "a gzip-compressed file")]


@pytest.mark.parametrize("head, what", CASES, ids=[w.split()[1] for _, w in CASES])
def test_binary_file_renamed_csv_says_what_it_is(tmp_path, head, what):
    path = tmp_path / "table.csv"
    path.write_bytes(head + bytes(range(256)) * 4)
    with pytest.raises(DataError) as err:
        load_table(path)
    message = str(err.value)
    assert f"this is {what}" in message and "not a CSV table" in message
    assert "codec" not in message and len(message.splitlines()) == 1


def test_text_table_still_loads(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("label,score\n1,0.9\n0,0.2\n", encoding="utf-8")
    assert load_table(path).shape == (2, 2)
