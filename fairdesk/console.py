"""The one way FairDesk writes to a terminal (``fairdesk-cli`` and the desktop app's headless paths).

:func:`say` is :func:`print` that cannot fail a run and cannot be steered by data:

* text from data (group, column, task and file names) reaches the terminal without escape sequences, control
  characters, bidi overrides or zero-width characters (:func:`fairdesk.core.escape.plain_text`);
* a character the console's encoding cannot show (a redirected run on Windows writes in the ANSI code page, cp1252)
  is shown as "?" instead of raising;
* a write that fails all the same (a closed pipe, a windowed build without a console) is dropped: a result already
  stored must never turn into a failed run — or be stored twice by a user who runs the command again.

:func:`prepare` gives the streams themselves the same tolerance for what others write there (argparse's help and
errors, warnings). ``tests/test_console.py`` forbids ``print`` and ``sys.stdout/stderr.write`` elsewhere in the CLI.
"""
from __future__ import annotations

import sys

from fairdesk.core.escape import plain_text


def prepare() -> None:
    """Let stdout and stderr replace what their encoding cannot show (instead of raising UnicodeEncodeError)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError, OSError):
            pass  # not a text stream we can reconfigure (a test's StringIO, None in a windowed build)


def say(*values, sep: str = " ", end: str = "\n", file=None, flush: bool = False, redraw: bool = False) -> None:
    """``print(*values, sep=sep, end=end, file=file)``, made safe (see the module). ``redraw``: start with a
    carriage return, so the line overwrites the one before (the progress bar)."""
    stream = sys.stdout if file is None else file
    if stream is None:
        return
    text = ("\r" if redraw else "") + plain_text(sep.join(str(v) for v in values)) + end
    encoding = getattr(stream, "encoding", None)
    if encoding:
        try:
            text = text.encode(encoding, "replace").decode(encoding)
        except (LookupError, UnicodeError):
            text = text.encode("ascii", "replace").decode("ascii")
    try:
        stream.write(text)
        if flush:
            stream.flush()
    except (OSError, ValueError, UnicodeError):
        pass  # nothing to say it with; the run's results are what counts
