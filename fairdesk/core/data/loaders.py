"""Load prediction or feature tables (CSV, Parquet) with messages a user can act on."""
from __future__ import annotations

import csv
import hashlib
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


def load_table(path: str | Path, nrows: int | None = None) -> pd.DataFrame:
    """Read a CSV/TSV/Parquet file. Raises :class:`DataError` with the reason and a fix."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"The file {path} does not exist. Check the path or choose the file again.")
    if path.is_dir():
        raise DataError(f"{path} is a folder. Choose a CSV or Parquet file inside it.")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        raise DataError(f"{path.name}: FairDesk reads CSV (.csv, .tsv) and Parquet (.parquet) tables; "
                        f"'{suffix or 'no extension'}' is not one of them. Export the table as CSV or Parquet.")
    try:
        if SUPPORTED[suffix] == "Parquet":
            df = pd.read_parquet(path)
            if nrows is not None:
                df = df.head(nrows)
        else:
            sep = "\t" if suffix == ".tsv" else None
            df = pd.read_csv(path, sep=sep, engine="python" if sep is None else "c", nrows=nrows)
    except pd.errors.EmptyDataError as err:
        raise DataError(f"{path.name} is empty. Check that it is the right file.") from err
    except (UnicodeDecodeError, pd.errors.ParserError, csv.Error, ValueError, OSError) as err:
        kind = SUPPORTED[suffix]
        raise DataError(f"{path.name} could not be read as {kind}: {str(err).splitlines()[0]}. "
                        f"Open it in a spreadsheet program and save it again as {kind}.") from err
    if df.shape[1] == 0 or df.shape[0] == 0:
        raise DataError(f"{path.name} has no rows or no columns. Check that it is the right file.")
    df.columns = [str(c).strip() for c in df.columns]
    return df
