"""Threshold explorer (issue 14): the cost of one slider update for 20,000 rows × 5 groups, against a pandas
``groupby`` recomputation of the same per-group counts in the same process.

``python -m benchmarks.bench_threshold_explorer [--rows 20000] [--groups 5] [--updates 200]`` (a few seconds).

Timed, each as the median over ``--updates`` thresholds spread over (0, 1):

* ``baseline``: pandas — flag the rows at the threshold and ``groupby`` the group to count TP/FP/FN/TN, then the
  rates (what a straightforward implementation redoes on every slider move);
* ``core``: :class:`fairdesk.core.stats.operating.GroupRates` — ``rates`` + ``gaps`` + ``fair_thresholds`` (one
  ``searchsorted`` over the presorted scores, plus the per-group thresholds);
* ``widget``: the whole update of :class:`fairdesk.gui.widgets.threshold_explorer.ThresholdExplorer` offscreen
  (the core numbers and the table and label refresh).

Prints the times and the ratios baseline / core and baseline / widget, and checks that both give the same counts.
Issue 14's target: a slider update in ≤ 50 ms.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd


def data(rows: int, groups: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.choice([f"group {i}" for i in range(groups)], rows)
    logit = rng.normal(-1.0, 1.3, rows)
    y = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(int)
    return pd.DataFrame({"y": y, "s": 1 / (1 + np.exp(-logit)), "g": g})


def baseline(df: pd.DataFrame, t: float) -> pd.DataFrame:
    flagged = df["s"] >= t
    c = pd.DataFrame({"g": df["g"], "tp": flagged & (df["y"] == 1), "fp": flagged & (df["y"] == 0),
                      "pos": df["y"] == 1, "neg": df["y"] == 0}).groupby("g").sum()
    out = pd.DataFrame({"tp": c["tp"], "fp": c["fp"], "tpr": c["tp"] / c["pos"], "fpr": c["fp"] / c["neg"],
                        "ppv": c["tp"] / (c["tp"] + c["fp"])})
    _ = out["tpr"].max() - out["tpr"].min(), out["fpr"].max() - out["fpr"].min()
    return out


def _median_ms(fn, thresholds) -> float:
    times = []
    for t in thresholds:
        t0 = time.perf_counter()
        fn(float(t))
        times.append(time.perf_counter() - t0)
    return 1000.0 * float(np.median(times))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--groups", type=int, default=5)
    ap.add_argument("--updates", type=int, default=200)
    args = ap.parse_args(argv)
    from fairdesk.core.stats.operating import GroupRates

    df = data(args.rows, args.groups)
    thresholds = np.linspace(0.01, 0.99, args.updates)
    t0 = time.perf_counter()
    rates = GroupRates(df["y"], df["s"], df["g"])
    setup_ms = 1000.0 * (time.perf_counter() - t0)
    for t in (0.2, 0.5, 0.8):  # same numbers
        a, b = rates.rates(t).set_index("group"), baseline(df, t)
        assert (a["tp"] == b.loc[a.index, "tp"]).all() and (a["fp"] == b.loc[a.index, "fp"]).all()

    def core(t):
        r = rates.rates(t)
        GroupRates.gaps(r)
        rates.fair_thresholds(t)

    base_ms = _median_ms(lambda t: baseline(df, t), thresholds)
    core_ms = _median_ms(core, thresholds)
    print(f"{args.rows:,} rows × {args.groups} groups, median of {args.updates} updates")
    print(f"  setup (sort once)            {setup_ms:8.2f} ms")
    print(f"  baseline pandas groupby      {base_ms:8.3f} ms per update")
    print(f"  core GroupRates (+gaps, fair) {core_ms:7.3f} ms per update   baseline/core = {base_ms / core_ms:6.1f}×")
    rates_only = _median_ms(rates.rates, thresholds)
    print(f"  core GroupRates.rates only   {rates_only:8.3f} ms per update   baseline/rates = "
          f"{base_ms / rates_only:6.1f}×")

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from fairdesk.gui.widgets.threshold_explorer import ThresholdExplorer

    ex = ThresholdExplorer()
    ex.set_rows(df["y"].to_numpy(), df["s"].to_numpy(), df["g"].to_numpy())
    widget_ms = _median_ms(ex.set_threshold, thresholds)
    app.processEvents()
    print(f"  widget update (offscreen)    {widget_ms:8.3f} ms per update   baseline/widget = "
          f"{base_ms / widget_ms:6.1f}×   (target ≤ 50 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
