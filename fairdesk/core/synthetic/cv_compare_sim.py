"""Two learners compared over repeated participant-disjoint cross-validation, with known truth (METHODS §3).

The age protocol compares every method with the DNN over the R·k per-fold values
(:func:`fairdesk.core.audits.age_independence.paired_comparison`). The folds share training rows (and, with R > 1
repeats, held-out rows), so the per-fold differences are positively correlated: the plain paired t-test treats
them as independent and rejects too often. This module measures that with cheap learners on small synthetic
cohorts, through the protocol's own folds (:func:`~fairdesk.core.audits.age_independence.group_folds`) and test.

Cohort (:func:`equal_learner_cohort`): participants with 1–4 sessions; two latent traits s_A, s_B ~ N(0, 1) per
participant; label 1[s_A + s_B + N(0, 1) > 0] per participant; features in two blocks of equal size, block A =
signal_a·s_A·u + participant style N(0, 0.5²) + session noise N(0, 1) (u a fixed unit direction), block B the same
with s_B and signal_b. Learner "a" is a logistic regression (sklearn) on block A, learner "b" the same on block B:
with ``signal_b == signal_a`` the two are equally good by symmetry (the null); a weaker ``signal_b`` makes "b"
worse (planted). :func:`compare_learners` returns both tests' one-tailed p ("b" below "a").
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def equal_learner_cohort(n_participants: int = 120, n_features: int = 6, signal_a: float = 0.6,
                         signal_b: float | None = None, seed: int = 0) -> tuple[pd.DataFrame, list[str], list[str]]:
    """``(table, block_a, block_b)``: one row per session with ``participant_id``, ``label`` and the features."""
    rng = np.random.default_rng(seed)
    signal_b = signal_a if signal_b is None else signal_b
    sessions = rng.integers(1, 5, size=n_participants)
    pid = np.repeat(np.arange(n_participants), sessions)
    s_a, s_b = rng.normal(size=n_participants), rng.normal(size=n_participants)
    label = (s_a + s_b + rng.normal(size=n_participants) > 0).astype(int)
    u = np.ones(n_features) / np.sqrt(n_features)
    cols = {}
    for block, s, sig in (("a", s_a, signal_a), ("b", s_b, signal_b)):
        style = rng.normal(0.0, 0.5, size=(n_participants, n_features))
        x = sig * np.sqrt(n_features) * s[:, None] * u + style
        x = x[pid] + rng.normal(size=(len(pid), n_features))
        for j in range(n_features):
            cols[f"{block}{j:02d}"] = x[:, j]
    table = pd.DataFrame({"participant_id": pid, "label": label[pid], **cols})
    return table, [f"a{j:02d}" for j in range(n_features)], [f"b{j:02d}" for j in range(n_features)]


def compare_learners(table: pd.DataFrame, block_a: list[str], block_b: list[str], folds: int = 5, repeats: int = 1,
                     seed: int = 0) -> dict:
    """Per-fold accuracy of the two learners on the protocol's folds, and the one-tailed p ("b" below "a") of the
    corrected resampled t-test and of the plain paired t-test."""
    from sklearn.linear_model import LogisticRegression

    from fairdesk.core.audits.age_independence import group_folds, paired_comparison, split_ratio

    y = table["label"].to_numpy()
    splits = group_folds(table["participant_id"].to_numpy(), y, folds, repeats, seed)
    acc = {"a": [], "b": []}
    for sp in splits:
        for name, cols in (("a", block_a), ("b", block_b)):
            X = table[cols].to_numpy()
            fit = LogisticRegression(max_iter=200).fit(X[sp.train], y[sp.train])
            acc[name].append(float(np.mean(fit.predict(X[sp.test]) == y[sp.test])))
    ratio = split_ratio(splits)
    out = {"accuracy_a": acc["a"], "accuracy_b": acc["b"], "test_train_ratio": ratio}
    for test in ("corrected", "plain"):
        c = paired_comparison(acc["b"], acc["a"], margin=0.02, test=test, test_train_ratio=ratio)
        out[f"p_{test}"] = c["p"] if c["p"] is not None else 1.0
    return out
