"""The reader's arithmetic the disclosure attack tests share (``from disclosure_arithmetic import ...``: ``tests/``
is on ``sys.path`` through its conftest): whole-count candidates of a printed value, and the fractions a report
prints ("0.081 (<11/37)", "0.913 (42/46)")."""
from __future__ import annotations

import math
import re

K = 11


def candidates(lo, hi, top):
    """Whole values in [lo, hi] ∩ [0, top]."""
    a, b = max(0, math.ceil(lo - 1e-9)), min(top, math.floor(hi + 1e-9))
    return list(range(a, b + 1)) if a <= b else []


def small(value, k=K) -> bool:
    return value is not None and 1 <= value < k


FRACTION = re.compile(r"(\d\.\d+) \(<(\d+)/([\d,]+)\)")
FRACTION2 = re.compile(r"(\d\.\d+) \(([\d,]+)/([\d,]+)\)")


def attack_fractions(text: str, k: int = K) -> list[str]:
    """"0.081 (<11/37)": rate × denominator (and the complement); "0.913 (42/46)": denominator − numerator."""
    leaks = []
    for m in FRACTION.finditer(text):
        rate, den = float(m.group(1)), int(m.group(3).replace(",", ""))
        eps = 0.5 * 10 ** -len(m.group(1).split(".")[1])
        cands = candidates((rate - eps) * den, (rate + eps) * den, den)
        if len(cands) == 1 and (small(cands[0], k) or small(den - cands[0], k)):
            leaks.append(m.group(0))
    for m in FRACTION2.finditer(text):
        num, den = int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))
        if small(den - num, k):
            leaks.append(m.group(0))
    return leaks
