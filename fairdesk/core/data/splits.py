"""Patient-disjoint splits: every row to "train", "val" or "test", no patient in two splits.

Shared by the tabular baselines and the note classifiers (:mod:`fairdesk.core.models`) and by image datasets
(:meth:`fairdesk.core.data.images.ImageDataset.split`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fairdesk.core.errors import ModelError


def patient_disjoint_split(df: pd.DataFrame, patient_id: str | None, val_size: float = 0.15,
                           test_size: float = 0.25, seed: int = 0) -> pd.Series:
    """Assign every row to "train", "val" or "test" so that no patient is in two splits.

    Patients (or rows, when ``patient_id`` is None) are shuffled with ``seed`` and cut so that the *row*
    proportions come close to ``val_size`` and ``test_size``. The assignment depends on the set of patient ids,
    not on the row order. When there are at least three patients, each requested split gets at least one.
    """
    val_size, test_size = float(val_size), float(test_size)
    if not (0.0 <= val_size < 1.0 and 0.0 <= test_size < 1.0 and val_size + test_size < 1.0):
        raise ModelError(
            f"The validation ({val_size:g}) and test ({test_size:g}) shares must each be between 0 and 1 and "
            "leave rows for training (together below 1). Typical values are 0.15 and 0.25.")
    n = len(df)
    if n == 0:
        raise ModelError("The table has no rows, so nothing can be split or trained.")
    if patient_id is None:
        codes = np.arange(n)
        n_units = n
    else:
        if patient_id not in df.columns:
            raise ModelError(f"The patient id column '{patient_id}' is not in the table. Choose an existing "
                             "column, or none if every row is a different patient.")
        col = df[patient_id]
        n_missing = int(col.isna().sum())
        if n_missing:
            raise ModelError(
                f"The patient id column '{patient_id}' is empty in {n_missing} row(s). Fill in the patient of "
                "every row (rows of one patient must stay in one split), or drop those rows.")
        _, codes = np.unique(col.astype(str).to_numpy(), return_inverse=True)
        codes = np.asarray(codes).ravel()
        n_units = int(codes.max()) + 1
    counts = np.bincount(codes, minlength=n_units)
    rng = np.random.default_rng(int(seed))
    perm = rng.permutation(n_units)
    # position of each unit's middle row along the shuffled order, as a share of all rows
    ends = np.cumsum(counts[perm])
    mid = (ends - counts[perm] / 2.0) / n
    unit_split = np.full(n_units, 0, dtype=np.int64)  # 0 train, 1 val, 2 test
    unit_split[perm[mid < test_size + val_size]] = 1
    unit_split[perm[mid < test_size]] = 2
    if n_units >= 3:
        for s, share in ((2, test_size), (1, val_size)):
            if share > 0 and not np.any(unit_split == s):
                train_units = perm[unit_split[perm] == 0]
                if len(train_units) > 1:
                    unit_split[train_units[0]] = s
    names = np.array(["train", "val", "test"], dtype=object)
    return pd.Series(names[unit_split[codes]], index=df.index, name="split", dtype=object)
