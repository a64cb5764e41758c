"""The one output guard (issue 20, item 1): nothing FairDesk writes can destroy what it was given.

Every command, job and dialog that writes files calls :func:`guard_outputs` with all it writes and all it reads,
before any work. It compares **final** paths — the ``.fairdesk`` suffix :class:`~fairdesk.core.project.Project` adds,
``~``, ``..``, symlinks and a trailing slash resolved (:func:`final_path`); hard links and, on case-insensitive file
systems, other spellings caught by file identity or case-folding (:func:`same_place`) — and refuses, in one sentence
(:class:`~fairdesk.core.errors.DataError`, CLI exit 2):

* an output that is an input, the project, a file in an input model folder, or another output of the command;
* an output *file* where a folder is (and an output *folder* where a file is), or a place that cannot be written;
* an output folder that holds, contains or lies inside an input, or lies inside another output folder;
* an output folder that already holds anything FairDesk did not write: only folders carrying FairDesk's marker
  file (:data:`MARKER`, written by :func:`claim_folder`) may be written into, replaced or emptied.

Folder writers in the core (model, generator and masked-LM folders, checkpoints, the demo folder) make their folder
with :func:`claim_folder`, which checks the same rule again — so the Python API cannot empty a user's folder either
— and :func:`release_if_unused` removes the folders a failed run made and never used. Single files are written by
:mod:`fairdesk.core.atomic`, which removes the parent folders it made when the write fails.
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from fairdesk.core.atomic import make_folder, missing_folders, remove_empty  # noqa: F401  (part of the guard's API)
from fairdesk.core.errors import DataError

#: the file that marks a folder as FairDesk's (written first, kept with the folder)
MARKER = ".fairdesk-folder.json"
PROJECT_SUFFIX = ".fairdesk"  # the suffix fairdesk.core.project.Project adds to a name without one

Named = Iterable[tuple[str, "str | os.PathLike | None"]]


def final_path(path: str | os.PathLike, suffix: str | None = None) -> str:
    """The absolute path FairDesk will really open: ``~`` expanded, ``suffix`` added to a name without one (what
    :class:`~fairdesk.core.project.Project` does with ``.fairdesk``), then symlinks, ``..`` and a trailing slash
    resolved."""
    p = os.path.expanduser(os.fspath(path))
    if suffix is not None:
        q = Path(p)
        if q.suffix != suffix and not q.suffix:
            p = str(q.with_suffix(suffix))
    return os.path.realpath(os.path.join(os.getcwd(), p))


def _case_insensitive(path: str) -> bool:
    """Whether the file system holding ``path`` ignores case (tested on its nearest existing folder)."""
    d = path
    while not os.path.isdir(d) and os.path.dirname(d) != d:
        d = os.path.dirname(d)
    while os.path.dirname(d) != d:
        name = os.path.basename(d)
        if name.lower() != name.upper():
            other = os.path.join(os.path.dirname(d), name.swapcase())
            try:
                return os.path.samefile(d, other)
            except OSError:
                return False
        d = os.path.dirname(d)
    return False


def same_place(a: str, b: str) -> bool:
    """``a`` and ``b`` (final paths) name the same file or folder: equal, the same inode (hard links, other
    spellings of an existing file), or equal ignoring case on a case-insensitive file system."""
    if a == b:
        return True
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return a.lower() == b.lower() and _case_insensitive(a)


def inside(path: str, folder: str) -> bool:
    """``path`` lies strictly inside ``folder`` (final paths; case folded on case-insensitive file systems)."""
    parent = os.path.dirname(path)
    while parent != path:
        if same_place(parent, folder):
            return True
        path, parent = parent, os.path.dirname(parent)
    return False


def is_fairdesk_folder(folder: str | os.PathLike) -> bool:
    return (Path(folder) / MARKER).is_file()


def foreign_entry(folder: str | os.PathLike) -> str | None:
    """The name of something in an existing, non-empty ``folder`` without FairDesk's marker (None: the folder is
    empty, missing or FairDesk's)."""
    folder = Path(folder)
    if not folder.is_dir() or is_fairdesk_folder(folder):
        return None
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        return None
    return names[0] if names else None


def _writable_place(option: str, given, real: str, folder: bool) -> None:
    place = real
    while not os.path.lexists(place) and os.path.dirname(place) != place:
        place = os.path.dirname(place)
    if place != real and not os.path.isdir(place):
        what = "made" if folder else "written"
        raise DataError(f"{option} {given} cannot be {what}: {place} is a file, not a folder.")
    check = place if os.path.isdir(place) else os.path.dirname(place)
    if not os.access(check, os.W_OK | os.X_OK):
        raise DataError(f"{option} {given} cannot be written: the folder {check} is read-only or FairDesk has no "
                        f"permission to write there. Choose another folder.")


def guard_outputs(files: Named = (), folders: Named = (), *, inputs: Named = (), models: Named = (),
                  project: tuple[str, "str | os.PathLike | None"] | None = None) -> None:
    """Refuse, before any work, outputs that would overwrite or empty something they must not (see the module).

    ``files``: (option, path) of files written; ``folders``: (option, path) of folders FairDesk makes or fills;
    ``inputs``: (description, path) of files or folders read; ``models``: (description, path) of input model files
    or folders (nothing may be written inside); ``project``: (description, path) of the project read or updated
    (compared with the ``.fairdesk`` suffix added). ``None`` or empty paths are skipped.
    """
    def final(items, suffix=None):
        return [(name, p, final_path(p, suffix)) for name, p in items if p not in (None, "")]

    outs = final(files)
    dirs = final(folders)
    ins = final(inputs) + (final([project], PROJECT_SUFFIX) if project else [])
    mods = final(models)
    every_out = [(n, g, r, False) for n, g, r in outs] + [(n, g, r, True) for n, g, r in dirs]
    for i, (name, given, real, is_folder) in enumerate(every_out):
        for what, in_given, in_real in ins + mods:
            if same_place(real, in_real):
                raise DataError(f"{name} {given} is the same {'folder' if is_folder else 'file'} as {what} "
                                f"({in_given}); FairDesk never overwrites its inputs, so choose another name.")
        for what, in_given, in_real in mods:
            if os.path.isdir(in_real) and inside(real, in_real):
                raise DataError(f"{name} {given} is inside {what} ({in_given}); FairDesk never writes into a model "
                                f"folder, so choose a place outside it.")
        for other, o_given, o_real, o_folder in every_out[:i]:
            if same_place(real, o_real):
                raise DataError(f"{other} and {name} are the same {'folder' if is_folder else 'file'} ({given}); "
                                "give each output its own name.")
            if o_folder and inside(real, o_real):
                raise DataError(f"{name} {given} is inside the output folder {other} ({o_given}); give it a place "
                                "of its own outside that folder.")
            if is_folder and inside(o_real, real):
                raise DataError(f"{other} {o_given} is inside the output folder {name} ({given}); give it a place "
                                "of its own outside that folder.")
        if is_folder:
            for what, in_given, in_real in ins + mods:
                if inside(in_real, real):
                    raise DataError(f"{name} {given} holds {what} ({in_given}); FairDesk never writes into a folder "
                                    "of its inputs, so choose a new or empty folder.")
            if os.path.lexists(real) and not os.path.isdir(real):
                raise DataError(f"{name} {given} is a file; give a folder (a new name is created).")
            entry = foreign_entry(real)
            if entry is not None:
                raise DataError(f"{name} {given} already holds files FairDesk did not write (such as '{entry}'); "
                                "FairDesk only writes into new, empty or its own folders, so choose another folder.")
        elif os.path.isdir(real):
            raise DataError(f"{name} {given} is a folder; give a file name inside it (for example "
                            f"{Path(given) / 'out'}).")
        _writable_place(name, given, real, is_folder)


# ----------------------------------------------------------------------------------------------------------------
# Folders FairDesk makes

def claim_folder(folder: str | os.PathLike, what: str = "FairDesk output", option: str = "The output folder") \
        -> list[Path]:
    """Make ``folder`` FairDesk's: refuse it when it holds anything FairDesk did not write (or is a file), make it
    (and its parents) if missing, and write the marker. Returns the folders it made (see :func:`release_if_unused`).
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{option} {folder} is a file; give a folder (a new name is created).")
    entry = foreign_entry(folder)
    if entry is not None:
        raise DataError(f"{option} {folder} already holds files FairDesk did not write (such as '{entry}'); FairDesk "
                        "only writes into new, empty or its own folders, so choose another folder.")
    made = make_folder(folder)
    if not is_fairdesk_folder(folder):
        from fairdesk.core import atomic

        try:
            atomic.write_text(folder / MARKER, json.dumps({"written_by": "FairDesk", "what": what}) + "\n")
        except BaseException:
            remove_empty(made)
            raise
    return made


@contextmanager
def claimed(folder: str | os.PathLike, what: str = "FairDesk output", option: str = "The output folder") \
        -> Iterator[Path]:
    """:func:`claim_folder` for the duration of a run: when the run fails before writing anything there, the folder
    (and the parents made for it) is removed again (:func:`release_if_unused`)."""
    made = claim_folder(folder, what, option)
    try:
        yield Path(folder)
    except BaseException:
        release_if_unused(folder, made)
        raise


def release_if_unused(folder: str | os.PathLike, made: list[Path]) -> None:
    """After a failed run: when ``folder`` holds nothing but the marker (and empty folders), remove those, then the
    folders in ``made`` that are empty. A folder with anything else in it is kept as it is (checkpoints to resume
    from)."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    entries = sorted(folder.rglob("*"), key=lambda q: len(q.parts), reverse=True)
    if any(not (p.is_dir() and not p.is_symlink()) and p != folder / MARKER for p in entries):
        return
    for p in entries:
        if p.is_dir():
            p.rmdir()
    (folder / MARKER).unlink(missing_ok=True)
    remove_empty(made)
