"""Figure data shared by the GUI's interactive plots and the PDF report's static figures.

One source of truth: :func:`forest_data`, :func:`delta_eo_data` and :func:`delta_bins_data` turn a
:class:`~fairdesk.core.audits.groups.GroupAuditResult` into plain tables (one row per plotted mark, with its label,
position, status and hover text). The GUI draws them with pyqtgraph, the report with the ``render_*_png`` functions
here (matplotlib, Agg backend, no pyplot state). Marker styles live in :data:`STATUS_STYLE` so both look alike.

Importing this module is cheap (numpy and pandas only); matplotlib is imported inside the render functions.
Pass ``suppress_k`` to show every count below k as ``"<k"`` (the report does; the GUI shows the user's own data).
"""
from __future__ import annotations

import collections
import functools
import math
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import pandas as pd

from fairdesk.core import numbers

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from fairdesk.core.audits.groups import GroupAuditResult

#: How each verdict is drawn (matplotlib marker codes; the GUI maps them to pyqtgraph symbols). The status of a
#: plotted row is its verdict: differs / equivalent within ±margin / inconclusive, or not estimable.
STATUS_STYLE: dict[str, dict[str, Any]] = {
    "differs": {"label": "differs (after correction)", "color": "#C03A00", "marker": "o", "filled": True,
                "size": 7.0},
    "equivalent": {"label": "equivalent within ±margin", "color": "#1B7F3B", "marker": "s", "filled": True,
                   "size": 6.0},
    "inconclusive": {"label": "inconclusive (neither shown)", "color": "#555555", "marker": "o", "filled": False,
                     "size": 6.0},
    "not_estimable": {"label": "not estimable / not tested", "color": "#8C8C8C", "marker": "x", "filled": False,
                      "size": 5.0},
}
STATUS_ORDER = ("differs", "equivalent", "inconclusive", "not_estimable")
NULL_BAND_STYLE = {"label": "95% null band of one test, before correction", "color": "#B9C4CF"}

METRIC_NAMES = {"parity": "positive prediction rate", "recall": "recall", "specificity": "specificity",
                "delta_eo": "error spread Δ_eo"}

FOREST_COLUMNS = ["task", "attribute", "group", "metric", "label", "y", "gap", "ci_low", "ci_high", "significant",
                  "significant_bh", "verdict", "status", "estimable", "n", "numerator", "denominator", "rate", "comparison",
                  "comparison_rate", "comparison_numerator", "comparison_denominator", "p_value", "q_value",
                  "favours", "reason", "tooltip"]
DELTA_COLUMNS = ["task", "attribute", "group", "label", "y", "bins_requested", "bins_used", "value", "ci_low",
                 "ci_high", "significant", "significant_bh", "verdict", "status", "estimable", "n", "p_value", "q_value",
                 "reason", "tooltip"]
BINS_COLUMNS = ["task", "attribute", "bins_requested", "bins_used", "bin", "lower", "upper", "mid", "label", "n",
                "n_positive", "fpr", "fnr", "tooltip"]

MINUS = "\u2212"


# --------------------------------------------------------------------------------------------------------------
# Formatting helpers (also used by the report model)

def table_rows(frame: pd.DataFrame, names, where=None) -> list:
    """The rows of ``frame`` as named tuples of the named columns (a name the frame lacks is left out, so
    ``getattr(row, name, None)`` gives None), only those where ``where`` (booleans, one per row) is true when given.
    The values are those ``itertuples`` gives; the columns are read whole, one at a time, and only the named ones:
    ``itertuples`` takes every column of the wide records tables through pandas, and a boolean selection copies every
    one of them (Arrow-backed text included), for the few a sentence or a plot row reads — most of the CPU the
    GUI's view thread spent on a stored audit's board summary and plots."""
    names = tuple(c for c in names if c in frame.columns)
    cols = [frame[c].tolist() for c in names]
    if where is not None:
        keep = np.flatnonzero(np.asarray(where, dtype=bool))
        cols = [[col[i] for i in keep] for col in cols]
    make = _row_type(names)._make
    return [make(values) for values in zip(*cols)]


@functools.lru_cache(maxsize=64)
def _row_type(names: tuple[str, ...]):
    return collections.namedtuple("Row", names, rename=True)


def as_text(value) -> str | None:
    """A cell as ``Series.astype(str)`` gives it: text, a missing value (None, NaN, pd.NA) left missing (None)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def num(value) -> float | None:
    """A float, or None for None / NaN / pd.NA / anything not numeric."""
    if value is None or value is pd.NA:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def is_true(value) -> bool:
    """True only for a real true value (the significance columns hold True / False / None / NaN)."""
    if value is None or value is pd.NA:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(value)


def fmt_count(value, k: int | None = None) -> str:
    """A count with thousands separators; below ``k`` it is shown as ``"<k"`` (small-cell suppression)."""
    return numbers.count(value, k)


def fmt_rate(value, digits: int = 3) -> str:
    return numbers.fixed(value, digits)


def fmt_signed(value, digits: int = 3) -> str:
    return numbers.signed(value, digits)


def fmt_p(value) -> str:
    return numbers.p_value(value)


def fmt_ci(low, high, digits: int = 3, signed: bool = True) -> str:
    return numbers.interval(low, high, digits, signed)


def fmt_fraction(numerator, denominator, k: int | None = None) -> str:
    return f"{fmt_count(numerator, k)}/{fmt_count(denominator, k)}"


def verdict_of(value) -> str | None:
    """The verdict string of a record ("differs", "equivalent", "inconclusive"), or None."""
    return value if isinstance(value, str) and value in ("differs", "equivalent", "inconclusive") else None


def gap_status(verdict, estimable: bool) -> str:
    """How a row is drawn: its verdict; "not_estimable" when there is no estimate or no test."""
    v = verdict_of(verdict)
    if not estimable or v is None:
        return "not_estimable"
    return v


VERDICT_TEXT = {"differs": "differs", "equivalent": "equivalent within ±{m}", "inconclusive": "inconclusive"}


def verdict_text(verdict, margin: float = 0.05) -> str:
    v = verdict_of(verdict)
    return "–" if v is None else VERDICT_TEXT[v].format(m=numbers.short(margin))


def _rate_counts(tn: float, fp: float, fn: float, tp: float, metric: str) -> tuple[float, float]:
    if metric == "parity":
        return tp + fp, tn + fp + fn + tp
    if metric == "recall":
        return tp, tp + fn
    return tn, tn + fp


def _task_order(result: "GroupAuditResult") -> list[str]:
    rec = result.records
    return list(dict.fromkeys(rec["task"].astype(str))) if not rec.empty else []


# --------------------------------------------------------------------------------------------------------------
# Forest (gap) plot data

def forest_data(result: "GroupAuditResult", attribute: str, metric: str, task: str | None = None, *,
                suppress_k: int | None = None, tasks: list[str] | None = None) -> pd.DataFrame:
    """One row per plotted gap estimate of ``attribute`` × ``metric`` (all tasks, or one ``task``).

    Order: tasks in the result's order, then groups in the result's order; ``y`` is the row position from the top
    (0, 1, …). Not-estimable gaps are kept (``gap`` NaN, ``status`` "not_estimable") so that the plot can say so.
    ``comparison_numerator`` / ``comparison_denominator`` are the counts behind the comparison rate (the compared
    group, the rest of the tested groups, or all tested groups, depending on the rule).
    """
    rec = result.records
    if rec.empty:
        return pd.DataFrame(columns=FOREST_COLUMNS)
    sel = rec[(rec["attribute"] == attribute) & (rec["metric"] == metric)]
    if task is not None:
        sel = sel[sel["task"].astype(str) == str(task)]
    if tasks is not None:
        sel = sel[sel["task"].astype(str).isin([str(t) for t in tasks])]
    order = {t: i for i, t in enumerate(_task_order(result))}
    sel = sel.assign(_t=sel["task"].astype(str).map(order), _i=np.arange(len(sel))).sort_values(["_t", "_i"],
                                                                                                   kind="stable")
    # each test drawn once: a pair shown from both sides ("F vs M" and "M vs F", max rule) keeps the row of the group
    # with the lower rate; the mirror is told in its tooltip
    tid = sel["test_id"] if "test_id" in sel else pd.Series(None, index=sel.index, dtype=object)
    twice = tid.notna() & tid.duplicated(keep=False)
    up = twice & (sel["gap"].astype(float) > 0)
    keep_up = up & ~tid.isin(set(tid[twice & ~up]))  # both sides positive (a tie at 0 has none): keep the first
    drop = (up & ~keep_up) | (keep_up & tid.duplicated(keep="first"))
    mirrors = {str(r.test_id): f"{r.group} vs {r.comparison}"
               for r in table_rows(sel, ("test_id", "group", "comparison"), drop.to_numpy(dtype=bool))}
    sel = sel[~drop]
    rule = result.plan.gap_rule
    counts = _group_counts(result, attribute)
    several_tasks = sel["task"].nunique() > 1
    rows = []
    for y, r in enumerate(table_rows(sel, FOREST_FIELDS)):
        t, group, comp = str(r.task), str(r.group), r.comparison
        comp = None if comp is None or (isinstance(comp, float) and math.isnan(comp)) else str(comp)
        gap = num(r.gap)
        estimable = gap is not None
        status = gap_status(getattr(r, "verdict", None), estimable)
        cnum, cden = _comparison_counts(counts, t, group, comp, rule, metric)
        label = group
        if rule in ("max", "between") and comp:
            label = f"{group} vs {comp}"
        if several_tasks:
            label = f"{t} · {label}"
        row = {"task": t, "attribute": attribute, "group": group, "metric": metric, "label": label, "y": y,
               "gap": gap if estimable else np.nan, "ci_low": _nan(r.ci_low), "ci_high": _nan(r.ci_high),
               "significant": is_true(r.significant), "significant_bh": is_true(r.significant_bh),
               "verdict": verdict_of(getattr(r, "verdict", None)), "status": status, "estimable": estimable, "n": _nan(r.n), "numerator": _nan(r.numerator),
               "denominator": _nan(r.denominator), "rate": _nan(r.rate), "comparison": comp,
               "comparison_rate": _nan(r.comparison_rate), "comparison_numerator": _nan(cnum),
               "comparison_denominator": _nan(cden), "p_value": _nan(r.p_value), "q_value": _nan(r.q_value),
               "favours": None if r.favours is None or (isinstance(r.favours, float) and math.isnan(r.favours))
               else str(r.favours),
               "reason": None if not isinstance(r.reason, str) else _reason(r.reason, suppress_k)}
        row["tooltip"] = forest_tooltip(row, rule, suppress_k, margin=float(getattr(result.plan, "margin", 0.05)))
        mirror = mirrors.get(str(getattr(r, "test_id", None)))
        if mirror:
            row["tooltip"] += f"\nthe same test as “{mirror}” (the gap with its sign reversed), drawn once"
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=FOREST_COLUMNS)


FOREST_FIELDS = ("task", "group", "comparison", "gap", "verdict", "ci_low", "ci_high", "significant", "significant_bh",
                 "n", "numerator", "denominator", "rate", "comparison_rate", "p_value", "q_value", "favours", "reason",
                 "test_id")  # what a gap plot's row reads of a record


def _nan(value) -> float:
    f = num(value)
    return np.nan if f is None else f


def _group_counts(result: "GroupAuditResult", attribute: str) -> dict[tuple[str, str], tuple[float, ...]]:
    g = result.groups
    if g.empty:
        return {}
    out = {}
    for r in table_rows(g, ("task", "group", "tn", "fp", "fn", "tp", "tested"),
                        [a == attribute for a in g["attribute"].tolist()]):
        out[(str(r.task), str(r.group))] = (_nan(r.tn), _nan(r.fp), _nan(r.fn), _nan(r.tp),
                                           1.0 if is_true(r.tested) else 0.0)
    return out


def _comparison_counts(counts, task, group, comp, rule, metric) -> tuple[float | None, float | None]:
    if not counts:
        return None, None
    if rule in ("max", "between"):
        c = counts.get((task, comp)) if comp else None
        return _rate_counts(*c[:4], metric) if c else (None, None)
    tested = [c for (t, g), c in counts.items() if t == task and c[4] > 0 and (rule == "to-overall" or g != group)]
    if not tested:
        return None, None
    total = np.sum(np.array([c[:4] for c in tested]), axis=0)
    return _rate_counts(*total, metric)


def comparison_counts(result: "GroupAuditResult", task: str, attribute: str, group: str, comparison: str | None,
                      metric: str, _cache: dict | None = None) -> tuple[float | None, float | None]:
    """(numerator, denominator) behind a gap record's comparison rate, from the result's per-group counts."""
    cache = _cache if _cache is not None else {}
    if attribute not in cache:
        cache[attribute] = _group_counts(result, attribute)
    return _comparison_counts(cache[attribute], str(task), str(group), comparison, result.plan.gap_rule, metric)


def _reason(text, k: int | None) -> str:
    """A reason recorded by the audit ("only 3 positive cases …"), its counts below k shown as "<k"."""
    from fairdesk.core.reports.document import suppress_text

    return suppress_text(str(text), k) if k else str(text)


def forest_tooltip(row: dict, rule: str, suppress_k: int | None = None, margin: float = 0.05) -> str:
    """Hover / report text for one gap estimate: n, denominators, rates, gap, CI, p and q."""
    k = suppress_k
    metric = METRIC_NAMES.get(row["metric"], row["metric"])
    lines = [f"{row['task']} · {row['attribute']} = {row['group']} · {metric}"]
    if num(row["rate"]) is None:
        lines.append(f"rate: not estimable ({_reason(row['reason'] or 'no cases in the denominator', k)})")
    else:
        lines.append(f"rate {fmt_rate(row['rate'])} = {fmt_fraction(row['numerator'], row['denominator'], k)}"
                     f"  (group n = {fmt_count(row['n'], k)})")
    if row["comparison"]:
        what = {"one-vs-rest": "rest of the groups", "to-overall": "all tested groups"}.get(rule, row["comparison"])
        comp = f"vs {what}: "
        if num(row["comparison_rate"]) is None:
            comp += "not estimable"
        else:
            comp += f"{fmt_rate(row['comparison_rate'])}"
            if num(row["comparison_denominator"]) is not None:
                comp += f" = {fmt_fraction(row['comparison_numerator'], row['comparison_denominator'], k)}"
        lines.append(comp)
    if row["estimable"]:
        lines.append(f"gap {fmt_signed(row['gap'])}  (adjusted CI {fmt_ci(row['ci_low'], row['ci_high'])})")
        lines.append(f"{numbers.p_equals(row['p_value'])}, {numbers.p_equals(row['q_value'], 'q')} · "
                     f"{verdict_text(row.get('verdict'), margin) if row.get('verdict') else 'not tested'}")
        if row["favours"]:
            lines.append(f"favours {row['favours']}")
        if row["reason"]:
            lines.append(f"note: {_reason(row['reason'], k)}")
    else:
        lines.append(f"gap {untested_text(row['rate'], row['reason'] or 'no comparison possible', k)}")
    return "\n".join(lines)


def untested_text(value, reason, k: int | None = None) -> str:
    """Why a gap has no estimate: "not estimable (no positive cases …)" when the rate itself cannot be estimated,
    "not tested: only 7 positive cases (fewer than 10)" when it can but rests on too few cases to test."""
    why = _reason(str(reason), k).removesuffix(": too few to test") if reason else ""
    if num(value) is None:
        return "not estimable" + (f" ({why})" if why else "")
    return "not tested" + (f": {why}" if why else "")


# --------------------------------------------------------------------------------------------------------------
# Δ_eo data

def delta_eo_data(result: "GroupAuditResult", attribute: str, *, suppress_k: int | None = None,
                  tasks: list[str] | None = None) -> pd.DataFrame:
    """One row per Δ_eo^(N) estimate of a continuous ``attribute`` (task × requested N), in a stable order."""
    rec = result.records
    if rec.empty:
        return pd.DataFrame(columns=DELTA_COLUMNS)
    sel = rec[(rec["attribute"] == attribute) & (rec["metric"] == "delta_eo")]
    if tasks is not None:
        sel = sel[sel["task"].astype(str).isin([str(t) for t in tasks])]
    order = {t: i for i, t in enumerate(_task_order(result))}
    sel = sel.assign(_t=sel["task"].astype(str).map(order), _i=np.arange(len(sel))).sort_values(["_t", "_i"],
                                                                                                   kind="stable")
    rows = []
    for y, r in enumerate(table_rows(sel, ("task", "group", "gap", "bins", "ci_low", "ci_high", "significant",
                                           "significant_bh", "verdict", "n", "p_value", "q_value", "reason"))):
        value = num(r.gap)
        estimable = value is not None
        n_req = str(r.group).removeprefix("N=")
        used = num(r.bins)
        label = f"{r.task} · N={n_req}"
        if used is not None and str(int(used)) != n_req:
            label += f" ({int(used)} used)"
        row = {"task": str(r.task), "attribute": attribute, "group": str(r.group), "label": label, "y": y,
               "bins_requested": int(n_req) if n_req.isdigit() else np.nan,
               "bins_used": np.nan if used is None else int(used), "value": np.nan if value is None else value,
               "ci_low": _nan(r.ci_low), "ci_high": _nan(r.ci_high), "significant": is_true(r.significant),
               "significant_bh": is_true(r.significant_bh), "verdict": verdict_of(getattr(r, "verdict", None)),
               "status": gap_status(getattr(r, "verdict", None), estimable), "estimable": estimable,
               "n": _nan(r.n), "p_value": _nan(r.p_value), "q_value": _nan(r.q_value),
               "reason": _reason(r.reason, suppress_k) if isinstance(r.reason, str) else None}
        lines = [f"{row['task']} · {attribute} · Δ_eo with N = {n_req} bins"
                 + ("" if used is None or str(int(used)) == n_req else f" ({int(used)} used)")]
        if estimable:
            lines += [f"Δ_eo {fmt_rate(value)}  (95% null band {fmt_ci(r.ci_low, r.ci_high, signed=False)}: "
                      "where Δ_eo falls in 95% of data sets without dependence)",
                      f"permutation {numbers.p_equals(r.p_value)}, {numbers.p_equals(r.q_value, 'q')} · "
                      f"{verdict_text(row['verdict']) if row['verdict'] else 'not tested'}",
                      f"n = {fmt_count(r.n, suppress_k)}"]
        else:
            lines.append(f"not estimable ({_reason(row['reason'] or 'both classes are needed', suppress_k)})")
        row["tooltip"] = "\n".join(lines)
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=DELTA_COLUMNS)


def delta_bins_data(result: "GroupAuditResult", attribute: str, bins_requested: int | None = None, *,
                    suppress_k: int | None = None, tasks: list[str] | None = None) -> pd.DataFrame:
    """The bins behind Δ_eo: one row per (task, requested N, bin) with FPR, FNR, n and positives.

    ``bins_requested=None`` keeps every requested N.
    """
    b = result.delta_bins
    if b.empty:
        return pd.DataFrame(columns=BINS_COLUMNS)
    sel = b[b["attribute"] == attribute]
    if bins_requested is not None:
        sel = sel[sel["bins_requested"].astype(int) == int(bins_requested)]
    if tasks is not None:
        sel = sel[sel["task"].astype(str).isin([str(t) for t in tasks])]
    order = {t: i for i, t in enumerate(_task_order(result))}
    sel = sel.assign(_t=sel["task"].astype(str).map(order), _i=np.arange(len(sel))).sort_values(
        ["_t", "bins_requested", "bin", "_i"], kind="stable")
    rows = []
    for r in table_rows(sel, ("task", "bins_requested", "bins_used", "bin", "lower", "upper", "n", "n_positive", "fpr",
                              "fnr")):
        lo, hi = float(r.lower), float(r.upper)
        label = f"{_short(lo)}–{_short(hi)}"
        row = {"task": str(r.task), "attribute": attribute, "bins_requested": int(r.bins_requested),
               "bins_used": int(r.bins_used), "bin": int(r.bin), "lower": lo, "upper": hi, "mid": (lo + hi) / 2,
               "label": label, "n": _nan(r.n), "n_positive": _nan(r.n_positive), "fpr": _nan(r.fpr),
               "fnr": _nan(r.fnr)}
        row["tooltip"] = (f"{row['task']} · {attribute} {label} (bin {row['bin'] + 1} of {row['bins_used']})\n"
                          f"n = {fmt_count(r.n, suppress_k)}, positives = {fmt_count(r.n_positive, suppress_k)}\n"
                          f"false positive rate {fmt_rate(r.fpr)}, false negative rate {fmt_rate(r.fnr)}")
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=BINS_COLUMNS)


def _short(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 10 else numbers.short(x, 3)


# --------------------------------------------------------------------------------------------------------------
# Static rendering (matplotlib, Agg, no pyplot)

FIG_WIDTH_IN = 6.7  # fits the A4 text frame of the report
ROW_HEIGHT_IN = 0.22


def forest_size(data: pd.DataFrame) -> tuple[float, float]:
    return FIG_WIDTH_IN, 1.2 + ROW_HEIGHT_IN * max(len(data), 1)


def delta_size(data: pd.DataFrame) -> tuple[float, float]:
    return FIG_WIDTH_IN, 1.2 + 0.26 * max(len(data), 1)


def bins_size(data: pd.DataFrame) -> tuple[float, float]:
    n_tasks = max(data["task"].nunique(), 1) if not data.empty else 1
    rows = math.ceil(n_tasks / 3)
    return FIG_WIDTH_IN, 0.45 + 1.95 * rows


def new_figure(size: tuple[float, float]):
    """A matplotlib figure on the Agg canvas (no pyplot state, no display), ``size`` in inches at 100 dpi."""
    import matplotlib

    matplotlib.use("Agg", force=False)  # no display is needed; harmless when the GUI has chosen its own backend
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100)  # margins are set by hand: a layout engine doubles the drawing time
    FigureCanvasAgg(fig)
    return fig


def _text_width_in(labels, size: float) -> float:
    """Width in inches of the widest label at ``size`` points (measured from the font, without drawing)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    ttp, prop = TextToPath(), FontProperties(size=size)
    widths = [ttp.get_text_width_height_descent(str(t), prop, ismath=False)[0] for t in labels]
    return max(widths, default=0.0) / 72.0


def _single_axes(fig, labels, label_size: float = 7.0):
    """One axes with room on the left for the category labels, above for the title and below for the legend."""
    w, h = fig.get_figwidth(), fig.get_figheight()
    left = min(_text_width_in(labels, label_size) * 1.04 + 0.2, w * 0.55)
    right, top, bottom = 0.12, 0.5, 0.78
    return fig.add_axes((left / w, bottom / h, 1 - (left + right) / w, 1 - (top + bottom) / h))


def save_figure(fig, path_or_buffer, dpi: int) -> None:
    """Write ``fig`` as PNG. Deterministic: no metadata that varies between runs."""
    # no metadata that varies between runs; PNG text chunks carry only the software name
    fig.savefig(path_or_buffer, format="png", dpi=dpi, metadata={"Software": None},
                pil_kwargs={"compress_level": 1})  # the PDF re-compresses the pixels anyway


def _style_axis(ax) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="x", labelsize=7.5)
    ax.tick_params(axis="y", labelsize=7)


def _draw_intervals(ax, data: pd.DataFrame, value_col: str, band: bool = False) -> None:
    """Estimates with their intervals; ``band``: the interval is a null band (Δ_eo), drawn as a light bar."""
    if band:
        lo, hi = data["ci_low"].to_numpy(float), data["ci_high"].to_numpy(float)
        ok = ~(np.isnan(lo) | np.isnan(hi))
        ax.hlines(data["y"].to_numpy()[ok], lo[ok], hi[ok], color=NULL_BAND_STYLE["color"], linewidth=7,
                  zorder=1.5)
    for status in STATUS_ORDER:
        part = data[data["status"] == status]
        if part.empty:
            continue
        st = STATUS_STYLE[status]
        if status == "not_estimable":
            for r in part.itertuples(index=False):
                text = untested_text(getattr(r, "rate", None), r.reason if isinstance(r.reason, str) else None)
                if len(text) > 62:
                    text = text.split(":")[0].split(" (")[0]
                ax.annotate(text, xy=(0, r.y), xytext=(6, 0),
                            textcoords="offset points", va="center", ha="left", fontsize=6.5, color=st["color"],
                            style="italic")
            ax.scatter(np.zeros(len(part)), part["y"], marker="x", s=st["size"] ** 2, color=st["color"],
                       linewidths=1.0, zorder=3)
            continue
        est = part[value_col].to_numpy(float)
        lo = part["ci_low"].to_numpy(float)
        hi = part["ci_high"].to_numpy(float)
        has_ci = ~(np.isnan(lo) | np.isnan(hi))
        if has_ci.any() and not band:
            ax.hlines(part["y"].to_numpy()[has_ci], lo[has_ci], hi[has_ci], color=st["color"],
                      linewidth=1.6 if st["filled"] else 1.0, zorder=2)
            for cap in (lo, hi):
                ax.scatter(cap[has_ci], part["y"].to_numpy()[has_ci], marker="|", s=22, color=st["color"],
                           linewidths=1.0, zorder=2)
        ax.scatter(est, part["y"], marker=st["marker"], s=st["size"] ** 2,
                   facecolors=st["color"] if st["filled"] else "white", edgecolors=st["color"],
                   linewidths=1.2, zorder=4, label=st["label"])


def _task_bands(ax, data: pd.DataFrame) -> None:
    """Light alternating shading behind each task's rows."""
    if data["task"].nunique() < 2:
        return
    for i, (_, part) in enumerate(data.groupby("task", sort=False)):
        if i % 2 == 0:
            ax.axhspan(part["y"].min() - 0.5, part["y"].max() + 0.5, color="#EEF2F6", zorder=0, linewidth=0)


def _legend(fig, ax, data: pd.DataFrame, band: bool = False) -> None:
    from matplotlib.lines import Line2D

    handles = []
    if band:
        handles.append(Line2D([], [], color=NULL_BAND_STYLE["color"], linewidth=6, label=NULL_BAND_STYLE["label"]))
    for status in STATUS_ORDER:
        if band and status == "equivalent":  # Δ_eo has no equivalence margin
            continue
        st = STATUS_STYLE[status]
        handles.append(Line2D([], [], linestyle="none", marker=st["marker"], markersize=st["size"],
                              markerfacecolor=st["color"] if st["filled"] else "white",
                              markeredgecolor=st["color"], color=st["color"], label=st["label"]))
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.02 / fig.get_figheight()),
               ncol=len(handles) if len(handles) <= 4 else 3,
               fontsize=6.5, frameon=False, handletextpad=0.3, columnspacing=1.2)


def render_forest_png(data: pd.DataFrame, path_or_buffer: "str | Path | BinaryIO", title: str, *,
                      xlabel: str | None = None, dpi: int = 150) -> None:
    """A forest plot of ``forest_data`` rows: estimate, CI whiskers, significant gaps filled and coloured."""
    fig = new_figure(forest_size(data))
    ax = _single_axes(fig, data["label"] if len(data) else [])
    n = len(data)
    if n == 0:
        ax.text(0.5, 0.5, "no estimates to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        _task_bands(ax, data)
        ax.axvline(0.0, color="#222222", linewidth=0.9, zorder=1)
        _draw_intervals(ax, data, "gap")
        ax.set_yticks(data["y"].to_numpy(), labels=list(data["label"]), fontsize=7)
        ax.set_ylim(n - 0.5, -0.5)
        values = np.concatenate([data[c].to_numpy(float) for c in ("gap", "ci_low", "ci_high")] + [np.zeros(1)])
        values = values[~np.isnan(values)]
        span = max(float(np.max(np.abs(values))) if values.size else 0.0, 0.02)
        ax.set_xlim(-span * 1.12, span * 1.12)
        metric = METRIC_NAMES.get(str(data["metric"].iloc[0]), str(data["metric"].iloc[0]))
        ax.set_xlabel(xlabel or f"gap in {metric} (group − comparison)", fontsize=8)
        ax.text(0.0, 1.0, "◀ lower for the group", transform=ax.transAxes, ha="left", va="bottom", fontsize=6.5,
                color="#444444")
        ax.text(1.0, 1.0, "higher for the group ▶", transform=ax.transAxes, ha="right", va="bottom",
                fontsize=6.5, color="#444444")
        ax.grid(axis="x", color="#DDDDDD", linewidth=0.5, zorder=0)
        _style_axis(ax)
        _legend(fig, ax, data)
    fig.suptitle(title, fontsize=9.5, x=0.08 / fig.get_figwidth(), ha="left", y=1 - 0.06 / fig.get_figheight(),
                 va="top")
    save_figure(fig, path_or_buffer, dpi)


def render_delta_png(data: pd.DataFrame, path_or_buffer: "str | Path | BinaryIO", title: str, *,
                     dpi: int = 150) -> None:
    """Δ_eo^(N) estimates (markers by verdict) over their 95% permutation null band (grey bar): an estimate right of
    its band is unlikely without dependence; 0 = the same error rates in every bin."""
    fig = new_figure(delta_size(data))
    ax = _single_axes(fig, data["label"] if len(data) else [])
    n = len(data)
    if n == 0:
        ax.text(0.5, 0.5, "no estimates to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        _task_bands(ax, data)
        ax.axvline(0.0, color="#222222", linewidth=0.9, zorder=1)
        _draw_intervals(ax, data, "value", band=True)
        ax.set_yticks(data["y"].to_numpy(), labels=list(data["label"]), fontsize=7)
        ax.set_ylim(n - 0.5, -0.5)
        values = np.concatenate([data[c].to_numpy(float) for c in ("value", "ci_low", "ci_high")])
        values = values[~np.isnan(values)]
        top = max(float(values.max()) if values.size else 0.0, 0.05)
        ax.set_xlim(-top * 0.04, top * 1.1)
        ax.set_xlabel("Δ_eo = Σ|FPR − mean FPR| + Σ|FNR − mean FNR| over the bins (0 = no spread)", fontsize=8)
        ax.grid(axis="x", color="#DDDDDD", linewidth=0.5, zorder=0)
        _style_axis(ax)
        _legend(fig, ax, data, band=True)
    fig.suptitle(title, fontsize=9.5, x=0.08 / fig.get_figwidth(), ha="left", y=1 - 0.06 / fig.get_figheight(),
                 va="top")
    save_figure(fig, path_or_buffer, dpi)


def render_bins_png(data: pd.DataFrame, path_or_buffer: "str | Path | BinaryIO", title: str, *,
                    xlabel: str = "", dpi: int = 150) -> None:
    """Small multiples, one per task: false positive and false negative rate in each bin of the attribute."""
    fig = new_figure(bins_size(data))
    tasks = list(dict.fromkeys(data["task"])) if not data.empty else []
    if not tasks:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no bins to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    ncol = 3
    nrow = max(math.ceil(len(tasks) / ncol), 1)
    values = data[["fpr", "fnr"]].to_numpy(float) if tasks else np.array([])
    values = values[np.isfinite(values)]  # every bin may be withheld in a released document
    top = float(values.max()) if values.size else float("nan")
    top = min(1.0, max(top * 1.15, 0.05)) if not math.isnan(top) else 1.0
    for i, t in enumerate(tasks):
        ax = fig.add_subplot(nrow, ncol, i + 1)
        part = data[data["task"] == t]
        x = np.arange(len(part))
        ax.plot(x, part["fpr"], marker="o", markersize=3.5, color="#C03A00", linewidth=1.2,
                label="false positive rate")
        ax.plot(x, part["fnr"], marker="s", markersize=3.5, color="#0065A8", linewidth=1.2, linestyle="--",
                label="false negative rate")
        ax.set_xticks(x, labels=list(part["label"]), fontsize=6, rotation=30 if len(part) > 3 else 0)
        ax.set_ylim(0, top)
        ax.set_title(f"{t} (N = {int(part['bins_used'].iloc[0])})", fontsize=8)
        ax.grid(axis="y", color="#DDDDDD", linewidth=0.5)
        _style_axis(ax)
        ax.tick_params(labelsize=6.5)
        if i == 0:
            fig.legend(*ax.get_legend_handles_labels(), fontsize=6.5, frameon=False, loc="upper right", ncol=2,
                       bbox_to_anchor=(0.99, 1 - 0.02 / fig.get_figheight()))
    fig.suptitle(title, fontsize=9.5, x=0.08 / fig.get_figwidth(), ha="left", y=1 - 0.06 / fig.get_figheight(),
                 va="top")
    if xlabel:
        fig.supxlabel(xlabel, fontsize=7.5, y=0.04 / fig.get_figheight(), va="bottom")
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.07, right=0.985, top=1 - 0.62 / h, bottom=(0.62 if xlabel else 0.45) / h,
                        wspace=0.28, hspace=0.6)
    save_figure(fig, path_or_buffer, dpi)
