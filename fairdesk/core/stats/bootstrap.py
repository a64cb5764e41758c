"""Bootstrap of confusion-cell counts, percentile CIs and bootstrap p-values.

Every group-rate statistic in FairDesk is a function of the counts of rows in a few *cells* (group x label x
prediction). Resampling rows with replacement inside a stratum only changes those counts, and the cell counts of a
row-resample of ``n_s`` rows from stratum ``s`` are exactly ``Multinomial(n_s, cell shares in s)``. **Without
smoothing** (``pseudo = 0``) drawing the counts directly is therefore the same bootstrap distribution as resampling
row indices (a test checks it against explicit index resampling) at a cost that does not grow with the rows.

Cluster (whole-patient) resampling draws how often each patient is picked and sums the picked patients' cell counts.

Boundary smoothing (``pseudo > 0``) is *not* row resampling any more: it is a smoothed bootstrap. Cells come in pairs
``(2k, 2k+1)`` that differ only in the prediction (group g, label y, prediction 0/1). A rate of 0/60 or 60/60 never
moves under plain resampling, so its bootstrap distribution is a point mass. With ``pseudo = 0.5`` each present
pair gets half a pseudo-row in each of its two cells when the resampling shares are formed (a Jeffreys prior on the
pair's split); estimates are never smoothed. The replicates then come from the smoothed shares, not the observed
ones: a KS test against row resampling rejects (p 5e-9 smoothed vs 0.98 unsmoothed), and a percentile
interval drawn from them is conservative and shifted off the estimate at small denominators (10/10 vs 700/1000:
gap 0.300, percentile CI 0.085 to 0.324). The group audit therefore uses the smoothed replicates only for a
*variance* — the design effect of :mod:`fairdesk.core.stats.gaps` — never for a percentile interval or a tail share
(see ``benchmarks/bench_group_intervals.py`` for the coverage study behind that choice).

:func:`percentile_ci` and :func:`bootstrap_p_value` are kept for other audits and the coverage study; the group
audit's p-values are not Monte-Carlo shares (a share is floored at 1/(B+1)).
"""
from __future__ import annotations

import numpy as np


def _pair_pseudo(counts: np.ndarray, pseudo: float) -> np.ndarray:
    """``pseudo`` in both cells of every pair (2k, 2k+1) that holds at least one row; zeros elsewhere."""
    if pseudo <= 0:
        return np.zeros(counts.shape, dtype=float)
    if counts.size % 2:
        raise ValueError("boundary smoothing needs cells in (prediction 0, prediction 1) pairs")
    present = (counts[0::2] + counts[1::2]) > 0
    return np.repeat(present, 2) * float(pseudo)


def stratified_cell_counts(cells: np.ndarray, strata: np.ndarray, n_cells: int, n_boot: int,
                           rng: np.random.Generator, pseudo: float = 0.0) -> np.ndarray:
    """Cell counts of ``n_boot`` row resamples, each stratum keeping its size.

    ``cells`` and ``strata`` are integer arrays (one entry per row). Returns an ``(n_boot, n_cells)`` int64 array.
    ``pseudo`` > 0 smooths the resampling shares at the boundary (see the module docstring).
    """
    cells = np.asarray(cells, dtype=np.int64)
    strata = np.asarray(strata, dtype=np.int64)
    out = np.zeros((n_boot, n_cells), dtype=np.int64)
    for s in np.unique(strata):
        in_s = cells[strata == s]
        counts = np.bincount(in_s, minlength=n_cells).astype(float)
        counts += _pair_pseudo(counts, pseudo)
        out += rng.multinomial(in_s.size, counts / counts.sum(), size=n_boot)
    return out


def cluster_cell_counts(cells: np.ndarray, clusters: np.ndarray, n_cells: int, n_boot: int,
                        rng: np.random.Generator, chunk: int = 100, pseudo: float = 0.0) -> np.ndarray:
    """Cell counts of ``n_boot`` whole-cluster resamples (as many clusters drawn as there are).

    With ``pseudo`` > 0, every present cell pair adds two one-row pseudo-clusters (one per cell), each drawn
    ``pseudo`` times as often as a real cluster (boundary smoothing, see the module docstring).
    """
    cells = np.asarray(cells, dtype=np.int64)
    _, cluster_idx = np.unique(np.asarray(clusters), return_inverse=True)
    n_clusters = int(cluster_idx.max()) + 1 if cluster_idx.size else 0
    per_cluster = np.zeros((n_clusters, n_cells), dtype=np.float64)
    np.add.at(per_cluster, (cluster_idx, cells), 1.0)
    weight = np.ones(n_clusters)
    extra = np.flatnonzero(_pair_pseudo(per_cluster.sum(axis=0), pseudo))
    if extra.size:
        per_cluster = np.vstack([per_cluster, np.eye(n_cells)[extra]])
        weight = np.concatenate([weight, np.full(extra.size, float(pseudo))])
    out = np.empty((n_boot, n_cells), dtype=np.int64)
    n_all = per_cluster.shape[0]
    # Draw n_clusters picks per replicate by inverting the cumulative weights (every real cluster weighs 1, so a
    # uniform u < n_clusters picks cluster floor(u)); 3x faster than rng.multinomial(n_clusters, shares).
    total = weight.sum()
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        u = rng.random((stop - start, n_clusters)) * total
        idx = u.astype(np.int64)
        tail = u >= n_clusters  # a pseudo-cluster was picked (only possible when pseudo > 0)
        if tail.any():
            idx[tail] = n_clusters + ((u[tail] - n_clusters) / pseudo).astype(np.int64)
        idx = np.minimum(idx, n_all - 1)
        idx += (np.arange(stop - start) * n_all)[:, None]
        weights = np.bincount(idx.ravel(), minlength=(stop - start) * n_all).reshape(stop - start, n_all)
        out[start:stop] = np.rint(weights.astype(np.float64) @ per_cluster).astype(np.int64)
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
