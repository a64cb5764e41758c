"""The project store: what was loaded, trained and audited, with provenance.

One SQLite file per project (``*.fairdesk``). Every write is one transaction, so a crash, a cancelled job or the
app being closed mid-job never leaves a half-written record and never touches earlier results. Tables are stored
as Parquet bytes and results as JSON: nothing is pickled.
"""
from __future__ import annotations

import io
import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fairdesk.core.errors import ProjectError
from fairdesk.core.provenance import now_utc

SUFFIX = ".fairdesk"
SCHEMA_VERSION = 1

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


@dataclass(frozen=True)
class ModelInfo:
    id: int
    name: str
    kind: str
    dataset_id: int | None
    predictions_id: int | None
    info: dict
    created: str


@dataclass(frozen=True)
class AuditInfo:
    id: int
    name: str
    kind: str
    dataset_id: int | None
    created: str


class Project:
    """A handle on a project file. Cheap to create; every call opens its own connection (thread-safe)."""

    def __init__(self, path: str | Path, create: bool = True) -> None:
        self.path = Path(path)
        if self.path.suffix != SUFFIX:
            self.path = self.path.with_suffix(SUFFIX) if not self.path.suffix else self.path
        if not self.path.exists() and not create:
            raise ProjectError(f"No project at {self.path}. Create a new project or choose an existing one.")
        if self.path.exists() and self.path.is_dir():
            raise ProjectError(f"{self.path} is a folder, not a FairDesk project file.")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with closing(self._connect()) as con, con:
                con.executescript(_SCHEMA)
                row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if row is None:
                    con.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                    con.execute("INSERT INTO meta VALUES ('created', ?)", (now_utc(),))
                elif int(row[0]) > SCHEMA_VERSION:
                    raise ProjectError(f"{self.path.name} was written by a newer FairDesk (schema {row[0]}). "
                                       "Update FairDesk to open it.")
        except sqlite3.DatabaseError as err:
            raise ProjectError(f"{self.path.name} is not a readable FairDesk project ({err}). If it was copied, "
                               "copy it again; earlier copies and backups are not affected.") from err

    @property
    def name(self) -> str:
        return self.path.stem

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=30)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        return con

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        try:
            with closing(self._connect()) as con:
                return con.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as err:
            raise ProjectError(f"Could not read {self.path.name}: {err}") from err

    def _insert(self, sql: str, args: tuple) -> int:
        try:
            with closing(self._connect()) as con, con:
                return int(con.execute(sql, args).lastrowid)
        except sqlite3.DatabaseError as err:
            raise ProjectError(f"Could not write to {self.path.name}: {err}. Nothing was changed.") from err

    # ---- datasets --------------------------------------------------------------------------------------------
    def add_dataset(self, name: str, df: pd.DataFrame, sha256: str, *, kind: str = "predictions",
                    source: str | None = None, roles: dict | None = None, origin: dict | None = None) -> int:
        buffer = io.BytesIO()
        df.reset_index(drop=True).to_parquet(buffer, index=False)
        return self._insert(
            "INSERT INTO datasets (name, kind, source, sha256, roles, n_rows, columns, created, origin, data) "
            "VALUES (?,?,?,?,?,?,?,?,?,?)",
            (name, kind, source, sha256, json.dumps(roles) if roles else None, int(len(df)),
             json.dumps([str(c) for c in df.columns]), now_utc(), json.dumps(origin) if origin else None,
             buffer.getvalue()))

    def set_roles(self, dataset_id: int, roles: dict) -> None:
        self._insert("UPDATE datasets SET roles=? WHERE id=?", (json.dumps(roles), dataset_id))

    def datasets(self) -> list[DatasetInfo]:
        rows = self._query("SELECT id, name, kind, source, sha256, roles, n_rows, columns, created, origin "
                           "FROM datasets ORDER BY id")
        return [DatasetInfo(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else None, r[6],
                            json.loads(r[7]), r[8], json.loads(r[9]) if r[9] else None) for r in rows]

    def dataset(self, dataset_id: int) -> DatasetInfo:
        for info in self.datasets():
            if info.id == dataset_id:
                return info
        raise ProjectError(f"Dataset {dataset_id} is not in project {self.name}.")

    def load_dataset(self, dataset_id: int) -> pd.DataFrame:
        rows = self._query("SELECT data FROM datasets WHERE id=?", (dataset_id,))
        if not rows:
            raise ProjectError(f"Dataset {dataset_id} is not in project {self.name}.")
        return pd.read_parquet(io.BytesIO(rows[0][0]))

    # ---- models ----------------------------------------------------------------------------------------------
    def add_model(self, name: str, kind: str, info: dict, *, dataset_id: int | None = None,
                  predictions_id: int | None = None) -> int:
        return self._insert("INSERT INTO models (name, kind, dataset_id, predictions_id, info, created) "
                            "VALUES (?,?,?,?,?,?)",
                            (name, kind, dataset_id, predictions_id, json.dumps(info, default=str), now_utc()))

    def models(self) -> list[ModelInfo]:
        rows = self._query("SELECT id, name, kind, dataset_id, predictions_id, info, created FROM models ORDER BY id")
        return [ModelInfo(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6]) for r in rows]

    # ---- audits ----------------------------------------------------------------------------------------------
    def add_audit(self, name: str, kind: str, result_json: str, dataset_id: int | None = None) -> int:
        return self._insert("INSERT INTO audits (name, kind, dataset_id, result, created) VALUES (?,?,?,?,?)",
                            (name, kind, dataset_id, result_json, now_utc()))

    def audits(self) -> list[AuditInfo]:
        rows = self._query("SELECT id, name, kind, dataset_id, created FROM audits ORDER BY id")
        return [AuditInfo(*r) for r in rows]

    def audit_json(self, audit_id: int) -> str:
        rows = self._query("SELECT result FROM audits WHERE id=?", (audit_id,))
        if not rows:
            raise ProjectError(f"Audit {audit_id} is not in project {self.name}.")
        return rows[0][0]

    def load_audit(self, audit_id: int):
        from fairdesk.core.audits.groups import GroupAuditResult

        return GroupAuditResult.from_json(self.audit_json(audit_id))
