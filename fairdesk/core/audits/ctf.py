"""Counterfactual token fairness (CTF) audit of a text classifier (METHODS §5; 002), model-agnostic.

Inputs: texts (with optional 0/1 labels) and either a scoring function ``score(list[str]) -> probabilities``
(called on batches of unique texts, never one text per call) or a table of precomputed scores for the
(original, counterfactual) pairs (:func:`ctf_from_scored_pairs`, for models FairDesk cannot run).

What is computed (:func:`ctf_audit`):

* **CTF gap** per term split (``train`` = the term set, ``held_out`` = a second set) and subset (``all``,
  ``label_0``, ``label_1`` of the audited texts; ``synthetic``: a seeded sample of the madlibs template set, scored
  by the same model, when ``synthetic`` rows are asked for — :func:`synthetic_texts`):
  ``CF_GAP(x) = mean_{x' ∈ Φ(x)} |f(x) − f(x')|`` (Φ within the split's terms), averaged over examples with a
  non-empty Φ(x) and at most ``max_tokens`` whitespace tokens (default 10, as 002).
  CI: percentile bootstrap over examples (an example keeps all its counterfactuals).
* **Control band**: for every such example, ``k_control`` pairs of control words (neutral adjectives,
  ``resources/text/identity_terms/control.txt``) are put into the slot(s) the identity term occupies and the same
  statistic ``|f(x_c1) − f(x_c2)|`` is averaged — how far the model moves when one neutral word in that slot is
  swapped for another. The band is the mean |change| over the control pairs. The excess ``CF_GAP − control`` is
  bootstrapped jointly: same resampled examples, and the control WORDS resampled too (:func:`_bootstrap`).
* **Verdicts** (per CTF-gap record; CIs at the Bonferroni level ``1 − α/m`` over the m records of the audit):
  "equivalent within margin" when the upper bound of the CTF gap is ≤ ``margin``; "differs" when the lower bound of
  the gap is above ``margin`` AND the lower bound of the excess over the control band is above ``margin``; otherwise
  "inconclusive" — in particular a model that moves as much for a neutral edit as for an identity edit ("reacts to
  any edit") is inconclusive, not biased.
* **Pairs**: per direction ``a → a'`` (examples mentioning ``a`` rewritten with ``a'``): n, mean |change|, mean
  signed change ``f(x') − f(x)``, flip rate at ``threshold`` with a Wilson interval, the share flipping up (0 → 1)
  and down (1 → 0), and the reverse direction's n and flip rate.
* **Group rates** (002 Table 3): per term, TPR and TNR at ``threshold`` over the examples mentioning it (Wilson
  intervals); the gap of a pair is ``|rate_a − rate_a'|`` (pairs where both are estimable); the overall gap is the
  mean over pairs, per split.

The document is JSON-able (:func:`CTFResult.to_dict`): ``ctf_gap``, ``pairs``, ``group_rates``, ``control``,
``counts``, ``settings``, ``provenance``. scipy (sparse) is imported inside functions; torch never.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from fairdesk.core.errors import DataError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

FORMAT = "fairdesk.ctf/1"
VERDICTS = ("differs", "equivalent within margin", "inconclusive")
SPLITS = ("train", "held_out")
SUBSETS = ("all", "label_0", "label_1")
SYNTHETIC = "synthetic"  # the subset name of the madlibs template sample (an addition to SUBSETS)
DEFAULTS = {"max_tokens": 10, "margin": 0.02, "alpha": 0.05, "n_boot": 2000, "threshold": 0.5, "k_control": 3,
            "batch_size": 1024, "synthetic": 1000}


# ==============================================================================================================
# Pair construction


@dataclass
class PairSet:
    """Every scored comparison as integer arrays over a table of unique texts.

    Row r compares ``texts[left[r]]`` with ``texts[right[r]]`` for example ``example[r]``; ``kind`` 0 = identity
    counterfactual (left = the original), 1 = control (left, right = two control-word fillings of the same slot).
    """

    texts: list[str]
    example: np.ndarray
    left: np.ndarray
    right: np.ndarray
    term: np.ndarray            # index into term_names
    cf_term: np.ndarray
    split: np.ndarray           # 0 train, 1 held_out
    kind: np.ndarray            # 0 identity, 1 control
    term_names: list[str]
    original: np.ndarray        # per example: index of its text in ``texts``
    eligible: np.ndarray        # per example: within max_tokens
    mentions: dict = field(default_factory=dict)   # split -> {term name: example indices mentioning it}
    excluded: dict = field(default_factory=dict)   # split -> number of examples with no valid counterfactual
    term_sets: dict = field(default_factory=dict)  # split -> TermSet.to_dict()

    def frame(self, ids=None):
        """The pairs as a table (id, text, counterfactual, term, counterfactual_term, split, kind) to score
        elsewhere; add columns ``score`` and ``counterfactual_score`` and pass it to :func:`ctf_from_scored_pairs`."""
        import pandas as pd

        ids = np.arange(len(self.original)) if ids is None else np.asarray(list(ids), dtype=object)
        t = np.asarray(self.texts, dtype=object)
        names = np.asarray(self.term_names, dtype=object)
        return pd.DataFrame({"id": ids[self.example], "text": t[self.left], "counterfactual": t[self.right],
                             "term": names[self.term], "counterfactual_term": names[self.cf_term],
                             "split": np.asarray(SPLITS, dtype=object)[self.split],
                             "kind": np.where(self.kind == 0, "identity", "control")})


def build_pairs(texts, terms="dixon_train", held_out_terms=None, control_terms="control",
                max_tokens: int | None = 10, k_control: int = 3, seed: int = 0,
                progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> PairSet:
    """Counterfactual and control pairs for every example (see the module docstring)."""
    from fairdesk.core.text.counterfactual import (
        counterfactual_texts,
        exclusion_reason,
        find_terms,
        load_terms,
        n_tokens,
        slot_substitutions,
    )

    rep = Reporter(progress, cancel)
    texts = ["" if t is None or (isinstance(t, float) and t != t) else str(t) for t in texts]
    sets = {"train": load_terms(terms)}
    if held_out_terms is not None:
        sets["held_out"] = load_terms(held_out_terms)
    control = load_terms(control_terms) if control_terms is not None else None
    if control is not None and control.paired:
        raise DataError("The control list must be a plain word list (one word per line), not 'a | b' pairs.")
    rng = np.random.default_rng(seed)
    index: dict[str, int] = {}
    table: list[str] = []

    def idx(s: str) -> int:
        i = index.get(s)
        if i is None:
            i = index[s] = len(table)
            table.append(s)
        return i

    names: dict[str, int] = {}
    name_list: list[str] = []

    def nid(s: str) -> int:
        i = names.get(s)
        if i is None:
            i = names[s] = len(name_list)
            name_list.append(s)
        return i

    from array import array

    cols = {k: array("q") for k in ("example", "left", "right", "term", "cf_term", "split", "kind")}
    original = np.array([idx(t) for t in texts], dtype=np.int64)
    eligible = np.array([max_tokens is None or n_tokens(t) <= max_tokens for t in texts], dtype=bool)
    mentions = {s: {} for s in sets}
    excluded = {s: 0 for s in sets}
    ctrl_words = list(control.groups) if control is not None else []
    step = max(1, len(texts) // 200)
    for i, text in enumerate(texts):
        if i % step == 0:
            rep(i / max(len(texts), 1), f"counterfactuals {i:,}/{len(texts):,}")
        for s_code, (split, ts) in enumerate(sets.items()):
            matches = find_terms(text, ts)
            if not matches:
                continue
            for g in {m.group for m in matches}:
                mentions[split].setdefault(ts.groups[g], []).append(i)
            if not eligible[i]:
                continue
            if exclusion_reason(text, ts):
                excluded[split] += 1
                continue
            cfs = counterfactual_texts(text, ts)
            left = int(original[i])
            for term, cf_term, cf_text in cfs:
                cols["example"].append(i)
                cols["left"].append(left)
                cols["right"].append(idx(cf_text))
                cols["term"].append(nid(term))
                cols["cf_term"].append(nid(cf_term))
                cols["split"].append(s_code)
                cols["kind"].append(0)
            if cfs and len(ctrl_words) >= 2:
                for _ in range(k_control):
                    a, b = (int(v) for v in rng.choice(len(ctrl_words), size=2, replace=False))
                    pair = slot_substitutions(text, ts, (ctrl_words[a], ctrl_words[b]))
                    if pair is None:
                        continue
                    cols["example"].append(i)
                    cols["left"].append(idx(pair[0]))
                    cols["right"].append(idx(pair[1]))
                    cols["term"].append(nid(ctrl_words[a]))
                    cols["cf_term"].append(nid(ctrl_words[b]))
                    cols["split"].append(s_code)
                    cols["kind"].append(1)
    rep(1.0, "counterfactuals done")
    arr = {k: np.frombuffer(v, dtype=np.int64).copy() if len(v) else np.zeros(0, np.int64)
           for k, v in cols.items()}
    return PairSet(table, arr["example"], arr["left"], arr["right"], arr["term"], arr["cf_term"], arr["split"],
                   arr["kind"], name_list, original, eligible,
                   {s: {k: np.asarray(v) for k, v in m.items()} for s, m in mentions.items()}, excluded,
                   {s: ts.to_dict() for s, ts in sets.items()})


def score_texts(score, texts: list[str], batch_size: int = 1024, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None) -> np.ndarray:
    """``score`` applied to ``texts`` in batches; checks the output is one probability per text."""
    rep = Reporter(progress, cancel)
    out = np.empty(len(texts), dtype=np.float64)
    for start in range(0, len(texts), batch_size):
        rep(start / max(len(texts), 1), f"scoring {start:,}/{len(texts):,}")
        batch = texts[start:start + batch_size]
        s = np.asarray(score(batch), dtype=np.float64).reshape(-1)
        if s.shape[0] != len(batch):
            raise DataError(f"The model returned {s.shape[0]} scores for {len(batch)} texts.")
        out[start:start + len(batch)] = s
    if np.isnan(out).any() or (out < 0).any() or (out > 1).any():
        raise DataError("The model's scores must be probabilities in [0, 1] (no missing values).")
    rep(1.0, "scoring done")
    return out


# ==============================================================================================================
# Statistics


def wilson_interval(k, n, level: float = 0.95):
    """Wilson score interval, vectorised (equals ``scipy.stats.binomtest(k, n).proportion_ci(method='wilson')``;
    hand-written because the per-pair table needs thousands of them at once). NaN where n = 0."""
    from statistics import NormalDist

    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
        low = np.where(k <= 0, 0.0, np.clip(centre - half, 0, 1))
        high = np.where(k >= n, 1.0, np.clip(centre + half, 0, 1))
    return np.where(n > 0, low, np.nan), np.where(n > 0, high, np.nan)


def _bootstrap(gap: np.ndarray, n_boot: int, rng: np.random.Generator, ctrl_example=None, ctrl_w1=None,
               ctrl_w2=None, ctrl_abs=None, n_words: int = 0, chunk: int = 50) -> np.ndarray:
    """Replicates (n_boot, 3) of (CTF gap, control band, excess) — two-level bootstrap.

    Examples are resampled with replacement (multiplicities ``M``), and so are the control WORDS (weights ``W``):
    the control band is an estimate of how a model reacts to a neutral word in the slot, made from a small sample
    of neutral words, and that sample's variability belongs in the interval (a simulation in
    ``benchmarks/bench_ctf.py --null`` showed that resampling examples alone calls "differs" in ~45% of audits of
    a model that reacts to identity words exactly as to neutral words). A control pair (c1, c2) of example e
    weighs ``M[e] · W[c1] · W[c2]``; the band is the weighted mean of its |change|. The identity terms are not
    resampled: the audit is about these terms. Without control rows only column 0 is filled (others NaN).
    """
    from scipy import sparse

    n = gap.shape[0]
    out = np.full((n_boot, 3), np.nan)
    has_ctrl = ctrl_abs is not None and len(ctrl_abs) > 0
    if has_ctrl:
        # per example and control-word pair: summed |change| and count (n × P sparse, P = n_words²)
        col = ctrl_w1 * n_words + ctrl_w2
        shape = (n, n_words * n_words)
        s_abs = sparse.csc_matrix((ctrl_abs, (ctrl_example, col)), shape=shape)
        s_cnt = sparse.csc_matrix((np.ones(len(ctrl_abs)), (ctrl_example, col)), shape=shape)
    for start in range(0, n_boot, chunk):
        c = min(chunk, n_boot - start)
        draws = rng.integers(0, n, size=(c, n)) + (np.arange(c) * n)[:, None]
        m = np.bincount(draws.ravel(), minlength=c * n).reshape(c, n).astype(np.float64)   # multiplicities
        out[start:start + c, 0] = m @ gap / n
        if has_ctrl:
            w = rng.multinomial(n_words, np.full(n_words, 1.0 / n_words), size=c).astype(np.float64)
            ww = (w[:, :, None] * w[:, None, :]).reshape(c, -1)                           # (c, P)
            num = np.einsum("cp,cp->c", np.asarray((s_abs.T @ m.T).T), ww)
            den = np.einsum("cp,cp->c", np.asarray((s_cnt.T @ m.T).T), ww)
            with np.errstate(invalid="ignore", divide="ignore"):
                band = num / den
            out[start:start + c, 1] = band
            out[start:start + c, 2] = out[start:start + c, 0] - band
    return out


def _pct(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval ignoring replicates where a statistic was not estimable (a control band whose drawn
    words have no pair among an example's control pairs)."""
    import warnings

    tail = (1 - level) / 2 * 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(samples, tail, axis=0), np.nanpercentile(samples, 100 - tail, axis=0)


def _per_example(example: np.ndarray, value: np.ndarray, n_examples: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.bincount(example, weights=value, minlength=n_examples)
    c = np.bincount(example, minlength=n_examples)
    with np.errstate(invalid="ignore", divide="ignore"):
        return s / c, c


@dataclass
class CTFResult:
    ctf_gap: list[dict]
    pairs: list[dict]
    group_rates: dict
    control: dict
    counts: dict
    settings: dict
    provenance: dict
    examples: list[dict] = field(default_factory=list)   # largest changes (for the diff viewer / report)

    @property
    def verdicts(self) -> dict[str, str]:
        return {f"{r['terms']}/{r['subset']}": r["verdict"] for r in self.ctf_gap}

    def to_dict(self) -> dict:
        return jsonable({"format": FORMAT, "kind": "ctf", "ctf_gap": self.ctf_gap, "pairs": self.pairs,
                         "group_rates": self.group_rates, "control": self.control, "counts": self.counts,
                         "settings": self.settings, "examples": self.examples, "provenance": self.provenance})


def _verdict(gap_lo, gap_hi, excess_lo, n, margin, has_control) -> tuple[str, str]:
    if n < 2:
        return "inconclusive", "fewer than 2 examples with a counterfactual"
    if gap_hi <= margin:
        return "equivalent within margin", f"upper bound of the CTF gap {gap_hi:.3g} ≤ margin {margin:g}"
    if gap_lo > margin:
        if not has_control:
            return "differs", f"lower bound of the CTF gap {gap_lo:.3g} > margin {margin:g} (no control band)"
        if excess_lo > margin:
            return "differs", (f"lower bound of the CTF gap {gap_lo:.3g} > margin {margin:g} and it exceeds the "
                               f"control band by more than the margin (excess lower bound {excess_lo:.3g})")
        return "inconclusive", ("the model moves as much when a neutral word in the same slot is swapped (control "
                                "band): it reacts to any edit, not shown to react to identity")
    return "inconclusive", "neither a gap above the margin nor equivalence within it is shown"


def ctf_statistics(pairs: PairSet, scores: np.ndarray, labels=None, margin: float = 0.02, alpha: float = 0.05,
                   n_boot: int = 2000, threshold: float = 0.5, seed: int = 0, n_examples_shown: int = 20,
                   progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                   family_size: int | None = None) -> CTFResult:
    """All statistics from a scored :class:`PairSet` (``scores[i]`` = f(pairs.texts[i])). ``family_size``: the
    number of CTF-gap records the Bonferroni level counts when more are computed elsewhere (the synthetic subset)."""
    rep = Reporter(progress, cancel)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape[0] != len(pairs.texts):
        raise DataError(f"{scores.shape[0]} scores for {len(pairs.texts)} texts.")
    n_ex = len(pairs.original)
    y = None
    if labels is not None:
        y = np.asarray(labels)
        if y.shape[0] != n_ex:
            raise DataError(f"{y.shape[0]} labels for {n_ex} texts.")
        if not np.isin(y, (0, 1)).all():
            raise DataError("Labels must be 0 or 1.")
        y = y.astype(int)
    rng = np.random.default_rng(seed)
    change = scores[pairs.right] - scores[pairs.left]
    absch = np.abs(change)
    flip = (scores[pairs.right] >= threshold) != (scores[pairs.left] >= threshold)
    up = (scores[pairs.left] < threshold) & (scores[pairs.right] >= threshold)
    splits = [s for s in SPLITS if s in pairs.term_sets]
    subsets = ["all"] + (["label_0", "label_1"] if y is not None else [])
    # --- CTF gap records
    plan = []
    for s_code, split in enumerate(SPLITS):
        if split not in splits:
            continue
        ident = (pairs.split == s_code) & (pairs.kind == 0)
        gap, cnt = _per_example(pairs.example[ident], absch[ident], n_ex)
        for subset in subsets:
            sel = cnt > 0
            if subset != "all":
                sel &= (y == int(subset[-1]))
            plan.append((split, subset, s_code, sel, gap))
    m = max(len(plan), int(family_size or 0), 1)
    level_v = 1 - alpha / m
    records = []
    for k, (split, subset, s_code, sel, gap) in enumerate(plan):
        rep(0.1 + 0.5 * k / m, f"bootstrap {split}/{subset}")
        g = gap[sel]
        n = int(sel.sum())
        pos = np.full(n_ex, -1)
        pos[np.flatnonzero(sel)] = np.arange(n)
        crow = np.flatnonzero((pairs.split == s_code) & (pairs.kind == 1))
        crow = crow[pos[pairs.example[crow]] >= 0]
        has_control = len(crow) > 0
        ident_rows = (pairs.split == s_code) & (pairs.kind == 0)
        rec = {"subset": subset, "terms": split, "n": n, "value": float(g.mean()) if n else float("nan"),
               "n_pairs": int(sel[pairs.example[ident_rows]].sum()) if n else 0}
        if has_control:
            words, wid = np.unique(np.concatenate([pairs.term[crow], pairs.cf_term[crow]]), return_inverse=True)
            w1, w2 = wid[:len(crow)], wid[len(crow):]
            rec.update(control=float(absch[crow].mean()), n_control_pairs=int(len(crow)),
                       n_control_words=int(len(words)))
            rec["excess"] = rec["value"] - rec["control"]
        if n >= 2:
            boot = _bootstrap(g, n_boot, rng, pos[pairs.example[crow]], w1 if has_control else None,
                              w2 if has_control else None, absch[crow] if has_control else None,
                              len(words) if has_control else 0)
            lo95, hi95 = _pct(boot, 1 - alpha)
            lov, hiv = _pct(boot, level_v)
            rec.update(ci_low=float(lo95[0]), ci_high=float(hi95[0]))
            if has_control:
                rec.update(control_ci_low=float(lo95[1]), control_ci_high=float(hi95[1]),
                           excess_ci_low=float(lo95[2]), excess_ci_high=float(hi95[2]))
            verdict, reason = _verdict(lov[0], hiv[0], lov[2], n, margin, has_control)
        else:
            rec.update(ci_low=float("nan"), ci_high=float("nan"))
            verdict, reason = _verdict(0, 0, 0, n, margin, has_control)
        rec.update(verdict=verdict, reason=reason)
        records.append(rec)
    # --- per-pair table (identity pairs, per direction)
    rep(0.65, "pairs")
    pair_records = []
    ident_all = pairs.kind == 0
    elig_ex = np.zeros(n_ex, dtype=bool)
    elig_ex[pairs.example] = True
    for s_code, split in enumerate(SPLITS):
        sel = ident_all & (pairs.split == s_code)
        if not sel.any():
            continue
        key = pairs.term[sel] * len(pairs.term_names) + pairs.cf_term[sel]
        uniq, inv = np.unique(key, return_inverse=True)
        nn = np.bincount(inv)
        mabs = np.bincount(inv, weights=absch[sel]) / nn
        mchg = np.bincount(inv, weights=change[sel]) / nn
        kf = np.bincount(inv, weights=flip[sel].astype(float))
        ku = np.bincount(inv, weights=up[sel].astype(float))
        lo, hi = wilson_interval(kf, nn, 1 - alpha)
        lookup = {int(u): j for j, u in enumerate(uniq)}
        for j, u in enumerate(uniq):
            a, b = divmod(int(u), len(pairs.term_names))
            r = lookup.get(b * len(pairs.term_names) + a)
            pair_records.append({
                "terms": split, "term": pairs.term_names[a], "counterfactual_term": pairs.term_names[b],
                "n": int(nn[j]), "mean_abs_change": float(mabs[j]), "mean_change": float(mchg[j]),
                "flip_rate": float(kf[j] / nn[j]), "flip_ci_low": float(lo[j]), "flip_ci_high": float(hi[j]),
                "flip_up_rate": float(ku[j] / nn[j]), "flip_down_rate": float((kf[j] - ku[j]) / nn[j]),
                "reverse_n": int(nn[r]) if r is not None else 0,
                "reverse_flip_rate": float(kf[r] / nn[r]) if r is not None else float("nan")})
    pair_records.sort(key=lambda d: (d["terms"], -d["mean_abs_change"]))
    # --- control summary
    control = {"words_used": sorted({pairs.term_names[t] for t in pairs.term[pairs.kind == 1]}),
               "records": [{k: r.get(k) for k in ("terms", "subset", "n", "control", "control_ci_low",
                                                   "control_ci_high")} for r in records if "control" in r]}
    ctrl_sel = pairs.kind == 1
    control["mean_abs_change"] = float(absch[ctrl_sel].mean()) if ctrl_sel.any() else float("nan")
    control["flip_rate"] = float(flip[ctrl_sel].mean()) if ctrl_sel.any() else float("nan")
    control["informative"] = bool(ctrl_sel.any() and absch[ctrl_sel].max() > 0)
    if ctrl_sel.any() and not control["informative"]:
        control["note"] = ("Every control filling got the same score (for example, control words outside the "
                           "model's vocabulary): the band is 0 and tells nothing about how the model reacts to a "
                           "neutral edit.")
    # --- group rates (002 Table 3)
    rep(0.8, "group rates")
    group = {"threshold": threshold, "terms": [], "gaps": []}
    if y is not None:
        pred = scores[pairs.original] >= threshold
        for split in splits:
            rates = {}
            for term, ex in sorted(pairs.mentions.get(split, {}).items()):
                ex = np.unique(ex)
                pos, neg = ex[y[ex] == 1], ex[y[ex] == 0]
                tp, tn = int(pred[pos].sum()), int((~pred[neg]).sum())
                tpr = tp / len(pos) if len(pos) else float("nan")
                tnr = tn / len(neg) if len(neg) else float("nan")
                (tl, th), (nl, nh) = wilson_interval(tp, len(pos), 1 - alpha), wilson_interval(tn, len(neg), 1 - alpha)
                rates[term] = (tpr, tnr)
                group["terms"].append({"terms": split, "term": term, "n": int(len(ex)), "n_pos": int(len(pos)),
                                       "n_neg": int(len(neg)), "tpr": tpr, "tpr_ci_low": float(tl),
                                       "tpr_ci_high": float(th), "tnr": tnr, "tnr_ci_low": float(nl),
                                       "tnr_ci_high": float(nh)})
            names = sorted(rates)
            tpr_gaps, tnr_gaps, worst = [], [], []
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    for which, lst in ((0, tpr_gaps), (1, tnr_gaps)):
                        ra, rb = rates[a][which], rates[b][which]
                        if not (math.isnan(ra) or math.isnan(rb)):
                            lst.append(abs(ra - rb))
                            worst.append((abs(ra - rb), "tpr" if which == 0 else "tnr", a, b))
            worst.sort(reverse=True)
            group["gaps"].append({"terms": split, "tpr_gap": float(np.mean(tpr_gaps)) if tpr_gaps else float("nan"),
                                  "tnr_gap": float(np.mean(tnr_gaps)) if tnr_gaps else float("nan"),
                                  "n_pairs_tpr": len(tpr_gaps), "n_pairs_tnr": len(tnr_gaps),
                                  "largest": [{"gap": g, "rate": r, "term": a, "other_term": b}
                                              for g, r, a, b in worst[:10]]})
    # --- largest changes (examples for the report / diff viewer)
    shown = []
    ident_idx = np.flatnonzero(ident_all)
    for r in ident_idx[np.argsort(-absch[ident_idx], kind="stable")[:n_examples_shown]]:
        shown.append({"example": int(pairs.example[r]), "text": pairs.texts[pairs.left[r]],
                      "counterfactual": pairs.texts[pairs.right[r]], "term": pairs.term_names[pairs.term[r]],
                      "counterfactual_term": pairs.term_names[pairs.cf_term[r]],
                      "terms": SPLITS[pairs.split[r]], "score": float(scores[pairs.left[r]]),
                      "counterfactual_score": float(scores[pairs.right[r]]),
                      "label": int(y[pairs.example[r]]) if y is not None else None})
    counts = {"n_examples": n_ex, "n_within_max_tokens": int(pairs.eligible.sum()), "n_unique_texts_scored":
              len(pairs.texts), "excluded_no_valid_counterfactual": dict(pairs.excluded),
              "n_identity_pairs": int(ident_all.sum()), "n_control_pairs": int((pairs.kind == 1).sum())}
    settings = {"margin": margin, "alpha": alpha, "verdict_ci_level": level_v, "n_boot": n_boot,
                "threshold": threshold, "seed": seed,
                "term_sets": {k: {kk: v[kk] for kk in ("name", "kind", "groups", "sha256")}
                              for k, v in pairs.term_sets.items()}}
    rep(1.0, "done")
    return CTFResult(records, pair_records, group, control, counts, settings, {}, shown)


def data_sha256(texts, labels=None) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(str(t).encode("utf-8"))
        h.update(b"\x00")
    if labels is not None:
        h.update(np.asarray(labels).astype(np.int64).tobytes())
    return h.hexdigest()


def synthetic_texts(n: int, seed: int = 0) -> tuple[list[str], np.ndarray, dict]:
    """A seeded sample of ``n`` rows of the madlibs template set (:func:`fairdesk.core.text.madlibs.madlibs`)
    among its rows with an identity term (the ``you_occupation`` rows have none); all of them when ``n`` is at
    least their number. Simple random sampling, so the templates keep the published proportions (``name_adj`` is
    94 % of the set). Returns ``(texts, labels, info)``; ``info`` holds the sample's size, the number available,
    the seed and the rows per template."""
    from fairdesk.core.text.madlibs import madlibs

    if n < 1:
        raise DataError("The synthetic template sample needs at least one row (0 turns it off).")
    df = madlibs()
    df = df[df["has_counterfactual"]].reset_index(drop=True)
    available = len(df)
    if n < available:
        rows = np.sort(np.random.default_rng([int(seed) & 0xFFFF_FFFF, 7]).choice(available, size=n, replace=False))
        df = df.iloc[rows]
    info = {"source": "madlibs", "n_rows": int(len(df)), "n_available": int(available), "seed": int(seed),
            "per_template": {str(k): int(v) for k, v in df["template"].value_counts().sort_index().items()},
            "n_label_1": int(df["label"].sum())}
    return df["text"].tolist(), df["label"].to_numpy().astype(int), info


def ctf_audit(texts, score, labels=None, terms="dixon_train", held_out_terms=None, control_terms="control",
              max_tokens: int | None = 10, margin: float = 0.02, alpha: float = 0.05, n_boot: int = 2000,
              threshold: float = 0.5, k_control: int = 3, batch_size: int = 1024, seed: int = 0,
              model_hashes: dict | None = None, progress: ProgressFn | None = None,
              cancel: CancelToken | None = None, synthetic: int | None = None) -> CTFResult:
    """The whole CTF audit: pairs (0–30 %), batched scoring of the unique texts (30–80 %), statistics.

    ``synthetic``: also score a sample of that many madlibs template rows (:func:`synthetic_texts`; None or 0:
    off) with the same model, term sets, control words and token limit, reported as CTF-gap records with subset
    ``"synthetic"`` (one per term split; counted in the Bonferroni family). ``settings["synthetic"]`` describes
    the sample (or says why it gave no record: no template mentions a term of the set)."""
    from fairdesk.core import provenance

    rep = Reporter(progress, cancel)
    texts = list(texts)
    if not texts:
        raise DataError("No texts to audit.")
    if labels is not None:  # checked before the expensive steps
        labels = np.asarray(labels)
        if labels.shape[0] != len(texts):
            raise DataError(f"{labels.shape[0]} labels for {len(texts)} texts.")
        if not np.isin(labels, (0, 1)).all():
            raise DataError("Labels must be 0 or 1 (1 = the positive class, e.g. toxic).")
    pairs = build_pairs(texts, terms, held_out_terms, control_terms, max_tokens, k_control, seed,
                        rep.sub(0.0, 0.3), rep.cancel)
    if not (pairs.kind == 0).any():
        raise DataError("No text mentions a term of the chosen term set within the token limit "
                        f"({max_tokens} tokens); choose another term set or raise --max-tokens.")
    synth = synth_info = None
    if synthetic:
        rep(0.25, "synthetic template texts")
        s_texts, _s_labels, synth_info = synthetic_texts(int(synthetic), seed)
        synth = build_pairs(s_texts, terms, held_out_terms, control_terms, max_tokens,
                            k_control, seed, None, rep.cancel)
        if not (synth.kind == 0).any():
            synth_info["note"] = ("No synthetic template text mentions a term of the chosen term set, so the "
                                  "synthetic subset has no result (the templates use the 50 Dixon et al. terms).")
            synth = None
    scores = score_texts(score, pairs.texts, batch_size, rep.sub(0.3, 0.7 if synth is not None else 0.8),
                         rep.cancel)
    family = None
    if synth is not None:
        family = len(pairs.term_sets) * ((3 if labels is not None else 1) + 1)
    result = ctf_statistics(pairs, scores, labels, margin, alpha, n_boot, threshold, seed,
                            progress=rep.sub(0.8, 0.95 if synth is not None else 1.0), cancel=rep.cancel,
                            family_size=family)
    if synth is not None:
        s_scores = score_texts(score, synth.texts, batch_size, rep.sub(0.7, 0.8), rep.cancel)
        s_res = ctf_statistics(synth, s_scores, None, margin, alpha, n_boot, threshold, seed, n_examples_shown=0,
                               progress=rep.sub(0.95, 1.0), cancel=rep.cancel, family_size=family)
        for rec in s_res.ctf_gap:
            rec["subset"] = SYNTHETIC
            result.ctf_gap.append(rec)
            if "control" in rec:
                result.control.setdefault("records", []).append(
                    {k: rec.get(k) for k in ("terms", "subset", "n", "control", "control_ci_low", "control_ci_high")})
        synth_info.update(n_identity_pairs=int((synth.kind == 0).sum()), n_control_pairs=int((synth.kind == 1).sum()),
                          n_unique_texts_scored=len(synth.texts), mean_score=float(np.mean(s_scores)))
    if synth_info is not None:
        result.settings["synthetic"] = synth_info
    result.settings.update(max_tokens=max_tokens, k_control=k_control, batch_size=batch_size)
    result.provenance = provenance.make(seed, data_sha256(texts, labels), model_hashes,
                                        term_set_sha256={k: v["sha256"] for k, v in pairs.term_sets.items()})
    return result


def ctf_from_scored_pairs(frame, labels_by_id: dict | None = None, margin: float = 0.02, alpha: float = 0.05,
                          n_boot: int = 2000, threshold: float = 0.5, seed: int = 0,
                          progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> CTFResult:
    """Statistics from a pairs table scored elsewhere: the columns of :meth:`PairSet.frame` plus ``score`` (f of
    ``text``) and ``counterfactual_score``. ``labels_by_id`` maps id → 0/1 (optional). Group rates need labels."""
    from fairdesk.core import provenance

    need = {"id", "text", "counterfactual", "term", "counterfactual_term", "score", "counterfactual_score"}
    missing = need - set(frame.columns)
    if missing:
        raise DataError(f"The scored pairs table lacks column(s) {', '.join(sorted(missing))}.")
    df = frame.copy()
    if "split" not in df:
        df["split"] = "train"
    if "kind" not in df:
        df["kind"] = "identity"
    bad = set(df["split"]) - set(SPLITS)
    if bad:
        raise DataError(f"Unknown split value(s) {sorted(bad)}; use train or held_out.")
    ids = list(dict.fromkeys(df["id"].tolist()))
    id_pos = {v: i for i, v in enumerate(ids)}
    index: dict[str, int] = {}
    texts: list[str] = []
    score_of: list[float] = []

    def idx(s, sc):
        i = index.get(s)
        if i is None:
            i = index[s] = len(texts)
            texts.append(s)
            score_of.append(float(sc))
        return i

    names: dict[str, int] = {}
    left = [idx(t, s) for t, s in zip(df["text"].astype(str), df["score"])]
    right = [idx(t, s) for t, s in zip(df["counterfactual"].astype(str), df["counterfactual_score"])]
    term = [names.setdefault(str(t), len(names)) for t in df["term"]]
    cf_term = [names.setdefault(str(t), len(names)) for t in df["counterfactual_term"]]
    example = np.array([id_pos[v] for v in df["id"]], dtype=np.int64)
    is_ident = (df["kind"] == "identity").to_numpy()
    original = np.zeros(len(ids), dtype=np.int64)
    original[example[is_ident]] = np.asarray(left)[is_ident]
    split = np.array([SPLITS.index(s) for s in df["split"]], dtype=np.int64)
    mentions: dict = {}
    for s_code, s in enumerate(SPLITS):
        sel = is_ident & (split == s_code)
        if sel.any():
            mentions[s] = {}
            for t, e in zip(np.asarray(term)[sel], example[sel]):
                mentions[s].setdefault(list(names)[t], set()).add(int(e))
            mentions[s] = {k: np.array(sorted(v)) for k, v in mentions[s].items()}
    pairs = PairSet(texts, example, np.asarray(left), np.asarray(right), np.asarray(term), np.asarray(cf_term),
                    split, np.where(is_ident, 0, 1), list(names), original, np.ones(len(ids), dtype=bool),
                    mentions, {}, {s: {"name": "imported", "kind": "imported", "groups": [], "sha256": ""}
                                   for s in mentions})
    labels = None
    if labels_by_id is not None:
        labels = np.array([labels_by_id[v] for v in ids])
    result = ctf_statistics(pairs, np.asarray(score_of), labels, margin, alpha, n_boot, threshold, seed,
                            progress=progress, cancel=cancel)
    from fairdesk.core.data.loaders import table_sha256

    result.provenance = provenance.make(seed, table_sha256(df), None, source="imported scores")
    return result
