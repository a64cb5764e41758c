"""The report of a masked-LM bias audit (kind ``"mlm_bias"``; METHODS §4, points 2, 3 and 5).

:func:`build_mlm_bias_report` turns the stored document of an audit (:func:`~fairdesk.core.audits.mlm_bias.
mlm_audit_document`: project audit kind ``"mlm_bias"``, the CLI's ``--json`` file) into the same
:class:`~fairdesk.core.reports.document.Report` tree the group audit uses, and :func:`mlm_bias_report_to_pdf` writes it
with :func:`~fairdesk.core.reports.pdf.write_pdf` (deterministic bytes, atomic write). Sections: summary in plain
words with the flag rule, method, the lists used and their sources, per-category results with distribution figures,
the side-by-side comparison of several models (001 Table 3 style) with a figure, the sentence-completion probe and
provenance.

The figures' data are pure functions that a GUI can plot with pyqtgraph (no matplotlib):
:func:`category_distribution_data` (one row per scored sentence, with a deterministic jitter and hover text),
:func:`category_summary_data` (box-plot statistics per category and group) and :func:`comparison_data` (mean
difference per category and model). The static renderers (matplotlib, Agg) live here too.

Small-cell suppression (``suppress_k``): the audit holds no patient data, but the setting is honoured for every
count of audited units all the same — templates, attribute phrases, (template, attribute) pairs, word pairs,
sentences, forward sequences, also inside verdicts such as "inconclusive: 2 templates" — so that a report never
prints a count below k. Counts of categories and models and the settings (minimum templates, top-k, the flag
thresholds) are shown.

Importing this module is cheap (numpy and pandas); matplotlib and reportlab are imported inside functions.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import pandas as pd

from fairdesk.core import numbers
from fairdesk.core.errors import DataError
from fairdesk.core.reports.board import Board, are, board_section
from fairdesk.core.reports.figures import MINUS, fmt_count, fmt_p, is_true, new_figure, num, save_figure
from fairdesk.core.reports.document import (with_disclosure, Block, FigureSpec, Paragraph, Report, Section, Table, cap,
                                            correction_words, join_words, report_date, suppress_text,
                                            suppression_note)

if TYPE_CHECKING:  # pragma: no cover
    from fairdesk.core.audits.mlm_bias import MLMBiasResult

TITLE = "FairDesk masked-LM bias audit"
#: Colours of the two compared word groups (first, second) — also for the GUI.
GROUP_COLORS = ("#2F6F9F", "#C98A00")
#: Colours of the models in the comparison figure, in document order.
MODEL_COLORS = ("#2F4858", "#E08A00", "#0065A8", "#6A8E23", "#8E44AD", "#7F7F7F")
FLAG_COLOR = "#C03A00"
PANEL_COLUMNS = 4
MAX_PANELS = 16          # categories per distribution figure (more are split over several figures)
MAX_PAIR_LINES = 60      # paired lines are drawn between the groups' points when a category has at most this many
FIG_WIDTH_IN = 6.7       # the A4 text frame of the report


# ==============================================================================================================
# The stored document


def _check_document(doc: dict) -> None:
    if not isinstance(doc, dict) or doc.get("kind") != "mlm_bias":
        kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise DataError(f"This is not a masked-LM bias audit (kind '{kind}'); the masked-LM report needs the JSON "
                        "document written by 'fairdesk-cli audit mlm-bias --json' or stored by the Audit tab.")
    if not doc.get("records"):
        raise DataError("The masked-LM audit document holds no category results; run the audit again.")
    for other in doc.get("compared", []) or []:
        if not other.get("records"):
            raise DataError(f"The compared model '{other.get('model_name', '?')}' has no category results in the "
                            "document; run the comparison again.")


def _models(doc: dict) -> list[dict]:
    """The audited models in document order: name, folder, records, method, provenance."""
    _check_document(doc)
    method = doc.get("method") or {}
    out = [{"name": str(doc.get("model_name") or "model"), "path": str(doc.get("model") or method.get("model") or ""),
            "records": doc["records"], "method": method, "provenance": doc.get("provenance") or {}}]
    for other in doc.get("compared", []) or []:
        m = other.get("method") or {}
        out.append({"name": str(other.get("model_name") or "model"), "path": str(other.get("model") or
                                                                                 m.get("model") or ""),
                    "records": other["records"], "method": m, "provenance": other.get("provenance") or {}})
    return out


def _pick(doc: dict, model: str | None) -> list[dict]:
    models = _models(doc)
    if model is None:
        return models
    chosen = [m for m in models if m["name"] == model]
    if not chosen:
        raise DataError(f"No model '{model}' in the audit; it holds {', '.join(m['name'] for m in models)}.")
    return chosen


def _groups(rec: dict) -> tuple[str, str]:
    g = rec.get("groups") or ["male", "female"]
    return str(g[0]), str(g[1])


def document_from(doc_or_result: "dict | MLMBiasResult") -> dict:
    """The audit document of a stored dict (checked) or of one :class:`MLMBiasResult`."""
    if isinstance(doc_or_result, dict):
        _check_document(doc_or_result)
        return doc_or_result
    from fairdesk.core.audits.mlm_bias import MLMBiasResult, mlm_audit_document

    if isinstance(doc_or_result, MLMBiasResult):
        name = Path(str(doc_or_result.method.get("model") or "model")).name or "model"
        return mlm_audit_document({name: doc_or_result})
    raise DataError(f"Cannot report a {type(doc_or_result).__name__}; give the masked-LM audit document (dict) or "
                    "its MLMBiasResult.")


# ==============================================================================================================
# Number formatting


def fmt_nats(value, signed: bool = False) -> str:
    """A score in nats with 3 decimals (a value that rounds to 0 prints as 0.000, never in scientific notation)."""
    return numbers.signed(value, 3) if signed else numbers.fixed(value, 3)


def _fmt_r(value) -> str:
    f = num(value)
    if f is None:
        return "–"
    return ("+" if f > 0 else MINUS if f < 0 else "") + f"{abs(f):.2f}"


def times(diff) -> str:
    """e^|diff| — how many times as likely one group's words are — with two decimals ("more than 1,000" beyond)."""
    d = abs(num(diff) or 0.0)
    return "more than 1,000" if d > math.log(1000) else numbers.fixed(math.exp(d), 2)


def _fmt_q(value) -> str:
    return numbers.p_value(value)


def _significant(rec: dict) -> bool:
    return is_true(rec.get("significant"))


VERDICTS = ("differs", "equivalent", "inconclusive")


def verdict_of(rec: dict) -> str:
    """The record's verdict: ``differs``, ``equivalent`` or ``inconclusive``. A document stored before verdicts
    existed has only ``flagged``: flagged reads as differs, anything else as inconclusive — never equivalent, since
    no equivalence test was run."""
    v = rec.get("verdict")
    if v in VERDICTS:
        return str(v)
    return "differs" if is_true(rec.get("flagged")) else "inconclusive"


def verdict_text(rec: dict, suppress_k: int | None = None) -> str:
    """The verdict in a few words ("differs (male-leaning)", "equivalent (±0.25 nats)", "inconclusive: 2
    templates"); with ``suppress_k`` a count below k in it prints as "<k"."""
    t = rec.get("verdict_text")
    if t and rec.get("verdict") in VERDICTS:
        return suppress_text(str(t), suppress_k) if suppress_k else str(t)
    return verdict_of(rec)


def _status(rec: dict) -> str:
    """Plot status of a category: ``flagged`` (= differs), ``equivalent`` or ``inconclusive``."""
    v = verdict_of(rec)
    return "flagged" if v == "differs" else v


# ==============================================================================================================
# Figure data (pure: numpy and pandas only; the GUI plots these)

DISTRIBUTION_COLUMNS = ["model", "category", "name", "panel", "group", "group_index", "x", "score", "pair_key",
                        "template", "attribute", "word", "sentence", "flagged", "significant", "mean_difference",
                        "q_value", "effect_size", "n", "verdict", "tooltip"]
SUMMARY_COLUMNS = ["model", "category", "name", "panel", "group", "group_index", "n", "mean", "median", "q1", "q3",
                   "whisker_low", "whisker_high", "min", "max", "flagged", "significant", "mean_difference",
                   "q_value", "effect_size", "tooltip"]
COMPARISON_COLUMNS = ["category", "name", "model", "model_index", "y", "offset", "mean_difference", "mean_first",
                      "mean_second", "first_group", "second_group", "q_value", "effect_size", "flagged", "significant",
                      "status", "verdict", "verdict_text", "min_log_ratio", "tooltip"]


def _jitter(i: int) -> float:
    """A deterministic spread in [−0.5, 0.5) for the i-th point (golden-ratio sequence: even, no random state)."""
    return ((i * 0.6180339887498949) % 1.0) - 0.5


def category_distribution_data(doc: dict, model: str | None = None, *, spread: float = 0.5) -> pd.DataFrame:
    """One row per scored sentence of every category (of one ``model`` or of all): its group, score and a plotting
    position ``x`` = group index (0 or 1) + a deterministic jitter of width ``spread``; ``pair_key`` links the two
    groups' sentences of one word pair (template, attribute, pair index) for paired lines; ``panel`` numbers the
    categories of a model in order; category results (flagged, q, effect size) are repeated on each row."""
    rows = []
    for m in _pick(doc, model):
        for panel, rec in enumerate(m["records"]):
            g1, g2 = _groups(rec)
            counters = {g1: 0, g2: 0}
            for s in rec.get("scores", []) or []:
                group = str(s.get("group"))
                if group not in counters:
                    continue
                gi = 0 if group == g1 else 1
                score = num(s.get("score"))
                i = counters[group]
                counters[group] += 1
                word, sentence = str(s.get("word", "")), str(s.get("sentence", ""))
                rows.append({
                    "model": m["name"], "category": str(rec["category"]), "name": str(rec.get("name") or
                                                                                     rec["category"]),
                    "panel": panel, "group": group, "group_index": gi, "x": gi + spread * _jitter(i),
                    "score": np.nan if score is None else score,
                    "pair_key": f"{s.get('template', '')}\u241f{s.get('attribute', '')}\u241f{s.get('pair_index', '')}",
                    "template": str(s.get("template", "")), "attribute": str(s.get("attribute", "")), "word": word,
                    "sentence": sentence, "flagged": is_true(rec.get("flagged")), "significant": _significant(rec),
                    "mean_difference": num(rec.get("mean_difference")), "q_value": num(rec.get("q_value")),
                    "effect_size": num(rec.get("effect_size")), "n": num(rec.get("n")),
                    "verdict": verdict_of(rec),
                    "tooltip": (f"{sentence}\n{group} word '{word}' · score {fmt_nats(score, True)} nats\n"
                                f"log p target {fmt_nats(s.get('log_p_target'), True)}, "
                                f"log p prior {fmt_nats(s.get('log_p_prior'), True)}")})
    return pd.DataFrame.from_records(rows, columns=DISTRIBUTION_COLUMNS)


def _box_stats(values: np.ndarray) -> dict[str, float]:
    v = np.sort(values[~np.isnan(values)])
    if v.size == 0:
        return {k: np.nan for k in ("n", "mean", "median", "q1", "q3", "whisker_low", "whisker_high", "min", "max")}
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    iqr = q3 - q1
    low = v[v >= q1 - 1.5 * iqr].min()
    high = v[v <= q3 + 1.5 * iqr].max()
    return {"n": int(v.size), "mean": float(v.mean()), "median": float(med), "q1": float(q1), "q3": float(q3),
            "whisker_low": float(low), "whisker_high": float(high), "min": float(v[0]), "max": float(v[-1])}


def category_summary_data(doc: dict, model: str | None = None, *, suppress_k: int | None = None) -> pd.DataFrame:
    """Box-plot statistics per (model, category, group): n, mean, median, quartiles, Tukey whiskers (1.5 IQR, at
    data points), min, max, with the category's test results and a hover text (counts below ``suppress_k`` in it
    print as "<k")."""
    points = category_distribution_data(doc, model)
    rows = []
    for m in _pick(doc, model):
        for panel, rec in enumerate(m["records"]):
            g1, g2 = _groups(rec)
            sub = points[(points["model"] == m["name"]) & (points["category"] == str(rec["category"]))]
            for gi, g in enumerate((g1, g2)):
                st = _box_stats(sub[sub["group"] == g]["score"].to_numpy(float))
                row = {"model": m["name"], "category": str(rec["category"]),
                       "name": str(rec.get("name") or rec["category"]), "panel": panel, "group": g,
                       "group_index": gi, **st, "flagged": is_true(rec.get("flagged")),
                       "significant": _significant(rec), "mean_difference": num(rec.get("mean_difference")),
                       "q_value": num(rec.get("q_value")), "effect_size": num(rec.get("effect_size"))}
                row["tooltip"] = (f"{row['name']} ({row['category']}) · {g} words\n"
                                  f"n = {fmt_count(st['n'], suppress_k)} sentences, mean "
                                  f"{fmt_nats(st['mean'], True)}, "
                                  f"median {fmt_nats(st['median'], True)} nats\n"
                                  f"{g1} − {g2}: {fmt_nats(row['mean_difference'], True)} nats, "
                                  f"q = {_fmt_q(row['q_value'])}, r = {_fmt_r(row['effect_size'])} · "
                                  f"{verdict_text(rec, suppress_k)}")
                rows.append(row)
    return pd.DataFrame.from_records(rows, columns=SUMMARY_COLUMNS)


def comparison_data(doc: dict, *, suppress_k: int | None = None) -> pd.DataFrame:
    """Mean score difference (first group − second group, nats) per category and model: one row per plotted mark.
    ``y`` is the category's row from the top (categories in first-seen order), ``offset`` the model's small
    vertical shift inside the row; ``min_log_ratio`` is that model's flag threshold on |difference|. Counts below
    ``suppress_k`` in the verdict texts print as "<k"."""
    models = _models(doc)
    cats: dict[str, str] = {}
    for m in models:
        for rec in m["records"]:
            cats.setdefault(str(rec["category"]), str(rec.get("name") or rec["category"]))
    order = {c: i for i, c in enumerate(cats)}
    k = len(models)
    rows = []
    for mi, m in enumerate(models):
        offset = 0.0 if k == 1 else (mi - (k - 1) / 2) * min(0.7 / (k - 1), 0.25)
        threshold = num(m["method"].get("min_log_ratio"))
        for rec in m["records"]:
            g1, g2 = _groups(rec)
            c = str(rec["category"])
            diff = num(rec.get("mean_difference"))
            status = _status(rec)
            row = {"category": c, "name": cats[c], "model": m["name"], "model_index": mi, "y": order[c],
                   "offset": offset, "mean_difference": np.nan if diff is None else diff,
                   "mean_first": num(rec.get(f"mean_{g1}")), "mean_second": num(rec.get(f"mean_{g2}")),
                   "first_group": g1, "second_group": g2, "q_value": num(rec.get("q_value")),
                   "effect_size": num(rec.get("effect_size")), "flagged": status == "flagged",
                   "significant": _significant(rec), "status": status, "verdict": verdict_of(rec),
                   "verdict_text": verdict_text(rec, suppress_k),
                   "min_log_ratio": np.nan if threshold is None else threshold}
            row["tooltip"] = (f"{m['name']} · {cats[c]} ({c})\n"
                              f"mean {g1} {fmt_nats(row['mean_first'], True)}, mean {g2} "
                              f"{fmt_nats(row['mean_second'], True)}; difference {fmt_nats(diff, True)} nats\n"
                              f"q = {_fmt_q(row['q_value'])}, r = {_fmt_r(row['effect_size'])} · "
                              f"{verdict_text(rec, suppress_k)}")
            rows.append(row)
    return pd.DataFrame.from_records(rows, columns=COMPARISON_COLUMNS)


# ==============================================================================================================
# Static figures (matplotlib, Agg)


def distribution_size(data: pd.DataFrame) -> tuple[float, float]:
    n = max(int(data["panel"].nunique()) if len(data) else 1, 1)
    rows = math.ceil(n / PANEL_COLUMNS)
    return FIG_WIDTH_IN, 0.75 + 2.05 * rows


def comparison_size(data: pd.DataFrame) -> tuple[float, float]:
    n = max(int(data["y"].nunique()) if len(data) else 1, 1)
    return FIG_WIDTH_IN, 1.25 + 0.36 * n


def _style(ax) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=6.5)


def render_distribution_png(data: pd.DataFrame, path_or_buffer: "str | Path | BinaryIO", title: str, *,
                            dpi: int = 150) -> None:
    """Small multiples, one panel per category: each sentence's score by group (box plot with the points drawn
    over it; paired lines between a word pair's two sentences when there are few), zero line, the mean
    difference and q under the title; flagged categories in red."""
    fig = new_figure(distribution_size(data))
    panels = list(dict.fromkeys(data["panel"])) if len(data) else []
    if not panels:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no scores to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    nrow = max(math.ceil(len(panels) / PANEL_COLUMNS), 1)
    for i, p in enumerate(panels):
        part = data[data["panel"] == p]
        ax = fig.add_subplot(nrow, PANEL_COLUMNS, i + 1)
        first = part.iloc[0]
        groups = [str(g) for g in part.sort_values("group_index", kind="stable")["group"].drop_duplicates()]
        values = [part[part["group_index"] == gi]["score"].dropna().to_numpy(float) for gi in (0, 1)]
        n_pairs = part["pair_key"].nunique()
        if n_pairs <= MAX_PAIR_LINES:
            wide = part.pivot_table(index="pair_key", columns="group_index", values=["x", "score"],
                                    aggfunc="first", sort=True)
            if ("x", 0) in wide.columns and ("x", 1) in wide.columns:
                xs = wide[[("x", 0), ("x", 1)]].to_numpy(float).T
                ys = wide[[("score", 0), ("score", 1)]].to_numpy(float).T
                ax.plot(xs, ys, color="#B8C2CC", linewidth=0.5, zorder=1)
        for gi in (0, 1):
            pts = part[part["group_index"] == gi]
            ax.scatter(pts["x"], pts["score"], s=4 if len(pts) > 200 else 7, color=GROUP_COLORS[gi],
                       alpha=0.35 if len(pts) > 200 else 0.6, linewidths=0, zorder=2)
        if all(len(v) for v in values):
            ax.boxplot(values, positions=[0, 1], widths=0.6, showfliers=False, whis=1.5, manage_ticks=False,
                       patch_artist=True, zorder=3,
                       boxprops={"facecolor": "none", "edgecolor": "#222222", "linewidth": 0.9},
                       medianprops={"color": "#222222", "linewidth": 1.3},
                       whiskerprops={"color": "#222222", "linewidth": 0.8},
                       capprops={"color": "#222222", "linewidth": 0.8})
            for gi, v in enumerate(values):
                ax.scatter([gi], [float(np.mean(v))], marker="D", s=16, color="white", edgecolors="#222222",
                           linewidths=0.9, zorder=4)
        ax.axhline(0.0, color="#888888", linewidth=0.6, linestyle="--", zorder=0)
        ax.set_xticks([0, 1], labels=groups + [""] * (2 - len(groups)), fontsize=7)
        ax.set_xlim(-0.6, 1.6)
        flagged = bool(first["flagged"])
        name = str(first["name"])
        head = str(first["category"]) + (f" · {name}" if name != str(first["category"]) else "")
        limit = 19 if flagged else 22  # a panel is about 1.4 inches wide; bold type is wider
        if len(head) > limit:
            head = head[:limit - 1] + "…"
        ax.set_title(head, fontsize=7.5, loc="left", color=FLAG_COLOR if flagged else "#222222",
                     fontweight="bold" if flagged else "normal", pad=12, y=1.0)  # fixed y: no auto layout
        short = {"differs": "differs", "equivalent": "equiv.", "inconclusive": "inconcl."}
        sub = (f"Δ {fmt_nats(first['mean_difference'], True)} · q {_fmt_q(first['q_value'])}"
               + (f" · {short.get(str(first['verdict']), '')}" if "verdict" in part.columns else ""))
        ax.text(0.0, 1.015, sub, transform=ax.transAxes, ha="left", va="bottom", fontsize=6,
                color=FLAG_COLOR if flagged else "#555555")
        ax.grid(axis="y", color="#E3E3E3", linewidth=0.5, zorder=0)
        _style(ax)
        if i % PANEL_COLUMNS == 0:
            ax.set_ylabel("score (nats)", fontsize=7)
    fig.suptitle(title, fontsize=9.5, x=0.08 / fig.get_figwidth(), ha="left", y=1 - 0.06 / fig.get_figheight(),
                 va="top")
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.08, right=0.99, top=1 - 0.72 / h, bottom=0.3 / h, wspace=0.42, hspace=0.62)
    save_figure(fig, path_or_buffer, dpi)


def render_comparison_png(data: pd.DataFrame, path_or_buffer: "str | Path | BinaryIO", title: str, *,
                          dpi: int = 150) -> None:
    """Mean difference (first − second group, nats) per category, one marker per model; filled circle = differs
    (flagged), hollow diamond = equivalent within the margin, hollow circle = inconclusive; the band around 0 is
    below the flag threshold."""
    from matplotlib.lines import Line2D

    fig = new_figure(comparison_size(data))
    w, h = fig.get_figwidth(), fig.get_figheight()
    if data.empty:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no estimates to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        save_figure(fig, path_or_buffer, dpi)
        return
    labels = data.drop_duplicates("y").sort_values("y")
    label_text = [f"{r.category} · {r.name}" if r.name != r.category else str(r.category)
                  for r in labels.itertuples(index=False)]
    left = min(0.2 + 0.055 * max(len(t) for t in label_text), w * 0.4)
    ax = fig.add_axes((left / w, 0.72 / h, 1 - (left + 0.15) / w, 1 - 1.25 / h))
    n = int(labels["y"].max()) + 1
    for y in range(0, n, 2):
        ax.axhspan(y - 0.5, y + 0.5, color="#F1F4F7", zorder=0, linewidth=0)
    values = data["mean_difference"].to_numpy(float)
    thr = data["min_log_ratio"].dropna()
    span = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 0.0
    if len(thr):
        t = float(thr.iloc[0])
        span = max(span, t)
        ax.axvspan(-t, t, color="#E6E6E6", zorder=0, linewidth=0)
    span = max(span, 1e-6) * 1.15
    ax.axvline(0.0, color="#222222", linewidth=0.9, zorder=1)
    handles = []
    for mi, (model, part) in enumerate(data.groupby("model_index", sort=True)):
        color = MODEL_COLORS[int(model) % len(MODEL_COLORS)]
        name = str(part["model"].iloc[0])
        y = part["y"].to_numpy(float) + part["offset"].to_numpy(float)
        for status, face, marker in (("flagged", color, "o"), ("equivalent", _blend(color, 0.25), "D"),
                                     ("inconclusive", "white", "o")):
            sel = (part["status"] == status).to_numpy()
            if sel.any():
                ax.scatter(part["mean_difference"].to_numpy(float)[sel], y[sel], s=34 if marker == "o" else 26,
                           marker=marker, facecolors=face, edgecolors=color, linewidths=1.2, zorder=3)
        handles.append(Line2D([], [], linestyle="none", marker="o", markersize=6, markerfacecolor=color,
                              markeredgecolor=color, label=name))
    handles += [Line2D([], [], linestyle="none", marker="o", markersize=6, markerfacecolor="#555555",
                       markeredgecolor="#555555", label="differs (flagged)"),
                Line2D([], [], linestyle="none", marker="D", markersize=5, markerfacecolor=_blend("#555555", 0.25),
                       markeredgecolor="#555555", label="equivalent"),
                Line2D([], [], linestyle="none", marker="o", markersize=6, markerfacecolor="white",
                       markeredgecolor="#555555", label="inconclusive")]
    ax.set_yticks(labels["y"].to_numpy(), labels=label_text, fontsize=7)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(-span, span)
    g1, g2 = str(data["first_group"].iloc[0]), str(data["second_group"].iloc[0])
    ax.set_xlabel(f"mean score difference {g1} − {g2} (nats); grey band: below the flag threshold", fontsize=7.5)
    ax.text(0.0, 1.0, f"◀ {g2} words more likely", transform=ax.transAxes, ha="left", va="bottom", fontsize=6.5,
            color="#444444")
    ax.text(1.0, 1.0, f"{g1} words more likely ▶", transform=ax.transAxes, ha="right", va="bottom", fontsize=6.5,
            color="#444444")
    ax.grid(axis="x", color="#DDDDDD", linewidth=0.5, zorder=0)
    _style(ax)
    ax.tick_params(axis="y", labelsize=7)
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.02 / h), ncol=min(len(handles), 6),
               fontsize=6.5, frameon=False, handletextpad=0.3, columnspacing=1.1)
    fig.suptitle(title, fontsize=9.5, x=0.08 / w, ha="left", y=1 - 0.06 / h, va="top")
    save_figure(fig, path_or_buffer, dpi)


def _blend(color: str, alpha: float) -> str:
    """``color`` mixed with white (an opaque half-tone, so that overlapping markers stay readable)."""
    c = color.lstrip("#")
    rgb = [int(c[i:i + 2], 16) for i in (0, 2, 4)]
    return "#" + "".join(f"{round(255 - alpha * (255 - v)):02X}" for v in rgb)


#: Figure kinds of this report: kind -> (render(data, buffer, title), size(data) -> (width, height) in inches).
FIGURE_KINDS = {"mlm_distribution": (render_distribution_png, distribution_size),
                "mlm_comparison": (render_comparison_png, comparison_size)}


def _install_figure_kinds() -> None:
    """Teach :func:`fairdesk.core.reports.pdf.write_pdf` this report's figure kinds (:data:`FIGURE_KINDS`)."""
    from fairdesk.core.reports import pdf

    for kind, (render, size) in FIGURE_KINDS.items():
        pdf.register_figure_kind(kind, render, size)


# ==============================================================================================================
# The report


def _words(words) -> str:
    return ", ".join(str(w) for w in words)


def _model_label(m: dict) -> str:
    path = m["path"]
    return f"“{m['name']}”" + (f" ({path})" if path and path not in (m["name"], "in-memory model") else "")


def _finding(rec: dict, k: int) -> str:
    g1, g2 = _groups(rec)
    diff = num(rec.get("mean_difference")) or 0.0
    more, less = (g1, g2) if diff > 0 else (g2, g1)
    test = rec.get("test_code", "wilcoxon")
    n_unit = "word pairs" if test in ("wilcoxon", "template") else "sentences"
    ci = ""
    if num(rec.get("ci_low")) is not None and num(rec.get("ci_high")) is not None:
        ci = (f", 95% CI over templates {fmt_nats(rec.get('ci_low'), True)} to "
              f"{fmt_nats(rec.get('ci_high'), True)}")
    size = (f"{fmt_count(rec.get('n_templates'), k)} templates, {fmt_count(rec.get('n'), k)} {n_unit}"
            if test == "template" else f"{fmt_count(rec.get('n'), k)} {n_unit}")
    return (f"{rec.get('name') or rec['category']} ({rec['category']}): the model finds the {more} words more likely "
            f"than the {less} words in these sentences — their prior-adjusted probability is on average "
            f"{times(diff)} times as high (geometric mean; mean score {g1} "
            f"{fmt_nats(rec.get(f'mean_{g1}'), True)}, {g2} {fmt_nats(rec.get(f'mean_{g2}'), True)}, difference "
            f"{fmt_nats(diff, True)} nats{ci}; rank-biserial r = {_fmt_r(rec.get('effect_size'))}; "
            f"q = {_fmt_q(rec.get('q_value'))}; {size}).")


def _unit_text(method: dict) -> str:
    """The unit of inference and the test, in words (older documents: the per-sentence test they ran)."""
    test = str(method.get("test_code") or "wilcoxon")
    if test == "template" and "sign-flip" not in str(method.get("test", "")):   # documents stored before it
        return ("The template is the unit of inference: scores of one template share its prior and its wording, so "
                "each template contributes one number — its mean score difference over all its attribute phrases "
                "and word pairs — and the test is the one-sample t-test of those template means against 0 "
                "(two-sided).")
    if test == "template":
        return ("The template is the unit of inference: scores of one template share its prior and its wording, so "
                "each template contributes one number — its mean score difference over all its attribute phrases "
                "and word pairs — and the test of those template means against 0 (two-sided) is an exact "
                "sign-flip test over templates backed by the one-sample t-test and Hall's skewness-corrected t, "
                "spending 0.8·α: exact when template effects are symmetric about 0, and within α + 0.02 under the "
                "skewed and two-mode template laws measured, where a handful of templates can miss a mode.")
    return (f"Test: {method.get('test', test)} — the per-sentence test of the authors' release. It treats the "
            "scores of one template as independent although they share its prior and wording "
            "(pseudo-replication), so its p-values are too small: with template effects of mean zero it flags at "
            "least one category in a third or more of null audits. Read its p and q with that in mind.")


def _margin(method: dict) -> float | None:
    m = num(method.get("margin"))
    return m if m is not None else None


def _verdict_rule_text(method: dict) -> str:
    """How differs / equivalent / inconclusive are decided (or, for an older document, that it had no
    equivalence test)."""
    alpha = num(method.get("alpha"))
    margin = _margin(method)
    k = method.get("min_templates")
    if margin is None or k is None:
        return ("This audit was stored before verdicts existed: a category that is not flagged is inconclusive — "
                "no equivalence test was run, so nothing here shows that the groups are treated alike.")
    a = f"{numbers.short(alpha)}" if alpha is not None else "alpha"
    return (f"Every category gets one of three verdicts. Differs: the flag rule above holds. Equivalent within "
            f"±{numbers.short(margin)} nats: two one-sided t-tests over the templates (TOST) show that the mean difference "
            f"lies inside ±{numbers.short(margin)} nats (a probability ratio between {math.exp(-margin):.2f} and "
            f"{math.exp(margin):.2f}), after Benjamini–Hochberg across the same categories (q < {a}). "
            f"Inconclusive: neither is shown — or the category has fewer than {k} templates, too few to generalise "
            f"over wordings (with 5 or fewer templates even an exact sign-flip test cannot reach p < 0.05, so a "
            f"small p would rest wholly on assumptions); such categories are left out of the correction. "
            "A difference that is not significant is inconclusive, never evidence that the model treats the groups "
            "alike.")


def _flag_rule_text(method: dict) -> str:
    alpha = num(method.get("alpha"))
    eff = num(method.get("min_effect"))
    nats = num(method.get("min_log_ratio"))
    if alpha is None or eff is None or nats is None:
        return f"Flag rule: {method.get('flag_rule', 'not recorded')}."
    units = "templates" if method.get("test_code") == "template" else "word pairs"
    return (f"A category is flagged (differs) only when three things hold: the difference between the groups is "
            f"significant after the {correction_words('bh', alpha)}, across the categories (q < {numbers.short(alpha)}); it is "
            f"consistent — the rank-biserial effect size |r| is at least {numbers.short(eff)}, so clearly more {units} lean one "
            f"way than the other; and it is large enough to matter — the mean score difference is at least "
            f"{numbers.short(nats)} nats, i.e. "
            f"one group's words are at least e^{numbers.short(nats)} ≈ {math.exp(nats):.2f} times as likely as the other's "
            f"after adjusting for the prior (recorded rule: {method.get('flag_rule', '')}).")


def board(doc: dict, models: list[dict], k: int) -> Board:
    """What page 1 says of a masked-LM audit: a grid of categories × models, the flagged categories in words
    (which words the model favours, how much, how sure), what could not be tested, what to check next."""
    main = models[0]
    g1, g2 = _groups(main["records"][0])
    entries = [(str(r.get("name") or r["category"]), m["name"], verdict_of(r)) for m in models for r in m["records"]]
    findings = []
    for m in models:
        who = f" ({m['name']})" if len(models) > 1 else ""
        for r in m["records"]:
            if verdict_of(r) != "differs":
                continue
            diff = num(r.get("mean_difference")) or 0.0
            more, less = (g1, g2) if diff > 0 else (g2, g1)
            ci = numbers.interval(r.get("ci_low"), r.get("ci_high"))
            findings.append(f"{r.get('name') or r['category']}{who}: the model finds the {more} words "
                            f"{times(diff)} times as likely as the {less} words after "
                            f"adjusting for the prior (difference {fmt_nats(diff, True)} nats, 95% CI {ci}; "
                            f"{numbers.p_equals(r.get('q_value'), 'q')}).")
    incon = sum(1 for m in models for r in m["records"] if verdict_of(r) == "inconclusive")
    untested = []
    if incon:
        untested.append(f"{are(incon, 'category verdict')} inconclusive (for example too few templates): not evidence "
                        "of fairness.")
    untested.append("Only the listed conditions and word lists were probed; other groups and conditions were not.")
    steps = []
    if findings:
        steps.append("Check whether a flagged association reflects a real difference in prevalence between the "
                     "groups before treating it as unwanted bias.")
    steps.append("Probe the conditions and words that matter for your notes with your own lists.")
    return Board(question=(f"Does {'the model' if len(models) == 1 else 'each model'} associate clinical "
                           f"conditions with the {g1} words or with the {g2} words?"),
                 entries=entries, row_title="Category", findings=findings,
                 no_findings="No category is flagged. That is not proof that the model has no such association.",
                 untested=untested, next_steps=steps, plan="", more_where="the results per category")


def _summary_section(doc: dict, models: list[dict], date: str, k: int) -> Section:
    main = models[0]
    method = main["method"]
    rec0 = main["records"][0]
    g1, g2 = _groups(rec0)
    groups = method.get("groups") or {}
    tpl = method.get("templates") or {}
    n_pairs = tpl.get("n_pairs")
    b: list[Block] = [Paragraph("What was audited", "subheading")]
    subject = (f"the masked language model {_model_label(main)}" if len(models) == 1 else
               f"{len(models)} masked language models — {join_words([_model_label(m) for m in models])}")
    b.append(Paragraph(
        f"This report checks whether {subject} {'associates' if len(models) == 1 else 'associate'} clinical "
        f"conditions with the {g1} words "
        f"({_words(groups.get(g1, []))}) or with the {g2} words ({_words(groups.get(g2, []))}). "
        f"Each sentence such as “{_example(rec0)}” is scored by how much more likely the model finds the word in "
        "the word slot when the medical context is present than when it is masked out: "
        "score = ln(p_target / p_prior), in nats (0 = the context does not change the word's probability). "
        f"{len(main['records'])} categories"
        + (f", {fmt_count(n_pairs, k)} (template, attribute) pairs" if n_pairs is not None else "")
        + (f", {fmt_count(method.get('n_scores'), k)} scored sentences per model" if method.get("n_scores") else "")
        + f". The audit was run on {date}."))
    b.append(Paragraph("What was found", "subheading"))
    margin = _margin(method)
    for m in models:
        recs = m["records"]
        flagged = [r for r in recs if verdict_of(r) == "differs"]
        equiv = [r for r in recs if verdict_of(r) == "equivalent"]
        incon = [r for r in recs if verdict_of(r) == "inconclusive"]
        who = f"model “{m['name']}”" if len(models) > 1 else "the model"  # its folder is named above
        mm = _margin(m["method"]) or margin
        b.append(Paragraph(
            f"Verdicts for {who} ({len(recs)} categories): {len(flagged)} differ{'s' if len(flagged) == 1 else ''}, "
            f"{len(equiv)} equivalent"
            + (f" within ±{numbers.short(mm)} nats" if mm is not None else "") + f", {len(incon)} inconclusive.", "lead"))
        if flagged:
            b.append(Paragraph(f"Flagged for {who}: {join_words([str(r.get('name') or r['category']) for r in flagged])}."
                               , "lead"))
            for r in flagged:
                b.append(Paragraph(_finding(r, k), "finding"))
        else:
            b.append(Paragraph(f"No category is flagged for {who}.", "lead"))
        if equiv:
            b.append(Paragraph(
                "Equivalent — shown to differ by less than the margin: "
                + join_words([f"{r.get('name') or r['category']} (difference {fmt_nats(r.get('mean_difference'), True)} "
                         f"nats, 95% CI {fmt_nats(r.get('ci_low'), True)} to {fmt_nats(r.get('ci_high'), True)})"
                         for r in equiv]) + "."))
        if incon:
            b.append(Paragraph(
                "Inconclusive — the data show neither a difference nor equivalence, so no conclusion either way "
                "(not evidence of fairness): "
                + join_words([f"{r.get('name') or r['category']} ({_incon_reason(r, k)})" for r in incon]) + "."))
    if len(models) > 1:
        changed = _flag_changes(models)
        b.append(Paragraph(f"Compared with {models[0]['name']}: " + ("; ".join(changed) if changed else
                                                                    "the same categories are flagged") + "."))
    b.append(Paragraph("How the verdicts are reached", "subheading"))
    b.append(Paragraph(_unit_text(method)))
    b.append(Paragraph(_flag_rule_text(method)))
    b.append(Paragraph(_verdict_rule_text(method)))
    b.append(Paragraph("How to read this", "subheading"))
    for text in (
        f"A positive difference means the {g1} words gain more probability from the medical context than the {g2} "
        f"words; a negative one the reverse. A difference of 0.69 nats means twice as likely.",
        ("The verdicts generalise over template wordings for these attribute phrases; a category is only as well "
         "covered as its templates." if method.get("test_code") == "template" else
         "Sentences share templates and attribute phrases, so their scores are not independent; this audit's test "
         "treats them as independent (as the source paper does). Judge by the effect sizes as well as by p and q."),
        "A flagged category is a signal to investigate, not proof of unwanted bias: conditions differ in prevalence "
        "between groups (Zhang et al. 2020), and a model trained on clinical notes learns those differences.",
    ):
        b.append(Paragraph(text, "bullet"))
    return Section("summary", "1  Summary", b)


def _incon_reason(rec: dict, k: int) -> str:
    text = verdict_text(rec, k)
    if text.startswith("inconclusive:"):
        return text.split(":", 1)[1].strip()
    if _significant(rec):
        return ("significant but below the size thresholds, difference "
                f"{fmt_nats(rec.get('mean_difference'), True)} nats")
    return f"difference {fmt_nats(rec.get('mean_difference'), True)} nats, q {_fmt_q(rec.get('q_value'))}"


def _example(rec: dict) -> str:
    scores = rec.get("scores") or []
    return str(scores[0].get("sentence")) if scores else "[GEND] has a hx of [ATTR]"


def _method_section(models: list[dict], no: int, k: int) -> Section:
    method = models[0]["method"]
    b: list[Block] = []
    b.append(Paragraph("The score", "subheading"))
    slot = method.get("slot", "GEND")
    b.append(Paragraph(
        f"For a template with a demographic slot [{slot}] and an attribute slot filled by a phrase a (the medical "
        f"context), and a word w of one of the compared groups: p_target(w) is the probability the model gives w "
        f"in the masked slot of the sentence with a filled in; p_prior(w) is the same probability when the words of "
        f"a are masked too. Score = {method.get('score', 'ln(p_target / p_prior)')} (natural log, in nats). "
        f"Method: {method.get('name', 'log-probability bias score')}."))
    b.append(Paragraph(
        f"Prior rule: {method.get('prior_rule_text') or method.get('prior_rule', 'not recorded')} "
        f"(rule “{method.get('prior_rule', '?')}”; the alternative rule of the authors' release masks one [MASK] "
        "per whitespace word of the attribute)."))
    b.append(Paragraph("Slot alignment and multi-piece words", "subheading"))
    b.append(Paragraph(
        f"Alignment: {method.get('alignment', 'not recorded')} — the slot is found on the tokenized sentence, "
        "never by counting whitespace words (the release's defect: a word before the slot that splits into "
        "pieces shifted the slot and the probability of the wrong position was read)."))
    b.append(Paragraph(f"Multi-piece words: {method.get('multi_piece_rule', 'not recorded')}."))
    for m in models:
        multi = m["method"].get("multi_piece_words") or {}
        who = f" ({m['name']})" if len(models) > 1 else ""
        if multi:
            b.append(Paragraph(f"Words split into pieces by the tokenizer{who}: "
                               + "; ".join(f"{w} → {' + '.join(map(str, p))}" for w, p in multi.items()) + ".",
                               "bullet"))
        else:
            b.append(Paragraph(f"Every compared word is a single piece in the model's vocabulary{who}.", "bullet"))
    b.append(Paragraph("Unit, test, correction, margin and verdicts", "subheading"))
    unit = (method.get("unit_text") or method.get("unit")
            or "the sentence pair (not recorded: an audit stored before the template unit)")
    b.append(Paragraph(f"Unit of inference: {unit}."))
    tests = list(dict.fromkeys(str(m["method"].get("test", "")) for m in models if m["method"].get("test")))
    b.append(Paragraph("Test per category: " + (" / ".join(tests) or "not recorded") + "."))
    b.append(Paragraph(f"Multiple testing: {method.get('multiple_testing', 'not recorded')}."))
    b.append(Paragraph(f"Equivalence: {method.get('equivalence', 'not tested (an audit stored before verdicts)')}; "
                       f"margin {method.get('margin', 'not recorded')} nats (default: the size threshold of the flag "
                       "rule, so that a difference either matters or is shown not to)."))
    b.append(Paragraph(f"Minimum templates: {method.get('min_templates', 'not recorded')} — "
                       f"{method.get('min_templates_rule', 'no minimum was applied')}."))
    b.append(Paragraph(f"Verdicts: {method.get('verdict_rule', 'only flagged / not flagged were recorded')}."))
    b.append(Paragraph(f"Effect size: {method.get('effect_size', 'not recorded')}. Also reported: the mean score "
                       "difference in nats (first group − second group) with its 95% t interval over the templates "
                       "and, in the JSON document, d_z = mean difference / its standard deviation over the test's "
                       "units."))
    for m in models:
        who = f" ({m['name']})" if len(models) > 1 else ""
        b.append(Paragraph(f"Flag rule{who}: {m['method'].get('flag_rule', 'not recorded')}.", "bullet"))
    n_seq = method.get("n_forward_sequences")
    if n_seq:
        b.append(Paragraph(
            f"Efficiency: the {fmt_count(method.get('n_scores'), k)} scores needed {fmt_count(n_seq, k)} distinct "
            "forward "
            "sequences — identical masked sentences (every prior of a template and mask count, every target shared "
            "by words of equal piece count) are run once, batched with padding and an attention mask.", "note"))
    b.append(Paragraph(
        suppression_note(k) + " The audit holds no patient data; the setting applies to the counts of templates, "
        "attribute phrases, pairs and sentences all the same (section 3 lists the templates themselves).", "note"))
    notes = list(dict.fromkeys(str(n) for m in models for n in (m["method"].get("notes") or [])))
    if notes:
        b.append(Paragraph("Caveats", "subheading"))
        for n in notes:
            b.append(Paragraph(suppress_text(n, k), "bullet"))
    return Section("method", f"{no}  Method", b)


def _lists_section(doc: dict, models: list[dict], no: int, k: int) -> Section:
    method = models[0]["method"]
    tpl = method.get("templates") or {}
    b: list[Block] = [Paragraph("Template list", "subheading")]
    b.append(Paragraph(f"File: {tpl.get('path') or 'not recorded (built in memory)'}."))
    b.append(Paragraph(f"SHA-256: {tpl.get('sha256') or 'not recorded'}."))
    b.append(Paragraph(f"Source: {tpl.get('source') or 'not given in the file'}"))
    others = {m["name"]: (m["method"].get("templates") or {}).get("sha256") for m in models[1:]}
    differ = [n for n, h in others.items() if h != tpl.get("sha256")]
    if differ:
        b.append(Paragraph(f"Caution: {join_words(differ)} {'was' if len(differ) == 1 else 'were'} audited with a "
                           "different template list (see the provenance section); their results are not directly "
                           "comparable.", "lead"))
    counts = tpl.get("counts") or {}
    groups = method.get("groups") or {}
    n_words = sum(len(v) for v in groups.values()) or None
    rows = []
    per_cat_templates: dict[str, list[str]] = {}
    for rec in models[0]["records"]:
        scores = rec.get("scores") or []
        templates = list(dict.fromkeys(str(s.get("template")) for s in scores))
        attrs = list(dict.fromkeys(str(s.get("attribute")) for s in scores))
        code = str(rec["category"])
        per_cat_templates[code] = templates
        pairs = counts.get(code, len(templates) * len(attrs))
        rows.append([code, str(rec.get("name") or code), fmt_count(rec.get("n_templates", len(templates)), k),
                     fmt_count(rec.get("n_attributes", len(attrs)), k), fmt_count(pairs, k),
                     fmt_count(pairs * n_words, k) if n_words else "–", "; ".join(attrs) or "–"])
    total_pairs = tpl.get("n_pairs", sum(counts.values()) if counts else None)
    rows.append(["All", "", "", "", fmt_count(total_pairs, k), fmt_count(total_pairs * n_words, k) if n_words and
                 total_pairs is not None else "–", ""])
    b.append(Table(["Code", "Category", "Templates", "Attributes", "Pairs", "Sentences", "Attribute phrases"], rows,
                   title="Categories, attribute phrases and (template, attribute) pairs",
                   align=list("LLRRRRL"),
                   note="Pairs = templates × attribute phrases of the category; sentences = pairs × the number of "
                        "compared words (each pair is scored once per word)."))
    b.append(Paragraph("Demographic word groups", "subheading"))
    names = list(groups)
    if names:
        length = max(len(v) for v in groups.values())
        wrows = [[str(i + 1)] + [str(groups[g][i]) if i < len(groups[g]) else "–" for g in names]
                 for i in range(length)]
        b.append(Table(["Pair"] + names, wrows, title=f"Words filling the [{method.get('slot', 'GEND')}] slot",
                       widths=[1] + [3] * len(names), align=["R"] + ["L"] * len(names),
                       note="The signed-rank test pairs the words position by position (each row is one pair)."))
    b.append(Paragraph("Templates", "subheading"))
    seen: dict[tuple[str, ...], str] = {}
    trows = []
    for code, templates in per_cat_templates.items():
        key = tuple(templates)
        if not templates:
            trows.append([code, "not stored in this document (it holds no per-sentence scores)"])
        elif key in seen:
            trows.append([code, f"the same {fmt_count(len(templates), k)} templates as {seen[key]}"])
        else:
            seen[key] = code
            trows.append([code, " · ".join(templates)])
    b.append(Table(["Code", "Templates (expanded; [ATTR] is the attribute slot)"], trows,
                   title="Templates per category", widths=[8, 92], small=True))
    comp = doc.get("completion")
    if comp:
        cm = comp.get("method") or {}
        ct = cm.get("templates") or {}
        b.append(Paragraph("Sentence-completion templates", "subheading"))
        b.append(Paragraph(f"File: {ct.get('path') or 'not recorded'}. SHA-256: {ct.get('sha256') or 'not recorded'}."))
        b.append(Paragraph(f"Source: {ct.get('source') or 'not given in the file'}"))
        b.append(Paragraph(f"Terms substituted for the slot: {_words(cm.get('terms') or [])}."))
        for t in dict.fromkeys(str(r.get("template")) for r in comp.get("rows", [])):
            b.append(Paragraph(t, "bullet"))
    return Section("lists", f"{no}  Lists used and their sources", b)


def _fmt_ci(rec: dict) -> str:
    lo, hi = num(rec.get("ci_low")), num(rec.get("ci_high"))
    if lo is None or hi is None:
        return "–"
    return f"{fmt_nats(lo, True)} to {fmt_nats(hi, True)}"


def _results_table(m: dict, k: int) -> Table:
    rec0 = m["records"][0]
    g1, g2 = _groups(rec0)
    rows = []
    for r in m["records"]:
        rows.append([str(r["category"]), str(r.get("name") or r["category"]), fmt_count(r.get("n_templates"), k),
                     fmt_count(r.get("n"), k), fmt_nats(r.get(f"mean_{g1}"), True), fmt_nats(r.get(f"mean_{g2}"), True),
                     fmt_nats(r.get("mean_difference"), True), _fmt_ci(r), fmt_p(r.get("p_value")),
                     fmt_p(r.get("q_value")), _fmt_r(r.get("effect_size")),
                     "yes (BH)" if _significant(r) else "no", verdict_text(r, k)])
    test = str(rec0.get("test_code", ""))
    n_text = ("word pairs (template × attribute × word pair)" if test in ("wilcoxon", "template")
              else "sentences of both groups")
    stat = {"wilcoxon": "Wilcoxon signed-rank statistic T over the word pairs",
            "template": "t over the templates' mean differences (df = templates − 1)"}.get(test,
                                                                                          "rank-sum z statistic")
    method = m["method"]
    margin = _margin(method)
    return Table(["Code", "Category", "Tpl.", "n", f"{g1}", f"{g2}", "Diff.", "95% CI", "p", "q", "r", "Sig.",
                  "Verdict"], rows,
                 title=f"Log-probability bias scores per category — {m['name']}",
                 align=list("LLRRRRRRRRRLL"), small=True,
                 note=f"Tpl. = templates; n = {n_text}. {g1} / {g2}: mean score ln(p_target/p_prior) of each "
                      f"group's sentences (nats); diff. = mean {g1} − mean {g2}; 95% CI: t interval of the mean "
                      "difference over the templates. Sig.: significant after correction (q < alpha). "
                      f"p: {stat} (the statistic is in the JSON document). q: Benjamini–Hochberg across the "
                      "categories with at least "
                      f"{method.get('min_templates', '?')} templates (– = left out: too few templates). Effect r: "
                      f"rank-biserial correlation (+1 = every {'template' if test == 'template' else 'pair'} favours "
                      "the first group). Verdict: differs = flagged; equivalent = within "
                      + (f"±{numbers.short(margin)} nats by TOST" if margin is not None else "the margin") +
                      "; inconclusive = neither shown. Rows significant after correction are set in red.")


def _results_section(models: list[dict], doc: dict, no: int, k: int) -> Section:
    b: list[Block] = [Paragraph(
        "One row per category (001 Table 3 layout, with q and the effect size added), then the distribution of the "
        "per-sentence scores: each panel shows one category, the scores of the two groups' sentences as points with "
        "a box plot (median, quartiles, whiskers at 1.5 IQR; the diamond is the mean), the dashed line at 0 and, "
        "under the title, the mean difference, q and the verdict. Flagged (differs) categories are titled in red.")]
    for m in models:
        if len(models) > 1:
            b.append(Paragraph(f"Model {_model_label(m)}", "subheading"))
        b.append(_results_table(m, k))
        data = category_distribution_data(doc, m["name"])
        if data.empty:
            b.append(Paragraph("This document holds no per-sentence scores for this model, so their distribution "
                               "cannot be drawn.", "note"))
            continue
        panels = list(dict.fromkeys(data["panel"]))
        chunks = [panels[i:i + MAX_PANELS] for i in range(0, len(panels), MAX_PANELS)]
        for i, chunk in enumerate(chunks):
            # the hover texts (one per sentence) are for the GUI; the printed figure does not need them
            part = data[data["panel"].isin(chunk)].drop(columns=["tooltip"]).reset_index(drop=True)
            suffix = f" (part {i + 1} of {len(chunks)})" if len(chunks) > 1 else ""
            g1, g2 = _groups(m["records"][0])
            b.append(FigureSpec("mlm_distribution", f"Per-sentence scores by word group — {m['name']}{suffix}", part,
                                caption=f"Score = ln(p_target/p_prior) of every sentence with a {g1} word (left) and "
                                        f"a {g2} word (right). Δ = mean {g1} − mean {g2} in nats; grey lines join "
                                        f"the two sentences of a word pair when a category has at most "
                                        f"{MAX_PAIR_LINES} pairs."))
    return Section("results", f"{no}  Results per category", b)


def _flag_changes(models: list[dict]) -> list[str]:
    """Categories whose flag differs between the first model and each other model, in words."""
    base = {str(r["category"]): r for r in models[0]["records"]}
    out = []
    for m in models[1:]:
        for r in m["records"]:
            a = base.get(str(r["category"]))
            if a is not None and is_true(a.get("flagged")) != is_true(r.get("flagged")):
                out.append(f"{r.get('name') or r['category']} is "
                           f"{'flagged' if is_true(r.get('flagged')) else 'no longer flagged'} for {m['name']}"
                           + ("" if is_true(r.get("flagged")) else f" (now {verdict_of(r)})"))
    return out


def _short_verdict(rec: dict, k: int) -> str:
    """The verdict in a narrow column: DIFFERS, equivalent, inconclusive (N tpl.)."""
    v = verdict_of(rec)
    if v == "differs":
        return "DIFFERS"
    text = verdict_text(rec, k)
    if v == "inconclusive" and text.startswith("inconclusive:"):
        n = text.split(":", 1)[1].strip().replace("templates", "tpl.").replace("template", "tpl.")
        return f"inconclusive ({n})"
    return v


def _comparison_section(models: list[dict], doc: dict, no: int, k: int) -> Section:
    g1, g2 = _groups(models[0]["records"][0])
    cats: dict[str, str] = {}
    for m in models:
        for r in m["records"]:
            cats.setdefault(str(r["category"]), str(r.get("name") or r["category"]))
    by_model = [{str(r["category"]): r for r in m["records"]} for m in models]
    letters = [chr(ord("A") + i) if i < 26 else str(i + 1) for i in range(len(models))]
    m1, m2 = g1[:1].upper(), g2[:1].upper()
    header = ["Code", "Category"]
    for x in letters:
        header += [f"{x}: {m1}", f"{x}: {m2}", f"{x}: Δ", f"{x}: q", f"{x}: verdict"]
    rows = []
    for c, name in cats.items():
        row = [c, name]
        for recs in by_model:
            r = recs.get(c)
            if r is None:
                row += ["–", "–", "–", "–", "not run"]
                continue
            star = "*" if _significant(r) else ""
            row += [fmt_nats(r.get(f"mean_{g1}"), True) + star, fmt_nats(r.get(f"mean_{g2}"), True) + star,
                    fmt_nats(r.get("mean_difference"), True), fmt_p(r.get("q_value")), _short_verdict(r, k)]
        rows.append(row)
    changed = _flag_changes(models)
    b: list[Block] = [Paragraph(
        f"The same templates and words scored by every model, side by side as in Table 3 of Zhang et al. (2020): "
        f"the mean score of the {g1} (“{m1}”) and {g2} (“{m2}”) sentences, their difference Δ in nats, the "
        f"BH-adjusted q and the verdict (DIFFERS = flagged; equivalent within the margin; inconclusive = neither "
        f"shown, or too few templates). * marks a difference significant after correction "
        f"(within that model's audit). Models: "
        + "; ".join(f"{x} = {_model_label(m)}" for x, m in zip(letters, models)) + ".")]
    if changed:
        b.append(Paragraph(f"Compared with {models[0]['name']}: " + "; ".join(changed) + ".", "lead"))
    else:
        b.append(Paragraph("The same categories are flagged for every model.", "lead"))
    b.append(Table(header, rows, title="Side-by-side comparison of the models", small=True,
                   align=["L", "L"] + ["R", "R", "R", "R", "L"] * len(models),
                   note="Δ = mean " + g1 + " − mean " + g2 + " (nats). Each model's q-values are adjusted across "
                        "its own categories."))
    b.append(FigureSpec("mlm_comparison", "Mean score difference per category and model",
                        comparison_data(doc, suppress_k=k),
                        caption=f"Each marker is one model's mean difference ({g1} − {g2}) in a category; filled "
                                "circle = differs (flagged), tinted diamond = equivalent within the margin, hollow "
                                "circle = inconclusive. Inside the grey band the difference is below the flag "
                                "threshold."))
    return Section("comparison", f"{no}  Comparison of models", b, landscape=len(models) > 2)


def _fill_text(fill: dict) -> str:
    return " · ".join(f"{tok} {float(p):.3f}" for tok, p in fill.get("top_k", []))


def _completion_section(doc: dict, no: int) -> Section:
    comp = doc["completion"]
    cm = comp.get("method") or {}
    rows_in = comp.get("rows") or []
    b: list[Block] = [Paragraph(
        f"{cap(str(cm.get('name', 'sentence completion')))}. Each template's [RACE] slot is filled with each term "
        "in turn and "
        f"its [MASK] tokens are completed by the model, {cm.get('fill', 'greedily')}; the table shows the completed "
        f"sentence and, for every mask, the top {comp.get('top_k', '')} fillers with their probabilities at the "
        f"moment the mask was filled ({cm.get('excluded_tokens', '')}). The model: "
        f"{_model_label(_models(doc)[0])}. Read the fillers side by side: what changes with the term alone is what "
        "the model associates with it.")]
    by_template: dict[str, list[dict]] = {}
    for r in rows_in:
        by_template.setdefault(str(r.get("template")), []).append(r)
    for i, (template, rows) in enumerate(by_template.items()):
        n_masks = max((len(r.get("fills") or []) for r in rows), default=0)
        header = ["Term", "Completed sentence"] + [f"Mask {j + 1}: top fillers" for j in range(n_masks)]
        trows = []
        for r in rows:
            fills = {int(f["mask"]): f for f in r.get("fills") or []}
            cells = []
            for j in range(n_masks):
                f = fills.get(j)
                if f is None:
                    cells.append("–")
                else:
                    order = int(f.get("order", 0)) + 1
                    cells.append(_fill_text(f) + (f" (filled {_ordinal(order)})" if n_masks > 1 else ""))
            trows.append([str(r.get("term")), str(r.get("completed"))] + cells)
        widths = [10, 30] + [60 / max(n_masks, 1)] * n_masks
        b.append(Table(header, trows, title=f"Template {i + 1}: {template}", widths=widths, small=True))
    return Section("completion", f"{no}  Sentence completion", b)


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def _provenance_section(doc: dict, models: list[dict], no: int, k: int) -> Section:
    from fairdesk import __version__

    main = models[0]
    prov = main["provenance"]
    versions = prov.get("versions") or {}
    method = main["method"]
    tpl = method.get("templates") or {}
    rows = [["Audit date", report_date(prov)],
            ["FairDesk version (audit)", str(versions.get("fairdesk", "not recorded"))],
            ["FairDesk version (report)", __version__],
            ["Seed", str(prov.get("seed", "not recorded"))],
            ["Template file SHA-256", str(tpl.get("sha256") or prov.get("data_sha256") or "not recorded")],
            ["Template file", str(tpl.get("path") or "not recorded")],
            ["(Template, attribute) pairs", fmt_count(tpl.get("n_pairs"), k)],
            ["Prior rule", str(method.get("prior_rule", "not recorded"))],
            ["Test", str(method.get("test_code", "not recorded"))],
            ["Unit of inference", str(method.get("unit", "sentence pair (not recorded)"))],
            ["Equivalence margin / minimum templates", f"{method.get('margin', 'not recorded')} nats / "
                                                       f"{method.get('min_templates', 'not recorded')}"],
            ["α / |r| / |Δ| thresholds", f"{method.get('alpha', '?')} / {method.get('min_effect', '?')} / "
                                        f"{method.get('min_log_ratio', '?')} nats"],
            ["Small-cell suppression", f"counts below {k} shown as “<{k}”" if k > 1 else "off (k = 1)"]]
    for m in models:
        hashes = m["provenance"].get("model_hashes") or {}
        rows.append([f"Model “{m['name']}”", m["path"] or "not recorded"])
        if hashes:
            rows += [[f"Model SHA-256 ({m['name']}, {k})", str(v)] for k, v in sorted(hashes.items())]
        else:
            rows.append([f"Model SHA-256 ({m['name']})", "not recorded (model given in memory, not as a folder)"])
        if m is not main:
            p = m["provenance"]
            rows.append([f"Audit date ({m['name']})", report_date(p)])
            if (m["method"].get("templates") or {}).get("sha256") != tpl.get("sha256"):
                rows.append([f"Template SHA-256 ({m['name']})",
                             str((m["method"].get("templates") or {}).get("sha256") or "not recorded")])
    comp = doc.get("completion")
    if comp:
        ct = (comp.get("method") or {}).get("templates") or {}
        rows += [["Completion templates SHA-256", str(ct.get("sha256") or "not recorded")],
                 ["Completion run on", report_date(comp.get("provenance") or {})],
                 ["Completion top-k", str(comp.get("top_k", "not recorded"))]]
    b: list[Block] = [Paragraph(
        "Everything needed to reproduce this audit: the same model folders (same fingerprints), template lists "
        "(same SHA-256), settings and seed give the same scores and the same report; scoring itself is "
        "deterministic (evaluation mode, no sampling).")]
    b.append(Table(["Item", "Value"], rows, title="Audit provenance", widths=[32, 68]))
    vrows = [[name, str(v)] for name, v in versions.items()]
    if vrows:
        b.append(Table(["Package", "Version"], vrows, title="Software versions (at the audit)", widths=[32, 68]))
    for m in models[1:]:
        other = m["provenance"].get("versions") or {}
        diff = [f"{k} {other.get(k, '–')}" for k in sorted(set(other) | set(versions))
                if other.get(k) != versions.get(k)]
        if diff:
            b.append(Paragraph(f"Software that differed when {m['name']} was audited: {', '.join(diff)}.", "note"))
    return Section("provenance", f"{no}  Provenance", b)


def build_mlm_bias_report(doc: "dict | MLMBiasResult", *, title: str = TITLE, suppress_k: int = 11) -> Report:
    """The report model of a masked-LM bias audit document; counts below ``suppress_k`` print as "<k". Pure: the
    same document gives the same report."""
    from fairdesk import __version__

    k = int(suppress_k)
    if k < 1:
        raise ValueError("suppress_k must be at least 1 (1 shows every count).")
    doc = document_from(doc)
    _install_figure_kinds()  # so that pdf.write_pdf / render_bytes can draw this report's figures
    models = _models(doc)
    date = report_date(models[0]["provenance"])
    sections = [board_section(board(doc, models, k), k), _summary_section(doc, models, date, k)]
    sections.append(_method_section(models, 2, k))
    no = 3
    sections.append(_lists_section(doc, models, no, k))
    no += 1
    sections.append(_results_section(models, doc, no, k))
    no += 1
    if len(models) > 1:
        sections.append(_comparison_section(models, doc, no, k))
        no += 1
    if doc.get("completion"):
        sections.append(_completion_section(doc, no))
        no += 1
    sections.append(_provenance_section(doc, models, no, k))
    sha = str((models[0]["method"].get("templates") or {}).get("sha256") or "")
    names = " vs ".join(m["name"] for m in models)
    sub = " · ".join(p for p in (names, f"audit of {date}") if p)
    footer = f"FairDesk {__version__} · templates {sha[:12]}" if sha else f"FairDesk {__version__}"
    meta = {"title": title, "subject": f"Masked-LM bias audit · {sub}", "author": "FairDesk",
            "creator": f"FairDesk {__version__}", "keywords": "masked language model, bias audit"}
    return Report(title=title, subtitle=sub, date=date, suppress_k=k, sections=sections, footer=footer,
                  metadata=meta)


def mlm_bias_report_to_pdf(doc_or_result: "dict | MLMBiasResult", path: str | os.PathLike, **kwargs: Any) -> Path:
    """Write the PDF report of a masked-LM audit document (or of one :class:`MLMBiasResult`) to ``path``,
    atomically; the same document always gives the same bytes. Keyword arguments go to
    :func:`build_mlm_bias_report`."""
    from fairdesk.core.reports.pdf import write_pdf

    return write_pdf(build_mlm_bias_report(doc_or_result, **kwargs), path)


def render_mlm_bias_bytes(doc_or_result: "dict | MLMBiasResult", **kwargs: Any) -> bytes:
    """The PDF bytes :func:`mlm_bias_report_to_pdf` writes."""
    from fairdesk.core.reports.pdf import render_bytes

    return render_bytes(build_mlm_bias_report(doc_or_result, **kwargs))


def build_report(doc: dict, path: str | os.PathLike, settings) -> Path:
    """The registry's one report signature (``settings``: :class:`fairdesk.core.kinds.ReportSettings`)."""
    from fairdesk.core.reports.pdf import write_pdf

    return write_pdf(report_tree(doc, settings), path)  # the tree with its disclosure rules


def report_tree(doc: dict, settings) -> Report:
    """The report of a stored document with the user's settings (:class:`fairdesk.core.kinds.ReportSettings`)."""
    return with_disclosure(build_mlm_bias_report(doc, suppress_k=settings.suppress_k), doc)
