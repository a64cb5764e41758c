"""Each group's confusion counts at any threshold, after one sort (the threshold explorer).

:class:`GroupRates` sorts the scores once per (group, label) cell, offset so that one ``np.searchsorted`` call over
all cells gives every group's TP, FP, FN and TN at a threshold: an update costs O(groups · log rows), not a pass
over the rows (a pandas ``groupby`` per slider move costs milliseconds per 20,000 rows; see
benchmarks/bench_threshold_explorer.py). Prediction is ``score ≥ threshold``, as in the audit.

Written by hand because no library keeps the sorted per-group scores between threshold queries (sklearn's
``roc_curve`` gives the curve, not counts at an arbitrary threshold, and recomputes per call).

Also: per-group thresholds that would give every group the same true positive rate (equal opportunity) or the
closest deterministic threshold to equal true and false positive rates (equalised odds) — for information only:
FairDesk audits a model, it does not post-process it (exact equalised odds needs randomised thresholds, Hardt,
Price & Srebro 2016).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


class GroupRates:
    """Counts and rates per group at any threshold. ``y`` (0/1), ``s`` (scores in [0, 1]), ``groups`` (labels)."""

    def __init__(self, y, s, groups) -> None:
        y = np.asarray(y, dtype=int)
        s = np.asarray(s, dtype=float)
        codes, names = pd.factorize(pd.Series(groups).astype("string").fillna("(missing)"), sort=True)
        self.groups = [str(g) for g in names]
        k = len(self.groups)
        cell = 2 * codes + y  # cell 2g: negatives of group g, 2g + 1: its positives
        # scores of each cell, sorted, placed at an offset of 2·cell so that all cells sort as one array
        self._v = np.sort(s + 2.0 * cell)
        self._end = np.cumsum(np.bincount(cell, minlength=2 * k))  # index after each cell's last score
        self._offsets = 2.0 * np.arange(2 * k)
        counts = np.bincount(cell, minlength=2 * k).reshape(k, 2)
        self.n_neg, self.n_pos = counts[:, 0], counts[:, 1]
        self.n = self.n_neg + self.n_pos
        # per group, once: its candidate thresholds (distinct scores, high to low) and the TPR and FPR at each,
        # so that the per-group "fair" thresholds cost O(rows) of vector work per update, not a sort
        self._curves = []
        for g in range(k):
            sg, yg = s[codes == g], y[codes == g]
            cand = np.unique(sg)[::-1]
            pos, neg = np.sort(sg[yg == 1]), np.sort(sg[yg == 0])
            with np.errstate(invalid="ignore", divide="ignore"):
                tpr = (pos.size - np.searchsorted(pos, cand, side="left")) / pos.size
                fpr = (neg.size - np.searchsorted(neg, cand, side="left")) / neg.size
            self._curves.append((cand, tpr, fpr))

    def counts(self, threshold: float) -> np.ndarray:
        """(groups, 4) array of [TN, FP, FN, TP] at ``threshold`` (prediction: score ≥ threshold)."""
        at_or_above = self._end - np.searchsorted(self._v, self._offsets + float(threshold), side="left")
        flagged = at_or_above.reshape(-1, 2)  # [FP, TP] per group
        fp, tp = flagged[:, 0], flagged[:, 1]
        return np.column_stack([self.n_neg - fp, fp, self.n_pos - tp, tp])

    def rates(self, threshold: float) -> pd.DataFrame:
        """Per group: n, positives, TP, FP, TN, FN, TPR, FPR and PPV (NaN where not estimable)."""
        c = self.counts(threshold).astype(float)
        tn, fp, fn, tp = c.T
        with np.errstate(invalid="ignore", divide="ignore"):
            tpr, fpr = tp / (tp + fn), fp / (fp + tn)
            ppv = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
        return pd.DataFrame({"group": self.groups, "n": self.n, "n_positive": self.n_pos, "tp": tp.astype(int),
                             "fp": fp.astype(int), "tn": tn.astype(int), "fn": fn.astype(int), "tpr": tpr,
                             "fpr": fpr, "ppv": ppv})

    @staticmethod
    def gaps(rates: pd.DataFrame) -> dict[str, float]:
        """Highest minus lowest TPR, FPR and PPV over the groups (NaN-aware), and the equalised-odds gap."""
        out = {}
        for col in ("tpr", "fpr", "ppv"):
            v = rates[col].to_numpy(float)
            v = v[~np.isnan(v)]
            out[col] = float(v.max() - v.min()) if v.size > 1 else math.nan
        out["equalised_odds"] = max(out["tpr"], out["fpr"]) if not (math.isnan(out["tpr"]) or
                                                                     math.isnan(out["fpr"])) else math.nan
        return out

    def overall(self, threshold: float) -> tuple[float, float]:
        """(TPR, FPR) of all groups together."""
        tn, fp, fn, tp = self.counts(threshold).sum(axis=0).astype(float)
        return (tp / (tp + fn) if tp + fn else math.nan, fp / (fp + tn) if fp + tn else math.nan)

    def fair_thresholds(self, threshold: float) -> pd.DataFrame:
        """Per group, for information: the threshold giving the group the overall TPR at ``threshold`` (equal
        opportunity), and the threshold among the group's own scores closest to the overall (TPR, FPR) in the
        larger of the two differences (equalised odds, deterministic)."""
        target_tpr, target_fpr = self.overall(threshold)
        rows = []
        for g, name in enumerate(self.groups):
            cand, tpr, fpr = self._curves[g]
            eo = eodds = math.nan
            if self.n_pos[g] and self.n_neg[g] and not math.isnan(target_tpr):
                reach = np.flatnonzero(tpr >= target_tpr - 1e-12)
                eo = float(cand[reach[0]]) if reach.size else math.nan  # highest threshold reaching the TPR
                dist = np.maximum(np.abs(tpr - target_tpr), np.abs(fpr - target_fpr))
                eodds = float(cand[int(np.argmin(dist))])
            rows.append({"group": name, "equal_opportunity": eo, "equalised_odds": eodds})
        return pd.DataFrame(rows)


def rates_from_curves(curves: pd.DataFrame, groups: pd.DataFrame, task: str, attribute: str,
                      threshold: float) -> pd.DataFrame:
    """The same table as :meth:`GroupRates.rates`, approximated from the stored ROC points (≤ 200 per group):
    each group's point with the lowest stored threshold at or above ``threshold``. For audits whose dataset is not
    in the project."""
    rows = []
    sel = curves[(curves["task"].astype(str) == task) & (curves["attribute"].astype(str) == attribute)
                 & (curves["curve"] == "roc")]
    sizes = groups[(groups["task"].astype(str) == task) & (groups["attribute"].astype(str) == attribute)]
    sizes = sizes.set_index(sizes["group"].astype(str))
    for r in sel.itertuples(index=False):
        thr = np.array([np.inf if v is None else v for v in r.threshold], dtype=float)
        fpr_pts, tpr_pts = np.asarray(r.x, dtype=float), np.asarray(r.y, dtype=float)
        ok = np.flatnonzero(thr >= threshold)  # thresholds decrease along the curve
        i = int(ok[-1]) if ok.size else 0
        g = str(r.group)
        n = int(sizes.loc[g, "n"]) if g in sizes.index else 0
        n_pos = int(sizes.loc[g, "n_positive"]) if g in sizes.index else 0
        tp, fp = tpr_pts[i] * n_pos, fpr_pts[i] * (n - n_pos)
        rows.append({"group": g, "n": n, "n_positive": n_pos, "tp": int(round(tp)), "fp": int(round(fp)),
                     "tn": int(round(n - n_pos - fp)), "fn": int(round(n_pos - tp)), "tpr": tpr_pts[i],
                     "fpr": fpr_pts[i], "ppv": tp / (tp + fp) if tp + fp > 0 else math.nan})
    return pd.DataFrame(rows, columns=["group", "n", "n_positive", "tp", "fp", "tn", "fn", "tpr", "fpr", "ppv"])
