"""What FairDesk writes for people: spreadsheet-safe tables, outputs that never overwrite inputs, write failures
said in one sentence.

* :func:`write_table` is the one way a table leaves FairDesk (CSV or Parquet, atomically). A CSV goes through
  :func:`spreadsheet_safe` first: every text cell (and column name) that begins with ``=``, ``+``, ``-``, ``@``, a
  tab or a carriage return gets a leading single quote (the OWASP "CSV injection" rule), so a spreadsheet shows it as
  text instead of running it as a formula. Numbers stay numbers: numeric columns are never touched, and a text cell
  that is a plain decimal number such as ``-0.5`` or ``+3e-2`` is left as it is too (a spreadsheet reads it as that
  number; it cannot call anything). FairDesk reads a quoted cell back as written, quote included. Lines end in
  CRLF (RFC 4180), so that pandas quotes a cell holding a lone carriage return. Parquet keeps its
  types and is written unchanged (it is not opened by a spreadsheet as text).
* Which paths may be written at all is decided by the one output guard, :func:`fairdesk.core.guard.guard_outputs`.
* :func:`os_error_sentence` turns a failed read or write (disk full, file size limit, read-only folder) into one
  sentence for the CLI and the GUI.
"""
from __future__ import annotations

import errno
import io
import os
import re
from pathlib import Path
from fairdesk.core import atomic

#: the first characters that make a spreadsheet treat a cell as a formula (OWASP)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def neutralise(value):
    """``value`` with a leading single quote when it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def spreadsheet_safe(df):
    """A copy of ``df`` whose text cells and column names cannot run as spreadsheet formulas (numbers untouched)."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        s = out[col]
        if isinstance(s.dtype, pd.CategoricalDtype):
            out[col] = s.astype(object).map(neutralise)
        elif pd.api.types.is_object_dtype(s.dtype) or pd.api.types.is_string_dtype(s.dtype):
            out[col] = s.map(neutralise)
    out.columns = [neutralise(c) if isinstance(c, str) else c for c in out.columns]
    return out


def table_csv(df) -> str:
    """The CSV text of ``df`` as FairDesk exports it: no index, spreadsheet-safe, RFC 4180 (CRLF line ends; a
    field holding a separator, a quote or a line break — carriage return included — is quoted)."""
    return spreadsheet_safe(df).to_csv(index=False, lineterminator="\r\n")


def released(df, k: int):
    """The copy of a summary table that may leave the workstation (:func:`fairdesk.core.disclosure.release_table`)
    with its rule sentence as a last column ``disclosure`` (first row; the others empty), so that the file itself
    says which k and rules were applied."""
    from fairdesk.core.disclosure import release_table

    out, rule = release_table(df, k)
    out = out.copy()
    out["disclosure"] = [rule] + [""] * (len(out) - 1) if len(out) else []
    return out


def write_table(df, path: str | os.PathLike, *, release_k: int | None = None) -> Path:
    """Write ``df`` atomically: Parquet for ``.parquet``/``.pq``, otherwise spreadsheet-safe CSV (UTF-8). With
    ``release_k`` (a summary table meant to leave the workstation) its :func:`released` copy is written."""
    if release_k is not None:
        df = released(df, release_k)
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        return atomic.write_bytes(path, buf.getvalue())
    return atomic.write_text(path, table_csv(df))


# ----------------------------------------------------------------------------------------------------------------
# Failed reads and writes in one sentence

_WHY = {
    errno.EFBIG: "the file size limit was reached (a quota or 'ulimit -f')",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EACCES: "FairDesk has no permission to write or read there",
    errno.EPERM: "FairDesk has no permission to write or read there",
    errno.EROFS: "the folder is on a read-only disk",
    errno.ENOENT: "a folder on the way does not exist",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
    errno.EEXIST: "a file of that name is in the way",
    errno.ENAMETOOLONG: "the file name is too long",
}


_WRITE_ONLY = {errno.EFBIG, errno.ENOSPC, errno.EDQUOT, errno.EROFS}
_TEMP = re.compile(r"^\.(?P<name>.+)\.[^.]+\.tmp$")  # the temporary file of fairdesk.core.atomic
#: what to do, by cause: a read-only disk is not "free some space", a locked file is not "fix the permissions"
_FIX = {
    errno.EFBIG: "raise the file size limit or write to a disk without one",
    errno.ENOSPC: "free some disk space",
    errno.EDQUOT: "free some space in your quota",
    errno.EROFS: "choose a folder on a disk that can be written",
    errno.EACCES: "choose another folder or ask for permission to write there",
    errno.EPERM: "choose another folder or ask for permission to write there",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "check the path",
    errno.EISDIR: "give a file name, not a folder",
    errno.EEXIST: "choose another name",
    errno.ENAMETOOLONG: "choose a shorter name",
    errno.EBUSY: "close the program that holds it open",
}
_LOCKED_WINERRORS = {32, 33}  # ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION: open in another program


def os_error_sentence(err: OSError) -> str:
    """One sentence for a failed file operation: which file, why, and what to do about that cause. Files written
    earlier stay intact (every output is written atomically). An OSError that is not a failed system call (a
    library's "cannot load" message) is given as its first line."""
    if not err.errno:
        return " ".join((str(err).strip().splitlines() or [type(err).__name__])[0].split())
    name = err.filename or err.filename2
    if name:
        p = Path(os.fsdecode(name))
        m = _TEMP.match(p.name)
        name = str(p.with_name(m.group("name"))) if m else str(p)
    where = f" '{name}'" if name else ""
    if getattr(err, "winerror", None) in _LOCKED_WINERRORS:
        why, fix = "another program has the file open (a spreadsheet or PDF viewer, say)", "close it"
    else:
        why = _WHY.get(err.errno or -1) or (err.strerror or str(err)).rstrip(".")
        fix = _FIX.get(err.errno or -1, "choose another folder")
    verb = "write" if err.errno in _WRITE_ONLY else "use"
    return (f"Could not {verb}{where}: {why}. Earlier files are intact (FairDesk writes every output whole or "
            f"not at all); {fix}, then run the command again.")
