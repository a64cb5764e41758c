"""Simulated scored-pair tables for the CTF audit's validity (issue 22; METHODS §5, docs/methods.md §5 "Unit of
resampling and per-term verdicts"): scores are simulated directly, no model is trained, and the table goes through
the same public function as ``fairdesk-cli audit ctf-scores`` (:func:`fairdesk.core.audits.ctf.ctf_from_scored_pairs`).

The score of the text of context ``c`` filled with term ``t`` is ``f(c, t) = b_c + s_c · z_{c,t} + δ·[t = planted]``
with ``b_c`` uniform on [0.3, 0.7], ``z`` standard normal and ``s_c`` a context scale with mean ``margin · √π / 2``,
so that every term's expected gap ``E|f(c, a) − f(c, b)|`` is exactly the margin (or ``background``) under the null ("at the margin":
the hardest null for both "differs" and "equivalent"). Contexts nested in templates share part of their ``z`` (the
template's reading of each term, correlation ``rho``) and their scale, so that a template, not a sentence, is the
independent unit when ``rho`` > 0. Layouts:

* ``complete`` — every context filled with every term (the madlibs layout);
* ``sparse`` — every context once, with one random term (real texts);
* duplicates — every row repeated 1…``max_dup`` times (identical text and score).

Control pairs (``control`` > 0): ``k_control`` pairs of neutral words per row in the same slot, whose scores move by
``control`` on average (``f(c, w) = b_c + control · √π / 2 · z_{c,w}``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

TEMPLATE_COL = "template"


@dataclass(frozen=True)
class CTFDesign:
    n_terms: int = 8
    n_contexts: int = 40            # sentence contexts (in all templates together)
    layout: str = "complete"        # "complete" | "sparse"
    max_dup: int = 1                # every row repeated 1..max_dup times
    n_templates: int = 0            # 0: no templates (every context its own); else contexts nested in templates
    rho: float = 0.0                # share of z common to the contexts of one template
    scale_sd: float = 0.5           # log-scale SD of the context scale s_c (skewed across contexts)
    planted: float = 0.0            # δ added to the score of the planted term (term 0)
    margin: float = 0.02
    background: float | None = None  # every term's expected gap without the planted effect (None: the margin)
    control: float = 0.0            # mean |change| of the control pairs (0: no control rows)
    k_control: int = 2

    def describe(self) -> str:
        parts = [f"{self.n_terms} terms", f"{self.n_contexts} contexts", self.layout]
        if self.max_dup > 1:
            parts.append(f"rows ×1–{self.max_dup}")
        if self.n_templates:
            parts.append(f"{self.n_templates} templates ρ={self.rho:g}")
        if self.planted:
            parts.append(f"term 0 +{self.planted:.3g}")
        if self.background is not None:
            parts.append(f"other gaps {self.background:.3g}")
        if self.control:
            parts.append(f"control {self.control:g}")
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
    terms = term_names(d.n_terms)
    n_tpl = d.n_templates or d.n_contexts
    tpl_of = np.arange(d.n_contexts) % n_tpl if d.n_templates else np.arange(d.n_contexts)
    mean_scale = (d.margin if d.background is None else d.background) * math.sqrt(math.pi) / 2
    # lognormal scale with mean mean_scale; templates carry it when there are templates
    tpl_scale = mean_scale * np.exp(rng.normal(-d.scale_sd ** 2 / 2, d.scale_sd, n_tpl))
    scale = tpl_scale[tpl_of]
    base = rng.uniform(0.3, 0.7, d.n_contexts)
    z_tpl = rng.standard_normal((n_tpl, d.n_terms))
    z = (math.sqrt(d.rho) * z_tpl[tpl_of] + math.sqrt(1 - d.rho) * rng.standard_normal((d.n_contexts, d.n_terms)))
    f = base[:, None] + scale[:, None] * z
    f[:, 0] += d.planted
    f = np.clip(f, 0.0, 1.0)
    ctrl_words = [f"ctrlword{i:02d}" for i in range(8)]
    fc = np.clip(base[:, None] + d.control * math.sqrt(math.pi) / 2 * rng.standard_normal((d.n_contexts, 8)), 0, 1)

    def text(c, word):
        return f"template {tpl_of[c]} sentence {c} mentions the {word} here"

    if d.layout == "complete":
        rows = [(c, a) for c in range(d.n_contexts) for a in range(d.n_terms)]
    elif d.layout == "sparse":
        rows = [(c, int(rng.integers(d.n_terms))) for c in range(d.n_contexts)]
    else:
        raise ValueError(f"unknown layout {d.layout!r}")
    out = {k: [] for k in ("id", "text", "counterfactual", "term", "counterfactual_term", "split", "kind", "score",
                           "counterfactual_score", TEMPLATE_COL)}
    rid = 0
    for c, a in rows:
        for _ in range(int(rng.integers(1, d.max_dup + 1))):
            for b in range(d.n_terms):
                if b == a:
                    continue
                for key, v in (("id", rid), ("text", text(c, terms[a])), ("counterfactual", text(c, terms[b])),
                               ("term", terms[a]), ("counterfactual_term", terms[b]), ("split", "train"),
                               ("kind", "identity"), ("score", f[c, a]), ("counterfactual_score", f[c, b]),
                               (TEMPLATE_COL, f"t{tpl_of[c]}")):
                    out[key].append(v)
            if d.control:
                for _k in range(d.k_control):
                    w1, w2 = rng.choice(8, size=2, replace=False)
                    for key, v in (("id", rid), ("text", text(c, ctrl_words[w1])),
                                   ("counterfactual", text(c, ctrl_words[w2])), ("term", ctrl_words[w1]),
                                   ("counterfactual_term", ctrl_words[w2]), ("split", "train"), ("kind", "control"),
                                   ("score", fc[c, w1]), ("counterfactual_score", fc[c, w2]),
                                   (TEMPLATE_COL, f"t{tpl_of[c]}")):
                        out[key].append(v)
            rid += 1
    frame = pd.DataFrame(out)
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


def draw_design(rng: np.random.Generator, planted: bool) -> CTFDesign:
    """A random design: number of terms, contexts, layout, duplicates, templates and (planted) the effect size."""
    layout = str(rng.choice(["complete", "sparse"]))
    n_terms = int(rng.integers(4, 16))
    n_templates = int(rng.choice([0, 0, 12, 25]))
    if layout == "sparse":
        n_contexts = int(rng.integers(60, 240))
    else:
        n_contexts = int(rng.integers(15, 60))
    if n_templates:
        n_contexts = max(n_contexts, 2 * n_templates)
    return CTFDesign(n_terms=n_terms, n_contexts=n_contexts, layout=layout, max_dup=int(rng.choice([1, 1, 3])),
                     n_templates=n_templates, rho=float(rng.choice([0.3, 0.7])) if n_templates else 0.0,
                     scale_sd=float(rng.uniform(0.2, 1.0)),
                     planted=float(rng.uniform(0.05, 0.25)) if planted else 0.0,
                     background=float(rng.uniform(0.0, 0.02)) if planted else None,
                     control=float(rng.choice([0.0, 0.005])))


def design_dict(design: CTFDesign) -> dict:
    return asdict(design)


#: the ``bench validity --family ctf`` designs' targets (issue 22: "differs" and "equivalent" each ≤ 0.05 at the
#: margin whatever the layout; a single planted term found in most audits and never certified)
NULL_TARGET = 0.05
POWER_TARGET = 0.8
VALIDITY_BOOT = 300


def _seed(seed: int, name: str, run: int) -> int:
    import zlib

    return int(np.random.default_rng([int(seed), zlib.crc32(name.encode()), int(run)]).integers(0, 2**31 - 1))


def validity_runs(runs: int, seed: int, rep, notes: list[str]) -> list[dict]:
    """The ctf family of :func:`fairdesk.core.validity.run_validity`: three simulations, six rows (keyword arguments
    of its row builder: design, kind, flags, target, level, meaning, tests_flagged, n_tests, seconds).

    1. the null at the margin on a template-complete set (20 terms × 40 contexts): share of audits whose summary
       says "differs", and "equivalent";
    2. the null at the margin over random designs (:func:`draw_design`): the same two shares;
    3. one planted term over random designs: share of audits that call the summary and the planted term "differs",
       and share that call either "equivalent"."""
    import time

    sims = [("null at the margin, template-complete 20 terms × 40", "complete", False),
            ("null at the margin, random designs", "random", False),
            ("one planted term +0.05–0.25, random designs", "planted", True)]
    rows = []
    for d_i, (title, name, planted) in enumerate(sims):
        sub = rep.sub(d_i / len(sims), (d_i + 1) / len(sims))
        t0 = time.process_time()
        a_flags, b_flags, hits, tests = [], [], 0, 0
        for i in range(runs):
            sub(i / runs, f"ctf: {name} audit {i + 1}/{runs}")
            s = _seed(seed, name, i)
            design = (CTFDesign(n_terms=20, n_contexts=40) if name == "complete" else
                      draw_design(np.random.default_rng(s), planted=planted))
            verdict, terms = run_audit(design, s, n_boot=VALIDITY_BOOT)
            hits += sum(t["verdict"] == "differs" for t in terms)
            tests += len(terms)
            if planted:
                p = next(t for t in terms if t["term"] == "idterm00")
                a_flags.append(verdict == "differs" and p["verdict"] == "differs")
                b_flags.append(verdict.startswith("equivalent") or p["verdict"].startswith("equivalent"))
            else:
                a_flags.append(verdict == "differs")
                b_flags.append(verdict.startswith("equivalent"))
        secs = time.process_time() - t0
        if planted:
            rows.append(dict(design=title + ": found", kind="planted", flags=a_flags, target_min=POWER_TARGET,
                             level="whole audit", meaning="share of audits whose summary says 'differs' and that "
                             "name the planted term as differing", tests_flagged=hits, n_tests=tests, seconds=secs))
            rows.append(dict(design=title + ": certified", kind="planted", flags=b_flags, target_max=0.0,
                             level="whole audit", meaning="share of audits that call the summary or the planted "
                             "term 'equivalent' (must never happen)", seconds=0.0))
        else:
            rows.append(dict(design=title + ": differs", kind="null", flags=a_flags, target_max=NULL_TARGET,
                             level="whole audit", meaning="share of audits whose summary says 'differs' when every "
                             "term's gap is exactly at the margin", tests_flagged=hits, n_tests=tests,
                             seconds=secs))
            rows.append(dict(design=title + ": equivalent", kind="null", flags=b_flags, target_max=NULL_TARGET,
                             level="whole audit", meaning="share of audits whose summary says 'equivalent within "
                             "the margin' when every term's gap is exactly at the margin", seconds=0.0))
    notes.append(f"ctf: scores simulated directly (fairdesk.core.synthetic.ctf_sim) through ctf_from_scored_pairs "
                 f"with {VALIDITY_BOOT} bootstrap replicates per audit (the product default is 2000), margin 0.02, "
                 "BH over the terms; templates declared with the template column.")
    return rows
