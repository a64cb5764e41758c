"""Issue 21 (item 1 and 4): statistical defects found outside the designs simulated before, each reproduced by a
small fixed-seed simulation that failed on the code before the fix. The full-size studies are in
``benchmarks/bench_design_space.py``; docs/methods.md §1 and §8 give their numbers."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
from fairdesk.core.data.schema import ColumnRoles


def _unequal_prevalence(rng, sizes=(2000, 200), prevalences=(0.05, 0.5), tpr=0.95, fpr=0.02) -> pd.DataFrame:
    frames = []
    for g, (n, p) in enumerate(zip(sizes, prevalences)):
        y = (rng.random(n) < p).astype(int)
        flagged = rng.random(n) < np.where(y == 1, tpr, fpr)
        frames.append(pd.DataFrame({"y": y, "s": np.where(flagged, 0.8, 0.2), "g": f"G{g}"}))
    return pd.concat(frames, ignore_index=True)


def test_parity_design_effect_is_one_with_independent_rows_whatever_the_prevalences():
    """Before: label-stratified resampling fixed the number of positives, so with prevalence 0.05 vs 0.5 the parity
    gap's design effect was 0.85 (an interval too narrow); resampling within groups gives 1. Recall and
    specificity keep theirs. 12 data sets × 400 replicates: the mean of a design effect has SD ≈ 0.02."""
    rng = np.random.default_rng(21)
    plan = GroupAuditPlan(threshold=0.5, roles=ColumnRoles(label="y", score="s", attributes=("g",)), n_boot=400, seed=3,
                          calibration=False)
    deff = {"parity": [], "recall": [], "specificity": []}
    for _ in range(12):
        tests = run_group_audit(_unequal_prevalence(rng), plan).tests
        for m in deff:
            deff[m].append(float(tests.loc[tests["metric"] == m, "design_effect"].iloc[0]))
    for m, v in deff.items():
        assert 0.92 < np.mean(v) < 1.08, (m, np.mean(v))
