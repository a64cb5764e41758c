# PyInstaller runtime hook: the frozen app is air-gapped before any of its modules load.
import os

for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "DO_NOT_TRACK"):
    os.environ[key] = "1"
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
