"""The one output guard: nothing FairDesk writes can destroy what it was given.

Every command, job and dialog that writes files calls :func:`guard_outputs` with all it writes and all it reads,
before any work. It compares **final** paths — the ``.fairdesk`` suffix :class:`~fairdesk.core.project.Project` adds,
``~``, ``..``, symlinks and a trailing slash resolved (:func:`final_path`); hard links and, on case-insensitive file
systems, other spellings caught by file identity or case-folding (:func:`same_place`) — and refuses, in one sentence
(:class:`~fairdesk.core.errors.DataError`, CLI exit 2):

* an output that is an input, the project, a file in an input model folder, or another output of the command;
* an output *file* where a folder is (and an output *folder* where a file is), or a place that cannot be written;
* an output folder that holds, contains or lies inside an input, or lies inside another output folder;
* an output folder that holds anything FairDesk did not write: a FairDesk folder carries a manifest
  (:data:`MARKER`) naming every file FairDesk wrote there with its SHA-256, and only a folder holding nothing but
  those files, unchanged, may be written into or replaced; a marker without that list (an older FairDesk, a copy)
  vouches for nothing;
* an output *file* given with a trailing separator: that path names a folder, always.

Every folder writer (trainers' model, generator and masked-LM folders with their checkpoints, generator previews,
the demo) goes through :func:`owned_folder`, which checks the same rule again — so the Python API cannot empty a
user's folder either —, records what the run wrote, removes a folder a failed run made and never used, and when
replacing a folder removes only the files its manifest records. Single files are written by
:mod:`fairdesk.core.atomic`, which removes the parent folders it made when the write fails.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from fairdesk.core.atomic import make_folder, missing_folders, remove_empty  # noqa: F401  (part of the guard's API)
from fairdesk.core.errors import DataError

#: the file that marks a folder as FairDesk's (written first, kept with the folder)
MARKER = ".fairdesk-folder.json"
MANIFEST_FORMAT = "fairdesk.folder/2"
MANIFEST_LIMIT = 64 << 20  # bytes of a manifest read at most (a bigger one is not FairDesk's)
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


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _entries(folder: Path) -> Iterator[tuple[str, Path]]:
    """Everything under ``folder`` that is not a real folder (files, symlinks, sockets …), as ``/``-joined names
    relative to it, sorted; symlinks are listed, never followed."""
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        links = [d for d in dirnames if (here / d).is_symlink()]
        for name in sorted(filenames + links):
            path = here / name
            yield path.relative_to(folder).as_posix(), path


def recorded_files(folder: str | os.PathLike) -> dict[str, str] | None:
    """The files FairDesk recorded writing into ``folder`` (name → SHA-256), from its manifest :data:`MARKER`;
    None when there is no manifest. A marker without a list (an older FairDesk, or a copy) records nothing."""
    marker = Path(folder) / MARKER
    if not marker.is_file() or marker.is_symlink():
        return None
    from fairdesk.core.jsonable import read_json_file

    try:
        doc = read_json_file(marker, MANIFEST_LIMIT)
    except (OSError, ValueError):  # damaged, too big or too deep: it vouches for nothing
        return {}
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, dict):
        return {}
    return {str(k): v for k, v in files.items() if isinstance(v, str)}


def foreign_entry(folder: str | os.PathLike) -> tuple[str, bool] | None:
    """The first thing in ``folder`` FairDesk did not write, as (name, changed): a file, link or anything else its
    manifest does not record (changed False), or a recorded file whose SHA-256 is no longer the recorded one
    (changed True). None: the folder is missing, empty (but for empty subfolders) or holds only what FairDesk wrote
    there, unchanged."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    recorded = recorded_files(folder) or {}
    try:
        for name, path in _entries(folder):
            if name == MARKER:
                continue
            if name not in recorded or path.is_symlink() or not path.is_file():
                return name, False
            if _sha256(path) != recorded[name]:
                return name, True
    except OSError as err:
        return (Path(err.filename).name if err.filename else folder.name), False
    return None


def ownership_refusal(option: str, given, folder: str | os.PathLike) -> str | None:
    """The one sentence refusing to write into ``folder`` (None: it may be written, replaced or emptied)."""
    found = foreign_entry(folder)
    if found is None:
        return None
    name, changed = found
    if changed:
        return (f"{option} {given} holds '{name}', which was changed after FairDesk wrote it; FairDesk never "
                "overwrites a file it did not write, so choose another folder (or move that file out).")
    return (f"{option} {given} already holds files FairDesk did not write (such as '{name}'); FairDesk only writes "
            "into new, empty or its own folders, so choose another folder.")


def separator_refusal(option: str, given) -> str | None:
    """A path ending in a separator names a folder: the sentence refusing it as a file output (None: fine)."""
    text = os.fspath(given)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    seps = tuple(s for s in (os.sep, os.altsep, "/") if s)
    if text.endswith(seps) and text.rstrip("".join(seps)):
        return (f"{option} {text} ends with a separator, so it names a folder; give a file name (for example "
                f"{os.path.join(text, 'out')}).")
    return None


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
            refusal = ownership_refusal(name, given, real)
            if refusal:
                raise DataError(refusal)
        elif separator_refusal(name, given):
            raise DataError(separator_refusal(name, given))
        elif os.path.isdir(real):
            raise DataError(f"{name} {given} is a folder; give a file name inside it (for example "
                            f"{Path(given) / 'out'}).")
        _writable_place(name, given, real, is_folder)


# ----------------------------------------------------------------------------------------------------------------
# Folders FairDesk makes

_open: dict[str, int] = {}  # folders an owned_folder of this process has open (final path → depth)
_open_lock = threading.Lock()


def record(folder: str | os.PathLike, what: str | None = None) -> None:
    """Write ``folder``'s manifest: every file now in it, with its SHA-256 (the marker itself left out). Called by
    :func:`owned_folder` when a run ends, and by trainers after each checkpoint, so that a run stopped by SIGKILL
    can still be resumed."""
    from fairdesk.core import atomic

    folder = Path(folder)
    if what is None:
        from fairdesk.core.jsonable import read_json_file

        try:
            doc = read_json_file(folder / MARKER, MANIFEST_LIMIT)
            what = doc.get("what") if isinstance(doc, dict) and isinstance(doc.get("what"), str) else None
        except (OSError, ValueError):
            what = None
    files = {name: _sha256(path) for name, path in _entries(folder)
             if name != MARKER and not name.rsplit("/", 1)[-1].startswith(f".{MARKER}.")
             and not path.is_symlink() and path.is_file()}
    atomic.write_text(folder / MARKER, json.dumps({"written_by": "FairDesk", "format": MANIFEST_FORMAT,
                                                   "what": what or "FairDesk output", "files": files},
                                                  indent=0, sort_keys=True) + "\n")


def record_checkpoint(path: str | os.PathLike) -> None:
    """Record the folder this process has open (:func:`owned_folder`) that holds ``path``, just written: a run
    killed later (SIGKILL, power loss) leaves checkpoints FairDesk can still resume from. Nothing when no open
    folder holds it."""
    real = os.path.realpath(path)
    with _open_lock:
        holders = [k for k in _open if real == k or real.startswith(k.rstrip(os.sep) + os.sep)]
    if holders:
        record(max(holders, key=len))


def _remove_recorded(folder: Path) -> None:
    """Remove from ``folder`` the files its manifest records (unchanged ones only), then the folders left empty,
    the manifest last; whatever else it holds stays where it is."""
    recorded = recorded_files(folder) or {}
    for name, path in list(_entries(folder)):
        if name in recorded and not path.is_symlink() and path.is_file() and _sha256(path) == recorded[name]:
            path.unlink()
    (folder / MARKER).unlink(missing_ok=True)
    for dirpath, _dirs, _files in sorted(os.walk(folder), key=lambda t: -len(Path(t[0]).parts)):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass


def _swap(tmp: Path, folder: Path, option: str, given, nested: bool) -> None:
    """Put the folder ``tmp`` (complete, with its manifest) in the place of ``folder``; the folder it replaces
    loses only the files FairDesk recorded writing there. Refuses (putting everything back) when that folder holds
    anything else."""
    if not os.path.lexists(folder):
        os.replace(tmp, folder)
        return
    old = folder.parent / f".{folder.name}.old-{os.getpid()}-{time.monotonic_ns()}"
    os.replace(folder, old)
    try:
        if nested:
            record(old)  # this run's own writes since it opened the folder
        refusal = ownership_refusal(option, given, old)
    except BaseException:
        os.replace(old, folder)
        raise
    if refusal:
        os.replace(old, folder)
        raise DataError(refusal)
    os.replace(tmp, folder)
    _remove_recorded(old)
    if old.exists():  # something appeared there meanwhile: put it back beside the new files, never delete it
        for entry in sorted(old.iterdir()):
            if not os.path.lexists(folder / entry.name):
                os.replace(entry, folder / entry.name)
        with contextlib.suppress(OSError):
            old.rmdir()


@contextmanager
def owned_folder(folder: str | os.PathLike, what: str = "FairDesk output", option: str = "The output folder", *,
                 replace: bool = False) -> Iterator[Path]:
    """The one way FairDesk writes a folder (models, generators, checkpoints, previews, the demo).

    On entry the folder must be new, empty or hold only what FairDesk recorded writing there, unchanged — otherwise
    one sentence (:class:`DataError`) and nothing touched. When the run ends (finished or not) every file in the
    folder is recorded in its manifest with its SHA-256; a failed run that wrote nothing leaves no new folder.

    ``replace=True`` yields a new temporary sibling folder instead; when the block finishes it takes the folder's
    place, and the old folder loses only the files FairDesk recorded (so an interrupted save never damages the
    previous one). Re-entered for a folder this process already has open (a trainer's save inside its job), the
    check and the recording are left to the outer run.
    """
    folder = Path(folder)
    given = folder
    key = os.path.realpath(folder)
    with _open_lock:
        nested = key in _open
        _open[key] = _open.get(key, 0) + 1
    try:
        if os.path.lexists(folder) and not folder.is_dir():
            raise DataError(f"{option} {given} is a file; give a folder (a new name is created).")
        if not nested:
            refusal = ownership_refusal(option, given, folder)
            if refusal:
                raise DataError(refusal)
        if replace:
            made = make_folder(folder.parent)
            tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}-{time.monotonic_ns()}"
            try:
                tmp.mkdir()
                yield tmp
                record(tmp, what)
                _swap(tmp, folder, option, given, nested)
            except BaseException:
                if tmp.is_dir():  # made above and written by this block only
                    shutil.rmtree(tmp, ignore_errors=True)
                remove_empty(made)
                raise
            return
        made = make_folder(folder)
        if not nested:
            try:
                record(folder, what)
            except BaseException:
                remove_empty(made)
                raise
        try:
            yield folder
        except BaseException:
            if not nested:
                with contextlib.suppress(OSError):
                    record(folder)
                release_if_unused(folder, made)
            raise
        if not nested:
            record(folder)
    finally:
        with _open_lock:
            _open[key] -= 1
            if not _open[key]:
                del _open[key]


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
