"""Decision thresholds chosen from data: shared by the audits (``threshold="best_f1"``) and the models that pick
their operating point on the validation split (the note classifiers)."""
from __future__ import annotations

import numpy as np


def best_f1_threshold(y: np.ndarray, s: np.ndarray) -> float:
    """The score threshold with the highest F1 of ``s >= threshold`` against the 0/1 labels ``y``
    (sklearn's precision-recall curve; ties: the lowest such threshold)."""
    from sklearn.metrics import precision_recall_curve

    precision, recall, thresholds = precision_recall_curve(y, s)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = 2 * precision * recall / (precision + recall)
    f1 = np.nan_to_num(f1[:-1], nan=-1.0)
    return float(thresholds[int(np.argmax(f1))])
