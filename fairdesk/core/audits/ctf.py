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
  CI: percentile bootstrap over CONTEXTS (:func:`contexts`: texts that are one sentence once their identity terms
  are removed — a template filled with different terms, repeated rows — or the values of a template column);
  a context keeps all its texts and their counterfactuals.
* **Per term** (``term_gaps``, :func:`_per_term`): term ``a``'s gap against reference fillings of the same slot of
  the same text — the median of the other terms' fillings (``value``, its interval, the mean signed change towards
  ``a``) and the control words (``control_gap``, its ``excess`` over the record's control band) — and, descriptive,
  the gap over the swaps a ↔ b (``swap_gap``), which carries the other terms' effects too.
* **Control band**: for every such example, ``k_control`` pairs of control words (neutral adjectives,
  ``resources/text/identity_terms/control.txt``) are put into the slot(s) the identity term occupies and the same
  statistic ``|f(x_c1) − f(x_c2)|`` is averaged — how far the model moves when one neutral word in that slot is
  swapped for another. The band is the mean |change| over the control pairs. The excess ``CF_GAP − control`` is
  bootstrapped jointly: same resampled contexts, and the control WORDS resampled too (:func:`_cluster_bootstrap`).
* **Verdicts** (:func:`apply_verdicts`), per term, corrected over every term record of the audit (BH or Holm):
  "differs" when ``value``, ``control_gap`` and the excess over the control band are all above ``margin``;
  "equivalent within margin" when ``value`` and ``swap_gap`` are below ``margin`` (one-sided tests at α/2, t with the bootstrap
  standard error over contexts); otherwise "inconclusive" — in particular a model that moves as much for a
  neutral edit as for an identity edit ("reacts to any edit") is inconclusive, not biased. A CTF-gap record
  (split × subset) differs when any of its terms differs and is equivalent only when all are; its averaged gap
  is descriptive.
* **Pairs**: per direction ``a → a'`` (examples mentioning ``a`` rewritten with ``a'``): n, mean |change|, mean
  signed change ``f(x') − f(x)``, flip rate at ``threshold`` with a Wilson interval, the share flipping up (0 → 1)
  and down (1 → 0), and the reverse direction's n and flip rate.
* **Group rates** (002 Table 3): per term, TPR and TNR at ``threshold`` over the examples mentioning it (Wilson
  intervals); the gap of a pair is ``|rate_a − rate_a'|`` (pairs where both are estimable); the overall gap is the
  mean over pairs, per split.

The document is JSON-able (:func:`CTFResult.to_dict`): ``ctf_gap``, ``term_gaps``, ``pairs``, ``group_rates``, ``control``,
``counts``, ``settings``, ``provenance``. scipy (sparse) is imported inside functions; torch never.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from fairdesk.core import numbers
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
    context: np.ndarray | None = None              # per example: its context (the resampling unit), 0..C-1
    context_source: str = "sentence"               # "sentence" (identity terms removed) or "template column 'x'"

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
                progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                templates=None) -> PairSet:
    """Counterfactual and control pairs for every example (see the module docstring). ``templates``: one value per
    text naming its template (the resampling unit, :func:`contexts`); None: the sentence without its identity
    terms."""
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
    context, source = contexts(texts, list(sets.values()), templates)
    return PairSet(table, arr["example"], arr["left"], arr["right"], arr["term"], arr["cf_term"], arr["split"],
                   arr["kind"], name_list, original, eligible,
                   {s: {k: np.asarray(v) for k, v in m.items()} for s, m in mentions.items()}, excluded,
                   {s: ts.to_dict() for s, ts in sets.items()}, context, source)


def contexts(texts, term_sets, templates=None) -> tuple[np.ndarray, str]:
    """The resampling unit of every text: ``(context id per text, 0..C-1; what a context is, in words)``.

    With ``templates`` (one value per text, e.g. madlibs' ``template`` column) the texts of one template form one
    context. Otherwise a context is the sentence with its identity terms (of every term set) replaced by one
    placeholder, lower-cased, spaces collapsed: "I am gay" and "i am Muslim" are one context, and so are repeated
    rows. A template-complete set (each context filled with every term) is therefore resampled by context, not by
    row — rows of one context share everything but the term, so they are not independent."""
    import pandas as pd

    from fairdesk.core.text.counterfactual import mask_terms

    if templates is not None:
        values = pd.Series(list(templates), dtype=object)
        if len(values) != len(texts):
            raise DataError(f"{len(values)} template values for {len(texts)} texts.")
        empty = values.isna() | (values.astype(str).str.strip() == "")
        if empty.any():
            raise DataError(f"The template column is empty in {int(empty.sum())} row(s); give every row a template "
                            "(or leave the option out to group texts by their sentence).")
        ids, _ = pd.factorize(values.astype(str))
        return ids.astype(np.int64), "template"
    keys = []
    for t in texts:
        for ts in term_sets:
            t = mask_terms(t, ts, "\x00")
        keys.append(" ".join(t.lower().split()))
    ids, _ = pd.factorize(pd.Series(keys, dtype=object))
    return ids.astype(np.int64), "sentence"


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
    """Replicates (n_boot, 3) of (mean gap, control band, excess), every example its own context (the one-column
    case of :func:`_cluster_bootstrap`)."""
    theta, band = _cluster_bootstrap(np.asarray(gap, dtype=float)[:, None], None, None, n_boot, rng, ctrl_example,
                                     ctrl_w1, ctrl_w2, ctrl_abs, n_words, chunk)
    return np.column_stack([theta[:, 0], band, theta[:, 0] - band])


def _by_context(values, weight, cluster):
    """Per context: the sums ``Σ w v`` and ``Σ w`` of each column (dense C × K) and the context index of each
    example (0..C-1)."""
    from scipy import sparse

    n = values.shape[0]
    cluster = np.arange(n) if cluster is None else np.asarray(cluster)
    _, cluster = np.unique(cluster, return_inverse=True)
    n_c = int(cluster.max()) + 1 if n else 0
    to_c = sparse.csr_matrix((np.ones(n), (cluster, np.arange(n))), shape=(n_c, n))   # context × example
    w = np.ones(values.shape) if weight is None else weight
    w = w.toarray() if sparse.issparse(w) else np.asarray(w, dtype=float)
    v = values.toarray() if sparse.issparse(values) else np.asarray(values, dtype=float)
    return np.asarray(to_c @ np.where(w > 0, v * w, 0.0)), np.asarray(to_c @ w), cluster


def _context_moments(s_num: np.ndarray, s_den: np.ndarray, est: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column, from the contexts' linearised contributions ``u_c = S_c − θ̂ N_c`` to a ratio
    ``θ̂ = Σ S_c / Σ N_c`` (contexts with N_c > 0): the cluster-robust standard error
    ``√(C/(C − 1) · Σ u_c²) / Σ N_c`` and the skewness of ``u`` — for :func:`_t_tests`. Closed form rather than the
    bootstrap's standard deviation: with a few hundred replicates the latter's Monte-Carlo noise fattens the tails
    of T (measured: 5.9% against 4.4% below the margin at nominal 2.5%, 30 contexts)."""
    k_cols = s_num.shape[1]
    se, skew = np.full(k_cols, np.nan), np.full(k_cols, np.nan)
    for k in range(k_cols):
        on = s_den[:, k] > 0
        c = int(on.sum())
        if c < 2:
            continue
        u = s_num[on, k] - est[k] * s_den[on, k]
        se[k] = math.sqrt(c / (c - 1) * float(np.sum(u ** 2))) / float(s_den[on, k].sum())
        m2 = float(np.mean((u - u.mean()) ** 2))
        skew[k] = float(np.mean((u - u.mean()) ** 3)) / m2 ** 1.5 if m2 > 0 else 0.0
    return se, skew


def _cluster_bootstrap(values: np.ndarray, weight: np.ndarray | None, cluster: np.ndarray | None, n_boot: int,
                       rng: np.random.Generator, ctrl_example=None, ctrl_w1=None, ctrl_w2=None, ctrl_abs=None,
                       n_words: int = 0, chunk: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Replicates ``(theta (n_boot, K), band (n_boot,))`` of K weighted means and the control band — a two-level
    bootstrap over contexts and control words.

    ``values`` (n × K, dense or sparse) and ``weight`` (n × K; None: all 1) per example: column k's statistic is
    ``Σ_e M_e w_ek v_ek / Σ_e M_e w_ek`` (column 0 of the audit: CF_GAP per example; column 1 + a: the example's
    mean |change| over its pairs that swap term a in or out, weight 1 where it has one). The CONTEXTS
    (``cluster``: context id per example; None: every example its own) are resampled with replacement, and an
    example takes its context's multiplicity ``M`` — examples of one context (one template filled with different
    terms, repeated rows) share everything but the term, so they are not independent (resampling rows
    made the interval 3–6× too narrow on a template-complete set). The control WORDS are resampled too (weights
    ``W``): the control band is an estimate of how a model reacts to a neutral word in the slot, made from a small
    sample of neutral words, and that sample's variability belongs in the interval (a simulation in
    ``benchmarks/bench_ctf.py --null`` showed that resampling examples alone calls "differs" in ~45% of audits of
    a model that reacts to identity words exactly as to neutral words). A control pair (c1, c2) of example e weighs
    ``M[e] · W[c1] · W[c2]``; the band is the weighted mean of its |change|. The identity terms are not resampled:
    the audit is about these terms. Without control rows ``band`` is NaN. Hand-written (scipy's ``bootstrap``
    resamples one level of independent observations): the replicates are sparse products over chunks.
    """
    from scipy import sparse

    s_num, s_den, cluster = _by_context(values, weight, cluster)
    n_c, k_cols = s_num.shape
    theta = np.full((n_boot, k_cols), np.nan)
    band = np.full(n_boot, np.nan)
    has_ctrl = ctrl_abs is not None and len(ctrl_abs) > 0
    if has_ctrl:
        # per context and control-word pair: summed |change| and count (C × P sparse, P = n_words²)
        col = ctrl_w1 * n_words + ctrl_w2
        shape = (n_c, n_words * n_words)
        rows = cluster[np.asarray(ctrl_example)]
        c_abs = sparse.csc_matrix((ctrl_abs, (rows, col)), shape=shape)
        c_cnt = sparse.csc_matrix((np.ones(len(ctrl_abs)), (rows, col)), shape=shape)
    for start in range(0, n_boot, chunk):
        c = min(chunk, n_boot - start)
        draws = rng.integers(0, n_c, size=(c, n_c)) + (np.arange(c) * n_c)[:, None]
        m = np.bincount(draws.ravel(), minlength=c * n_c).reshape(c, n_c).astype(np.float64)   # multiplicities
        with np.errstate(invalid="ignore", divide="ignore"):
            theta[start:start + c] = (m @ s_num) / (m @ s_den)
        if has_ctrl:
            ww = rng.multinomial(n_words, np.full(n_words, 1.0 / n_words), size=c).astype(np.float64)
            ww = (ww[:, :, None] * ww[:, None, :]).reshape(c, -1)                          # (c, P)
            num = np.einsum("cp,cp->c", np.asarray((c_abs.T @ m.T).T), ww)
            den = np.einsum("cp,cp->c", np.asarray((c_cnt.T @ m.T).T), ww)
            with np.errstate(invalid="ignore", divide="ignore"):
                band[start:start + c] = num / den
    return theta, band


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
    term_gaps: list[dict] = field(default_factory=list)  # one record per term × split × subset, with its verdict

    @property
    def verdicts(self) -> dict[str, str]:
        return {f"{r['terms']}/{r['subset']}": r["verdict"] for r in self.ctf_gap}

    def to_dict(self) -> dict:
        return jsonable({"format": FORMAT, "kind": "ctf", "ctf_gap": self.ctf_gap, "term_gaps": self.term_gaps,
                         "pairs": self.pairs,
                         "group_rates": self.group_rates, "control": self.control, "counts": self.counts,
                         "settings": self.settings, "examples": self.examples, "provenance": self.provenance})


def _per_term(pairs: PairSet, ident: np.ndarray, scores: np.ndarray, n_ex: int, crow: np.ndarray) -> dict:
    """Per example × term of a split, each as (mean value, weight) sparse CSR matrices n_ex × T (weight 1 where the
    example has a value):

    * ``median``: ``|f(x_a) − m|`` and the signed ``f(x_a) − m``, m the median of the other terms' fillings of the
      same slot of the same text — term a's own effect: the other terms' effects reach m only when half of them
      are biased the same way, whereas a mean over the swaps a ↔ b carries every other term's effect (one biased
      term b lifts every other term's swap gap by about δ/(T − 1));
    * ``control`` (None without control rows): ``|f(x_a) − f(x_w)|`` averaged over the control fillings w of the
      same slot — a reference without any identity term, so its excess over the control band cannot be made by
      other terms, however many are biased;
    * ``swap``: the mean |change| over the swaps a ↔ b with the other terms (CTF's own per-term gap).

    and ``names``: the term names of the T columns."""
    import warnings

    from scipy import sparse

    rows = np.flatnonzero(ident)
    t_all = np.concatenate([pairs.term[rows], pairs.cf_term[rows]])
    terms = np.unique(t_all)
    col_of = np.full(len(pairs.term_names), -1, dtype=np.int64)
    col_of[terms] = np.arange(len(terms))
    shape = (n_ex, len(terms))

    def mean_by(e, c, *vals):
        cnt = sparse.csr_matrix((np.ones(len(e)), (e, c)), shape=shape)   # duplicates are summed
        inv = cnt.copy()
        inv.data = 1.0 / inv.data
        w = cnt.copy()
        w.data = np.ones_like(w.data)
        return [sparse.csr_matrix((v, (e, c)), shape=shape).multiply(inv).tocsr() for v in vals] + [w]

    e2 = np.concatenate([pairs.example[rows], pairs.example[rows]])
    c2 = col_of[t_all]
    change = scores[pairs.right[rows]] - scores[pairs.left[rows]]
    swap_abs, swap_w = mean_by(e2, c2, np.abs(np.concatenate([change, change])))
    # the filling of the slot with each term: the original with its own term, each counterfactual with its term
    f_s = np.concatenate([scores[pairs.left[rows]], scores[pairs.right[rows]]])
    filled, _w = mean_by(e2, c2, f_s)
    dense = np.where(_w.toarray() > 0, filled.toarray(), np.nan)
    med_signed = np.full(dense.shape, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for j in range(dense.shape[1]):
            others = np.delete(dense, j, axis=1)
            m = np.nanmedian(others, axis=1) if others.shape[1] else np.full(n_ex, np.nan)
            med_signed[:, j] = dense[:, j] - m
    # the averages of equal scores differ in the last bits: a model blind to the terms must read exactly 0
    med_signed[np.abs(med_signed) < 1e-12] = 0.0
    med_abs = np.abs(med_signed)
    on = np.isfinite(med_signed)
    e_m, c_m = np.nonzero(on)
    med = mean_by(e_m, c_m, med_abs[on], med_signed[on])
    out = {"names": [pairs.term_names[int(t)] for t in terms], "median": tuple(med), "swap": (swap_abs, swap_w),
           "control": None}
    if len(crow):
        ce = np.concatenate([pairs.example[crow], pairs.example[crow]])
        ct = np.concatenate([pairs.left[crow], pairs.right[crow]])
        uniq = np.unique(ce * len(pairs.texts) + ct)            # each control text of an example once
        ce, ct = uniq // len(pairs.texts), uniq % len(pairs.texts)
        k = np.bincount(ce, minlength=n_ex)
        ref = np.full((n_ex, max(int(k.max()), 1)), np.nan)
        ref[ce, np.arange(len(ce)) - np.concatenate([[0], np.cumsum(k)[:-1]])[ce]] = scores[ct]
        e_c, c_c = np.nonzero(on & (k > 0)[:, None])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            g = np.nanmean(np.abs(dense[e_c, c_c][:, None] - ref[e_c]), axis=1)
        g[g < 1e-12] = 0.0
        out["control"] = tuple(mean_by(e_c, c_c, g))
    return out


def _t_tests(est: np.ndarray, se: np.ndarray, n_ctx: np.ndarray, margin: float, skew: np.ndarray | None = None):
    """One-sided p-values of "above the margin" and "below the margin" for each column.

    ``T = (θ̂ − margin) / SE`` referred to t with C − 1 degrees of freedom (the caller gives the SE over contexts, or
    for "below" that SE scaled to the null value). With ``skew`` (the skewness γ of the contexts' contributions,
    :func:`_context_moments`) T is first passed through Hall's (1992) monotone skewness-removing transformation
    ``T + a T² + a² T³ / 3 + γ / (6 √C)``, ``a = γ / (3 √C)``: a gap is a mean of absolute changes, skewed to the
    right (docs/methods.md §5 has the size study). Hand-written (no library has it); the reference distribution is
    scipy's. Smooth p-values, because a
    percentile count cannot go below 1/(B + 1), too coarse for a correction over dozens of terms. NaN where fewer
    than 2 contexts."""
    from scipy.stats import t as t_dist

    diff = est - margin
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        z = np.where(se > 0, diff / np.where(se > 0, se, 1), np.sign(diff) * np.inf)
        if skew is not None:
            g = np.nan_to_num(skew)
            a = g / (3 * np.sqrt(np.maximum(n_ctx, 1)))
            hall = z + a * z ** 2 + a ** 2 * z ** 3 / 3 + g / (6 * np.sqrt(np.maximum(n_ctx, 1)))
            z = np.where(np.isfinite(z), hall, z)
    df = np.maximum(n_ctx - 1, 1)
    above, below = t_dist.sf(z, df), t_dist.cdf(z, df)
    bad = (n_ctx < 2) | ~np.isfinite(est)
    above[bad] = np.nan
    below[bad] = np.nan
    return above, below


def _boot_se(boot: np.ndarray, n_ctx: np.ndarray) -> np.ndarray:
    """The bootstrap's standard deviation over contexts, inflated by √(C/(C − 1)) (the bootstrap's shrinkage of the
    variance of a mean of C units) — the SE of the excess over the control band, whose control words have no
    closed form."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanstd(boot, axis=0, ddof=1) * np.sqrt(n_ctx / np.maximum(n_ctx - 1, 1))


def _gap_records(split, subset, sel, gap, per_term, context, pairs, crow_all, absch, ident, margin, alpha, n_boot,
                 rng):
    """The averaged CTF-gap record of (split, subset) and one record per term, with bootstrap intervals over
    contexts and the one-sided p-values the verdicts use (:func:`apply_verdicts`). Columns of one bootstrap: the
    averaged gap, then per term its gap against the median of the other terms, its swap gap and (with control
    rows) its gap against the control words."""
    from scipy import sparse

    n_ex = len(sel)
    ex = np.flatnonzero(sel)
    n = len(ex)
    pos = np.full(n_ex, -1)
    pos[ex] = np.arange(n)
    crow = crow_all[pos[pairs.example[crow_all]] >= 0]
    has_control = len(crow) > 0 and per_term["control"] is not None
    ctx = context[ex]
    rec = {"subset": subset, "terms": split, "n": n, "value": float(gap[ex].mean()) if n else float("nan"),
           "n_pairs": int(sel[pairs.example[ident]].sum()) if n else 0,
           "n_contexts": int(len(np.unique(ctx))) if n else 0}
    words = w1 = w2 = None
    if has_control:
        words, wid = np.unique(np.concatenate([pairs.term[crow], pairs.cf_term[crow]]), return_inverse=True)
        w1, w2 = wid[:len(crow)], wid[len(crow):]
        rec.update(control=float(absch[crow].mean()), n_control_pairs=int(len(crow)),
                   n_control_words=int(len(words)))
        rec["excess"] = rec["value"] - rec["control"]
    m_abs, m_signed, m_w = per_term["median"]
    blocks = [per_term["median"][::2], per_term["swap"]] + ([per_term["control"]] if has_control else [])
    T = len(per_term["names"])
    values = sparse.hstack([sparse.csr_matrix(gap[ex][:, None])] + [v[ex] for v, _ in blocks]).tocsr()
    weight = sparse.hstack([sparse.csr_matrix(np.ones((n, 1)))] + [w[ex] for _, w in blocks]).tocsr()
    w_dense = weight.toarray()
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.asarray(values.multiply(weight).sum(axis=0)).ravel() / w_dense.sum(axis=0)
        signed = np.asarray(m_signed[ex].sum(axis=0)).ravel() / np.asarray(m_w[ex].sum(axis=0)).ravel()
    n_ctx = np.array([len(np.unique(ctx[w_dense[:, j] > 0])) for j in range(w_dense.shape[1])], dtype=float)
    M, S, C = 1, 1 + T, 1 + 2 * T        # first column of each block
    terms_out = []
    if n >= 2:
        theta, band = _cluster_bootstrap(values, weight, ctx, n_boot, rng, pos[pairs.example[crow]],
                                         w1, w2, absch[crow] if has_control else None,
                                         len(words) if has_control else 0)
        lo, hi = _pct(theta, 1 - alpha)
        rec.update(ci_low=float(lo[0]), ci_high=float(hi[0]))
        s_num, s_den, _ = _by_context(values, weight, ctx)
        se, skew = _context_moments(s_num, s_den, est)
        p_above, _ = _t_tests(est, se, n_ctx, margin, skew)
        # "below the margin": the SE scaled to the null value (the coefficient of variation times the margin) —
        # a gap is a mean of non-negative changes whose spread grows with its level, so a low estimate comes with
        # a low SE and the plain T said "below" too often (docs/methods.md §5)
        with np.errstate(invalid="ignore", divide="ignore"):
            se_null = np.where(est > 0, se * margin / np.where(est > 0, est, 1), 0.0)
        _, p_below = _t_tests(est, se_null, n_ctx, margin, skew)
        if has_control:
            excess = theta - band[:, None]
            blo, bhi = _pct(band[:, None], 1 - alpha)
            elo, ehi = _pct(excess, 1 - alpha)
            rec.update(control_ci_low=float(blo[0]), control_ci_high=float(bhi[0]), excess_ci_low=float(elo[0]),
                       excess_ci_high=float(ehi[0]))
            p_excess, _ = _t_tests(est - rec["control"], _boot_se(excess, n_ctx), n_ctx, margin)
    else:
        rec.update(ci_low=float("nan"), ci_high=float("nan"))
        lo = hi = p_above = p_below = np.full(len(est), np.nan)
    for j, term in enumerate(per_term["names"]):
        if w_dense[:, M + j].sum() == 0:
            continue
        t = {"terms": split, "subset": subset, "term": term, "n": int((w_dense[:, M + j] > 0).sum()),
             "n_contexts": int(n_ctx[M + j]), "value": float(est[M + j]), "ci_low": float(lo[M + j]),
             "ci_high": float(hi[M + j]), "mean_change_towards": float(signed[j]),
             "p_above_margin": float(p_above[M + j]), "p_below_margin": float(p_below[M + j]),
             "swap_gap": float(est[S + j]), "swap_ci_low": float(lo[S + j]), "swap_ci_high": float(hi[S + j]),
             "p_swap_below_margin": float(p_below[S + j])}
        if has_control and n >= 2 and w_dense[:, C + j].sum() > 0:
            t.update(control_gap=float(est[C + j]), p_control_gap_above_margin=float(p_above[C + j]),
                     control=rec["control"], excess=float(est[C + j] - rec["control"]),
                     excess_ci_low=float(elo[C + j]), excess_ci_high=float(ehi[C + j]),
                     p_excess_above_margin=float(p_excess[C + j]))
        # differs: above the margin against the other terms AND (with control words) against a neutral word in
        # the slot, by more than the neutral words move among themselves; equivalent: within the margin against
        # the other terms both ways (the median and every swap) — a swap gap lifted by another term's effect
        # can only make equivalence harder
        p_d = max([t["p_above_margin"]] + [t[k] for k in ("p_control_gap_above_margin", "p_excess_above_margin")
                                           if k in t])
        t.update(p_differs=p_d, p_equivalence=max(t["p_below_margin"], t["p_swap_below_margin"]))
        terms_out.append(t)
    return rec, terms_out


def apply_verdicts(records: list[dict], term_records: list[dict], margin: float, alpha: float = 0.05,
                   correction: str = "bh") -> None:
    """The verdicts, in place: per term from the p-values corrected over every term record of the audit (one
    family; ``correction`` "bh" or "holm", as the group audit), per averaged-gap record from its terms.

    A term **differs** when its corrected p of "gap ≤ margin" and — with a control band — of "excess over the band
    ≤ margin" (intersection–union: the larger of the two p-values) is ≤ α/2; **equivalent within margin** when its
    corrected p of "gap ≥ margin" is ≤ α/2 (one-sided tests at α/2: the two sides of a 1 − α interval); otherwise
    **inconclusive**. A record (split × subset) says "differs" when any of its terms differs, "equivalent within
    margin" only when every one of its terms is, else "inconclusive": its averaged gap is descriptive — averaging
    35 terms dilutes one biased term about 17-fold."""
    from fairdesk.core.stats.multiple import adjust

    q_d = adjust([t["p_differs"] for t in term_records], correction) if term_records else np.array([])
    q_e = adjust([t["p_equivalence"] for t in term_records], correction) if term_records else np.array([])
    for t, qd, qe in zip(term_records, q_d, q_e):
        t["q_differs"], t["q_equivalence"] = float(qd), float(qe)
        if qd <= alpha / 2:
            t["verdict"] = "differs"
            t["reason"] = (f"the gap is above the margin {margin:g}"
                           + (" and above the control band by more than the margin" if "excess" in t else
                              " (no control band)") + f" ({numbers.p_equals(qd, 'corrected p')})")
        elif qe <= alpha / 2:
            t["verdict"] = "equivalent within margin"
            t["reason"] = f"the gap is within the margin {margin:g} ({numbers.p_equals(qe, 'corrected p')})"
        else:
            t["verdict"] = "inconclusive"
            if math.isnan(qd):
                t["reason"] = "fewer than 2 contexts with this term: no test"
            elif t.get("p_above_margin", 1) <= alpha / 2 and t.get("p_excess_above_margin", 0) > alpha / 2:
                t["reason"] = ("the model moves as much when a neutral word in the same slot is swapped (control "
                               "band): it reacts to any edit, not shown to react to this term")
            else:
                t["reason"] = "neither a gap above the margin nor equivalence within it is shown"
    for rec in records:
        mine = [t for t in term_records if t["terms"] == rec["terms"] and t["subset"] == rec["subset"]]
        differ = sorted((t for t in mine if t["verdict"] == "differs"), key=lambda t: -t["value"])
        n_eq = sum(t["verdict"].startswith("equivalent") for t in mine)
        rec["n_terms"], rec["n_terms_differ"], rec["n_terms_equivalent"] = len(mine), len(differ), n_eq
        rec["terms_differ"] = [t["term"] for t in differ]
        if rec["n"] < 2 or not mine:
            rec["verdict"], rec["reason"] = "inconclusive", "fewer than 2 examples with a counterfactual"
        elif differ:
            shown = ", ".join(f"'{t['term']}' ({numbers.fixed(t['value'], 3)})" for t in differ[:5])
            rec["verdict"] = "differs"
            rec["reason"] = (f"{len(differ)} of {len(mine)} terms differ: {shown}"
                             + (", …" if len(differ) > 5 else ""))
        elif n_eq == len(mine):
            rec["verdict"] = "equivalent within margin"
            rec["reason"] = f"every one of the {len(mine)} terms is shown within the margin {margin:g}"
        else:
            rec["verdict"] = "inconclusive"
            rec["reason"] = (f"no term is shown to differ, and {len(mine) - n_eq} of {len(mine)} terms are not shown "
                             f"within the margin {margin:g}")


def ctf_statistics(pairs: PairSet, scores: np.ndarray, labels=None, margin: float = 0.02, alpha: float = 0.05,
                   n_boot: int = 2000, threshold: float = 0.5, seed: int = 0, n_examples_shown: int = 20,
                   progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                   correction: str = "bh") -> CTFResult:
    """All statistics from a scored :class:`PairSet` (``scores[i]`` = f(pairs.texts[i])); verdicts corrected over
    this result's term records (:func:`apply_verdicts`; :func:`ctf_audit` corrects again when it adds the synthetic
    subset)."""
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
    # --- CTF gap records (the averaged gap, descriptive) and one record per term with its own tests
    context = pairs.context if pairs.context is not None else np.arange(n_ex)
    records, term_records = [], []
    k = 0
    n_plan = len(splits) * len(subsets)
    for s_code, split in enumerate(SPLITS):
        if split not in splits:
            continue
        ident = (pairs.split == s_code) & (pairs.kind == 0)
        gap, cnt = _per_example(pairs.example[ident], absch[ident], n_ex)
        crow_all = np.flatnonzero((pairs.split == s_code) & (pairs.kind == 1))
        per_term = _per_term(pairs, ident, scores, n_ex, crow_all)
        for subset in subsets:
            rep(0.1 + 0.5 * k / max(n_plan, 1), f"bootstrap {split}/{subset}")
            k += 1
            sel = cnt > 0
            if subset != "all":
                sel &= (y == int(subset[-1]))
            rec, terms_rec = _gap_records(split, subset, sel, gap, per_term, context, pairs, crow_all, absch,
                                          ident, margin, alpha, n_boot, rng)
            records.append(rec)
            term_records += terms_rec
    apply_verdicts(records, term_records, margin, alpha, correction)
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
    settings = {"margin": margin, "alpha": alpha, "correction": correction, "n_boot": n_boot,
                "resampling_unit": ("template" if pairs.context_source == "template" else
                                    "sentence without its identity terms"),
                "n_contexts": int(len(np.unique(context))),
                "threshold": threshold, "seed": seed,
                "term_sets": {k: {kk: v[kk] for kk in ("name", "kind", "groups", "sha256")}
                              for k, v in pairs.term_sets.items()}}
    rep(1.0, "done")
    return CTFResult(records, pair_records, group, control, counts, settings, {}, shown, term_records)


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
              cancel: CancelToken | None = None, synthetic: int | None = None, templates=None,
              correction: str = "bh") -> CTFResult:
    """The whole CTF audit: pairs (0–30 %), batched scoring of the unique texts (30–80 %), statistics.

    ``synthetic``: also score a sample of that many madlibs template rows (:func:`synthetic_texts`; None or 0:
    off) with the same model, term sets, control words and token limit, reported as CTF-gap records with subset
    ``"synthetic"`` (one per term split; its term records join the correction family). ``settings["synthetic"]``
    describes the sample (or says why it gave no record: no template mentions a term of the set). ``templates``:
    one template name per text, the resampling unit (:func:`contexts`; None: the sentence without its identity
    terms). ``correction``: "bh" or "holm" over every term record of the audit."""
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
    if correction not in ("bh", "holm"):
        raise DataError(f"Unknown correction '{correction}'; choose bh or holm.")
    pairs = build_pairs(texts, terms, held_out_terms, control_terms, max_tokens, k_control, seed,
                        rep.sub(0.0, 0.3), rep.cancel, templates=templates)
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
    result = ctf_statistics(pairs, scores, labels, margin, alpha, n_boot, threshold, seed,
                            progress=rep.sub(0.8, 0.95 if synth is not None else 1.0), cancel=rep.cancel,
                            correction=correction)
    if synth is not None:
        s_scores = score_texts(score, synth.texts, batch_size, rep.sub(0.7, 0.8), rep.cancel)
        s_res = ctf_statistics(synth, s_scores, None, margin, alpha, n_boot, threshold, seed, n_examples_shown=0,
                               progress=rep.sub(0.95, 1.0), cancel=rep.cancel, correction=correction)
        for t in s_res.term_gaps:
            t["subset"] = SYNTHETIC
        result.term_gaps += s_res.term_gaps
        for rec in s_res.ctf_gap:
            rec["subset"] = SYNTHETIC
            result.ctf_gap.append(rec)
            if "control" in rec:
                result.control.setdefault("records", []).append(
                    {k: rec.get(k) for k in ("terms", "subset", "n", "control", "control_ci_low", "control_ci_high")})
        synth_info.update(n_identity_pairs=int((synth.kind == 0).sum()), n_control_pairs=int((synth.kind == 1).sum()),
                          n_unique_texts_scored=len(synth.texts), mean_score=float(np.mean(s_scores)))
    if synth is not None:  # one correction family over the audited and the synthetic texts' terms
        apply_verdicts(result.ctf_gap, result.term_gaps, margin, alpha, correction)
    if synth_info is not None:
        result.settings["synthetic"] = synth_info
    result.settings.update(max_tokens=max_tokens, k_control=k_control, batch_size=batch_size)
    result.provenance = provenance.make(seed, data_sha256(texts, labels), model_hashes,
                                        term_set_sha256={k: v["sha256"] for k, v in pairs.term_sets.items()})
    return result


def ctf_from_scored_pairs(frame, labels_by_id: dict | None = None, margin: float = 0.02, alpha: float = 0.05,
                          n_boot: int = 2000, threshold: float = 0.5, seed: int = 0,
                          progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                          template_col: str | None = None, correction: str = "bh") -> CTFResult:
    """Statistics from a pairs table scored elsewhere: the columns of :meth:`PairSet.frame` plus ``score`` (f of
    ``text``) and ``counterfactual_score``. ``labels_by_id`` maps id → 0/1 (optional). Group rates need labels.
    ``template_col``: a column naming each id's template (the resampling unit); without it a context is the
    original text with the table's terms removed (:func:`contexts`)."""
    from fairdesk.core import provenance

    need = {"id", "text", "counterfactual", "term", "counterfactual_term", "score", "counterfactual_score"}
    missing = need - set(frame.columns)
    if missing:
        raise DataError(f"The scored pairs table lacks column(s) {', '.join(sorted(missing))}.")
    if template_col is not None and template_col not in frame.columns:
        raise DataError(f"The scored pairs table has no column '{template_col}' (--template-col).")
    if correction not in ("bh", "holm"):
        raise DataError(f"Unknown correction '{correction}'; choose bh or holm.")
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
    from fairdesk.core.text.counterfactual import parse_terms

    # the text of each id (from its first row) and, with a template column, its template (one per id)
    # (an identity row's text: a control row's text has a control word where the term was, another context)
    first = df.iloc[np.argsort(~is_ident, kind="stable")].drop_duplicates("id")
    if template_col is not None:
        per_id = df.groupby("id", sort=False)[template_col].nunique(dropna=False)
        if (per_id > 1).any():
            raise DataError(f"Id {per_id[per_id > 1].index[0]} has two different values in the template column "
                            f"'{template_col}'; a text has one template.")
        templates = first.set_index("id").loc[ids, template_col].tolist()
    else:
        templates = None
    ident_terms = sorted(set(df.loc[df["kind"] == "identity", "term"].astype(str))
                         | set(df.loc[df["kind"] == "identity", "counterfactual_term"].astype(str)))
    try:  # the terms the table swaps, to find each text's context (a table's odd term names: the text is the key)
        known = [parse_terms("\n".join(t for t in ident_terms if "|" not in t and not t.startswith("#")),
                             "imported")]
    except DataError:
        known = []
    context, source = contexts(first.set_index("id").loc[ids, "text"].astype(str).tolist(), known, templates)
    pairs = PairSet(texts, example, np.asarray(left), np.asarray(right), np.asarray(term), np.asarray(cf_term),
                    split, np.where(is_ident, 0, 1), list(names), original, np.ones(len(ids), dtype=bool),
                    mentions, {}, {s: {"name": "imported", "kind": "imported", "groups": [], "sha256": ""}
                                   for s in mentions}, context, source)
    labels = None
    if labels_by_id is not None:
        labels = np.array([labels_by_id[v] for v in ids])
    result = ctf_statistics(pairs, np.asarray(score_of), labels, margin, alpha, n_boot, threshold, seed,
                            progress=progress, cancel=cancel, correction=correction)
    from fairdesk.core.data.loaders import table_sha256

    result.provenance = provenance.make(seed, table_sha256(df), None, source="imported scores")
    return result
