"""User data, cache and resource locations that work in a checkout, a wheel and a frozen build."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def _base(env: str, default: Path) -> Path:
    value = os.environ.get(env)
    return Path(value) if value else default


def data_dir() -> Path:
    """Where projects live by default (``FAIRDESK_HOME`` overrides)."""
    path = _base("FAIRDESK_HOME", Path.home() / ".local" / "share" / "fairdesk")
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    path = _base("FAIRDESK_CACHE", Path.home() / ".cache" / "fairdesk")
    path.mkdir(parents=True, exist_ok=True)
    return path


def resources_dir() -> Path:
    """The ``resources/`` folder: beside the package in a checkout, inside the bundle when frozen."""
    if getattr(sys, "frozen", False):
        return Path(getattr(sys, "_MEIPASS", Path(sys.executable).parent)) / "resources"
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "resources", here / "resources"):
        if candidate.is_dir():
            return candidate
    return here.parent / "resources"
