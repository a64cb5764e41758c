"""Disclosure control: the one step every artefact meant to leave the workstation passes through.

:func:`release` turns a stored audit document into a releasable copy *before* anything is rendered, so the PDF,
the HTML report, the model card (JSON and Markdown), the exports and ``--release-json`` all show the same,
already-protected numbers. The analyst's working document (the project, ``--json``) keeps the exact counts.

What a releasable copy holds, for small-cell threshold k (counts 1 … k − 1 are "small"):

* **Primary suppression.** A small count is ``None`` (printed "<k").
* **Units, at two levels.** A group of a group audit (of a task and an attribute, or an intersection) is hidden
  *whole* when a count describing it as a whole — its size, patients, positives or negatives — is small: all its
  counts are ``None``, because the others (size − positives …) would give the small one back. When only a cell is
  small (TP/FP/FN/TN, a rate's numerator or its complement), its size, positives and prevalence stay, its cells
  are ``None`` and its rates are banded. Bins of a continuous attribute are hidden whole.
* **Complementary suppression.** Within every partition a reader can total (the groups of one attribute in one task,
  the groups of an intersection sharing one value, the bins of a continuous attribute, the groups of a monitor's
  attribute in one period), more units are hidden — the smallest first, whole for a margin, cells for a cell type —
  until no hidden small count follows from the partition's total minus the shown parts: each count type's hidden
  small cells must leave at least two whole values possible, and their sum may not be small (:func:`partition_safe`).
* **Task totals.** A task's own total (the sum over one attribute's groups) is a count as well: one of rows,
  positives or negatives from 1 to k − 1 withholds the task whole (its error-spread rows and bins, and the audit's
  row counts, which minus the other tasks would give it back); one of TP, FP, FN or TN withholds every group's cells.
  Such a task's rates are grid bands only.
* **Rates of hidden units** are shown as a band on a fixed grid whose width w (0.1, 0.2, 0.25, 0.5 or 1) spans at
  least 2k cases of the rate's denominator (``rate_band``), and the number stored in ``rate`` is the band's middle;
  a gap involving such a rate is that middle minus the other rate (``gap_band``), and its interval is withheld.
  A band so wide cannot narrow a hidden count below what "<k" already says.
* **Slices** with fewer than k rows (on either half of the data) are removed: never described.
* **Other kinds** decide which counts are of people: the monitor's group-periods, the texts of a ctf audit, the
  images of an image audit, the rows of the age-independent learners' folds; a masked-LM audit counts templates,
  masks and scores, not people, and is exempt (each says so in its rules).
* **Precision.** Every other number is rounded to the report's precision (3 decimals; p- and q-values to 2
  significant digits), so no estimate is printed at full precision.

The rules applied are recorded in ``doc["disclosure"] = {"k", "rules", "for_release": True}``; every artefact
prints them. :func:`release_table` does the same for one table (GUI copy and export).
"""
from __future__ import annotations

import copy
import math
import re
from collections import defaultdict

#: keys whose values count patients, rows, cases or other people-level units (suppressed when small)
COUNT_KEYS = frozenset({
    "n", "n_patients", "n_positive", "n_negative", "tn", "fp", "fn", "tp", "numerator", "denominator", "positives",
    "negatives", "cases", "rest_n", "rest_cases", "discovery_n", "discovery_cases", "discovery_rest_n",
    "discovery_rest_cases", "n_rows", "n_eval_rows", "n_test", "n_notes", "n_windows", "n_images", "n_units",
    "n_participants", "n_pairs", "n_templates", "n_sentences", "truncated_notes", "notes_at_window_cap",
    "discovery_rows", "confirmation_rows", "discovery_patients", "confirmation_patients", "n_cases", "n_texts",
    "label_1", "held_out", "size", "count", "patients", "rows", "labelled", "previous_n", "participants", "n_examples", "n_within_max_tokens",
    "n_readable", "n_audited", "n_missing_attribute"})
#: float keys rounded to significant digits rather than decimals (probabilities spanning many magnitudes)
P_KEYS = frozenset({"p_value", "q_value", "p_equivalence", "q_equivalence", "p", "q", "lr_stat"})
#: identifiers, settings and provenance: never rounded
KEEP_KEYS = frozenset({"provenance", "plan", "method", "thresholds", "threshold", "seed", "version", "versions",
                       "disclosure", "settings", "split", "margin", "alpha", "ci_level"})
DIGITS = 3
WIDTHS = (0.1, 0.2, 0.25, 0.5, 1.0)


def _small(value, k: int) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and 1 <= value < k


def _int(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return int(round(f)) if math.isfinite(f) else None


def band_width(denominator, k: int) -> float:
    """The band width of a hidden rate: the smallest of 0.1, 0.2, 0.25, 0.5, 1 spanning at least 2k cases."""
    d = _int(denominator) or 0
    return next((w for w in WIDTHS if w * d >= 2 * k), 1.0)


def band(numerator, denominator, k: int) -> tuple[float, float]:
    """The grid band [j·w, (j+1)·w] holding numerator/denominator (the whole 0–1 range when either is unknown)."""
    num, den = _int(numerator), _int(denominator)
    if num is None or not den:
        return (0.0, 1.0)
    w = band_width(den, k)
    j = min(int(math.floor(num / den / w + 1e-12)), int(round(1 / w)) - 1)
    return (round(j * w, 2), round((j + 1) * w, 2))


def primary_band(numerator, denominator, k: int) -> tuple[float, float] | None:
    """The band of a rate whose numerator (or complement) is from 1 to k − 1: exactly what "<k" already says
    (1/den to (k − 1)/den, or its mirror), rounded outward to 3 decimals; None when neither is small or den < k."""
    num, den = _int(numerator), _int(denominator)
    if num is None or den is None or den < k:
        return None
    if 1 <= num < k:
        lo, hi = 1 / den, (k - 1) / den
    elif 1 <= den - num < k:
        lo, hi = (den - k + 1) / den, (den - 1) / den
    else:
        return None
    return (math.floor(lo * 1000) / 1000, math.ceil(hi * 1000) / 1000)


def partition_safe(hidden_values: list, k: int) -> bool:
    """Whether the hidden cells of one partition with a known total keep every small one ambiguous: a reader knows
    the hidden cells' sum S, that a "<k" cell lies in 1 … k − 1 and that another hidden cell is at least 0. S itself
    counts the hidden cells' union, so it may not be from 1 to k − 1 either."""
    values = [_int(v) or 0 for v in hidden_values]
    primaries = [v for v in values if 1 <= v < k]
    if not primaries:
        return True
    s, p = sum(values), len(primaries)
    if s < k:  # the hidden cells' sum is known: itself a count from 1 to k − 1 (of their union)
        return False
    if len(values) > p:  # another hidden cell (≥ 0) absorbs: each small one ranges over 1 … S − (p − 1)
        return s - p + 1 >= 2
    return p >= 2 and p < s < p * (k - 1)


def _complement(units: dict, partitions: list[list], count_types, k: int, size) -> None:
    """Hide more units of each partition (smallest first) until every count type is :func:`partition_safe`.
    ``units``: key → {"counts": {type: value}, "hidden": bool}."""
    changed = True
    while changed:
        changed = False
        for part in partitions:
            for t in count_types:
                hidden = [units[u]["counts"].get(t) for u in part if units[u]["hidden"]]
                if partition_safe(hidden, k):
                    continue
                shown = sorted((u for u in part if not units[u]["hidden"]), key=lambda u: size(units[u]))
                if not shown:
                    continue
                units[shown[0]]["hidden"] = True
                changed = True


# ----------------------------------------------------------------------------------------------------------------
# Group audits


def _group_units(doc: dict, k: int) -> dict:
    """Every (task, attribute, group) of a group audit with its counts, hidden when any of them is small."""
    units: dict = {}
    for g in doc.get("groups") or []:
        n, pos = _int(g.get("n")), _int(g.get("n_positive"))
        counts = {"n": n, "n_patients": _int(g.get("n_patients")), "n_positive": pos,
                  "negatives": None if n is None or pos is None else n - pos,
                  **{c: _int(g.get(c)) for c in ("tn", "fp", "fn", "tp")}}
        units[(g.get("task"), g.get("attribute"), g.get("group"))] = {"counts": counts, "hidden": False}
    for d in doc.get("dropped") or []:
        key = (d.get("task"), d.get("attribute"), d.get("group"))
        units.setdefault(key, {"counts": {"n": _int(d.get("n"))}, "hidden": False})
    for r in doc.get("records") or []:  # numerators and denominators of every rate
        key = (r.get("task"), r.get("attribute"), r.get("group"))
        unit = units.setdefault(key, {"counts": {"n": _int(r.get("n"))}, "hidden": False})
        num, den = _int(r.get("numerator")), _int(r.get("denominator"))
        unit["counts"][f"{r.get('metric')}_numerator"] = num
        unit["counts"][f"{r.get('metric')}_complement"] = None if num is None or den is None else den - num
    for unit in units.values():
        unit["cells"] = any(_small(v, k) for v in unit["counts"].values())
        unit["hidden"] = any(_small(unit["counts"].get(c), k) for c in MARGINS)
    return units


#: the counts that describe a group as a whole; the others (TP, FP, FN, TN, a rate's numerator and its complement)
#: are its cells
MARGINS = ("n", "n_patients", "n_positive", "negatives")


def _complement_cells(units: dict, partitions: list[list], count_types, k: int, size) -> None:
    """:func:`_complement` with two levels: a margin count type (:data:`MARGINS`) is hidden in a unit withheld
    whole (``hidden``), any other count type in a unit whose cells are withheld (``cells``); a partition unsafe for
    a margin withholds its smallest shown unit whole, one unsafe for a cell type withholds only its cells."""
    def hidden_for(u, t):
        return u["hidden"] if t in MARGINS else u["cells"]

    changed = True
    while changed:
        changed = False
        for part in partitions:
            for t in count_types:
                if partition_safe([units[u]["counts"].get(t) for u in part if hidden_for(units[u], t)], k):
                    continue
                shown = sorted((u for u in part if not hidden_for(units[u], t)), key=lambda u: size(units[u]))
                if not shown:
                    continue
                units[shown[0]]["cells"] = True
                if t in MARGINS:
                    units[shown[0]]["hidden"] = True
                changed = True


def _group_partitions(units: dict) -> list[list]:
    parts = defaultdict(list)
    for key in units:
        task, attr, group = key
        parts[(task, attr)].append(key)
        if isinstance(attr, str) and " × " in attr and isinstance(group, str):
            values = group.split(" & ")  # how the group audit labels an intersection's cells
            for i, v in enumerate(values):  # the intersection's cells sharing one value add up to that group
                parts[(task, attr, i, v)].append(key)
    return list(parts.values())


def _small_tasks(units: dict, k: int) -> tuple[set, set]:
    """Tasks whose own total (the sum over one attribute's groups) is from 1 to k − 1: those with such a total of
    rows, positives or negatives (withheld as a whole), and those with such a total of TP, FP, FN or TN (every group's
    cells withheld)."""
    totals: dict = defaultdict(lambda: defaultdict(dict))
    for (task, attr, _group), u in units.items():
        if isinstance(attr, str) and " × " in attr:
            continue
        for t, v in u["counts"].items():
            if t in MARGINS or t in CELLS:
                cell = totals[task][t]
                cell[attr] = (cell.get(attr) or 0) + (_int(v) or 0)

    def small(task, types):
        return any(_small(v, k) for t, by in totals[task].items() if t in types for v in by.values())

    whole = {task for task in totals if small(task, MARGINS)}
    return whole, {task for task in totals if task not in whole and small(task, CELLS)}


#: a group's confusion counts
CELLS = ("tn", "fp", "fn", "tp")


def _release_groups(doc: dict, k: int) -> list[str]:
    units = _group_units(doc, k)
    withheld_tasks, cell_tasks = _small_tasks(units, k)
    for (task, _attr, _group), u in units.items():
        if task in withheld_tasks:
            u["hidden"] = u["cells"] = True
        elif task in cell_tasks:
            u["cells"] = True
    primary = sum(u["hidden"] for key, u in units.items() if key[0] not in withheld_tasks)
    primary_cells = {key for key, u in units.items() if u["cells"] and not u["hidden"]}
    count_types = sorted({t for u in units.values() for t in u["counts"]})
    _complement_cells(units, _group_partitions(units), count_types, k, size=lambda u: u["counts"].get("n") or 0)
    whole = {key for key, u in units.items() if u["hidden"]}
    hidden = {key for key, u in units.items() if u["cells"]}  # whole or cells: every rate of these is banded
    rules = []
    if withheld_tasks:
        names = ", ".join(str(t) for t in sorted(withheld_tasks, key=str))
        rules.append(f"Task(s) {names} have a total of rows, positives or negatives from 1 to "
                     f"{k - 1}: every count of the task, the rows behind its error spread and its bins are withheld, "
                     f"every rate is shown as a band at least 2 × {k} cases of its denominator wide, and the audit's "
                     "row counts are withheld too (they minus the shown tasks would give the task's rows).")
        prov = doc.get("provenance")
        if isinstance(prov, dict):
            for c in ("n_rows", "n_eval_rows"):
                if c in prov:
                    prov[c] = None
    if cell_tasks:
        names = ", ".join(str(t) for t in sorted(cell_tasks, key=str))
        rules.append(f"Task(s) {names} have a total of TP, FP, FN or TN from 1 to {k - 1}: every group of the task "
                     f"shows its size, positives and prevalence, with its TP, FP, FN and TN withheld and its rates "
                     f"shown as a band at least 2 × {k} cases of its denominator wide.")
    whole_groups = {key for key in whole if key[0] not in withheld_tasks}
    if whole_groups:
        rules.append(f"{len(whole_groups)} group(s) have all their counts withheld: {primary} with a size, positives "
                     f"or negatives from 1 to {k - 1}, {len(whole_groups) - primary} more so that no withheld count follows "
                     "from a total minus the shown groups (complementary suppression).")
    cells_only = hidden - whole - {key for key in hidden if key[0] in withheld_tasks | cell_tasks}
    if cells_only:
        first = len(cells_only & primary_cells)
        rules.append(f"{len(cells_only)} group(s) show their size, positives and prevalence but have their TP, FP, "
                     f"FN and TN withheld and their rates banded: {first} with one of those counts (or a rate's "
                     f"numerator or its complement) from 1 to {k - 1}, {len(cells_only) - first} more so that no "
                     "withheld count follows from a total minus the shown groups.")

    def is_hidden(task, attr, group) -> bool:
        return (task, attr, group) in hidden

    def is_whole(task, attr, group) -> bool:
        return (task, attr, group) in whole

    for g in doc.get("groups") or []:
        key = (g.get("task"), g.get("attribute"), g.get("group"))
        if is_hidden(*key):
            for c in ("tn", "fp", "fn", "tp"):
                g[c] = None
            g["withheld"] = True
        if is_whole(*key):
            for c in ("n", "n_patients", "n_positive"):
                g[c] = None
            g["prevalence"] = None
    for d in doc.get("dropped") or []:
        if is_whole(d.get("task"), d.get("attribute"), d.get("group")):
            d["n"] = None
    # a rate resting on a small count: the band "<k" allows; any other rate of a withheld group: a wide grid band
    # a withheld task: only grid bands (two "<k" bands of one group would pin a third count between them)
    bands = {(r.get("task"), r.get("attribute"), r.get("group"), r.get("metric")):
             (r.get("task") not in withheld_tasks | cell_tasks and primary_band(r.get("numerator"), r.get("denominator"), k))
             or band(r.get("numerator"), r.get("denominator"), k)
             for r in doc.get("records") or []}
    pooled = (doc.get("plan") or {}).get("gap_rule") in ("one-vs-rest", "to-overall")
    tested_den: dict = defaultdict(int)  # the denominators of the tested groups, by (task, attribute, metric)
    for r in doc.get("records") or []:
        if r.get("test_id") and _int(r.get("denominator")):
            tested_den[(r.get("task"), r.get("attribute"), r.get("metric"))] += _int(r.get("denominator"))
    banded = 0
    gaps: dict = {}
    for r in doc.get("records") or []:
        task, attr, metric = r.get("task"), r.get("attribute"), r.get("metric")
        me = is_hidden(task, attr, r.get("group"))
        other = r.get("comparison")
        other_hidden = isinstance(other, str) and is_hidden(task, attr, other)
        if pooled and me and r.get("comparison_rate") is not None:
            # the rest's rate over a known denominator is the total minus this group: a wide grid band too
            rest_den = tested_den[(task, attr, metric)] - (_int(r.get("denominator")) or 0)
            bands[(task, attr, other, metric)] = band(r["comparison_rate"] * rest_den, rest_den, k)
            other_hidden = True
        if me and r.get("rate") is not None:
            lo, hi = bands[(task, attr, r.get("group"), metric)]
            r["rate"], r["rate_band"] = round((lo + hi) / 2, 3), [lo, hi]
            banded += 1
        else:
            lo = hi = r.get("rate")
        if me:
            for c in ("n", "numerator", "denominator") if is_whole(task, attr, r.get("group")) else ("numerator",):
                r[c] = None
        if other_hidden and r.get("comparison_rate") is not None:
            olo, ohi = bands.get((task, attr, other, metric), (0.0, 1.0))
            r["comparison_rate"], r["comparison_rate_band"] = round((olo + ohi) / 2, 3), [olo, ohi]
        else:
            olo = ohi = r.get("comparison_rate")
        if (me or other_hidden) and r.get("gap") is not None and None not in (lo, hi, olo, ohi):
            r["gap_band"] = [round(lo - ohi, 3), round(hi - olo, 3)]
            r["gap"] = round((r["gap_band"][0] + r["gap_band"][1]) / 2, 3)
            r["ci_low"] = r["ci_high"] = None
            gaps[r.get("test_id")] = r
    for r in doc.get("records") or []:
        if r.get("task") in withheld_tasks and r.get("metric") == "delta_eo":
            r["n"] = None
    for b in doc.get("delta_bins") or []:
        if b.get("task") in withheld_tasks:
            for c in ("n", "n_positive", "fpr", "fnr"):
                b[c] = None
    for t in doc.get("tests") or []:
        r = gaps.get(t.get("test_id"))
        if r is not None:
            t["gap"], t["ci_low"], t["ci_high"] = r["gap"], None, None
            t["gap_band"] = r["gap_band"]
    if banded:
        rates_rule = (f"A rate resting on a count from 1 to {k - 1} is shown as the band that “<{k}” allows; any "
                      f"other rate of a withheld group as a band on a fixed grid at least 2 × {k} cases of its "
                      "denominator wide; a gap involving either is shown as the band minus the other rate, without "
                      "its interval.")
        rules.append(rates_rule)
    for d in doc.get("discrimination") or []:
        if is_whole(d.get("task"), d.get("attribute"), d.get("group")):
            d["n"] = d["n_positive"] = None
    for c in doc.get("calibration") or []:
        if is_whole(c.get("task"), c.get("attribute"), c.get("group")):
            c["n"] = c["n_positive"] = None
    kept = []
    sizes = {(g.get("task"), g.get("attribute"), g.get("group")): (_int(g.get("n_positive")), _int(g.get("n")))
             for g in doc.get("groups") or []}
    thinned = 0
    for c in doc.get("curves") or []:
        if is_hidden(c.get("task"), c.get("attribute"), c.get("group")):
            continue  # a withheld group's curves would give its counts back bin by bin
        if c.get("curve") in ("roc", "pr", "operating_roc", "operating_pr"):
            pos, n = sizes.get((c.get("task"), c.get("attribute"), c.get("group")), (None, None))
            if pos is None or n is None:
                continue  # counts behind the points unknown here: leave the curve out
            thinned += _thin_curve(c, pos, n - pos, k)
        if isinstance(c.get("n"), list):
            for i, (m, y) in enumerate(zip(c["n"], c.get("y") or [])):
                found = None if m is None or y is None else round(m * y)
                if _small(m, k) or _small(found, k) or (found is not None and _small(m - found, k)):
                    c["n"][i] = None
                    for key in ("y", "ci_low", "ci_high"):
                        if isinstance(c.get(key), list) and i < len(c[key]):
                            c[key][i] = None
        kept.append(c)
    if "curves" in doc and len(kept) < len(doc["curves"]):
        rules.append("The calibration, ROC and precision–recall curves of withheld groups are left out; reliability "
                     "bins resting on a count from 1 to k − 1 are blank.")
    if thinned:
        rules.append(f"ROC and precision–recall curves keep only points whose true- and false-positive counts, their "
                     f"complements and their steps from the previous point are each 0 or at least {k} "
                     f"({thinned} points left out).")
    if "curves" in doc:
        doc["curves"] = kept
    rules += _release_bins(doc, k)
    # the words about a withheld group (warnings, reasons) must not carry its counts either
    for key in hidden:
        task, attr, group = (str(x) for x in key)
        doc["warnings"] = [_scrub(w) if f"'{task}'" in w and f"{attr} = '{group}'" in w else w
                           for w in doc.get("warnings") or []]
    for table in ("records", "groups", "dropped", "discrimination", "calibration"):
        for r in doc.get(table) or []:
            if is_hidden(r.get("task"), r.get("attribute"), r.get("group")) and isinstance(r.get("reason"), str):
                r["reason"] = _scrub(r["reason"])
    return rules


_COUNT_WORDS = re.compile(r"(?<![\w.<])(?:only )?\d[\d,]*(?= (?:rows?|patients?|cases?|positives?|negatives?|"
                          r"positive cases?|negative cases?|people)\b)")
_THRESHOLD = re.compile(r"(?:fewer than|at least|more than|less than|< ?)\s*$")


def _scrub(text: str) -> str:
    """``text`` with every count of rows, patients or cases withheld ("only 25 rows" → "a withheld number of
    rows"); thresholds ("fewer than 30 rows") are settings and stay."""
    def repl(m: re.Match) -> str:
        if _THRESHOLD.search(m.string, 0, m.start()):
            return m.group(0)
        return "a withheld number of"
    return _COUNT_WORDS.sub(repl, text)


def _curve_counts(c: dict, pos: int, neg: int) -> list:
    """(TP, FP) behind each point of a ROC curve (x = FPR, y = TPR) or a precision–recall curve (x = recall,
    y = precision) of a group with ``pos`` positives and ``neg`` negatives, as a reader of the 3-decimal points would
    compute them; None where a point cannot say."""
    out = []
    for x, y in zip(c.get("x") or [], c.get("y") or []):
        if x is None or y is None:
            out.append(None)
            continue
        x, y = round(x, 3), round(y, 3)  # as the released copy prints them
        if c["curve"] in ("roc", "operating_roc"):
            out.append((round(y * pos), round(x * neg)))
        else:
            tp = round(x * pos)
            out.append((tp, round(tp / y - tp) if y > 0 else None) if tp else (0, None))
    return out


def _thin_curve(c: dict, pos: int, neg: int, k: int) -> int:
    """Keep the points of a ROC / precision–recall curve whose counts a reader could not turn into a small cell:
    TP and FP, P − TP and N − FP each 0 or ≥ k, and each step from the previous kept point 0 or ≥ k in both (any two
    kept points then differ by 0 or ≥ k). A precision of 1 at recall 0 (no one flagged) stays. Returns the number of
    points left out."""
    def ok(v, total):
        return v is not None and not _small(v, k) and not _small(total - v, k)

    keep, last, dropped = [], None, 0
    for i, counts in enumerate(_curve_counts(c, pos, neg)):
        good = counts is not None and ok(counts[0], pos) and (counts[1] is None and counts[0] == 0
                                                              or ok(counts[1], neg))
        if good and last is not None:
            good = all(b is None or a is None or not _small(abs(a - b), k) for a, b in zip(counts, last))
        if good:
            keep.append(i)
            last = counts
        else:
            dropped += 1
    for key in ("x", "y", "threshold"):
        if isinstance(c.get(key), list):
            c[key] = [c[key][i] for i in keep if i < len(c[key])]
    return dropped


def _release_bins(doc: dict, k: int) -> list[str]:
    bins = doc.get("delta_bins") or []
    units = {}
    for i, b in enumerate(bins):
        n, pos = _int(b.get("n")), _int(b.get("n_positive"))
        neg = None if n is None or pos is None else n - pos
        fn = None if pos is None or b.get("fnr") is None else round(b["fnr"] * pos)
        fp = None if neg is None or b.get("fpr") is None else round(b["fpr"] * neg)
        counts = {"n": n, "n_positive": pos, "negatives": neg, "fn": fn, "fp": fp,
                  "tp": None if fn is None else pos - fn, "tn": None if fp is None else neg - fp}
        units[i] = {"counts": counts, "hidden": any(_small(v, k) for v in counts.values())}
    if not any(u["hidden"] for u in units.values()):
        return []
    parts = defaultdict(list)
    for i, b in enumerate(bins):
        parts[(b.get("task"), b.get("attribute"), b.get("bins_used"))].append(i)
    _complement(units, list(parts.values()), ("n", "n_positive", "negatives", "fn", "fp", "tp", "tn"), k,
                size=lambda u: u["counts"].get("n") or 0)
    for i, b in enumerate(bins):
        if units[i]["hidden"]:
            for key in ("n", "n_positive", "fpr", "fnr"):
                b[key] = None
    return [f"Bins of a continuous attribute with a count from 1 to {k - 1} (and, where a total would give one "
            "back, their neighbours) are blank."]


# ----------------------------------------------------------------------------------------------------------------
# Slice audits

_SLICE_DENOMINATOR = {"recall": "cases", "fnr": "cases", "specificity": "negatives", "fpr": "negatives"}


def _slice_counts(s: dict, prefix: str = "") -> dict:
    n, cases = _int(s.get(prefix + "n")), _int(s.get(prefix + "cases"))
    negatives = None if n is None or cases is None else n - cases
    den = {"cases": cases, "negatives": negatives}.get(_SLICE_DENOMINATOR.get(s.get("metric"), ""), n)
    value = s.get(prefix + "value")
    num = None if den is None or value is None else round(value * den)
    return {"n": n, "cases": cases, "negatives": negatives, "numerator": num,
            "complement": None if num is None else den - num, "denominator": den}


def _release_slices(doc: dict, k: int) -> list[str]:
    slices = doc.get("slices") or []
    keep = [s for s in slices if (_int(s.get("n")) or 0) >= k and (_int(s.get("discovery_n")) or k) >= k]
    rules = []
    if len(keep) < len(slices):
        rules.append(f"Slices with fewer than {k} rows are not described.")
    doc["slices"] = keep
    banded = False
    for s in keep:
        # the rest's denominator (the discovery half's rest is about as large as the confirmation half's)
        rest = {"n": _int(s.get("rest_n")), "cases": _int(s.get("rest_cases"))}
        rest["negatives"] = None if None in (rest["n"], rest["cases"]) else rest["n"] - rest["cases"]
        rest_den = rest.get(_SLICE_DENOMINATOR.get(s.get("metric"), "n"), rest["n"])
        for prefix in ("", "discovery_"):
            counts = _slice_counts(s, prefix)
            if not any(_small(v, k) for v in counts.values()):
                continue
            banded = True
            if s.get(prefix + "value") is not None:
                lo, hi = (primary_band(counts["numerator"], counts["denominator"], k) or
                          band(counts["numerator"], counts["denominator"], k))
                s[prefix + "value"], s[prefix + "value_band"] = round((lo + hi) / 2, 3), [lo, hi]
                # the rest's rate over a known total gives the slice's numerator back: a grid band too
                r = s.get(prefix + "rest_value")
                if r is not None:
                    w = band_width(rest_den, k)
                    j = min(int(math.floor(r / w + 1e-12)), int(round(1 / w)) - 1)
                    rlo, rhi = round(j * w, 2), round((j + 1) * w, 2)
                    s[prefix + "rest_value"], s[prefix + "rest_value_band"] = round((rlo + rhi) / 2, 3), [rlo, rhi]
                    if s.get(prefix + "gap") is not None:
                        s[prefix + "gap_band"] = [round(lo - rhi, 3), round(hi - rlo, 3)]
                        s[prefix + "gap"] = round((s[prefix + "gap_band"][0] + s[prefix + "gap_band"][1]) / 2, 3)
            for c in ("cases", "rest_cases", "rest_n", "ci_low", "ci_high"):
                if prefix + c in s:
                    s[prefix + c] = None
    if banded:
        rules.append(f"A slice resting on a count from 1 to {k - 1} shows its cases as withheld, its rate as the band "
                     f"“<{k}” allows (or a band at least 2 × {k} cases wide), the rest's rate as a band at least "
                     f"2 × {k} cases wide and its gap as the difference of the two bands, without its interval.")
    return rules


# ----------------------------------------------------------------------------------------------------------------
# Monitor

def _monitor_units(doc: dict, k: int) -> dict:
    """Every (task, attribute, group, period) of a monitor with the counts of people it shows or implies: per
    metric its cases, found (rate × cases), missed, patients; from the context its rows, labelled rows, unlabelled
    rows, positives (prevalence × labelled), negatives, flagged (flagged share × rows) and unflagged rows."""
    units: dict = {}

    def unit(r):
        key = (r.get("task"), r.get("attribute"), r.get("group"), r.get("period"))
        return units.setdefault(key, {"counts": {}, "hidden": False})

    for r in doc.get("monitor") or []:
        u, m = unit(r)["counts"], str(r.get("metric"))
        n, rate = _int(r.get("n")), r.get("rate")
        num = None if n is None or rate is None else int(round(rate * n))
        u[f"{m}_n"], u[f"{m}_found"] = n, num
        u[f"{m}_missed"] = None if num is None else n - num
        u[f"{m}_patients"] = _int(r.get("patients"))
    for c in doc.get("context") or []:
        u = unit(c)["counts"]
        rows, lab = _int(c.get("rows")), _int(c.get("labelled"))
        pos = None if lab is None or c.get("prevalence") is None else int(round(c["prevalence"] * lab))
        flagged = None if rows is None or c.get("flagged") is None else int(round(c["flagged"] * rows))
        u.update({"rows": rows, "labelled": lab, "unlabelled": None if None in (rows, lab) else rows - lab,
                  "positives": pos, "negatives": None if None in (lab, pos) else lab - pos,
                  "flagged": flagged, "unflagged": None if None in (rows, flagged) else rows - flagged})
    for u in units.values():
        c = u["counts"]
        # flagged rows without a label: the positive prediction rate's flags minus those of recall and specificity
        if None not in (c.get("parity_found"), c.get("recall_found"), c.get("specificity_missed")):
            c["flagged_unlabelled"] = c["parity_found"] - c["recall_found"] - c["specificity_missed"]
        u["hidden"] = any(_small(v, k) for v in c.values())
    return units


def _grid_band(rate, denominator, k: int) -> tuple[float, float]:
    w = band_width(denominator, k)
    j = min(int(math.floor(rate / w + 1e-12)), int(round(1 / w)) - 1)
    return (round(j * w, 2), round((j + 1) * w, 2))


def _release_monitor(doc: dict, k: int) -> list[str]:
    units = _monitor_units(doc, k)
    primary = sum(u["hidden"] for u in units.values())
    parts = defaultdict(list)
    for key in units:
        parts[(key[0], key[1], key[3])].append(key)  # the groups of one attribute in one period add up
    count_types = sorted({t for u in units.values() for t in u["counts"]})
    _complement(units, list(parts.values()), count_types, k, size=lambda u: u["counts"].get("rows") or
                max([v for v in u["counts"].values() if v is not None] or [0]))
    hidden = {key for key, u in units.items() if u["hidden"]}
    if not hidden:
        return []
    order = [p.get("period") for p in doc.get("periods") or []]
    by_key: dict = defaultdict(dict)
    for r in doc.get("monitor") or []:
        by_key[(r.get("task"), r.get("attribute"), r.get("group"), r.get("metric"))][r.get("period")] = r
    def weight(r) -> float:  # the monitor's weight of a period: the effective size M·M_r/(M + M_r)
        m, mr = _int(r.get("n")) or 0, _int(r.get("rest_n")) or 0
        return m * mr / (m + mr) if m > 0 and mr > 0 else 0.0

    weights = {(key, period): weight(r) for key, recs in by_key.items() for period, r in recs.items()}
    for key, recs in by_key.items():
        for period, r in recs.items():
            me = (key[0], key[1], key[2], period) in hidden
            since = r.get("since") or (order[0] if order else period)
            window = [p for p in order if since <= p <= period] or [period]
            if me:
                n, rate = _int(r.get("n")), r.get("rate")
                lo = hi = None
                if rate is not None and n:
                    num = int(round(rate * n))
                    lo, hi = primary_band(num, n, k) or band(num, n, k)
                    r["rate"], r["rate_band"] = round((lo + hi) / 2, 3), [lo, hi]
                rn, rr = _int(r.get("rest_n")), r.get("rest_rate")
                rlo = rhi = None
                if rr is not None and rn:
                    rlo, rhi = _grid_band(rr, rn, k)
                    r["rest_rate"], r["rest_rate_band"] = round((rlo + rhi) / 2, 3), [rlo, rhi]
                for c in ("n", "rest_n", "patients", "period_se"):
                    r[c] = None
                if r.get("period_gap") is not None and None not in (lo, hi, rlo, rhi):
                    r["period_gap_band"] = [round(lo - rhi, 3), round(hi - rlo, 3)]
                    r["period_gap"] = round((r["period_gap_band"][0] + r["period_gap_band"][1]) / 2, 3)
                else:
                    r["period_gap"] = None
            if not any((key[0], key[1], key[2], p) in hidden for p in window):
                continue
            if len(window) == 1:
                # the estimate over one withheld period is its own gap again: the same band, no interval
                first = recs.get(window[0], r)
                if first.get("period_gap_band") and r.get("gap") is not None:
                    r["gap_band"] = list(first["period_gap_band"])
                    r["gap"] = first["period_gap"]
                else:
                    r["gap"] = None
                r["cs_low"] = r["cs_high"] = None
            elif r.get("gap") is not None:
                # the gap over a window of several periods (any of them withheld) is Σ w·d / Σ w: two windows one
                # period apart give that period's w·d, and with it the period's count. A grid band at least 2k of
                # the window's weight wide (and the sequence rounded outward to it) leaves that count as open as a
                # band of the period's own rate.
                total = sum(weights.get((key, p), 0.0) for p in window)
                w = next((x for x in WIDTHS if x * total >= 2 * k), 1.0)
                lo = math.floor(r["gap"] / w + 1e-12) * w
                r["gap_band"] = [round(lo, 2), round(lo + w, 2)]
                r["gap"] = round(lo + w / 2, 3)
                lo_cs, hi_cs = r.get("cs_low"), r.get("cs_high")
                if lo_cs is not None:
                    r["cs_low"] = round(math.floor(lo_cs / w + 1e-12) * w, 2)
                if hi_cs is not None:
                    r["cs_high"] = round(math.ceil(hi_cs / w - 1e-12) * w, 2)
                if lo_cs is not None and hi_cs is not None and (hi_cs < 0 <= r["cs_high"] or r["cs_low"] <= 0 < lo_cs):
                    # rounded outward it would reach 0 beside an alarm it does not reach: left out, the band says it
                    r["cs_low"] = r["cs_high"] = None
    for a in doc.get("alarms") or []:
        r = by_key.get((a.get("task"), a.get("attribute"), a.get("group"), a.get("metric")), {}).get(a.get("period"))
        if r is not None:
            for c in ("gap", "cs_low", "cs_high", "gap_band"):
                if c in r:
                    a[c] = r[c]
    ch = doc.get("changes") or {}
    if ch.get("moves"):
        ch["moves"] = [m for m in ch["moves"] if not any(
            (m.get("task"), m.get("attribute"), m.get("group"), p) in hidden for p in (ch.get("period"),
                                                                                      ch.get("previous")))]
    for c in doc.get("context") or []:
        if (c.get("task"), c.get("attribute"), c.get("group"), c.get("period")) in hidden:
            for key in ("rows", "labelled", "prevalence", "flagged", "score_q25", "score_median", "score_q75"):
                c[key] = None
    rules = [f"{primary} group-period(s) with a count of people from 1 to {k - 1} (cases, found or missed cases, "
             "patients, rows, labelled, positive, negative or flagged rows) have all their counts, the prevalence, "
             "the flagged share and the score quartiles withheld."]
    if len(hidden) > primary:
        rules.append(f"{len(hidden) - primary} further group-period(s) are withheld the same way so that no withheld "
                     "count follows from a period's total minus the other groups (complementary suppression).")
    rules.append(f"The rates of a withheld group-period are shown as the band “<{k}” allows (or a band at least "
                 f"2 × {k} cases wide), the rest's rate as a band at least 2 × {k} cases wide, the period's gap as "
                 "their difference; the monitor's gap over a window of one withheld period is that band, without "
                 "its confidence sequence, and over a window of several periods a band on a grid at least 2 × "
                 f"{k} of the window's effective size wide, its confidence sequence rounded outward to that grid.")
    return rules


# ----------------------------------------------------------------------------------------------------------------
# Counterfactual token fairness, counterfactual invariance of images, age-independent learners, masked-LM bias


def _withhold_row(row: dict, k: int, den_key: str, rate_keys, clear=(), extra=()) -> bool:
    """Withhold ``row``'s count ``den_key``, the rates over it (``rate_keys``) and ``clear`` when the count, a rate's
    numerator (rate × count) or its complement, or a count in ``extra``, is from 1 to k − 1."""
    den = _int(row.get(den_key))
    counts = [den] + [_int(row.get(e)) for e in extra]
    for rk in rate_keys:
        if row.get(rk) is not None and den:
            num = int(round(row[rk] * den))
            counts += [num, den - num]
    if not any(_small(v, k) for v in counts):
        return False
    for key in (den_key, *rate_keys, *clear, *extra):
        if key in row:
            row[key] = None
    row["withheld"] = True
    return True


def _release_ctf(doc: dict, k: int) -> list[str]:
    """Texts of the audited data are taken as people (a note is about a patient): the texts holding each identity
    term, their positives and negatives and the rates over them; the notes behind each substitution. Counts of
    generated variants (identity and control pairs, texts scored, templates of the synthetic set) are exempt."""
    hidden_terms = set()
    for t in (doc.get("group_rates") or {}).get("terms") or []:
        n, pos, neg = _int(t.get("n")), _int(t.get("n_pos")), _int(t.get("n_neg"))
        tp = None if pos is None or t.get("tpr") is None else int(round(t["tpr"] * pos))
        tn = None if neg is None or t.get("tnr") is None else int(round(t["tnr"] * neg))
        counts = [n, pos, neg, tp, tn, None if tp is None else pos - tp, None if tn is None else neg - tn]
        if any(_small(v, k) for v in counts):
            hidden_terms.add((t.get("terms"), t.get("term")))
            for key in ("n", "n_pos", "n_neg", "tpr", "tpr_ci_low", "tpr_ci_high", "tnr", "tnr_ci_low",
                        "tnr_ci_high"):
                t[key] = None
            t["withheld"] = True
    gr = doc.get("group_rates") or {}
    for g in gr.get("pair_gaps") or []:
        if {(g.get("terms"), g.get("term")), (g.get("terms"), g.get("other_term"))} & hidden_terms:
            g["tpr_gap"] = g["tnr_gap"] = None
    for g in gr.get("gaps") or []:
        g["largest"] = [x for x in g.get("largest") or [] if not {(g.get("terms"), x.get("term")),
                                                                  (g.get("terms"), x.get("other_term"))} & hidden_terms]
    pairs = 0
    for p in doc.get("pairs") or []:
        n = _int(p.get("n"))
        flips = [None if p.get(r) is None or n is None else int(round(p[r] * n))
                 for r in ("flip_rate", "flip_up_rate", "flip_down_rate")]
        rn = _int(p.get("reverse_n"))
        rflip = None if rn is None or p.get("reverse_flip_rate") is None else int(round(p["reverse_flip_rate"] * rn))
        counts = [n, rn, rflip, None if rflip is None else rn - rflip] + flips + \
            [None if f is None else n - f for f in flips]
        if any(_small(v, k) for v in counts):
            pairs += 1
            for key in ("n", "flip_rate", "flip_ci_low", "flip_ci_high", "flip_up_rate", "flip_down_rate",
                        "reverse_n", "reverse_flip_rate"):
                p[key] = None
            p["withheld"] = True
    perf = doc.get("performance")
    perf_hidden = isinstance(perf, dict) and _withhold_row(perf, k, "n", ("accuracy",), extra=("n_positive",))
    rules = [f"Texts of the audited data count as people (a note is about a patient): {len(hidden_terms)} identity "
             f"term(s) and {pairs} substitution(s) resting on a count of texts from 1 to {k - 1} (texts, positives, "
             "negatives, true or false results, flips) have their counts and rates withheld, and so has every gap "
             "involving such a term."]
    if perf_hidden:
        rules.append(f"The overall accuracy rests on a count from 1 to {k - 1} and is withheld.")
    rules.append("Counts of generated variants (identity and control pairs, texts scored, templates and rows of the "
                 "synthetic set) count no people and are shown.")
    return rules


def _release_cit(doc: dict, k: int) -> list[str]:
    """Images are of patients: the images per attribute value, those audited, and the flips among them."""
    rules = []
    ds = doc.get("dataset") or {}
    per = ds.get("n_per_group") or {}
    if any(_small(_int(v), k) for v in per.values()):
        # the values add up to the images audited: one withheld alone would follow from the others
        for g in per:
            per[g] = None
        rules.append(f"An attribute value with fewer than {k} images audited (and at least one): every value's count of images is "
                     "withheld (they add up to the images audited).")
    hidden_dir = 0
    for effect in (doc.get("effects") or {}).values():
        for d in (effect or {}).get("directions") or []:
            source_hidden = per.get(str(d.get("source"))) is None and bool(per)
            if _withhold_row(d, k, "n", ("flip_rate",)) or source_hidden:
                d["n"], d["flip_rate"] = None, None
                hidden_dir += 1
    for r in doc.get("table") or []:
        if _small(_int(r.get("n")), k):
            r["n"] = None
        for key, v in list(r.items()):
            if key.startswith("flip_rate_") and v is not None:
                src = key.split("_")[-1].split("->")[0]
                n = _int(per.get(src)) if per.get(src) is not None else None
                f = None if n is None else int(round(v * n))
                if n is None or _small(f, k) or _small(n - f, k):
                    r[key] = None
    if hidden_dir:
        rules.append(f"{hidden_dir} direction(s) with fewer than {k} images (or as many flipped or not flipped) show "
                     "neither their count of images nor their flip rate.")
    rules.append("Shifts of predicted probability are means over images, shown rounded; the example images and "
                 "the scatter of each image's predictions are the analyst's choice to share.")
    return rules


def _release_age(doc: dict, k: int) -> list[str]:
    """Rows and participants are people. A fold's accuracy over its known rows gives the fold's right and wrong
    predictions; ΔEO sums rate differences over age bins whose sizes are not published."""
    settings = doc.get("settings") or {}
    folds = settings.get("fold_sizes") or []
    rows = [_int(f.get("rows")) for f in folds]
    hidden = False
    for m in (doc.get("methods") or {}).values():
        acc = (m or {}).get("accuracy") or {}
        values = acc.get("folds") or []
        for v, n in zip(values, rows):
            if v is None or n is None:
                continue
            right = int(round(v * n))
            if _small(right, k) or _small(n - right, k):
                hidden = True
    rules = []
    if hidden or any(_small(n, k) for n in rows):
        for m in (doc.get("methods") or {}).values():
            acc = (m or {}).get("accuracy") or {}
            if acc.get("folds") is not None:
                acc["folds"] = [None] * len(acc["folds"])
            if acc.get("mean") is not None:  # a band at least 2k rows of the smallest fold wide
                w = band_width(min([n for n in rows if n] or [0]), k)
                j = min(int(math.floor(acc["mean"] / w + 1e-12)), int(round(1 / w)) - 1)
                acc["mean_band"] = [round(j * w, 2), round((j + 1) * w, 2)]
                acc["mean"] = round((acc["mean_band"][0] + acc["mean_band"][1]) / 2, 3)
            acc["std"] = None  # two folds' mean and spread would give both folds back
            comp = ((m or {}).get("comparison") or {}).get("accuracy")
            if isinstance(comp, dict):
                comp["mean_difference"] = None
        for f in folds:
            for key in ("rows", "participants", "positives"):
                f[key] = None
        rules.append(f"A fold's accuracy times its rows would give a count of right or wrong predictions from 1 to "
                     f"{k - 1}: the fold accuracies, fold sizes, the spread of accuracy and the differences between "
                     f"learners are withheld, and the mean accuracy is shown as a band at least 2 × {k} rows of the "
                     "smallest fold wide.")
    rules.append("ΔEO sums differences of rates over age bins whose sizes are not published: no count follows "
                 "from it; it is shown rounded.")
    return rules


def _release_mlm(doc: dict, k: int) -> list[str]:  # noqa: ARG001
    return ["A masked-language-model audit counts templates, masks and scores of a model, not people: those "
            "counts are shown."]


#: kinds whose counts are not of people (template, mask and score counts): never suppressed
NO_PEOPLE = frozenset({"mlm_bias"})
#: per kind, count keys that count generated variants rather than people (shown whatever their size)
EXEMPT_KEYS = {"ctf": frozenset({"n_pairs", "n_control_pairs", "n_control_words", "n_unique_texts_scored",
                                 "n_identity_pairs", "n_available", "n_templates", "n_sentences", "n_pairs_tpr",
                                 "n_pairs_tnr"})}


# ----------------------------------------------------------------------------------------------------------------
# Every kind


def _primary_and_round(obj, k: int, hits: list, key: str = "", keep: bool = False, exempt=frozenset()):
    """Primary suppression of every count key left and rounding of every other number (not under a
    :data:`KEEP_KEYS` key: settings, provenance), in place."""
    if isinstance(obj, dict):
        for key2, v in list(obj.items()):
            obj[key2] = _primary_and_round(v, k, hits, key2, keep or key2 in KEEP_KEYS, exempt)
        return obj
    if isinstance(obj, list):
        return [_primary_and_round(v, k, hits, key, keep, exempt) for v in obj]
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        return obj
    if key in COUNT_KEYS or key.startswith("n_") and isinstance(obj, int):
        setting = keep and key in ("count", "size")  # under settings these two words name no people
        if key in COUNT_KEYS and _small(obj, k) and not setting and key not in exempt:
            hits.append(key)
            return None
        return obj
    if keep:
        return obj
    if isinstance(obj, float) and math.isfinite(obj):
        if key in P_KEYS:
            return float(f"{obj:.2g}")
        return round(obj, DIGITS)
    return obj


def release(kind: str, doc: dict, k: int) -> dict:
    """A releasable copy of a stored audit document of kind ``kind`` for small-cell threshold ``k`` (module doc).
    With k = 1 nothing is suppressed, but the copy still says so."""
    out = copy.deepcopy(doc)
    k = int(k)
    rules: list[str] = []
    if k > 1:
        releaser = {"groups": _release_groups, "slices": _release_slices, "monitor": _release_monitor,
                    "ctf": _release_ctf, "cit_images": _release_cit, "age_independence": _release_age,
                    "mlm_bias": _release_mlm}.get(kind)
        if releaser is not None:
            rules += releaser(out, k)
        elif kind == "note_classifiers":
            for name, audit in (out.get("audits") or {}).items():
                rules += [f"{name}: {r}" for r in _release_groups(audit, k)]
        hits: list = []
        _primary_and_round(out, k if kind not in NO_PEOPLE else 1, hits, exempt=EXEMPT_KEYS.get(kind, frozenset()))
        if hits:
            rules.append(f"Every other count from 1 to {k - 1} is withheld (printed “<{k}”).")
        rules.append(f"Estimates and gaps are rounded to {DIGITS} decimals, p- and q-values to 2 significant digits.")
    out["disclosure"] = {"k": k, "rules": [rule_header(k)] + rules, "for_release": True}
    return out


def rule_header(k: int) -> str:
    """The first sentence of every releasable artefact's disclosure note."""
    if k <= 1:
        return "Small-cell suppression is off (k = 1): every count is shown; not for release outside the team."
    return (f"Released with small-cell threshold k = {k}: no count from 1 to {k - 1} is shown or can be worked out "
            "from the numbers shown.")


def working_header() -> dict:
    """What the analyst's working document says about itself (``--json``, the project)."""
    return {"for_release": False,
            "note": "Working document: holds exact counts, small cells included; not for release. Use --release-json "
                    "(or a report) for a copy that may leave the workstation."}


# ----------------------------------------------------------------------------------------------------------------
# Tables (GUI copy and export, CSV/Excel)

TABLE_COUNTS = ("n", "numerator", "denominator", "positives", "negatives", "n_positive", "n_patients", "cases",
                "tp", "fp", "fn", "tn", "count")
TABLE_RATES = ("rate", "value", "prevalence", "recall", "specificity", "precision", "ppr", "fpr", "fnr")
TABLE_INTERVALS = ("ci_low", "ci_high", "gap", "gap_ci_low", "gap_ci_high")


def release_table(df, k: int):
    """A releasable copy of one table and the sentence saying what was done: rows whose counts include one from
    1 to k − 1 have every count, rate and interval withheld; if one row of the table is withheld, the next
    smallest is too (so the column total minus the shown rows gives nothing back); other numbers are rounded."""
    import numpy as np
    import pandas as pd

    out = df.copy()
    k = int(k)
    if k <= 1 or out.empty:
        return out, rule_header(k)
    lower = {c: str(c).strip().lower() for c in out.columns}
    counts = [c for c in out.columns if lower[c] in TABLE_COUNTS]
    rates = [c for c in out.columns if lower[c] in TABLE_RATES or lower[c].endswith("_rate")]
    intervals = [c for c in out.columns if lower[c] in TABLE_INTERVALS]
    num = {c: pd.to_numeric(out[c], errors="coerce") for c in counts}
    small = pd.Series(False, index=out.index)
    for c in counts:
        small |= (num[c] >= 1) & (num[c] < k)
    by = {lower[c]: c for c in counts}
    if "numerator" in by and "denominator" in by:
        rest = num[by["denominator"]] - num[by["numerator"]]
        small |= (rest >= 1) & (rest < k)
    if "n" in by and "positives" in by:
        rest = num[by["n"]] - num[by["positives"]]
        small |= (rest >= 1) & (rest < k)
    hidden = small.copy()
    # the column totals are known to a reader: hide the smallest shown rows until no small one follows from them
    while counts and not all(partition_safe(list(num[c][hidden].fillna(0)), k) for c in counts):
        size = num[counts[0]].where(~hidden)
        if not size.notna().any():
            break
        hidden.loc[size.idxmin()] = True
    for c in counts + rates + intervals:
        out[c] = out[c].astype(object)
        out.loc[hidden, c] = None
    for c in counts:  # whole counts print as whole numbers, a withheld one as blank
        whole = pd.to_numeric(out[c], errors="coerce")
        if whole.notna().any() and (whole.dropna() == whole.dropna().round()).all():
            out[c] = whole.astype("Int64")
    for c in out.columns:
        if c in counts:
            continue
        if pd.api.types.is_float_dtype(out[c].dtype):
            out[c] = out[c].round(DIGITS)
        elif out[c].dtype == object:
            out[c] = [round(v, DIGITS) if isinstance(v, (float, np.floating)) else v for v in out[c]]
    n_hidden = int(hidden.sum())
    sentence = rule_header(k)
    if n_hidden:
        sentence += (f" {n_hidden} row(s) resting on a count from 1 to {k - 1} (or needed to keep one hidden) have "
                     "their counts, rates and intervals blank; other numbers are rounded to 3 decimals.")
    return out, sentence
