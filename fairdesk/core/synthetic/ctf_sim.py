"""Simulated scored-pair tables for the CTF audit's validity (METHODS §5, docs/methods.md §5 "Unit of resampling
and per-term verdicts"): scores are simulated directly, no model is trained, and the table goes through the same
public function as ``fairdesk-cli audit ctf-scores`` (:func:`fairdesk.core.audits.ctf.ctf_from_scored_pairs`).

The score of the text of context ``c`` with term ``t`` in its slot is ``f(c, t) = b_c + s_c · z_{c,t} + δ_t`` and
with control word ``w`` in the slot ``f(c, w) = b_c + κ · s_c · z_{c,w}``, with ``b_c`` uniform on [0.3, 0.7], ``z``
standard normal, ``s_c`` a context scale (lognormal, SD ``scale_sd`` on the log scale) and ``δ_t`` the planted
effect of term t (terms 0 … ``n_planted`` − 1 get ``planted`` with alternating signs, or the effects of
``effects``; 0 for the others), plus ``common`` for every term (a reaction to any identity term, which no swap
between terms shows). The scales are set so that an unplanted term's expected gap against the control
slot, ``E|f(c, t) − f(c, w)|``, is exactly the margin (or ``background``) — "at the margin", the hardest null for
both "differs" and "equivalent" — and the control pairs move by ``control`` on average (``E|f(c, w₁) − f(c, w₂)|``;
κ follows). Contexts nested in templates share part of their ``z`` (the template's reading of each term,
correlation ``rho``) and their scale, so that a template, not a sentence, is the independent unit when ``rho`` > 0.
Layouts:

* ``complete`` — every context filled with every term (the madlibs layout);
* ``sparse`` — every context once, with one random term (real texts);
* duplicates — every row repeated 1…``max_dup`` times (identical text and score).

Every row has its counterfactuals with every other term and ``k_control`` pairs of control words (8 words) in the
same slot; ``control=None`` leaves the control rows out (the per-term gap is then measured against the other terms).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

TEMPLATE_COL = "template"
N_CONTROL_WORDS = 8


@dataclass(frozen=True)
class CTFDesign:
    n_terms: int = 8
    n_contexts: int = 40            # sentence contexts (in all templates together)
    layout: str = "complete"        # "complete" | "sparse"
    max_dup: int = 1                # every row repeated 1..max_dup times
    n_templates: int = 0            # 0: no templates (every context its own); else contexts nested in templates
    rho: float = 0.0                # share of z common to the contexts of one template
    scale_sd: float = 0.5           # log-scale SD of the context scale s_c (skewed across contexts)
    planted: float = 0.0            # |δ| of each planted term (terms 0..n_planted-1, signs +, −, +, …)
    margin: float = 0.02
    background: float | None = None  # every unplanted term's expected gap against the control slot (None: margin)
    control: float | None = 0.0     # mean |change| of the control pairs (None: no control rows)
    k_control: int = 2
    n_planted: int = 1              # how many terms carry ``planted`` (when planted ≠ 0)
    effects: tuple = ()             # explicit δ of terms 0, 1, … (overrides planted / n_planted)
    common: float = 0.0             # added to every term's score: a reaction to any identity term, shared by all

    def deltas(self) -> np.ndarray:
        """δ_t of every term."""
        d = np.zeros(self.n_terms)
        if self.effects:
            d[:len(self.effects)] = self.effects
        elif self.planted:
            k = min(self.n_planted, self.n_terms)
            d[:k] = self.planted * np.where(np.arange(k) % 2 == 0, 1.0, -1.0)
        return d

    def planted_terms(self) -> list[str]:
        return [n for n, x in zip(term_names(self.n_terms), self.deltas()) if x != 0]

    def describe(self) -> str:
        parts = [f"{self.n_terms} terms", f"{self.n_contexts} contexts", self.layout]
        if self.max_dup > 1:
            parts.append(f"rows ×1–{self.max_dup}")
        if self.n_templates:
            parts.append(f"{self.n_templates} templates ρ={self.rho:g}")
        k = len(self.planted_terms())
        if k:
            parts.append(f"{k} planted |δ| {np.abs(self.deltas()[self.deltas() != 0]).min():.3g}–"
                         f"{np.abs(self.deltas()).max():.3g}")
        if self.background is not None:
            parts.append(f"other gaps {self.background:.3g}")
        parts.append("no control rows" if self.control is None else f"control {self.control:g}")
        return ", ".join(parts)


def term_names(n: int) -> list[str]:
    return [f"idterm{i:02d}" for i in range(n)]


def simulate_scored_pairs(design: CTFDesign, seed: int):
    """``(frame, template column or None)``: the scored pairs table of one simulated audit (columns of
    :meth:`fairdesk.core.audits.ctf.PairSet.frame` plus ``score``, ``counterfactual_score`` and, with templates,
    ``template``)."""
    import pandas as pd

    d = design
    rng = np.random.default_rng(seed)
    T = d.n_terms
    terms = np.array(term_names(T), dtype=object)
    n_tpl = d.n_templates or d.n_contexts
    tpl_of = np.arange(d.n_contexts) % n_tpl if d.n_templates else np.arange(d.n_contexts)
    gap = d.margin if d.background is None else d.background
    band = d.control or 0.0
    # κ: E|f(w1) − f(w2)| / E|f(t) − f(w)| = κ√2 / √(1 + κ²) = band / gap
    r = band / gap if gap > 0 else 0.0
    if r >= math.sqrt(2):
        raise ValueError("the control band must be below √2 × the terms' gap")
    kappa = r / math.sqrt(2 - r * r)
    mean_scale = gap * math.sqrt(math.pi / 2) / math.sqrt(1 + kappa ** 2)
    # lognormal scale with mean mean_scale; templates carry it when there are templates
    tpl_scale = mean_scale * np.exp(rng.normal(-d.scale_sd ** 2 / 2, d.scale_sd, n_tpl))
    scale = tpl_scale[tpl_of]
    base = rng.uniform(0.3, 0.7, d.n_contexts)
    z_tpl = rng.standard_normal((n_tpl, T))
    z = (math.sqrt(d.rho) * z_tpl[tpl_of] + math.sqrt(1 - d.rho) * rng.standard_normal((d.n_contexts, T)))
    f = np.clip(base[:, None] + scale[:, None] * z + d.deltas()[None, :] + d.common, 0.0, 1.0)
    # without a gap (background 0) the control words move by the band on their own
    c_scale = kappa * scale if gap > 0 else np.full(d.n_contexts, band * math.sqrt(math.pi) / 2)
    fc = np.clip(base[:, None] + c_scale[:, None] * rng.standard_normal((d.n_contexts, N_CONTROL_WORDS)), 0, 1)
    ctrl_words = np.array([f"ctrlword{i:02d}" for i in range(N_CONTROL_WORDS)], dtype=object)

    if d.layout == "complete":
        c_row = np.repeat(np.arange(d.n_contexts), T)
        a_row = np.tile(np.arange(T), d.n_contexts)
    elif d.layout == "sparse":
        c_row = np.arange(d.n_contexts)
        a_row = rng.integers(T, size=d.n_contexts)
    else:
        raise ValueError(f"unknown layout {d.layout!r}")
    dup = rng.integers(1, d.max_dup + 1, size=len(c_row))
    c_id, a_id = np.repeat(c_row, dup), np.repeat(a_row, dup)      # one per id (row of the audited data)
    n_id = len(c_id)
    # identity rows: every id against every other term
    i_id = np.repeat(np.arange(n_id), T - 1)
    i_a = a_id[i_id]
    i_b = (i_a + 1 + np.tile(np.arange(T - 1), n_id)) % T
    i_c = c_id[i_id]
    parts = [pd.DataFrame({"id": i_id, "c": i_c, "w1": terms[i_a], "w2": terms[i_b], "kind": "identity",
                           "score": f[i_c, i_a], "counterfactual_score": f[i_c, i_b]})]
    if d.control is not None:
        k_id = np.repeat(np.arange(n_id), d.k_control)
        w1 = rng.integers(N_CONTROL_WORDS, size=len(k_id))
        w2 = (w1 + rng.integers(1, N_CONTROL_WORDS, size=len(k_id))) % N_CONTROL_WORDS
        k_c = c_id[k_id]
        parts.append(pd.DataFrame({"id": k_id, "c": k_c, "w1": ctrl_words[w1], "w2": ctrl_words[w2],
                                   "kind": "control", "score": fc[k_c, w1], "counterfactual_score": fc[k_c, w2]}))
    df = pd.concat(parts, ignore_index=True).sort_values("id", kind="stable", ignore_index=True)
    sentence = np.array([f"template {tpl_of[c]} sentence {c} mentions the " for c in range(d.n_contexts)],
                        dtype=object)
    frame = pd.DataFrame({"id": df["id"].to_numpy(), "text": sentence[df["c"]] + df["w1"] + " here",
                          "counterfactual": sentence[df["c"]] + df["w2"] + " here", "term": df["w1"],
                          "counterfactual_term": df["w2"], "split": "train", "kind": df["kind"],
                          "score": df["score"], "counterfactual_score": df["counterfactual_score"],
                          TEMPLATE_COL: np.array([f"t{t}" for t in range(n_tpl)], dtype=object)[tpl_of[df["c"]]]})
    return frame, (TEMPLATE_COL if d.n_templates else None)


def run_audit(design: CTFDesign, seed: int, n_boot: int = 400, declare_template: bool = True,
              correction: str = "bh"):
    """One simulated audit through :func:`~fairdesk.core.audits.ctf.ctf_from_scored_pairs`: ``(summary verdict,
    term records)`` — the summary is the record of split "train", subset "all"."""
    from fairdesk.core.audits.ctf import ctf_from_scored_pairs

    frame, tcol = simulate_scored_pairs(design, seed)
    kw = {"template_col": tcol} if (tcol and declare_template) else {}
    res = ctf_from_scored_pairs(frame, margin=design.margin, n_boot=n_boot, seed=seed, correction=correction,
                                **kw)
    summary = next(r for r in res.ctf_gap if r["terms"] == "train" and r["subset"] == "all")
    return summary["verdict"], [t for t in res.term_gaps if t["subset"] == "all"]


#: The space of :func:`draw_design`: term counts, contexts per layout (a template-complete set is capped at
#: ``complete_rows`` texts), planted effects |δ| (each with a random sign) and the control band as a share of the
#: unplanted terms' gap.
SPACE = {"n_terms": (4, 60), "complete_contexts": (12, 40), "complete_rows": 1200, "sparse_contexts": (40, 200),
         "effect": (0.05, 0.25), "control_share": (0.0, 0.7)}


def draw_design(rng: np.random.Generator, planted: bool, background: str = "margin") -> CTFDesign:
    """A random design of :data:`SPACE`: number of terms (4–60), layout, contexts, duplicates, templates, context
    scales, control band and — ``planted`` — how many terms are biased (one to all but one: half the designs
    1–3, the others uniform) and each one's effect (|δ| 0.05–0.25, random sign). The unplanted terms' gap against
    the control slot is the margin (``background="margin"``, the hardest null) or uniform below it
    (``"below"``)."""
    sp = SPACE
    layout = str(rng.choice(["complete", "sparse"]))
    n_terms = int(np.exp(rng.uniform(np.log(sp["n_terms"][0]), np.log(sp["n_terms"][1] + 1))))
    n_templates = int(rng.choice([0, 0, 6, 12]))
    if layout == "sparse":
        n_contexts = int(rng.integers(sp["sparse_contexts"][0], sp["sparse_contexts"][1] + 1))
    else:
        hi = max(sp["complete_contexts"][0], min(sp["complete_contexts"][1], sp["complete_rows"] // n_terms))
        n_contexts = int(rng.integers(sp["complete_contexts"][0], hi + 1))
    if n_templates:
        n_contexts = max(n_contexts, 2 * n_templates)
    margin = 0.02
    gap = margin if background == "margin" else float(rng.uniform(0.2, 1.0)) * margin
    effects: tuple = ()
    if planted:
        k = int(rng.integers(1, 4)) if rng.random() < 0.5 else int(rng.integers(1, n_terms))
        k = min(k, n_terms - 1)
        effects = tuple(float(x) for x in rng.uniform(*sp["effect"], size=k) * rng.choice([-1.0, 1.0], size=k))
    return CTFDesign(n_terms=n_terms, n_contexts=n_contexts, layout=layout, max_dup=int(rng.choice([1, 1, 3])),
                     n_templates=n_templates, rho=float(rng.choice([0.3, 0.7])) if n_templates else 0.0,
                     scale_sd=float(rng.uniform(0.2, 1.0)), margin=margin, background=gap,
                     control=float(rng.uniform(*sp["control_share"])) * gap, effects=effects)


def design_dict(design: CTFDesign) -> dict:
    return asdict(design)


#: the ``bench validity --family ctf`` designs' targets: "differs" and "equivalent" each ≤ α + 0.02 at the margin
#: whatever the layout, the family-wise error over the unbiased terms ≤ α + 0.02 whatever the number of biased
#: terms, planted terms found (per term) in most audits and never certified
NULL_TARGET = 0.07
POWER_TARGET = 0.8
VALIDITY_BOOT = 300


def _seed(seed: int, name: str, run: int) -> int:
    import zlib

    return int(np.random.default_rng([int(seed), zlib.crc32(name.encode()), int(run)]).integers(0, 2**31 - 1))


def planted_audit(design: CTFDesign, seed: int, n_boot: int = VALIDITY_BOOT, correction: str = "bh") -> dict:
    """One audit of a design with planted terms: whether any unbiased term says "differs" (the family-wise error
    over them), how many planted terms say "differs", whether any says "equivalent", and the counts."""
    verdict, terms = run_audit(design, seed, n_boot=n_boot, correction=correction)
    planted = set(design.planted_terms())
    said = {t["term"]: t["verdict"] for t in terms}
    return {"summary": verdict,
            "false_differs": sum(v == "differs" for k, v in said.items() if k not in planted),
            "found": [said.get(k) == "differs" for k in sorted(planted)],
            "certified": any(said.get(k, "").startswith("equivalent") for k in planted),
            "n_unbiased": sum(k not in planted for k in said)}


def validity_runs(runs: int, seed: int, rep, notes: list[str]) -> list[dict]:
    """The ctf family of :func:`fairdesk.core.validity.run_validity`: three simulations, seven rows (keyword
    arguments of its row builder: design, kind, flags, target, level, meaning, tests_flagged, n_tests, seconds).

    1. every term's swap gap at the margin (its gap against the control words 1/√2 of it) on a template-complete
       set with few terms (8 terms × 40 contexts): share of audits whose summary says "differs", and
       "equivalent";
    2. the null at the margin over random designs of :data:`SPACE` (:func:`draw_design`): the same two shares;
    3. planted terms over random designs (one to all but one of 4–60 terms biased by |δ| 0.05–0.25, the others
       exactly at the margin): the family-wise error over the unbiased terms, the share of planted terms found,
       and the share of audits that certify a planted term."""
    import time

    sims = [("swap gap at the margin, template-complete 8 terms × 40", "complete", False),
            ("null at the margin, random designs (4–60 terms)", "random", False),
            ("1 to T−1 planted terms |δ| 0.05–0.25, others at the margin, 4–60 terms", "planted", True)]
    rows = []
    for d_i, (title, name, planted) in enumerate(sims):
        sub = rep.sub(d_i / len(sims), (d_i + 1) / len(sims))
        t0 = time.process_time()
        a_flags, b_flags, c_flags, hits, tests = [], [], [], 0, 0
        for i in range(runs):
            sub(i / runs, f"ctf: {name} audit {i + 1}/{runs}")
            s = _seed(seed, name, i)
            # the complete design puts the swap gap (the equivalence test's other half) at the margin
            design = (CTFDesign(n_terms=8, n_contexts=40, background=0.02 / math.sqrt(2)) if name == "complete" else
                      draw_design(np.random.default_rng(s), planted=planted))
            if planted:
                out = planted_audit(design, s)
                a_flags.append(out["false_differs"] > 0)
                b_flags += out["found"]
                c_flags.append(out["certified"])
                hits += out["false_differs"]
                tests += out["n_unbiased"]
            else:
                verdict, terms = run_audit(design, s, n_boot=VALIDITY_BOOT)
                hits += sum(t["verdict"] == "differs" for t in terms)
                tests += len(terms)
                a_flags.append(verdict == "differs")
                b_flags.append(verdict.startswith("equivalent"))
        secs = time.process_time() - t0
        if planted:
            rows.append(dict(design=title + ": an unbiased term differs", kind="null", flags=a_flags,
                             target_max=NULL_TARGET, level="whole audit", meaning="share of audits in which at "
                             "least one unbiased term (its gap against the control slot exactly at the margin) "
                             "says 'differs' — the family-wise error over the unbiased terms, whatever the number "
                             "of biased terms", tests_flagged=hits, n_tests=tests, seconds=secs))
            rows.append(dict(design=title + ": planted terms found", kind="planted", flags=b_flags,
                             target_min=POWER_TARGET, level="planted term", meaning="share of planted terms that "
                             "say 'differs'", seconds=0.0))
            rows.append(dict(design=title + ": certified", kind="planted", flags=c_flags, target_max=0.0,
                             level="whole audit", meaning="share of audits that call a planted term 'equivalent' "
                             "(must never happen)", seconds=0.0))
        else:
            rows.append(dict(design=title + ": differs", kind="null", flags=a_flags, target_max=NULL_TARGET,
                             level="whole audit", meaning="share of audits whose summary says 'differs' when every "
                             "term's gap against the control slot is exactly at the margin", tests_flagged=hits,
                             n_tests=tests, seconds=secs))
            rows.append(dict(design=title + ": equivalent", kind="null", flags=b_flags, target_max=NULL_TARGET,
                             level="whole audit", meaning="share of audits whose summary says 'equivalent within "
                             "the margin' when every term's gap is exactly at the margin", seconds=0.0))
    notes.append(f"ctf: scores simulated directly (fairdesk.core.synthetic.ctf_sim) through ctf_from_scored_pairs "
                 f"with {VALIDITY_BOOT} bootstrap replicates per audit (the product default is 2000), margin 0.02, "
                 "BH over the terms, each term's gap against the control words in its slot; templates declared "
                 "with the template column.")
    return rows
