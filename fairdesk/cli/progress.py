"""The terminal progress bar every ``fairdesk-cli`` command shows (``--quiet`` hides it)."""
from __future__ import annotations

import sys
import time

from fairdesk.console import say
from fairdesk.core.progress import Eta


class TerminalProgress:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._last = -1.0
        self._start = time.monotonic()
        self._eta = Eta()

    def __call__(self, fraction: float, message: str = "") -> None:
        if self.quiet:
            return
        eta = self._eta.text(fraction)
        if self.tty:
            bar = "#" * int(30 * fraction)
            say(f"[{bar:<30}] {100 * fraction:5.1f}%  {eta:<20} {message[:50]:<50}", end="", file=sys.stderr,
                flush=True, redraw=True)
        elif fraction - self._last >= 0.1 or fraction >= 1.0 and self._last < 1.0:
            self._last = fraction
            say(f"{100 * fraction:5.1f}%  {message}{f' ({eta})' if eta else ''}", file=sys.stderr)

    def done(self) -> None:
        if not self.quiet and self.tty:
            say(f"done in {time.monotonic() - self._start:.1f} s{' ' * 80}", file=sys.stderr, redraw=True)
