"""Argument helpers shared by the ``fairdesk-cli`` command families."""
from __future__ import annotations

import argparse

from fairdesk.core.errors import FairDeskError


def split_list(values: str | list[str] | None) -> list[str]:
    """Repeatable and comma-separated values as one list: ``--x a,b --x c`` -> ``[a, b, c]`` (a single string is
    one value, not a sequence of characters)."""
    out: list[str] = []
    for v in ([values] if isinstance(values, str) else values or []):
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def drop_groups(values: list[str] | None) -> dict[str, list[str]]:
    """``--drop-group ATTRIBUTE=GROUP`` (repeatable) -> ``{attribute: [group, ...]}``."""
    drop: dict[str, list[str]] = {}
    for item in values or []:
        if "=" not in item:
            raise FairDeskError(f"--drop-group takes ATTRIBUTE=GROUP, got '{item}'.")
        attr, group = item.split("=", 1)
        drop.setdefault(attr.strip(), []).append(group.strip())
    return drop


def add_roles(p: argparse.ArgumentParser) -> None:
    """The column-role options of ``audit groups`` and ``validate``."""
    p.add_argument("data", help="CSV or Parquet file, one row per sample (and task)")
    p.add_argument("--label", required=True, help="true outcome column (0/1)")
    p.add_argument("--score", required=True, help="model probability column in [0, 1]")
    p.add_argument("--task", help="task column (long format: one row per sample and task)")
    p.add_argument("--attribute", action="append", help="categorical protected attribute (repeatable)")
    p.add_argument("--continuous-attribute", action="append", help="continuous attribute, e.g. age (repeatable)")
    p.add_argument("--patient-id", help="patient id column: repeated patients are resampled as whole clusters")
    p.add_argument("--sample-id", help="sample id column (must be unique within a task)")
    p.add_argument("--split", help="split column: the audit uses 'test' rows; 'val' rows choose best-F1 thresholds")
    p.add_argument("--min-group-size", type=int, default=30, help="groups smaller than this are listed, not tested")
    p.add_argument("--missing-value", action="append", metavar="TEXT",
                   help="a text that means a missing value, e.g. NA (repeatable; otherwise only empty cells are "
                        "missing and texts such as NA, null or None are kept as text)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def column_roles(args: argparse.Namespace):
    """The :class:`~fairdesk.core.data.schema.ColumnRoles` the :func:`add_roles` options name."""
    from fairdesk.core.data.schema import ColumnRoles

    return ColumnRoles(label=args.label, score=args.score, task=args.task, attributes=tuple(args.attribute or ()),
                       continuous_attributes=tuple(args.continuous_attribute or ()), patient_id=args.patient_id,
                       sample_id=args.sample_id, split=args.split)


def add_executor(p: argparse.ArgumentParser) -> None:
    """``--executor local|dask --scheduler ADDRESS|local:N``: where the command's independent tasks run."""
    p.add_argument("--executor", default="local", choices=["local", "dask"],
                   help="where the independent tasks run: local (this process, the default) or dask (a Dask "
                        "cluster; needs pip install 'fairdesk[distributed]'); the results are the same")
    p.add_argument("--scheduler", help="with --executor dask: the scheduler's address tcp://HOST:PORT, or local:N "
                                       "for N worker processes on this machine")


def executor_spec(args: argparse.Namespace):
    """The :class:`~fairdesk.core.executor.ExecutorSpec` of ``--executor`` / ``--scheduler``, checked before any
    work (a dask executor without Dask.distributed installed is refused here, in one sentence)."""
    from fairdesk.core.executor import ExecutorSpec, import_distributed

    spec = ExecutorSpec.from_options(args.executor, args.scheduler)
    if spec.kind == "dask":
        import_distributed()
    return spec


def add_release_json(p: argparse.ArgumentParser) -> None:
    """``--release-json OUT.json``: the audit document as it may leave the workstation (small cells and every count
    that gives one back withheld at ``--suppress-k``; :func:`fairdesk.core.disclosure.release`)."""
    p.add_argument("--release-json", metavar="OUT.json",
                   help="also write the releasable copy of the document here: small cells withheld at --suppress-k "
                        "(--json keeps exact counts and is not for release)")


def add_html(p: argparse.ArgumentParser) -> None:
    """``--html OUT.html``: the self-contained HTML report of the audit (every audit command and ``report``)."""
    p.add_argument("--html", metavar="OUT.html",
                   help="also write the self-contained HTML report here (one file, figures embedded, works offline)")
