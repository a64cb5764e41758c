"""The project store: what was loaded, trained and audited, with provenance.

One SQLite file per project (``*.fairdesk``), and only that file: users copy project files to share them, so a
project is one complete file whenever FairDesk is not writing it.

* Journal mode ``DELETE`` (SQLite's rollback journal), ``synchronous=FULL``. The journal exists only while a
  transaction commits and is deleted when it ends; a commit that fails (disk full, file-size limit) is rolled back
  from it, leaving the file as it was. WAL would keep ``-wal``/``-shm`` files beside the project while any
  connection is open (readers too), and a checkpoint that fails on close leaves the main file incomplete
  without them; FairDesk's writes are rare, small and never concurrent with long reads, so WAL's
  reader/writer concurrency buys nothing here. Projects written in WAL mode by earlier versions are switched
  back (their WAL folded in) when opened.
* Every store is one transaction (:meth:`Project.transaction`): a dataset and the audit or model that goes with it
  are stored together or not at all, so a crash, a kill, a cancelled job or the app being closed mid-job never
  leaves a half-written record and never touches earlier results. After the commit the new rows are read back
  through a fresh connection; a write that fails says so (:class:`ProjectError`) and says whether the project is
  as it was.
* A new project is built in a temporary file and linked into place complete. An existing SQLite file that is not a
  FairDesk project is refused without writing to it; opening a project that does not exist with ``create=False``
  (every reading path) creates nothing.

Tables are stored as Parquet bytes and results as JSON: nothing is pickled.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import tempfile
import threading
from collections import OrderedDict
from contextlib import closing, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import pandas as pd

from fairdesk.core.errors import ProjectError
from fairdesk.core.jsonable import loads_checked, loads_in_pieces
from fairdesk.core.provenance import now_utc

SUFFIX = ".fairdesk"


def relative_to_project(path: str | Path, project_path: str | Path) -> str | None:
    """``path`` relative to the project file's folder (``None`` on another drive), stored beside every absolute
    path a project records (model folders, image folders) so that a project moved or renamed together with its
    files — the demo's staging folder, a copied study folder — still finds them."""
    try:
        return os.path.relpath(Path(path).resolve(), Path(project_path).resolve().parent)
    except ValueError:  # Windows: another drive
        return None


def located(recorded: str | Path, relative: str | None, project_path: str | Path) -> Path:
    """Where a recorded file or folder is now: the absolute path recorded while it exists, else the same place
    relative to where the project file is now (when that exists), else the recorded path (the caller's "not there
    any more" message names it)."""
    path = Path(recorded)
    if not path.exists() and relative:
        moved = Path(project_path).resolve().parent / relative
        if moved.exists():
            return moved.resolve()
    return path


class DamagedAudit(ProjectError):
    """A stored audit document does not have its kind's shape (the other audits of the project are usable)."""

SCHEMA_VERSION = 1

_TABLES = ("meta", "datasets", "models", "audits")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS datasets (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, source TEXT, sha256 TEXT NOT NULL,
    roles TEXT, n_rows INTEGER NOT NULL, columns TEXT NOT NULL, created TEXT NOT NULL, origin TEXT, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS models (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, dataset_id INTEGER, predictions_id INTEGER,
    info TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS audits (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, dataset_id INTEGER, result TEXT NOT NULL,
    created TEXT NOT NULL);
"""
# audit_checks is not in _TABLES: a project without it (written before it existed) is opened without a write (a
# read-only copy stays readable) and gets the table with its next audit; until then its audits are checked on read.
_CHECKS_TABLE = ("CREATE TABLE IF NOT EXISTS audit_checks (audit_id INTEGER PRIMARY KEY, sha256 TEXT NOT NULL, "
                 "schema_sha256 TEXT NOT NULL)")
_SCHEMA += _CHECKS_TABLE + ";\n"


@dataclass(frozen=True)
class DatasetInfo:
    id: int
    name: str
    kind: str  # "predictions" or "features"
    source: str | None
    sha256: str
    roles: dict | None
    n_rows: int
    columns: list[str]
    created: str
    origin: dict | None  # e.g. {"model_id": 3} for predictions written by a trained model
    damaged: str | None = None  # why the stored roles or origin were set aside (None: they were read as stored)


@dataclass(frozen=True)
class ModelInfo:
    id: int
    name: str
    kind: str
    dataset_id: int | None
    predictions_id: int | None
    info: dict
    created: str
    damaged: str | None = None  # why the stored record was set aside (``info`` is then empty)


@dataclass(frozen=True)
class AuditInfo:
    id: int
    name: str
    kind: str
    dataset_id: int | None
    created: str


@dataclass(frozen=True)
class DeletedAudit:
    """A deleted audit as it was stored (:meth:`Project.delete_audit`), enough to restore it exactly."""
    id: int
    name: str
    kind: str
    dataset_id: int | None
    result: str
    created: str
    check: tuple[str, str] | None = None


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


#: why an SQLite call failed, told from its message (SQLite gives no errno), and what the user can do about it
_LOCKED = ("locked by another program (another FairDesk window or fairdesk-cli command, or a database tool, is "
           "writing to it); close that program or let it finish, then try again")
_READ_ONLY = ("the file, its folder or the disk is read-only; copy the project to a folder you can write to, or "
              "ask for write permission")
_FULL = "free some disk space and run it again"


def sqlite_cause(err: BaseException) -> str | None:
    """The cause and fix for an SQLite error that is not damage: locked, read-only, disk full, no permission
    (None: the message names no such cause)."""
    text = str(err).lower()
    if "locked" in text or "busy" in text:
        return _LOCKED
    if "readonly" in text or "read-only" in text:
        return _READ_ONLY
    if "disk is full" in text or "database or disk is full" in text:
        return _FULL
    if "unable to open" in text:
        return "FairDesk cannot open the file (no permission, or its folder is missing); check the file and its folder"
    return None


def os_cause(err: OSError) -> str:
    """The fix for a failed file operation on a project, by its errno."""
    import errno

    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return _FULL
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "the folder or disk is read-only or FairDesk may not write there; choose a folder you can write to"
    return "choose another folder"


# What the records beside the audits must look like before any page or job reads them: the roles of a dataset map a
# role to a column name, a list of names or nothing; its origin, and a model's record, are JSON objects.
_NAMES = {"type": ["string", "null", "array"], "items": {"type": "string"}}
ROLES_SCHEMA = {"type": "object", "additionalProperties": _NAMES}
RECORD_SCHEMA = {"type": "object"}
COLUMNS_SCHEMA = {"type": "array", "items": {"type": "string"}}
STORED_SCHEMAS = {"roles": ROLES_SCHEMA, "record": RECORD_SCHEMA, "columns": COLUMNS_SCHEMA}


def document_digest(text) -> str:
    """SHA-256 of a stored document's bytes (its text in UTF-8). hashlib releases the interpreter lock while it hashes
    a long document, so the check of a digest never stalls the Qt thread."""
    data = text if isinstance(text, (bytes, bytearray)) else str(text).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def validated(kind: str, text) -> tuple[str, str] | None:
    """``(document digest, schema digest)`` when ``text`` is a document that kind ``kind``'s schema accepts (what
    :meth:`Project.add_audit` stores beside it); ``None`` when it is not JSON, breaks the schema, or its kind has no
    schema (reading checks such a document as it always did)."""
    from fairdesk.core.kinds import AUDIT_KINDS

    if kind not in AUDIT_KINDS or AUDIT_KINDS[kind].schema is None:
        return None
    try:
        doc = loads_in_pieces(text)
    except (TypeError, ValueError):
        return None
    return _passed(kind, text, doc)


def _passed(kind: str, text, doc) -> tuple[str, str] | None:
    """The digests of ``text`` when ``doc`` — exactly the values ``text`` reads back as — passes kind's schema."""
    from fairdesk.core.kinds import check_document, schema_digest

    return None if check_document(kind, doc) else (document_digest(text), schema_digest(kind))


def written(kind: str, document) -> tuple[str, tuple[str, str] | None]:
    """``(text, digests)``: the text :meth:`Project.add_audit` stores for ``document`` and :func:`validated`'s
    digests of it. ``document`` is the text itself, or the JSON values (a ``dict``) the text is written from here —
    ``json.dumps(document, indent=1, allow_nan=False)``, so the text stored is always the text of the values checked.
    Values that are plain JSON (what the text reads back as: :func:`_reads_back_as`) are checked as they are, without
    parsing the text just written (for the demo's group audit a 3 MB decode); any others (a tuple, a key that is not
    a ``str``, a subclass) are checked as the text reads back. Values with NaN or ±inf, or that JSON cannot hold,
    raise ``ValueError`` / ``TypeError`` (nothing is stored)."""
    from fairdesk.core.kinds import AUDIT_KINDS

    if isinstance(document, (str, bytes, bytearray)):
        return document, validated(kind, document)
    text = json.dumps(document, indent=1, allow_nan=False)
    if kind not in AUDIT_KINDS or AUDIT_KINDS[kind].schema is None:
        return text, None
    if not _reads_back_as(document):
        return text, validated(kind, text)
    return text, _passed(kind, text, document)


def storable_name(text: str) -> str:
    """A file name as text SQLite (UTF-8) can store and a report can print: bytes of the name that are not UTF-8
    (which Python keeps as lone surrogates) shown as ``\\xNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace").decode("utf-8")


_JSON_SCALARS = (str, int, float, bool, type(None))


def _reads_back_as(value) -> bool:
    """Whether ``json.loads(json.dumps(value))`` is ``value`` again, type for type: dicts with ``str`` keys, lists,
    and ``str``, ``int``, ``float``, ``bool``, ``None`` (exactly those types; finite floats, which ``allow_nan=False``
    has already required). A walk over the values: 0.2 ms against the schema check's 6.9 ms for
    ``tests/data/documents/groups.json``, and in Python, so the interpreter lock is given up as it runs (one
    ``json.loads`` holds it throughout)."""
    stack = [value]
    while stack:
        item = stack.pop()
        of = type(item)
        if of is dict:
            for key, member in item.items():
                if type(key) is not str:
                    return False
                stack.append(member)
        elif of is list:
            stack.extend(item)
        elif of not in _JSON_SCALARS:
            return False
    return True


def _stored_json(text, which: str):
    """``(value, problem)``: a stored JSON field parsed and checked against its schema (``which``: a key of
    ``STORED_SCHEMAS``); ``(None, why)`` when damaged. The value is parsed anew for each caller (callers change it)."""
    if text is None:
        return None, None
    problem = _json_problem(text, which)
    return (None, problem) if problem else (loads_checked(text), None)


@lru_cache(maxsize=1024)
def _json_problem(text, which: str) -> str | None:
    """Why the stored JSON field ``text`` breaks schema ``which`` (None: it holds). Checked once per distinct text in
    a process: the pages list the project's datasets and models on every refresh (opening a project refreshed each
    page, on the Qt thread), and jsonschema's check of every field of every dataset each time cost up to 40 ms there.
    Keyed by the text itself, so any change to a stored field (a byte) is checked anew, whoever wrote it."""
    from fairdesk.core.kinds import schema_problems

    try:
        value = loads_checked(text)
    except (TypeError, ValueError) as err:
        return f"not JSON ({_one_line(err)})"
    problems = schema_problems(value, STORED_SCHEMAS[which], limit=1)
    return problems[0] if problems else None


# The last datasets decoded, by the SHA-256 of their stored Parquet bytes: the GUI's pages read the same dataset
# while a project opens (the group form, the calibration views of an audit of it), each decode 50-100 ms of Arrow
# threads and of the interpreter lock the Qt thread waits for. Keyed by content, so a changed byte is decoded anew.
_FRAMES: OrderedDict[str, pd.DataFrame] = OrderedDict()
_FRAMES_LOCK = threading.Lock()
_FRAMES_KEPT, _FRAMES_BYTES = 4, 256 * 2 ** 20


def _decoded(data: bytes) -> pd.DataFrame:
    key = document_digest(data)
    with _FRAMES_LOCK:
        df = _FRAMES.get(key)
        if df is not None:
            _FRAMES.move_to_end(key)
            return df
    df = pd.read_parquet(io.BytesIO(data))
    with _FRAMES_LOCK:
        _FRAMES[key] = df
        while _FRAMES and (len(_FRAMES) > _FRAMES_KEPT or sum(
                int(f.memory_usage(deep=False).sum()) for f in _FRAMES.values()) > _FRAMES_BYTES):
            _FRAMES.popitem(last=False)
    return df


class Project:
    """A handle on a project file. Cheap to create; every call opens its own connection (thread-safe).

    ``create=False`` (every path that only reads) refuses a path where no project exists instead of creating one.
    """

    def __init__(self, path: str | Path, create: bool = True) -> None:
        self.path = Path(path)
        if self.path.suffix != SUFFIX:
            self.path = self.path.with_suffix(SUFFIX) if not self.path.suffix else self.path
        self._local = threading.local()
        #: opened read-only: the file is on media FairDesk cannot write (a CD, a read-only share), so it is read
        #: as it is — no journal converted, no table added — and every store fails with one sentence
        self.read_only = False
        if self.path.is_dir():
            raise ProjectError(f"{self.path} is a folder, not a FairDesk project file.")
        if not self.path.exists() or self.path.stat().st_size == 0:
            if not create:
                what = "No project at" if not self.path.exists() else "An empty file, not a project, at"
                raise ProjectError(f"{what} {self.path}. Create a new project or choose an existing one.")
            self._create()
        self._open_existing()

    @property
    def name(self) -> str:
        return self.path.stem

    # ---- opening ---------------------------------------------------------------------------------------------
    def _create(self) -> None:
        """Build an empty project in a temporary file and link it into place complete (never half-created)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            os.close(fd)
        except OSError as err:
            raise ProjectError(f"Could not create the project {self.path} ({_one_line(err)}); "
                               f"{os_cause(err)}.") from err
        try:
            with closing(sqlite3.connect(tmp, isolation_level=None)) as con:
                con.execute("PRAGMA journal_mode=DELETE")
                con.execute("BEGIN")
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        con.execute(stmt)
                con.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                con.execute("INSERT INTO meta VALUES ('created', ?)", (now_utc(),))
                con.execute("COMMIT")
            os.chmod(tmp, 0o644)
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            if self.path.exists():  # an empty (0-byte) file: replace it; there is nothing to lose
                os.replace(tmp, self.path)
            else:
                try:
                    os.link(tmp, self.path)  # atomic "create if absent": a concurrent creator's project wins
                except FileExistsError:
                    pass
                except OSError:  # no hard links here (FAT, some network shares): rename, still complete
                    if not self.path.exists():
                        os.replace(tmp, self.path)
        except (OSError, sqlite3.Error) as err:
            fix = os_cause(err) if isinstance(err, OSError) else sqlite_cause(err) or "choose another folder"
            raise ProjectError(f"Could not create the project {self.path} ({_one_line(err)}); nothing was "
                               f"written ({fix}).") from err
        finally:
            Path(tmp).unlink(missing_ok=True)

    def _on_read_only_media(self) -> bool:
        """The project's folder cannot be written (read-only media or share): opening must not write."""
        return not os.access(self.path.parent, os.W_OK) or not os.access(self.path, os.W_OK)

    def _open_existing(self) -> None:
        """Refuse (untouched) anything that is not a FairDesk project; fold an earlier version's WAL back in. On
        media that cannot be written the project is opened read-only instead, without a write."""
        self.read_only = self._on_read_only_media()
        try:
            with closing(self._connect()) as con:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                version = None
                if "meta" in tables:
                    row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                    version = row[0] if row else None
                if version is None:
                    raise ProjectError(f"{self.path.name} is an SQLite database but not a FairDesk project; it was "
                                       "left untouched. Choose a .fairdesk project file or create a new project.")
                try:
                    version = int(version)
                except ValueError:
                    raise ProjectError(f"{self.path.name} has a damaged schema version ({version!r}); it was left "
                                       "untouched.") from None
                if version > SCHEMA_VERSION:
                    raise ProjectError(f"{self.path.name} was written by a newer FairDesk (schema {version}). "
                                       "Update FairDesk to open it.")
                if self.read_only:
                    return  # read as it is: no journal folded in, no table added (nothing may be written)
                if con.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                    try:  # needs the file to ourselves; if another program holds it open, try again next time
                        con.execute("PRAGMA journal_mode=DELETE")
                    except sqlite3.OperationalError:
                        pass
                journal = self.path.with_name(self.path.name + "-journal")
                if journal.exists():
                    # A hot journal (a commit killed half-way) was rolled back by the read above. What is left is
                    # one killed before its commit began (its header not yet written, so SQLite ignores it): stale,
                    # since no writer is active while we hold the write lock; delete it so the project is one file.
                    try:
                        con.execute("BEGIN IMMEDIATE")
                        journal.unlink(missing_ok=True)
                        con.execute("COMMIT")
                    except (sqlite3.OperationalError, OSError):  # busy or read-only: left for the next open
                        if con.in_transaction:
                            con.execute("ROLLBACK")
                if not set(_TABLES) <= tables:  # a project of this schema missing a table: add it
                    con.execute("BEGIN IMMEDIATE")
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            con.execute(stmt)
                    con.execute("COMMIT")
        except sqlite3.DatabaseError as err:
            cause = sqlite_cause(err)
            if cause is not None:  # locked, read-only, full: nothing is wrong with the file itself
                raise ProjectError(f"{self.path.name} cannot be opened now ({_one_line(err)}): {cause}; the "
                                   "project itself is not damaged.") from err
            raise ProjectError(f"{self.path.name} is not a readable FairDesk project ({err}). If it was copied, "
                               "copy it again; earlier copies and backups are not affected.") from err

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:  # immutable: SQLite takes no lock and makes no -shm or journal file beside it
            from urllib.parse import quote

            return sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?mode=ro&immutable=1", uri=True,
                                   timeout=30, isolation_level=None)
        con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        con.execute("PRAGMA synchronous=FULL")
        return con

    # ---- reading and writing ---------------------------------------------------------------------------------
    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        con = getattr(self._local, "con", None)
        try:
            if con is not None:  # inside a transaction of this thread: see its own writes
                return con.execute(sql, args).fetchall()
            with closing(self._connect()) as con:
                return con.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as err:
            cause = sqlite_cause(err)
            raise ProjectError(f"Could not read {self.path.name} ({_one_line(err)})"
                               + (f": {cause}." if cause else "; restore the project from a copy if this "
                                  "persists.")) from err

    @contextmanager
    def transaction(self) -> Iterator["Project"]:
        """Every write inside is one transaction: all stored, or none (nested calls join the outer one).

        ``with project.transaction(): ds = project.add_dataset(...); project.add_audit(..., dataset_id=ds)``
        """
        if getattr(self._local, "con", None) is not None:
            yield self
            return
        try:
            con = self._connect()
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as err:
            raise self._write_failed(err) from err
        self._local.con, self._local.written = con, []
        written = self._local.written
        try:
            try:
                yield self
                con.execute("COMMIT")
            except BaseException as err:
                if con.in_transaction:
                    try:
                        con.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # SQLite rolls a hot journal back when the file is next opened
                if isinstance(err, sqlite3.DatabaseError):
                    raise self._write_failed(err) from err
                raise
        finally:
            self._local.con = None
            con.close()
        self._verify(written)

    def _write_failed(self, err: sqlite3.DatabaseError) -> ProjectError:
        """One sentence: the write failed, and whether the project is still as it was (checked, not assumed)."""
        try:
            with closing(sqlite3.connect(self.path, timeout=30)) as con:
                check = con.execute("PRAGMA quick_check").fetchone()[0]
        except sqlite3.Error as check_err:
            # locked or unreadable just now: the rollback left the file as it was; it cannot be checked yet
            check = "ok" if sqlite_cause(check_err) else _one_line(check_err)
        if check == "ok":
            hint = sqlite_cause(err) or _FULL  # "disk I/O error": a full disk or the file size limit
            return ProjectError(f"Could not write to {self.path.name} ({_one_line(err)}), so nothing was stored; "
                                f"the project is as it was before ({hint}).")
        return ProjectError(f"Could not write to {self.path.name} ({_one_line(err)}), and the file now fails "
                            f"SQLite's check ({check}); restore the project from a copy.")

    def _verify(self, written: list[tuple[str, int]]) -> None:
        """Read the committed rows back through a fresh connection: a store reports success only if it is there."""
        if not written:
            return
        try:
            with closing(self._connect()) as con:
                missing = [f"{table[:-1]} {rid}" for table, rid in written
                           if con.execute(f"SELECT 1 FROM {table} WHERE id=?", (rid,)).fetchone() is None]
        except sqlite3.DatabaseError as err:
            raise ProjectError(f"{self.path.name} cannot be read back after writing ({_one_line(err)}); restore "
                               "the project from a copy.") from err
        if missing:
            raise ProjectError(f"{self.path.name} does not hold {', '.join(missing)} after writing; the store "
                               "failed, run it again.")

    def _insert(self, sql: str, args: tuple, table: str | None = None) -> int:
        with self.transaction():
            rid = int(self._local.con.execute(sql, args).lastrowid)
            if table is not None:
                self._local.written.append((table, rid))
            return rid

    # ---- datasets --------------------------------------------------------------------------------------------
    def add_dataset(self, name: str, df: pd.DataFrame, sha256: str, *, kind: str = "predictions",
                    source: str | None = None, roles: dict | None = None, origin: dict | None = None) -> int:
        name, source = storable_name(name), None if source is None else storable_name(source)
        buffer = io.BytesIO()
        df.reset_index(drop=True).to_parquet(buffer, index=False)
        return self._insert(
            "INSERT INTO datasets (name, kind, source, sha256, roles, n_rows, columns, created, origin, data) "
            "VALUES (?,?,?,?,?,?,?,?,?,?)",
            (name, kind, source, sha256, json.dumps(roles) if roles else None, int(len(df)),
             json.dumps([str(c) for c in df.columns]), now_utc(), json.dumps(origin) if origin else None,
             buffer.getvalue()), "datasets")

    def set_roles(self, dataset_id: int, roles: dict) -> None:
        self._insert("UPDATE datasets SET roles=? WHERE id=?", (json.dumps(roles), dataset_id))

    def datasets(self) -> list[DatasetInfo]:
        rows = self._query("SELECT id, name, kind, source, sha256, roles, n_rows, columns, created, origin "
                           "FROM datasets ORDER BY id")
        return [self._dataset_info(r) for r in rows]

    def _dataset_info(self, r: tuple) -> DatasetInfo:
        """One dataset row, its JSON fields checked: damaged roles or origin are set aside (None) and said in
        ``damaged``, so the dataset's table and every other dataset stay usable."""
        roles, bad_roles = _stored_json(r[5] or None, "roles")
        columns, bad_columns = _stored_json(r[7], "columns")
        origin, bad_origin = _stored_json(r[9] or None, "record")
        problems = [f"its {what} {why}" for what, why in (("roles", bad_roles), ("column list", bad_columns),
                                                           ("origin", bad_origin)) if why]
        damaged = None
        if problems:
            damaged = (f"Dataset {r[0]} of project {self.name} has damaged records ({'; '.join(problems)}); they "
                       "were set aside: map its columns again (its table and the other datasets are unaffected).")
        return DatasetInfo(r[0], r[1], r[2], r[3], r[4], roles, r[6], columns or [], r[8], origin, damaged)

    def dataset(self, dataset_id: int) -> DatasetInfo:
        for info in self.datasets():
            if info.id == dataset_id:
                return info
        raise ProjectError(f"Dataset {dataset_id} is not in project {self.name}.")

    def load_dataset(self, dataset_id: int) -> pd.DataFrame:
        rows = self._query("SELECT data FROM datasets WHERE id=?", (dataset_id,))
        if not rows:
            raise ProjectError(f"Dataset {dataset_id} is not in project {self.name}.")
        return _decoded(rows[0][0]).copy(deep=False)  # (copy-on-write: a change to it stays the caller's)

    # ---- models ----------------------------------------------------------------------------------------------
    def add_model(self, name: str, kind: str, info: dict, *, dataset_id: int | None = None,
                  predictions_id: int | None = None) -> int:
        """Store a model record. A ``path`` in ``info`` is also stored relative to the project file
        (``path_relative``) and :meth:`models` finds it there when the project moved together with the model."""
        if info.get("path") and "path_relative" not in info:
            info = {**info, "path_relative": relative_to_project(info["path"], self.path)}
        return self._insert("INSERT INTO models (name, kind, dataset_id, predictions_id, info, created) "
                            "VALUES (?,?,?,?,?,?)",
                            (name, kind, dataset_id, predictions_id, json.dumps(info, default=str), now_utc()),
                            "models")

    def models(self) -> list[ModelInfo]:
        rows = self._query("SELECT id, name, kind, dataset_id, predictions_id, info, created FROM models ORDER BY id")
        out = []
        for r in rows:
            info, problem = _stored_json(r[5], "record")
            damaged = (f"Model {r[0]} of project {self.name} has a damaged record ({problem}); it was set aside (the "
                       "other models are unaffected).") if problem or info is None else None
            if info and isinstance(info.get("path"), str) and info["path"]:
                info["path"] = str(located(info["path"], info.get("path_relative"), self.path))
            out.append(ModelInfo(r[0], r[1], r[2], r[3], r[4], info or {}, r[6], damaged))
        return out

    # ---- audits ----------------------------------------------------------------------------------------------
    def add_audit(self, name: str, kind: str, document: str | dict, dataset_id: int | None = None) -> int:
        """Store an audit document: its text, or the JSON values (a ``dict``) the project writes its text from
        (:func:`written`: the text stored is then always the text of the values checked; there is no way to hand
        the project a text and values that differ). It is checked against its kind's schema here, once, before the
        write begins; a document that passes is stored with the SHA-256 of its bytes and of the schema
        (``audit_checks``, in the same transaction), and :meth:`audit_document` skips the check while both still
        match. A document that fails is stored as given, without a digest: reading it says what is wrong, as
        before."""
        text, checked = written(kind, document)
        return self._store_audit(name, kind, text, dataset_id, checked)

    def _store_audit(self, name: str, kind: str, result, dataset_id: int | None, checked: tuple | None) -> int:
        with self.transaction():
            rid = self._insert("INSERT INTO audits (name, kind, dataset_id, result, created) VALUES (?,?,?,?,?)",
                               (name, kind, dataset_id, result, now_utc()), "audits")
            if checked is not None:  # (a row left by a deleted audit of the same id is replaced; its digest never
                con = self._local.con  # matched this document's bytes anyway)
                con.execute(_CHECKS_TABLE)
                con.execute("INSERT OR REPLACE INTO audit_checks (audit_id, sha256, schema_sha256) VALUES (?,?,?)",
                            (rid, *checked))
            return rid

    def _check_of(self, audit_id: int, kind: str, text) -> tuple[str, str] | None:
        """The stored digests of audit ``audit_id`` when they still match its document's bytes ``text`` and its
        kind's schema (the document passed the schema when it was stored and neither changed since); else None."""
        from fairdesk.core.kinds import AUDIT_KINDS, schema_digest

        if kind not in AUDIT_KINDS or AUDIT_KINDS[kind].schema is None:
            return None
        if not self._query("SELECT 1 FROM sqlite_master WHERE type='table' AND name='audit_checks'"):
            return None  # a project from before the digests: every audit is checked on read
        rows = self._query("SELECT sha256, schema_sha256 FROM audit_checks WHERE audit_id=?", (audit_id,))
        if not rows or rows[0][1] != schema_digest(kind) or rows[0][0] != document_digest(text):
            return None
        return rows[0]

    def copy_audit(self, other: "Project", audit_id: int) -> int:
        """Store a copy of ``other``'s audit (its document byte for byte, its name and kind) and of the dataset it
        was run on, both in one transaction: together or not at all. Returns the audit's id in this project.
        (``fairdesk-cli audit groups --project`` runs the import and the audit jobs on a scratch project, then
        copies the pair here, so a failed or killed run never leaves a dataset without its audit.)"""
        rows = other._query("SELECT name, kind, dataset_id, result FROM audits WHERE id=?", (audit_id,))
        if not rows:
            raise ProjectError(f"Audit {audit_id} is not in project {other.name}.")
        name, kind, dataset_id, result = rows[0]
        checked = other._check_of(audit_id, kind, result) or validated(kind, result)  # the bytes are the same
        dataset = other._query("SELECT name, kind, source, sha256, roles, n_rows, columns, origin, data FROM datasets "
                               "WHERE id=?", (dataset_id,)) if dataset_id is not None else []
        with self.transaction():
            new_dataset = None
            if dataset:
                d = dataset[0]
                new_dataset = self._insert(
                    "INSERT INTO datasets (name, kind, source, sha256, roles, n_rows, columns, created, origin, data) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?)", (*d[:7], now_utc(), *d[7:]), "datasets")
            return self._store_audit(name, kind, result, new_dataset, checked)

    def rename_audit(self, audit_id: int, name: str) -> None:
        """Give a stored audit another name (its document and everything else stay as they are)."""
        name = " ".join(str(name).split())
        if not name:
            raise ProjectError("An audit's name cannot be empty; type a name.")
        self.audit_kind(audit_id)  # says so when the audit is not there
        with self.transaction():
            self._local.con.execute("UPDATE audits SET name=? WHERE id=?", (name, audit_id))
            self._local.written.append(("audits", audit_id))

    def delete_audit(self, audit_id: int) -> "DeletedAudit":
        """Remove a stored audit (only it: its dataset, models and other audits stay) and return everything needed
        to put it back (:meth:`restore_audit`): the GUI keeps these until the project closes, so a delete can be
        undone until then."""
        rows = self._query("SELECT id, name, kind, dataset_id, result, created FROM audits WHERE id=?", (audit_id,))
        if not rows:
            raise ProjectError(f"Audit {audit_id} is not in project {self.name}.")
        has_checks = bool(self._query("SELECT 1 FROM sqlite_master WHERE type='table' AND name='audit_checks'"))
        check = self._query("SELECT sha256, schema_sha256 FROM audit_checks WHERE audit_id=?", (audit_id,)) \
            if has_checks else []
        with self.transaction():
            self._local.con.execute("DELETE FROM audits WHERE id=?", (audit_id,))
            if has_checks:
                self._local.con.execute("DELETE FROM audit_checks WHERE audit_id=?", (audit_id,))
        return DeletedAudit(*rows[0], check=tuple(check[0]) if check else None)

    def restore_audit(self, deleted: "DeletedAudit") -> int:
        """Put a deleted audit back, byte for byte with its name and date, under its old id when that is still free
        (else a new one). Returns its id."""
        free = not self._query("SELECT 1 FROM audits WHERE id=?", (deleted.id,))
        with self.transaction():
            con = self._local.con
            if free:
                con.execute("INSERT INTO audits (id, name, kind, dataset_id, result, created) VALUES (?,?,?,?,?,?)",
                            (deleted.id, deleted.name, deleted.kind, deleted.dataset_id, deleted.result,
                             deleted.created))
                rid = deleted.id
            else:
                rid = int(con.execute("INSERT INTO audits (name, kind, dataset_id, result, created) VALUES "
                                      "(?,?,?,?,?)", (deleted.name, deleted.kind, deleted.dataset_id, deleted.result,
                                                      deleted.created)).lastrowid)
            self._local.written.append(("audits", rid))
            if deleted.check is not None:
                con.execute(_CHECKS_TABLE)
                con.execute("INSERT OR REPLACE INTO audit_checks (audit_id, sha256, schema_sha256) VALUES (?,?,?)",
                            (rid, *deleted.check))
        return rid

    def audits(self) -> list[AuditInfo]:
        rows = self._query("SELECT id, name, kind, dataset_id, created FROM audits ORDER BY id")
        return [AuditInfo(*r) for r in rows]

    def audit_json(self, audit_id: int) -> str:
        rows = self._query("SELECT result FROM audits WHERE id=?", (audit_id,))
        if not rows:
            raise ProjectError(f"Audit {audit_id} is not in project {self.name}.")
        return rows[0][0]

    def audit_document(self, audit_id: int) -> dict:
        """The stored document of an audit, checked against its kind's schema (:mod:`fairdesk.core.kinds`) before
        anything reads it. A damaged document raises :class:`DamagedAudit` naming the audit and the project; the
        project's other audits are unaffected. The check is skipped when the document's bytes and the schema still
        have the digests recorded when it was stored (:meth:`add_audit`): any other document — changed by a byte,
        stored without a digest (by an earlier FairDesk, or failing its schema), or of a kind whose schema changed
        since — is checked in full, so a damaged one always gives the same error. (The digest is a record of a
        check, not a seal: whoever rewrites a document and its digest together is not stopped by it.)"""
        from fairdesk.core.kinds import AUDIT_KINDS, check_document

        kind = self.audit_kind(audit_id)
        text = self.audit_json(audit_id)
        try:
            doc = loads_in_pieces(text)  # read in the GUI's view thread: one json.loads would stall the Qt thread
        except (TypeError, ValueError) as err:
            problems = [f"it is not JSON ({_one_line(err)})"]
        else:
            checked = self._check_of(audit_id, kind, text) is not None
            problems = check_document(kind, doc) if kind in AUDIT_KINDS and not checked else []
        if problems:
            name = next((a.name for a in self.audits() if a.id == audit_id), "")
            title = AUDIT_KINDS[kind].title if kind in AUDIT_KINDS else kind
            raise DamagedAudit(f"Audit {audit_id} ('{name}', {title}) of project {self.name} is damaged and cannot "
                               f"be shown or reported: {'; '.join(problems)}. The project's other audits are "
                               "unaffected; run this audit again to replace it, or open a copy of the project made "
                               "before it was damaged.")
        return doc

    def load_audit(self, audit_id: int):
        """The typed result of a stored audit (its document checked by :meth:`audit_document`), parsed by its
        kind's row in :mod:`fairdesk.core.kinds`."""
        from fairdesk.core.kinds import parse_document

        return parse_document(self.audit_kind(audit_id), self.audit_document(audit_id))

    def audit_kind(self, audit_id: int) -> str:
        rows = self._query("SELECT kind FROM audits WHERE id=?", (audit_id,))
        if not rows:
            raise ProjectError(f"Audit {audit_id} is not in project {self.name}.")
        return rows[0][0]
