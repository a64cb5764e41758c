"""First import of every entry point: make the process air-gapped before anything heavy loads.

Imports neither Qt nor torch.
"""
from __future__ import annotations

import os
import sys

# Forced, whatever the user's environment says (HF_HUB_OFFLINE=0 must not turn the network back on).
_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "DIFFUSERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
    "DO_NOT_TRACK": "1",
}
# Defaults the user may override.
_DEFAULT_ENV = {
    "PYQTGRAPH_QT_LIB": "PySide6",
    "MPLBACKEND": "Agg",
}


def apply() -> None:
    """Force the offline environment (idempotent) and guard streams of windowed builds."""
    os.environ.update(_OFFLINE_ENV)
    for key, value in _DEFAULT_ENV.items():
        os.environ.setdefault(key, value)
    from fairdesk import paths

    if not (os.environ.get("HF_HOME") and os.environ.get("MPLCONFIGDIR")):
        cache = paths.cache_location()  # nothing is written at import: each library makes its folder when needed
        os.environ.setdefault("HF_HOME", str(cache / "hf"))
        os.environ.setdefault("MPLCONFIGDIR", str(cache / "matplotlib"))
    # A windowed (no console) frozen build has no stdout/stderr: writes would crash.
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    if getattr(sys, "frozen", False):
        import multiprocessing

        multiprocessing.freeze_support()


apply()
