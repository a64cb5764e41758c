"""Atomic file writes: a crash or cancel never leaves a half-written file over an earlier good one, nor the new
empty folders made for it."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def missing_folders(folder: str | Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, outermost first."""
    missing = []
    p = Path(folder)
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    return missing[::-1]


def make_folder(folder: str | Path) -> list[Path]:
    """``mkdir -p``; returns the folders it made, outermost first (for :func:`remove_empty`)."""
    made = []
    try:
        for p in missing_folders(folder):
            p.mkdir()
            made.append(p)
    except BaseException:
        remove_empty(made)
        raise
    return made


def remove_empty(made: list[Path]) -> None:
    """Remove the folders of ``made`` (outermost first) that are empty, innermost first."""
    for p in reversed(made):
        try:
            p.rmdir()
        except OSError:
            break


def write_bytes(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    made = make_folder(path.parent)
    try:
        mode = path.stat().st_mode & 0o777  # keep the permissions of the file being replaced
    except OSError:
        mode = 0o644
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except BaseException:
        remove_empty(made)
        raise
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        remove_empty(made)  # never leave new empty folders behind a failed write
        if isinstance(err, OSError) and err.errno and not err.filename:  # say which file (disk full, size limit)
            raise OSError(err.errno, err.strerror or str(err), str(path)) from err
        raise
    return path


def write_text(path: str | Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))
