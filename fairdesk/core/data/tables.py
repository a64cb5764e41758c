"""A user's table into a project: :func:`import_table` reads a CSV or Parquet file (a predictions table, features,
a monitor's stream), checks it against its column roles when they are given and stores it as a dataset. Every
audit kind, the GUI, the CLI and the Python API import their tables through it."""
from __future__ import annotations

from pathlib import Path

from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project


def import_table(project_path: str | Path, file_path: str | Path, *, kind: str = "predictions",
                 roles: ColumnRoles | None = None, name: str | None = None, missing: tuple[str, ...] = (),
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Load a CSV/Parquet file into the project (validated first when roles are given). Returns the dataset id.
    ``missing``: texts that mean a missing value (only empty cells otherwise). What the loader did that the user
    should know (columns not read, Unicode spellings merged) is stored as the dataset's ``origin["notes"]``."""
    from fairdesk.core.data.loaders import file_sha256, load_table, table_notes
    from fairdesk.core.data.schema import validate

    rep = Reporter(progress, cancel)
    rep(0.0, f"Reading {Path(file_path).name}")
    df = load_table(file_path, columns=roles.all_columns() if roles is not None else None, missing=missing)
    notes = table_notes(df)
    rep(0.6, "Checking the table")
    if roles is not None:
        validate(df, roles).raise_if_errors()
    sha = file_sha256(file_path)
    rep(0.9, "Saving into the project")
    return Project(project_path).add_dataset(name or Path(file_path).name, df, sha, kind=kind,
                                             source=str(Path(file_path).resolve()),
                                             roles=roles.to_dict() if roles else None,
                                             origin={"notes": notes} if notes else None)
