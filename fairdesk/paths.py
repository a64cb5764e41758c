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
    """The ``resources/`` folder, found through the package itself (``importlib.resources``): ``fairdesk/resources``
    in an installed wheel and in the frozen bundle; the repository's ``resources/`` beside the package only in a
    checkout (recognised by its ``pyproject.toml``), so that a top-level ``resources`` folder another package put
    into site-packages can never shadow ours."""
    from importlib.resources import files

    package = Path(str(files("fairdesk")))
    if (package / "resources").is_dir():
        return package / "resources"
    if (package.parent / "pyproject.toml").is_file():
        return package.parent / "resources"
    return package / "resources"  # missing: the caller's "not found" names the place it should be


# The two programs, started as programs (the CLI and the GUI never import each other): in a frozen build the
# executables sit side by side; in a checkout or an installed wheel they are the same Python running a module.
PROGRAM_MODULES = {"fairdesk": "fairdesk.gui.app", "fairdesk-cli": "fairdesk.cli"}


def program_command(name: str) -> list[str]:
    """The command line that starts ``fairdesk`` (the desktop app) or ``fairdesk-cli``."""
    if getattr(sys, "frozen", False):
        return [str(Path(sys.executable).with_name(name + (".exe" if sys.platform == "win32" else "")))]
    return [sys.executable, "-m", PROGRAM_MODULES[name]]


def run_program(name: str, args: list[str]) -> int:
    """Run ``fairdesk`` or ``fairdesk-cli`` with ``args`` in this terminal and return its exit code (Ctrl-C reaches
    the child too; we wait for it to say what it did rather than print a traceback)."""
    import subprocess

    proc = subprocess.Popen(program_command(name) + list(args))
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue
