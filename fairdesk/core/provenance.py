"""What every result records so that it can be reproduced: seed, hashes, package versions, date."""
from __future__ import annotations

import datetime as _dt
import platform
import sys
from importlib import metadata

_PACKAGES = ("fairdesk", "numpy", "pandas", "scipy", "scikit-learn", "torch", "PySide6-Essentials", "pyqtgraph",
             "reportlab", "matplotlib", "pyarrow")


def package_versions(*extra: str) -> dict[str, str]:
    """Python, the platform and the installed versions of FairDesk's packages and of ``extra`` ones (e.g.
    ``"transformers"``); packages that are not installed are left out."""
    from fairdesk import version

    versions = {"python": sys.version.split()[0], "platform": platform.platform(terse=True),
                "fairdesk": version()}  # from the metadata, or __version__ in a frozen build without it
    for name in _PACKAGES[1:] + tuple(extra):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def make(seed: int | None, data_sha256: str | None, model_hashes: dict[str, str] | None = None,
         **extra) -> dict:
    record = {"seed": seed, "data_sha256": data_sha256, "model_hashes": dict(model_hashes or {}),
              "created_utc": now_utc(), "versions": package_versions()}
    record.update(extra)
    return record
