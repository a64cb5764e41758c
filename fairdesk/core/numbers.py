"""How FairDesk prints a number: one module for the screen, the PDF, the HTML report, the CLI and the model card.

Every printed number goes through these functions so that the same value reads the same everywhere:

* p- and q-values with three decimals, and "< 0.001" below 0.001 (never "5.33e-170" or "p = 0");
* rates, gaps and other measures with fixed decimals per measure (:data:`DIGITS`), a true minus sign "−" and a
  "+" on signed differences;
* intervals as "low to high";
* counts with thousands separators, "<k" below the small-cell threshold k;
* a missing value (None, NaN, pd.NA, text) as "–".

No function ever returns scientific notation, "nan", "None" or "inf".
"""
from __future__ import annotations

import math

MINUS = "\u2212"
MISSING = "–"

#: decimals per kind of measure (a measure not listed prints with 3)
DIGITS = {"rate": 3, "gap": 3, "auroc": 3, "auprc": 3, "delta_eo": 3, "nats": 2, "shift": 3, "r2": 2,
          "accuracy": 3, "probability": 3, "ratio": 2, "effect": 2}


def num(value) -> float | None:
    """A finite float, or None for None / NaN / ±inf / pd.NA / anything not numeric (booleans are not numbers)."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def fixed(value, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals ("0.120"); a true minus sign; "–" when missing. Values that round to zero
    print as zero without a sign; large values get thousands separators ("12,345.6")."""
    f = num(value)
    if f is None:
        return MISSING
    digits = max(0, int(digits))
    if round(f, digits) == 0:
        return f"{0:.{digits}f}"
    text = f"{abs(f):,.{digits}f}"
    return (MINUS + text) if f < 0 else text


def signed(value, digits: int = 3) -> str:
    """A difference with its sign: "+0.120", "−0.045", "0.000"."""
    f = num(value)
    if f is None:
        return MISSING
    text = fixed(f, digits)
    return text if text.startswith(MINUS) or round(f, digits) == 0 else "+" + text


def short(value, digits: int = 6) -> str:
    """A setting or a plain value in its shortest form ("0.05", "1", "0.457" with ``digits=3``), as ``:g`` prints it
    but never in scientific notation: below 0.0001 in size it reads "< 0.0001", a large value prints whole."""
    f = num(value)
    if f is None:
        return MISSING
    if f == 0:
        return "0"
    if abs(f) < 1e-4:
        return f"> {MINUS}0.0001" if f < 0 else "< 0.0001"
    text = f"{f:.{max(1, int(digits))}g}"
    if "e" in text:
        text = f"{f:.0f}"
    return text.replace("-", MINUS)


def measure(value, kind: str = "rate", signed_: bool = False) -> str:
    """A value of a measure, with the measure's decimals (:data:`DIGITS`)."""
    digits = DIGITS.get(kind, 3)
    return signed(value, digits) if signed_ else fixed(value, digits)


def p_value(value) -> str:
    """A p- or q-value: "0.012", "< 0.001", "1.000"; "–" when missing."""
    f = num(value)
    if f is None:
        return MISSING
    f = min(max(f, 0.0), 1.0)
    return "< 0.001" if f < 0.001 else f"{f:.3f}"


def p_equals(value, name: str = "p") -> str:
    """"p = 0.012" or "p < 0.001" (the sign belongs to the sentence, not to the number)."""
    text = p_value(value)
    return f"{name} {text}" if text.startswith("<") else f"{name} = {text}"


def interval(low, high, digits: int = 3, signed_: bool = True) -> str:
    """"−0.120 to +0.030" (signed) or "0.610 to 0.720"; "–" when either end is missing."""
    if num(low) is None or num(high) is None:
        return MISSING
    f = signed if signed_ else fixed
    return f"{f(low, digits)} to {f(high, digits)}"


def count(value, k: int | None = None) -> str:
    """A count with thousands separators; below ``k`` it is shown as "<k" (small-cell suppression)."""
    f = num(value)
    if f is None:
        return MISSING
    n = int(round(f))
    if k is not None and n < k:
        return f"<{k}"
    return f"{n:,}"


def percent(value, digits: int = 0) -> str:
    """A share as a percentage: "12%"."""
    f = num(value)
    return MISSING if f is None else f"{fixed(100 * f, digits)}%"


#: column names (lower case, spaces for underscores) whose values are p- or q-values
_P_NAMES = ("p", "q", "p value", "q value", "p equivalence", "q equivalence", "p tost", "tost p")


def is_p_column(name) -> bool:
    """Whether a table column holds p- or q-values ("p", "q_value", "TOST p 0->1", "cit_lr_p", "p (BH)")."""
    text = str(name or "").strip().lower().replace("_", " ")
    words = text.replace("(", " ").replace(")", " ").split()
    if not words:
        return False
    return (text in _P_NAMES or words[0] in ("p", "q") or words[-1] in ("p", "q")
            or any(text.startswith(n + " ") for n in _P_NAMES))


def cell(value, column: str = "") -> str:
    """A table cell as the screen shows it: p-values by :func:`p_value`, other floats with 3 decimals (or 4
    significant digits from 10 up), whole numbers with separators, never scientific notation."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    f = num(value)
    if f is None:
        try:
            import numpy as np

            if isinstance(value, np.bool_):
                return "yes" if value else "no"
        except ImportError:  # pragma: no cover
            pass
        return MISSING if value is None or _missing(value) else str(value)
    if is_p_column(column):
        return p_value(f)
    if f == int(f) and abs(f) < 1e15 and _is_integer(value):
        return f"{int(f):,}"
    if abs(f) >= 10:
        return fixed(f, max(0, 3 - int(math.log10(abs(f)))))
    return fixed(f, 3)


def _is_integer(value) -> bool:
    try:
        import numpy as np

        return isinstance(value, (int, np.integer))
    except ImportError:  # pragma: no cover
        return isinstance(value, int)


def _missing(value) -> bool:
    try:
        import pandas as pd

        return value is pd.NA or value is pd.NaT
    except ImportError:  # pragma: no cover
        return False
