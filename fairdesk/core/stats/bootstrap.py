"""Bootstrap of confusion-cell counts, percentile CIs and bootstrap p-values.

Every group-rate statistic in FairDesk is a function of the counts of rows in a few *cells* (group x label x
prediction). Resampling rows with replacement inside a stratum therefore only changes those counts, and the cell
counts of a row-resample of ``n_s`` rows from stratum ``s`` are exactly ``Multinomial(n_s, cell shares in s)``.
Drawing the counts directly is the same bootstrap distribution as resampling row indices (a test checks it against
explicit index resampling) at a cost that does not grow with the number of rows.

Cluster (whole-patient) resampling draws how often each patient is picked, ``Multinomial(P, 1/P)``, and sums the
picked patients' cell counts.
"""
from __future__ import annotations

import numpy as np


def stratified_cell_counts(cells: np.ndarray, strata: np.ndarray, n_cells: int, n_boot: int,
                           rng: np.random.Generator) -> np.ndarray:
    """Cell counts of ``n_boot`` row resamples, each stratum keeping its size.

    ``cells`` and ``strata`` are integer arrays (one entry per row). Returns an ``(n_boot, n_cells)`` int64 array.
    """
    cells = np.asarray(cells, dtype=np.int64)
    strata = np.asarray(strata, dtype=np.int64)
    out = np.zeros((n_boot, n_cells), dtype=np.int64)
    for s in np.unique(strata):
        in_s = cells[strata == s]
        counts = np.bincount(in_s, minlength=n_cells)
        out += rng.multinomial(in_s.size, counts / in_s.size, size=n_boot)
    return out


def cluster_cell_counts(cells: np.ndarray, clusters: np.ndarray, n_cells: int, n_boot: int,
                        rng: np.random.Generator, chunk: int = 100) -> np.ndarray:
    """Cell counts of ``n_boot`` whole-cluster resamples (as many clusters drawn as there are)."""
    cells = np.asarray(cells, dtype=np.int64)
    _, cluster_idx = np.unique(np.asarray(clusters), return_inverse=True)
    n_clusters = int(cluster_idx.max()) + 1 if cluster_idx.size else 0
    per_cluster = np.zeros((n_clusters, n_cells), dtype=np.float64)
    np.add.at(per_cluster, (cluster_idx, cells), 1.0)
    out = np.empty((n_boot, n_cells), dtype=np.int64)
    share = np.full(n_clusters, 1.0 / max(n_clusters, 1))
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        weights = rng.multinomial(n_clusters, share, size=stop - start).astype(np.float64)
        out[start:stop] = np.rint(weights @ per_cluster).astype(np.int64)
    return out


def percentile_ci(samples: np.ndarray, level: float = 0.95, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap replicates, ignoring NaN replicates."""
    tail = (1.0 - level) / 2.0 * 100.0
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low = np.nanpercentile(samples, tail, axis=axis)
            high = np.nanpercentile(samples, 100.0 - tail, axis=axis)
    return low, high


def bootstrap_p_value(samples: np.ndarray, axis: int = 0) -> np.ndarray:
    """Two-sided bootstrap p-value for "gap = 0": ``min(1, 2 min(P*(g <= 0), P*(g >= 0)))``.

    Each tail share uses the ``(b + 1) / (B + 1)`` correction, with ``B`` the number of replicates in which the gap
    was estimable. (The authors' release used the smaller tail share alone: one-sided, not doubled.)
    """
    valid = ~np.isnan(samples)
    n_valid = valid.sum(axis=axis)
    with np.errstate(invalid="ignore"):
        le = np.where(valid, samples <= 0, False).sum(axis=axis)
        ge = np.where(valid, samples >= 0, False).sum(axis=axis)
        p = np.minimum(1.0, 2.0 * np.minimum(le + 1, ge + 1) / (n_valid + 1))
    return np.where(n_valid > 0, p, np.nan)
