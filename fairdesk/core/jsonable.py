"""One conversion of results into the plain values a JSON document holds (every stored document goes through it)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def jsonable(obj: Any) -> Any:
    """``obj`` as plain Python values that ``json.dumps(..., allow_nan=False)`` writes: dicts (keys as ``str``),
    lists (from lists, tuples and numpy arrays), numpy scalars as ``int``/``float``/``bool``/``str``, and NaN, ±inf,
    ``pd.NA`` and ``pd.NaT`` as ``None``. Anything else (str, int, bool, None, other objects) is returned as is."""
    if isinstance(obj, dict):
        return {_key(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if obj is pd.NA or obj is pd.NaT:
        return None
    return obj


def _key(k: Any) -> str:
    return k if isinstance(k, str) else str(k)
