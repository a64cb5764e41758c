"""Model kinds, training and prediction. Heavy libraries (sklearn, torch) are imported only when used.

The tabular names below load :mod:`.tabular` (and pandas) on first use, not when the package is imported: the CLI
parser imports :mod:`.age_independent` (numpy only) to name its settings, and must not pay for pandas."""

_TABULAR = ("DEFAULT_PARAMS", "MODEL_KINDS", "MODEL_LABELS", "TrainResult", "TrainSpec", "model_hash",
            "train_and_predict")

__all__ = [*_TABULAR, "patient_disjoint_split"]


def __getattr__(name: str):
    if name in _TABULAR:
        from fairdesk.core.models import tabular

        return getattr(tabular, name)
    if name == "patient_disjoint_split":
        from fairdesk.core.data.splits import patient_disjoint_split

        return patient_disjoint_split
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
