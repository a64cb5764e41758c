"""Load prediction or feature tables (CSV, Parquet) with messages a user can act on."""
from __future__ import annotations

import csv
import hashlib
import io
import unicodedata
from pathlib import Path

import pandas as pd

from fairdesk.core.errors import DataError

SUPPORTED = {".csv": "CSV", ".tsv": "TSV", ".txt": "CSV", ".parquet": "Parquet", ".pq": "Parquet"}


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def table_sha256(df: pd.DataFrame) -> str:
    """A content hash of a table (column names, dtypes and values; row order matters)."""
    digest = hashlib.sha256()
    digest.update("\x1f".join(map(str, df.columns)).encode())
    digest.update("\x1f".join(map(str, df.dtypes)).encode())
    digest.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
    return digest.hexdigest()


#: the first bytes of files people rename to .csv by mistake -> what they are
_MAGIC = [
    (b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"), (b"MM\x00*", "a TIFF image"), (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive (an Excel .xlsx or Word file is one)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Excel (.xls) or Office file"),
    (b"\x1f\x8b", "a gzip-compressed file"), (b"SQLite format 3\x00", "an SQLite database (a FairDesk project is one)"),
    (b"PAR1", "a Parquet file"), (b"DICM", "a DICOM image"),
]
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_SAMPLE = 1 << 16


def is_pickle(head: bytes) -> bool:
    """Whether the first bytes of a file are a Python pickle's (protocol 2–5: 0x80 and the protocol) — and not a
    safetensors file's, whose 8-byte little-endian header length (its first byte may well be 0x80) is followed by
    the header's "{"."""
    return len(head) >= 2 and head[0] == 0x80 and head[1] in (2, 3, 4, 5) and head[8:9] != b"{"


def _kind_of(head: bytes) -> str | None:
    """What a file is when it is not text, from its first bytes (None: looks like text)."""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if is_pickle(head):
        return "a Python pickle"
    if len(head) > 128 and head[128:132] == b"DICM":
        return "a DICOM image"
    if b"\x00" in head and not head.startswith(_UTF16_BOMS):
        return "a binary file"
    return None


def _text_sample(path: Path, head: bytes) -> tuple[str, str]:
    """(encoding, decoded first ~64 KB cut at a line end). UTF-8 (a BOM is dropped), UTF-16 with a BOM (Excel's
    "Unicode text"), else Windows-1252 (what Excel writes on Windows)."""
    if head.startswith(_UTF16_BOMS):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
    raw = head
    cut = raw.rfind(b"\n") if len(raw) >= _SAMPLE else len(raw)
    raw = raw[:cut if cut > 0 else len(raw)]
    try:
        return encoding, raw.decode(encoding)
    except UnicodeDecodeError as err:
        if encoding == "utf-16":
            raise
        if err.start >= len(raw) - 4 and len(head) >= _SAMPLE:  # a character cut by the sample's end
            return encoding, raw[:err.start].decode(encoding)
        try:
            return "cp1252", raw.decode("cp1252")
        except UnicodeDecodeError:
            raise err from None


def _delimiter(sample: str, suffix: str) -> str:
    if suffix == ".tsv":
        return "\t"
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:  # one column, or too little to tell
        return ","


def _header(sample: str, sep: str) -> list[str]:
    """The first record (RFC 4180: quoted names may hold the separator, quotes and line breaks)."""
    try:
        return next(csv.reader(io.StringIO(sample, newline=""), delimiter=sep), [])
    except csv.Error:
        return []


def _check_duplicates(path: Path, names: list[str]) -> None:
    seen: dict[str, list[int]] = {}
    for i, name in enumerate(names, start=1):
        seen.setdefault(str(name).strip(), []).append(i)
    dup = {n: pos for n, pos in seen.items() if len(pos) > 1}
    if dup:
        listed = "; ".join(f"'{n}' (columns {', '.join(map(str, pos))})" for n, pos in dup.items())
        raise DataError(f"{path.name} has more than one column named {listed}. Give every column its own name "
                        f"and save the table again.")


#: texts pandas reads as missing by default; FairDesk keeps them as text in a text column ("NA" may be a group, "None"
#: an insurance category) and reads them as missing only in a column whose other values are all numbers
NA_LIKE = frozenset({"NA", "N/A", "n/a", "NaN", "nan", "-NaN", "-nan", "null", "NULL", "Null", "None", "none", "<NA>",
                     "#N/A", "#NA", "#N/A N/A", "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN"})
#: where :func:`load_table` leaves what the reader should be told (columns ignored, spellings merged)
NOTES = "fairdesk_notes"


def table_notes(df: pd.DataFrame) -> list[str]:
    """What :func:`load_table` did to a table that the user should be told (empty: nothing)."""
    return list(df.attrs.get(NOTES, []))


def _flat_parquet_columns(path: Path, wanted: list[str] | None) -> tuple[list[str], list[str]]:
    """(columns to read, nested or binary columns left out). A nested (list, struct, map) or binary column holds
    no value FairDesk can audit; one that a role names is refused by name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    names = [str(n) for n in schema.names]
    _check_duplicates(path, names)
    odd = {f.name: str(f.type) for f in schema
           if pa.types.is_nested(f.type) or pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)
           or pa.types.is_fixed_size_binary(f.type)}
    named = [c for c in (wanted or []) if c in odd]
    if named:
        raise DataError(f"{path.name}: column '{named[0]}' holds {odd[named[0]]} values (nested or binary), not one "
                        "value per row; choose a column of numbers or text for that role.")
    keep = [n for n in names if n not in odd and (wanted is None or n in wanted)]
    return keep, [f"'{n}' ({odd[n]})" if n in odd else f"'{n}'" for n in names if n not in keep]


def _read_as_data(df: pd.DataFrame, missing: frozenset[str]) -> tuple[pd.DataFrame, list[str]]:
    """Text values are data: NFC-normalised (merged spellings said), NA-like texts kept unless ``missing`` names
    them or the column is otherwise numeric. Returns the table and the notes for the user."""
    notes = []
    for col in df.columns:
        values = df[col]
        if values.dtype != object and not pd.api.types.is_string_dtype(values):
            continue
        text = values.map(lambda v: unicodedata.normalize("NFC", v) if isinstance(v, str) else v)
        spellings = pd.DataFrame({"nfc": text, "raw": values}).dropna().drop_duplicates()
        merged = spellings["nfc"][spellings["nfc"].duplicated()].unique()
        if len(merged):
            shown = ", ".join(repr(v) for v in merged[:5])
            notes.append(f"Column '{col}': {shown} came in more than one Unicode spelling; the spellings were "
                         "merged (normalised to NFC).")
        is_token = text.isin(NA_LIKE | missing)
        if is_token.any():
            rest = pd.to_numeric(text[~is_token & text.notna()], errors="coerce")
            if len(rest) and rest.notna().all():  # a column of numbers: the token can only mean missing
                text = pd.to_numeric(text.mask(is_token), errors="coerce")
            elif missing:
                text = text.mask(text.isin(missing))
        df[col] = text
    return df, notes


def _nfc_names(path: Path, names: list) -> list[str]:
    """Column names as NFC text, stripped; two names that become one are refused (duplicates)."""
    out = [unicodedata.normalize("NFC", str(c)).strip() for c in names]
    if len(set(out)) < len(out):
        _check_duplicates(path, out)
    return out


def load_table(path: str | Path, nrows: int | None = None, *, columns: list[str] | None = None,
               missing: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """Read a CSV/TSV/Parquet file. Raises :class:`DataError` with the reason and a fix.

    Tables as people have them: a UTF-8 byte-order mark is dropped, UTF-16 (Excel "Unicode text") and
    Windows-1252 files are read, the separator (comma, semicolon, tab, bar) is detected, quoted fields may hold
    separators and line breaks (RFC 4180, header included). Refused with one sentence: duplicate column names
    (named), an empty file, a file with a header but no rows, and a binary file saying what it is ("this is a PNG
    image, not a table").

    Read as data, never as structure: only empty cells are missing; a text such as "NA", "null" or "None" stays
    text unless ``missing`` lists it (or its column is otherwise all numbers, where it can only mean missing).
    Column names and text values are normalised to Unicode NFC; names that become equal are refused as
    duplicates, values that merge are said in :func:`table_notes`. Parquet: nested and binary columns are left
    out and listed in the notes (refused when ``columns`` names one); with ``columns`` only those are read.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"The file {path} does not exist. Check the path or choose the file again.")
    if path.is_dir():
        raise DataError(f"{path} is a folder. Choose a CSV or Parquet file inside it.")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        raise DataError(f"{path.name}: FairDesk reads CSV (.csv, .tsv) and Parquet (.parquet) tables; "
                        f"'{suffix or 'no extension'}' is not one of them. Export the table as CSV or Parquet.")
    kind = SUPPORTED[suffix]
    read_notes: list[str] = []
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SAMPLE)
    except OSError as err:
        raise DataError(f"{path.name} could not be opened ({err.strerror or err}). Check that FairDesk may read "
                        f"it.") from None
    if not head.strip():
        raise DataError(f"{path.name} is empty{' (0 bytes)' if not head else ''}. Check that it is the right file.")
    what = _kind_of(head)
    if what is not None and not (kind == "Parquet" and what in ("a Parquet file", "a binary file")):
        raise DataError(f"{path.name}: this is {what}, not a {kind} table. Choose the table itself, or export it "
                        f"as CSV or Parquet.")
    try:
        if kind == "Parquet":
            keep, ignored = _flat_parquet_columns(path, columns)
            df = pd.read_parquet(path, columns=keep)
            if nrows is not None:
                df = df.head(nrows)
            _check_duplicates(path, [str(c) for c in df.columns])
            if ignored:
                read_notes = [f"{path.name}: {len(ignored)} column(s) were not read (nested or binary, or named "
                              f"by no role): "
                                f"{', '.join(ignored[:10])}{' …' if len(ignored) > 10 else ''}."]
        else:
            try:
                encoding, sample = _text_sample(path, head)
            except UnicodeDecodeError as err:
                raise DataError(f"{path.name} could not be read as CSV: it is neither UTF-8 nor Windows-1252 text "
                                f"(byte {err.start + 1}). Open it in a spreadsheet program and save it again as CSV "
                                f"UTF-8.") from None
            if not sample.strip():
                raise DataError(f"{path.name} is empty. Check that it is the right file.")
            sep = _delimiter(sample, suffix)
            _check_duplicates(path, _header(sample, sep))
            # only an empty cell is missing; pandas' default list ("NA", "null", "None", ...) is applied below,
            # column by column, where it can only mean missing
            df = pd.read_csv(path, sep=sep, encoding=encoding, nrows=nrows, engine="c", keep_default_na=False,
                             na_values=[""])
    except pd.errors.EmptyDataError as err:
        raise DataError(f"{path.name} is empty. Check that it is the right file.") from err
    except (UnicodeDecodeError, pd.errors.ParserError, csv.Error, ValueError, OSError) as err:
        raise DataError(f"{path.name} could not be read as {kind}: {str(err).splitlines()[0]}. "
                        f"Open it in a spreadsheet program and save it again as {kind}.") from err
    if df.shape[1] == 0:
        raise DataError(f"{path.name} has no columns. Check that it is the right file.")
    if df.shape[0] == 0:
        raise DataError(f"{path.name} has column names but no rows. Check that it is the right file.")
    df.columns = _nfc_names(path, list(df.columns))
    df, notes = _read_as_data(df, frozenset(str(m) for m in missing))
    df.attrs[NOTES] = read_notes + notes
    return df
