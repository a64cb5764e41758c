"""Figure data and static figures of calibration and discrimination by group (METHODS §8).

:func:`curve_data` turns the stored ``curves`` table of a group audit into one row per plotted point (group, curve,
x, y, interval, n, label and hover text, counts suppressed below ``suppress_k``); the GUI's reliability and ROC
widgets and the report's ``render_*_png`` functions here draw the same rows. :data:`GROUP_COLOURS` gives each group
its colour (Okabe–Ito, readable with colour-blindness) in both.

Importing this module is cheap (numpy and pandas only); matplotlib is imported inside the render functions.
"""
from __future__ import annotations

import math

from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import pandas as pd

from fairdesk.core import numbers
from fairdesk.core.reports.figures import as_text, fmt_count, new_figure, save_figure, table_rows

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from fairdesk.core.audits.groups import GroupAuditResult

GROUP_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
CURVE_COLUMNS = ["task", "attribute", "group", "colour", "curve", "x", "y", "ci_low", "ci_high", "n", "threshold",
                 "label", "tooltip"]


def group_colour(i: int) -> str:
    return GROUP_COLOURS[i % len(GROUP_COLOURS)]


def _listed(value) -> list:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    return list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]


def _f(value) -> float:
    return float("nan") if value is None else float(value)


def group_sizes(result: "GroupAuditResult", task: str, attribute: str) -> dict[str, int | None]:
    cal = result.calibration
    if cal.empty:
        return {}
    where = [as_text(t) == task and as_text(a) == attribute
             for t, a in zip(cal["task"].tolist(), cal["attribute"].tolist())]
    # a size withheld from a released document is None (printed "–")
    return {str(r.group): None if math.isnan(_f(r.n)) else int(r.n) for r in table_rows(cal, ("group", "n"), where)}


def curve_data(result: "GroupAuditResult", task: str, attribute: str, *,
               suppress_k: int | None = None) -> pd.DataFrame:
    """One row per point of the stored curves of (task, attribute): ``curve`` is reliability (binned observed vs
    predicted, with its interval and bin size n), smoothed (isotonic), roc, pr, operating_roc or operating_pr.
    ``label``: the group with its size (suppressed below k); ``tooltip``: what a hover shows."""
    cv = result.curves
    if cv.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    sub = table_rows(cv, ("group", "curve", "x", "y", "n", "ci_low", "ci_high", "threshold"),
                     [as_text(t) == task and as_text(a) == attribute
                      for t, a in zip(cv["task"].tolist(), cv["attribute"].tolist())])
    sizes = group_sizes(result, task, attribute)
    order = list(dict.fromkeys(as_text(r.group) for r in sub))
    # built a column at a time, a stored curve (row) at a time: a dict per point cost the GUI's view thread most of
    # the 70 ms this took for the demo's curves; a hover text is written only for the points that show one
    cols: dict[str, list] = {c: [] for c in CURVE_COLUMNS}
    for r in sub:
        group, curve = str(r.group), str(r.curve)
        label = f"{group} (n = {fmt_count(sizes.get(group), suppress_k)})" if group in sizes else group
        xs, ys = _listed(r.x), _listed(r.y)
        m = min(len(xs), len(ys))
        ns, los, his, thr = (_padded(_listed(v), m) for v in (r.n, r.ci_low, r.ci_high, r.threshold))
        x, y = [_f(v) for v in xs[:m]], [_f(v) for v in ys[:m]]
        lo, hi, t = [_f(v) for v in los], [_f(v) for v in his], [_f(v) for v in thr]
        if curve == "reliability":
            tips = [f"{attribute} = {group} · bin {i + 1}\nn = {fmt_count(ns[i], suppress_k)}\n"
                    f"predicted {x[i]:.3f}, observed {y[i]:.3f}"
                    + (f" (95% CI {lo[i]:.3f} to {hi[i]:.3f})" if los[i] is not None and his[i] is not None else "")
                    for i in range(m)]
        elif curve.startswith("operating"):
            what = ("FPR {:.3f}, TPR {:.3f}" if curve == "operating_roc" else "recall {:.3f}, precision {:.3f}")
            tips = [f"{attribute} = {group} · operating point at threshold {numbers.short(t[i], 3)}\n" + what.format(x[i], y[i])
                    for i in range(m)]
        else:
            tips = [""] * m
        for c, v in (("task", task), ("attribute", attribute), ("group", group),
                     ("colour", group_colour(order.index(group))), ("curve", curve), ("label", label)):
            cols[c].extend([v] * m)
        cols["x"] += x
        cols["y"] += y
        cols["ci_low"] += lo
        cols["ci_high"] += hi
        cols["n"] += [np.nan if n is None else float(n) for n in ns]
        cols["threshold"] += t
        cols["tooltip"] += tips
    if not cols["x"]:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    return pd.DataFrame(cols, columns=CURVE_COLUMNS)


def _padded(values: list, m: int) -> list:
    """``values`` cut or padded with None to length ``m`` (a stored curve may list fewer n or bounds than points)."""
    return values[:m] + [None] * (m - len(values))


# --------------------------------------------------------------------------------------------------------------
# Static figures (matplotlib, Agg)

CAL_FIG_WIDTH_IN = 10.0  # the calibration section is set on landscape pages (frame about 10.3 in wide)


def calibration_size(data: pd.DataFrame) -> tuple[float, float]:  # noqa: ARG001 - the registry's signature
    return CAL_FIG_WIDTH_IN, 3.7


def _groups(data: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(group, colour, label) in the data's order."""
    first = data.drop_duplicates("group")
    return [(str(r.group), str(r.colour), str(r.label)) for r in first.itertuples(index=False)]


def _style(ax) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=7)
    ax.grid(color="#E3E3E3", linewidth=0.5)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("equal")


def draw_reliability(ax, data: pd.DataFrame) -> None:
    """Per group: binned observed share vs mean predicted risk (dots with 95% intervals) and the isotonic
    recalibration curve (line); the dotted diagonal is perfect calibration."""
    ax.plot([0, 1], [0, 1], color="#888888", linewidth=0.8, linestyle=":", zorder=1)
    for group, colour, _ in _groups(data):
        pts = data[(data["group"] == group) & (data["curve"] == "reliability")]
        sm = data[(data["group"] == group) & (data["curve"] == "smoothed")]
        if not sm.empty:
            ax.plot(sm["x"], sm["y"], color=colour, linewidth=1.0, alpha=0.75, zorder=2)
        if not pts.empty:
            yerr = np.vstack([(pts["y"] - pts["ci_low"]).clip(lower=0), (pts["ci_high"] - pts["y"]).clip(lower=0)])
            ax.errorbar(pts["x"], pts["y"], yerr=yerr, fmt="o", markersize=3.2, color=colour, elinewidth=0.7,
                        capsize=1.5, zorder=3)
    ax.set_xlabel("predicted risk (mean score in the bin)", fontsize=7.5)
    ax.set_ylabel("observed share with the outcome", fontsize=7.5)
    ax.set_title("Reliability", fontsize=8)
    _style(ax)


def draw_curve(ax, data: pd.DataFrame, curve: str) -> None:
    """ROC (``curve`` "roc") or precision–recall ("pr") per group, each group's operating point at the audit's
    threshold marked with a black-edged dot."""
    if curve == "roc":
        ax.plot([0, 1], [0, 1], color="#888888", linewidth=0.8, linestyle=":")
    for group, colour, _ in _groups(data):
        part = data[(data["group"] == group) & (data["curve"] == curve)]
        if not part.empty:
            ax.plot(part["x"], part["y"], color=colour, linewidth=1.1)
        op = data[(data["group"] == group) & (data["curve"] == f"operating_{curve}")]
        if not op.empty:
            ax.scatter(op["x"], op["y"], s=26, color=colour, edgecolors="black", linewidths=0.8, zorder=4)
    if curve == "roc":
        ax.set_xlabel("false positive rate", fontsize=7.5)
        ax.set_ylabel("true positive rate (recall)", fontsize=7.5)
        ax.set_title("ROC", fontsize=8)
    else:
        ax.set_xlabel("recall", fontsize=7.5)
        ax.set_ylabel("precision (PPV)", fontsize=7.5)
        ax.set_title("Precision–recall", fontsize=8)
    _style(ax)


def render_calibration_png(data: pd.DataFrame, path_or_buffer: "str | Path | BinaryIO", title: str, *,
                           dpi: int = 150) -> None:
    """Three panels of one task and attribute, one colour per group: reliability, ROC and precision–recall."""
    from matplotlib.lines import Line2D

    fig = new_figure(calibration_size(data))
    w, h = fig.get_figwidth(), fig.get_figheight()
    side, bottom = 2.4, 0.8
    axes = [fig.add_axes(((0.7 + i * 3.3) / w, bottom / h, side / w, side / h)) for i in range(3)]
    draw_reliability(axes[0], data)
    draw_curve(axes[1], data, "roc")
    draw_curve(axes[2], data, "pr")
    handles = [Line2D([], [], color=c, marker="o", markersize=3.5, linewidth=1.1, label=lab)
               for _, c, lab in _groups(data)]
    handles += [Line2D([], [], color="#888888", linestyle=":", linewidth=0.8, label="perfect calibration / chance"),
                Line2D([], [], linestyle="none", marker="o", markersize=4.5, markerfacecolor="white",
                       markeredgecolor="black", label="operating point at the threshold")]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.01), ncol=min(5, len(handles)),
               fontsize=6.8, frameon=False, handletextpad=0.4, columnspacing=1.4)
    fig.suptitle(title, fontsize=9.5, x=0.08 / w, ha="left", y=1 - 0.06 / h, va="top")
    save_figure(fig, path_or_buffer, dpi)
