"""FairDesk: offline fairness audits of medical ML models.

The package is layered GUI -> jobs -> core; ``fairdesk.core`` never imports Qt and keeps heavy libraries
(scipy, scikit-learn, torch) inside the functions that need them so that start-up stays fast.
"""

__version__ = "0.1.0"  # the one version string: pyproject.toml reads it (dynamic version), so the metadata agrees


def version() -> str:
    """The installed distribution's version (package metadata), or ``__version__`` when FairDesk runs from a
    checkout or a frozen build without metadata. ``--version``, ``python -m fairdesk --version`` and every result's
    provenance use this."""
    from importlib import metadata

    try:
        return metadata.version("fairdesk")
    except metadata.PackageNotFoundError:
        return __version__


#: the notebook API (``fd.audit_groups``, ``fd.audit_slices``), loaded on first use so that ``import fairdesk``
#: stays light: the window's start-up and the CLI's parser import this package and must not pay for pandas' jobs
_API = ("audit_groups", "audit_slices", "AuditResult")


def __getattr__(name: str):
    if name in _API:
        # by module name, not an import statement: fairdesk.api sits on the jobs, which read version() from here
        # at run time; a statement would make this package and the jobs import each other (a cycle, in the layer
        # test's graph) although neither needs the other to load
        import importlib

        return getattr(importlib.import_module("fairdesk.api"), name)
    raise AttributeError(f"module 'fairdesk' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_API))
