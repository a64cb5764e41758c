"""The one check of a numeric parameter against its stated limits, refused in one sentence naming the option.

Every plan and model configuration with numbers a user sets (the group audit's plan, the image classifier's and the
generator's configuration) passes its numbers through :func:`check_number`; the sentence names the CLI option, which
the GUI's form fields and the Python API's keyword arguments stand for.
"""
from __future__ import annotations

import math
import numbers

from fairdesk.core.errors import DataError


def check_number(value, option: str, low: float, high: float, *, whole: bool, what: str, open_ends: bool = False):
    """``value`` as an ``int`` (``whole``) or ``float`` within ``[low, high]`` (``(low, high)`` with ``open_ends``);
    otherwise :class:`DataError` naming ``option`` and saying ``what`` the number is."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DataError(f"{option} must be a number ({what}), not {value!r}.")
    if not math.isfinite(value) or (whole and value != int(value)):
        raise DataError(f"{option} {value!r} is not {'a whole number' if whole else 'a finite number'} ({what}).")
    if whole:
        value = int(value)
    inside = low < value < high if open_ends else low <= value <= high
    if not inside:
        span = (f"strictly between {low:g} and {high:g}" if open_ends else
                f"from {low:,} to {high:,}" if whole else f"from {low:g} to {high:g}")
        raise DataError(f"{option} {value} is outside the limits: give a number {span} ({what}).")
    return value if whole else float(value)
