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
