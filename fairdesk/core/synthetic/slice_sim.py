"""Simulated predictions for the slice audit: categorical attributes, a model with the same recall and
specificity everywhere, and optionally one planted slice of order 1–3 whose recall is lower by ``gap``.

Used by the validity family ``slices`` (:func:`validity_runs`, through ``fairdesk-cli bench validity --family
slices``), by ``tests/core/test_slices.py`` and by ``benchmarks/bench_slices.py``.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

#: the number of values of each simulated attribute a1, a2, … (cycled)
CARDINALITIES = (3, 4, 2, 5, 3, 4, 2, 3)
BASE_RECALL, BASE_SPECIFICITY, PREVALENCE = 0.8, 0.8, 0.3
ALPHA, SIZE_TOLERANCE = 0.05, 0.02


def simulate_slice_table(n_rows: int = 20_000, n_attributes: int = 8, order: int = 0, gap: float = 0.0,
                         seed: int = 0, slice_share: float | None = None, n_patients: int | None = None,
                         ) -> tuple[pd.DataFrame, dict]:
    """(table, planted definition). Attributes ``a1`` … ``a<n_attributes>`` with values ``v0, v1, …``
    (:data:`CARDINALITIES`), independent; label with prevalence :data:`PREVALENCE`; score in [0, 1] flagged at
    0.5 with recall :data:`BASE_RECALL` and specificity :data:`BASE_SPECIFICITY` everywhere, except recall
    ``BASE_RECALL − gap`` in the planted slice ``a1 = v0, …, a<order> = v0`` (``order`` 0: no slice). With
    ``slice_share`` the first ``order`` attributes are drawn so that the planted slice holds about that share of the
    rows (each of its values with probability share^(1/order)); otherwise uniformly. With ``n_patients`` the rows
    belong to that many patients (column ``pid``; attributes fixed per patient)."""
    rng = np.random.default_rng(seed)
    units = n_patients or n_rows
    cols = {}
    for j in range(n_attributes):
        k = CARDINALITIES[j % len(CARDINALITIES)]
        if j < order and slice_share is not None:
            p0 = slice_share ** (1.0 / order)
            probs = np.r_[p0, np.full(k - 1, (1 - p0) / (k - 1))]
        else:
            probs = np.full(k, 1.0 / k)
        cols[f"a{j + 1}"] = np.array([f"v{i}" for i in range(k)])[rng.choice(k, units, p=probs)]
    df = pd.DataFrame(cols)
    if n_patients:
        pid = rng.integers(0, n_patients, n_rows)
        df = df.iloc[pid].reset_index(drop=True)
        df.insert(0, "pid", pid)
    n = len(df)
    y = rng.binomial(1, PREVALENCE, n)
    planted = {f"a{j + 1}": "v0" for j in range(order)}
    in_slice = np.ones(n, bool) if order else np.zeros(n, bool)
    for col, val in planted.items():
        in_slice &= df[col].to_numpy() == val
    recall = np.where(in_slice, BASE_RECALL - gap, BASE_RECALL)
    flag = np.where(y == 1, rng.random(n) < recall, rng.random(n) >= BASE_SPECIFICITY)
    u = rng.random(n)
    df["y"] = y
    df["p"] = np.where(flag, 0.5 + 0.5 * u, 0.5 * u * 0.999)
    return df, planted


def found(slices: pd.DataFrame, planted: dict) -> bool:
    """Whether a "differs" slice finds the planted one: its definition is the planted slice, a part of it with one
    condition fewer (a 2-way part of a 3-way slice), or the planted slice with conditions added (rows inside it)."""
    if slices.empty:
        return False
    items = set(planted.items())
    for d, v in zip(slices["definition"], slices["verdict"]):
        if v != "differs":
            continue
        own = set(d.items())
        if (own <= items and len(own) >= max(1, len(items) - 1)) or items <= own:
            return True
    return False


def _seed(seed: int, design: str, run: int) -> int:
    import zlib

    return int(np.random.default_rng([int(seed), zlib.crc32(f"slices/{design}".encode()), int(run)])
               .integers(0, 2**31 - 1))


#: (order, share of rows in the slice, recall gap) of the planted designs: power by slice size and gap
PLANTED = ((1, 0.05, 0.15), (2, 0.05, 0.15), (3, 0.02, 0.3), (3, 0.05, 0.15), (3, 0.05, 0.3))


def validity_runs(runs: int, seed: int, rep, notes: list[str], n_rows: int = 20_000,
                  planted: tuple = PLANTED) -> list[dict]:
    """The rows of the validity family ``slices`` (keyword arguments of ``fairdesk.core.validity``'s row builder):
    the complete null (any "differs" slice in a whole audit; target α + 0.02) and each planted design (the share of
    audits that find it, :func:`found`). One audit: ``n_rows`` rows, 8 attributes, recall, threshold 0.5, the CLI's
    defaults (max order 3, min size 50, carry 20, discovery fraction 0.5), 200 bootstrap replicates."""
    from fairdesk.core.audits.slices import SliceAuditPlan, run_slice_audit
    from fairdesk.core.data.schema import ColumnRoles

    designs = [("complete null: recall 0.8 everywhere", "null", 0, 0.0, None)]
    designs += [(f"planted {o}-way slice, {share:.0%} of rows, recall gap {g:g}", "planted", o, g, share)
                for o, share, g in planted]
    rows = []
    for d, (design, kind, order, gap, share) in enumerate(designs):
        sub = rep.sub(d / len(designs), (d + 1) / len(designs))
        flags, hits, tests = [], 0, 0
        t0 = time.process_time()
        for i in range(runs):
            sub(i / runs, f"slices: {design}, audit {i + 1}/{runs}")
            s = _seed(seed, design, i)
            df, definition = simulate_slice_table(n_rows, 8, order, gap, s, slice_share=share)
            roles = ColumnRoles(label="y", score="p", attributes=tuple(f"a{j + 1}" for j in range(8)))
            res = run_slice_audit(df, SliceAuditPlan(roles=roles, threshold=0.5, seed=s, n_boot=200),
                                  cancel=sub.cancel)
            said = res.slices["verdict"] == "differs" if not res.slices.empty else pd.Series(dtype=bool)
            hits += int(said.sum())
            tests += int(len(res.slices))
            flags.append(bool(said.any()) if kind == "null" else found(res.slices, definition))
        meaning = ("share of whole slice audits of a model that serves every slice alike that report at least one "
                   "slice as differing (searched on discovery rows, confirmed on the others)" if kind == "null" else
                   "share of audits in which the planted slice, a part of it with one condition fewer, or a slice "
                   "inside it is reported as differing (power)")
        rows.append(dict(design=design, kind=kind, flags=flags,
                         target_max=ALPHA + SIZE_TOLERANCE if kind == "null" else None, meaning=meaning,
                         tests_flagged=hits, n_tests=tests, seconds=time.process_time() - t0))
    notes.append(f"slices: {n_rows:,} rows and 8 attributes (3, 4, 2, 5, 3, 4, 2, 3 values) per audit, recall at "
                 "threshold 0.5, 200 bootstrap replicates for the design effect (the product default is 1000).")
    return rows
