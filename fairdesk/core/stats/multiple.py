"""Multiple-testing correction."""
from __future__ import annotations

import numpy as np


def benjamini_hochberg(p_values) -> np.ndarray:
    """BH-adjusted p-values (q-values); NaN entries stay NaN and do not count as tests."""
    from scipy.stats import false_discovery_control

    p = np.asarray(p_values, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = false_discovery_control(p[ok], method="bh")
    return q
