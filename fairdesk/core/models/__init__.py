"""Model kinds, training and prediction. Heavy libraries (sklearn, torch) are imported only when used."""
from fairdesk.core.data.splits import patient_disjoint_split
from fairdesk.core.models.tabular import (
    DEFAULT_PARAMS,
    MODEL_KINDS,
    MODEL_LABELS,
    TrainResult,
    TrainSpec,
    model_hash,
    train_and_predict,
)

__all__ = [
    "DEFAULT_PARAMS",
    "MODEL_KINDS",
    "MODEL_LABELS",
    "TrainResult",
    "TrainSpec",
    "model_hash",
    "patient_disjoint_split",
    "train_and_predict",
]
