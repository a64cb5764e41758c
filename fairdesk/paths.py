"""User data, cache and resource locations that work in a checkout, a wheel and a frozen build."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def _base(env: str, default: Path) -> Path:
    value = os.environ.get(env)
    return Path(value) if value else default


def _writable(path: Path) -> bool:
    """``path`` is, or can be made as, a folder this process may write into — decided without writing anything
    (its nearest existing ancestor is a folder we may write in)."""
    p = path
    while not os.path.lexists(p) and p.parent != p:
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


_said: set[str] = set()


def _place(env: str, default: Path, kind: str) -> Path:
    """Where ``kind`` lives: ``env`` or ``default`` when that can be written; otherwise (a read-only or locked-down
    home folder) a private folder under the system's temporary folder for this session, said once on stderr."""
    wanted = _base(env, default)
    if _writable(wanted):
        return wanted
    try:
        user = str(os.getuid())
    except AttributeError:  # Windows
        user = os.environ.get("USERNAME", "user")
    fallback = Path(tempfile.gettempdir()) / f"fairdesk-{kind}-{user}"
    if kind not in _said:
        _said.add(kind)
        from fairdesk.console import say

        say(f"fairdesk: note: {wanted} cannot be written, so FairDesk's {kind} are kept in {fallback} for this "
            f"session (set {env} to choose a folder).", file=sys.stderr)
    return fallback


def data_location() -> Path:
    """Where projects and settings live by default (``FAIRDESK_HOME`` overrides), made by no one: nothing is
    written by asking."""
    return _place("FAIRDESK_HOME", Path.home() / ".local" / "share" / "fairdesk", "settings")


def cache_location() -> Path:
    """Where library caches go (``FAIRDESK_CACHE`` overrides), made by no one: the libraries make it when they
    need it."""
    return _place("FAIRDESK_CACHE", Path.home() / ".cache" / "fairdesk", "caches")


def data_dir() -> Path:
    """:func:`data_location`, made when missing (an OSError when even the temporary fallback cannot be made)."""
    path = data_location()
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
