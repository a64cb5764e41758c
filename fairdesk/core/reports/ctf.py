"""PDF report of a counterfactual token fairness audit (audit kind ``ctf``; METHODS §5).

:func:`report_tree` turns the stored document (:meth:`fairdesk.core.audits.ctf.CTFResult.to_dict` plus the job's
``model``, ``data``, ``unknown_terms``, ``notes``, ``attribution``) into the generic
:class:`~fairdesk.core.reports.document.Report`; :func:`build_report` (the registry's signature) writes it with
:func:`fairdesk.core.reports.pdf.write_pdf`. Everything comes from the document (no clock, no files), so every front
end writes the same bytes. Every count goes through :func:`count` and prints as "<k" below ``settings.suppress_k``.

Sections: summary in words (the three verdicts; the terms that differ, named), methods and settings, CTF gaps with
the control band and per term, flip rates per term pair, TPR/TNR by term (002 Table 3), example pairs, provenance and attribution.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from fairdesk.core import numbers
from fairdesk.core.reports.board import Board, are, board_section
from fairdesk.core.reports.document import (with_disclosure, CORRECTION_WORDS, Paragraph, Report, Section, Table, cap, correction_words,
                                            join_words, report_date)
from fairdesk.core.reports.figures import fmt_rate, fmt_signed
from fairdesk.core.text.counterfactual import BUILTIN_TITLES

SPLIT_TITLE = {"train": "train terms", "held_out": "held-out terms"}
SUBSET_TITLE = {"all": "all texts", "label_0": "label-0 texts", "label_1": "label-1 texts",
                "synthetic": "synthetic template texts"}
MAX_PAIR_ROWS = 40
MAX_TERM_ROWS = 60
MAX_EXAMPLES = 12


# --------------------------------------------------------------------------------------------------------------
# Formatting (local: the counts of this report all pass through ``count``)


def num(value) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def count(value, k: int) -> str:
    """A count with thousands separators; below ``k`` it prints as ``"<k"`` (small-cell suppression)."""
    f = num(value)
    if f is None:
        return "–"
    n = int(round(f))
    return f"<{k}" if n < k else f"{n:,}"


def rate(value, n, k: int, digits: int = 3) -> str:
    """A share of ``n`` texts; not shown ("–") when n < k, since share and "<k" together would give the count."""
    return "–" if (num(n) or 0) < k else f3(value, digits)


def rate_ci(low, high, n, k: int) -> str:
    return "–" if (num(n) or 0) < k else ci(low, high)


f3, signed = fmt_rate, fmt_signed  # the figures module's number formats, under the names used here


def ci(low, high, digits: int = 3) -> str:
    lo, hi = num(low), num(high)
    if lo is None or hi is None:
        return "–"
    return f"{lo:.{digits}f} to {hi:.{digits}f}"


def verdict_words(verdict: str | None, margin: float) -> str:
    if not verdict:
        return "–"
    return f"equivalent within ±{numbers.short(margin)}" if verdict.startswith("equivalent") else verdict


def _split(name: str) -> str:
    return SPLIT_TITLE.get(name, name)


def differing_terms(doc: dict) -> list[dict]:
    """The term records that differ, largest gap first."""
    recs = [t for t in doc.get("term_gaps") or [] if t.get("verdict") == "differs"]
    return sorted(recs, key=lambda t: (-(num(t.get("value")) or 0), t.get("terms", ""), t.get("subset", ""),
                                       t.get("term", "")))


def term_sentence(t: dict, k: int | None = None) -> str:
    """One term's finding in words ("Train terms, all texts: swapping in 'muslim' raises the score by 0.19 on
    average (mean |change| …) — differs."). ``k``: small-cell suppression of the text count."""
    towards = num(t.get("mean_change_towards"))
    moves = ("moves the score" if towards is None else
             f"{'raises' if towards >= 0 else 'lowers'} the score by {abs(towards):.2f} on average")
    n = count(t.get("n"), k) if k else f"{int(t.get('n') or 0):,}"
    return (f"{cap(_split(t.get('terms', '')))}, {SUBSET_TITLE.get(t.get('subset'), t.get('subset'))}: swapping in "
            f"'{t.get('term')}' {moves} (mean |change| {f3(t.get('value'))}, 95% CI "
            f"{ci(t.get('ci_low'), t.get('ci_high'))}, over {n} texts) — {t.get('verdict')}.")


def term_sentences(doc: dict, k: int | None = None, limit: int = 10) -> list[str]:
    """The terms that differ, in words, largest gap first — the findings the summary page, the GUI and the CLI
    name (:func:`term_sentence`)."""
    recs = differing_terms(doc)
    out = [term_sentence(t, k) for t in recs[:limit]]
    if len(recs) > limit:
        out.append(f"… and {len(recs) - limit} more term results that differ (see the table 'CTF gap by term').")
    return out


# --------------------------------------------------------------------------------------------------------------
# Sections


def board(doc: dict, k: int) -> Board:
    """What page 1 says of a CTF audit: a grid of term sets × subsets of texts, the identity terms whose swap moves
    the score (largest first, with intervals), what could not be tested, what to check next."""
    settings = doc.get("settings") or {}
    margin = num(settings.get("margin")) or 0.02
    model = doc.get("model") or {}
    recs = doc.get("ctf_gap") or []
    terms = doc.get("term_gaps") or []
    entries = [(cap(_split(r.get("terms", ""))), SUBSET_TITLE.get(r.get("subset"), str(r.get("subset"))),
                r.get("verdict")) for r in terms or recs]
    if terms:
        findings = [term_sentence(t, k) for t in differing_terms(doc)]
    else:
        findings = [f"{cap(_split(r.get('terms', '')))}, {SUBSET_TITLE.get(r.get('subset'), r.get('subset'))}: "
                    f"CTF gap {f3(r.get('value'))} (95% CI {ci(r.get('ci_low'), r.get('ci_high'))}) over "
                    f"{count(r.get('n'), k)} texts — differs." for r in recs if r.get("verdict") == "differs"]
    untested = []
    excluded = (doc.get("counts") or {}).get("excluded_no_valid_counterfactual") or {}
    n_excl = sum(int(v or 0) for v in excluded.values())
    if n_excl:
        untested.append(f"{count(n_excl, k)} texts have no valid counterfactual (their meaning depends on sex) and "
                        "were left out.")
    unknown = sum(len(v) for v in (doc.get("unknown_terms") or {}).values() if isinstance(v, list))
    if unknown:
        untested.append(f"{are(unknown, 'identity term')} of the term sets never found in the texts, so not "
                        "tested.")
    n_inc = sum(1 for r in terms or recs if str(r.get("verdict") or "").startswith("inconclusive"))
    if n_inc:
        untested.append(f"{are(n_inc, 'result')} inconclusive: not evidence that the model is fair.")
    steps = []
    if findings:
        steps.append("Read the example pairs of the terms that differ (page 2 on): does the model react to the "
                     "identity itself?")
        steps.append("Consider training with a counterfactual remedy (counterfactual logit pairing) and audit "
                     "again.")
    steps.append("Add the identity terms your patients use to the term set, and audit again.")
    return Board(question=(f"Would the score of {model.get('name') or 'the model'} change if one identity term in "
                           f"a text were swapped for another, with nothing else changed? Margin ±{numbers.short(margin)} in "
                           "probability."),
                 entries=entries, row_title="Terms", findings=findings,
                 no_findings="No identity term was shown to move the score beyond the margin.",
                 untested=untested, next_steps=steps, plan=str(settings.get("description") or ""),
                 more_where="the table 'CTF gap by term'")


def _summary(doc: dict, k: int) -> Section:
    s = Section("summary", "Summary")
    settings = doc.get("settings") or {}
    margin = num(settings.get("margin")) or 0.02
    model = doc.get("model") or {}
    data = doc.get("data") or {}
    sets = settings.get("term_sets") or {}
    counts = doc.get("counts") or {}
    names = [f"{BUILTIN_TITLES[v.get('name')]} ({_split(key)})" if v.get("name") in BUILTIN_TITLES else
             f"'{v.get('name')}' ({_split(key)})" for key, v in sets.items()]
    what = model.get("name") or "the model"
    method = model.get("method")
    if method:
        lam = num(model.get("lambda"))
        what += f" (trained with {method}" + (f", λ = {numbers.short(lam)}" if method.startswith("clp") and lam is not None
                                               else "") + ")"
    s.blocks.append(Paragraph(
        f"Would the score of {what} change if one identity term in a text were swapped for another, with nothing "
        f"else changed? FairDesk swapped the terms of {join_words(names) or 'the term set'} in the texts of "
        f"{data.get('name') or 'the data'} and measured the CTF gap: the mean absolute change in the predicted "
        f"probability, over texts with a counterfactual. A control band — the same change when a neutral word in "
        f"the same place is swapped for another — tells identity from any edit.", "lead"))
    recs = doc.get("ctf_gap") or []
    terms = doc.get("term_gaps") or []
    if terms:
        tally = {v: sum(1 for r in terms if (r.get("verdict") or "").startswith(v)) for v in
                 ("differs", "equivalent", "inconclusive")}
        s.blocks.append(Paragraph(
            f"Every identity term has its own verdict (margin ±{numbers.short(margin)} in probability; corrected over the "
            f"{len(terms)} term results with the "
            f"{correction_words(settings.get('correction') or 'bh', num(settings.get('alpha')) or 0.05)}): "
            f"{tally['differs']} differ, {tally['equivalent']} equivalent within ±{numbers.short(margin)}, "
            f"{tally['inconclusive']} inconclusive. 'Differs': the term's gap is above the margin and above the "
            "control band by more than the margin; 'equivalent': its gap is shown within the margin; "
            "'inconclusive': neither is shown — it does not mean the model is fair. A result below says 'differs' "
            "when any of its terms differs and 'equivalent' only when every term is shown within the margin; its "
            "averaged gap is descriptive (averaging many terms dilutes one biased term).", "finding"))
        for sentence in term_sentences(doc, k):
            s.blocks.append(Paragraph(sentence, "finding"))
    else:  # documents stored before per-term verdicts
        tally = {v: sum(1 for r in recs if (r.get("verdict") or "").startswith(v)) for v in
                 ("differs", "equivalent", "inconclusive")}
        s.blocks.append(Paragraph(
            f"Verdicts of the {len(recs)} CTF-gap results (margin ±{numbers.short(margin)} in probability): {tally['differs']} "
            f"differ, {tally['equivalent']} equivalent within ±{numbers.short(margin)}, {tally['inconclusive']} inconclusive "
            "(stored before per-term verdicts: the verdict is on the gap averaged over all terms, which can hide one "
            "biased term). 'Inconclusive' does not mean the model is fair.", "finding"))
    for r in recs:
        line = (f"{cap(_split(r.get('terms', '')))}, {SUBSET_TITLE.get(r.get('subset'), r.get('subset'))}: CTF gap "
                f"{f3(r.get('value'))} (95% CI {ci(r.get('ci_low'), r.get('ci_high'))}) over {count(r.get('n'), k)} "
                "texts")
        if num(r.get("control")) is not None:
            band_ci = ci(r.get("control_ci_low"), r.get("control_ci_high"))
            line += f"; control band {f3(r.get('control'))} (95% CI {band_ci}), excess {signed(r.get('excess'))}"
        if r.get("n_terms"):
            line += (f"; terms: {r.get('n_terms_differ', 0)} differ, {r.get('n_terms_equivalent', 0)} equivalent "
                     f"of {r['n_terms']}")
        line += f" — {verdict_words(r.get('verdict'), margin)}"
        s.blocks.append(Paragraph(line + ".", "bullet"))
    perf = doc.get("performance") or {}
    if perf:
        s.blocks.append(Paragraph(
            f"Accuracy side: AUROC {f3(perf.get('auroc'))}, accuracy {f3(perf.get('accuracy'))} at "
            f"τ = {numbers.short(num(perf.get('threshold')) or 0.5)} over {perf.get('over') or 'the audited texts'} "
            f"({count(perf.get('n'), k)} texts, {count(perf.get('n_positive'), k)} with label 1).", "body"))
    pairs = [p for p in doc.get("pairs") or [] if num(p.get("mean_abs_change")) is not None]
    pairs = [p for p in pairs if (num(p.get("n")) or 0) >= k]  # a pair of a handful of texts is not a finding
    if pairs:
        top = max(pairs, key=lambda p: (num(p.get("mean_abs_change")), -int(p.get("n") or 0)))
        s.blocks.append(Paragraph(
            f"The largest mean change of one term pair: '{top['term']}' → '{top['counterfactual_term']}' "
            f"({_split(top.get('terms', ''))}), {f3(top.get('mean_abs_change'))} over {count(top.get('n'), k)} texts, "
            f"flip rate {rate(top.get('flip_rate'), top.get('n'), k)} at "
            f"τ = {numbers.short(num(settings.get('threshold')) or 0.5)}.", "body"))
    excluded = counts.get("excluded_no_valid_counterfactual") or {}
    n_excl = sum(int(v or 0) for v in excluded.values())
    if n_excl:
        s.blocks.append(Paragraph(
            f"{count(n_excl, k)} texts were left out: their meaning depends on sex (pregnancy, prostate, …), so they "
            "have no valid counterfactual.", "note"))
    for note in doc.get("notes") or []:
        s.blocks.append(Paragraph(note, "note"))
    if doc.get("attribution"):
        s.blocks.append(Paragraph("Uses the Dixon et al. word lists or madlibs template set (CC BY 4.0); "
                                  "attribution under Provenance.", "note"))
    return s


def _methods(doc: dict, k: int) -> Section:
    s = Section("methods", "Methods")
    st = doc.get("settings") or {}
    margin = num(st.get("margin")) or 0.02
    imported = (doc.get("model") or {}).get("kind") == "imported scores"
    s.blocks += [
        Paragraph("Counterfactuals. For each text x and each pair of terms (a, a′) of the term set, Φ(x) holds the "
                  "text with every a replaced by a′ (whole words and multi-word terms, case-insensitive, the "
                  "capitalisation kept; substituted, never deleted). Other senses ('white blood cells', 'black "
                  "stool') are left alone. Only texts of at most the token limit are audited (002)."),
        Paragraph("CTF gap. CF_GAP(x) = mean over x′ ∈ Φ(x) of |f(x) − f(x′)|, f the predicted probability; the CTF "
                  "gap is its mean over texts with a counterfactual, per term set (train / held-out) and label "
                  "subset. The gap of a term: the same mean over the counterfactual pairs that swap that term in or "
                  "out."),
        Paragraph("Unit of resampling. 95% intervals: percentile bootstrap over contexts — "
                  + ("the templates of the template column" if st.get("resampling_unit") == "template" else
                     "texts that are the same sentence once their identity terms are removed form one context "
                     "(a template filled with different terms; repeated rows)")
                  + (f", {int(st['n_contexts']):,} contexts" if st.get("n_contexts") else "")
                  + ": the texts of one context are not independent, so the context (with all its texts and "
                  "counterfactuals) is what is resampled."),
        Paragraph("Control band. For every audited text, pairs of neutral words (control words) are put in the place "
                  "the identity term occupies and |f(x_c1) − f(x_c2)| is averaged: how far the model moves for a "
                  "neutral edit in the same place. The bootstrap resamples the contexts and the control words."),
        Paragraph(f"Verdicts, per term (one-sided t tests at α/2 on each side of the margin {numbers.short(margin)}, with the "
                  f"bootstrap standard error over contexts, corrected with "
                  f"{CORRECTION_WORDS.get(st.get('correction'), 'a correction')} over every term result of the "
                  f"audit): differs when the term's gap is above the margin and its excess over the control band "
                  f"is above the margin too; equivalent within ±{numbers.short(margin)} when its gap is below the margin; "
                  "otherwise inconclusive — a model that moves as much for a neutral edit as for an identity edit is "
                  "inconclusive, not called biased. Without a control band 'differs' needs only the gap. A result "
                  "(term set × subset) differs when any of its terms differs and is equivalent only when every term "
                  "is."),
        Paragraph("Flip rates: the share of counterfactual pairs whose decision at τ changes, per direction a → a′ "
                  "(Wilson intervals). TPR and TNR per term over the texts mentioning it; the gap of a pair is "
                  "|rate_a − rate_a′|, the overall gap the mean over pairs (002 Table 3)."),
    ]
    synth = st.get("synthetic") or {}
    if synth.get("n_rows") and not synth.get("note"):
        per = synth.get("per_template") or {}
        s.blocks.append(Paragraph(
            f"Synthetic template texts. Besides the audited texts, {count(synth['n_rows'], k)} of the "
            f"{int(synth.get('n_available') or 0):,} madlibs template sentences with an identity term (Dixon et al. "
            f"2018, as in 002; sampled with seed {synth.get('seed')}; "
            + ", ".join(f"{name} {count(v, k)}" for name, v in per.items())
            + ") were scored by the same model with the same terms, control words and token limit. All of their "
            "toxicity is in the context, so every counterfactual is symmetric by design; their CTF gap is the row "
            "'synthetic template texts' (no label subsets; its terms join the correction family). Word lists and set: "
            "CC BY 4.0, attribution under Provenance."))
    sets = st.get("term_sets") or {}
    rows = [["Term set (" + _split(key) + ")",
             f"{v.get('name')}: {len(v.get('groups') or [])} groups ({v.get('kind')})"] for key, v in sets.items()]
    rows += [["Margin", f"±{numbers.short(margin)} (probability)"], ["Confidence level (intervals shown)",
                                                         f"{100 * (1 - (num(st.get('alpha')) or 0.05)):.0f}%"],
             ["Bootstrap replicates", f"{int(st.get('n_boot') or 0):,}"],
             ["Unit of resampling", str(st.get("resampling_unit") or "text (stored by an earlier version)")],
             ["Correction over the term tests", CORRECTION_WORDS.get(st.get("correction"), "–")],
             ["Decision threshold τ", f"{numbers.short(num(st.get('threshold')) or 0.5)}"],
             ["Token limit", str(st.get("max_tokens")) if st.get("max_tokens") else
              ("set when the pairs were exported" if imported else "none")],
             ["Control pairs per text", str(st.get("k_control", "–"))], ["Seed", str(st.get("seed", "–"))]]
    s.blocks.append(Table(["Setting", "Value"], rows, title="Settings", align=["L", "L"]))
    counts = doc.get("counts") or {}
    crow = [["Texts", count(counts.get("n_examples"), k)],
            ["Texts within the token limit", count(counts.get("n_within_max_tokens"), k)],
            ["Identity pairs scored", count(counts.get("n_identity_pairs"), k)],
            ["Control pairs scored", count(counts.get("n_control_pairs"), k)],
            ["Unique texts scored", count(counts.get("n_unique_texts_scored"), k)]]
    for key, v in (counts.get("excluded_no_valid_counterfactual") or {}).items():
        crow.append([f"Left out, no valid counterfactual ({_split(key)})", count(v, k)])
    if synth.get("n_rows") and not synth.get("note"):
        crow += [["Synthetic template texts", count(synth.get("n_rows"), k)],
                 ["Synthetic identity pairs scored", count(synth.get("n_identity_pairs"), k)]]
    s.blocks.append(Table(["Count", "n"], crow, title="Counts", align=["L", "R"]))
    return s


def _gaps(doc: dict, k: int) -> Section:
    s = Section("gaps", "CTF gaps and the control band", landscape=True)
    margin = num((doc.get("settings") or {}).get("margin")) or 0.02
    rows = []
    for r in doc.get("ctf_gap") or []:
        rows.append([_split(r.get("terms", "")), SUBSET_TITLE.get(r.get("subset"), str(r.get("subset"))),
                     count(r.get("n"), k), count(r.get("n_pairs"), k), f3(r.get("value")),
                     ci(r.get("ci_low"), r.get("ci_high")), f3(r.get("control")),
                     ci(r.get("control_ci_low"), r.get("control_ci_high")), signed(r.get("excess")),
                     ci(r.get("excess_ci_low"), r.get("excess_ci_high")), verdict_words(r.get("verdict"), margin)])
    s.blocks.append(Table(["Terms", "Texts", "n", "Pairs", "CTF gap", "95% CI", "Control band", "95% CI",
                           "Excess", "95% CI", "Verdict"], rows, title="CTF gap by term set and label",
                          align=["L", "L", "R", "R", "R", "R", "R", "R", "R", "R", "L"],
                          note="n: texts with a counterfactual. Excess: CTF gap minus the control band."))
    terms = sorted(doc.get("term_gaps") or [], key=lambda t: ((t.get("verdict") != "differs"),
                                                                 t.get("terms", ""), t.get("subset", ""),
                                                                 -(num(t.get("value")) or 0), t.get("term", "")))
    if terms:
        shown = [t for t in terms if t.get("subset") == "all" or t.get("verdict") == "differs"][:MAX_TERM_ROWS]
        rows = [[_split(t.get("terms", "")), SUBSET_TITLE.get(t.get("subset"), str(t.get("subset"))), t.get("term", ""),
                 count(t.get("n"), k), count(t.get("n_contexts"), k), f3(t.get("value")),
                 ci(t.get("ci_low"), t.get("ci_high")), signed(t.get("mean_change_towards")),
                 signed(t.get("excess")), f"{numbers.short(num(t.get('q_differs')), 2)}" if num(t.get("q_differs")) is not None
                 else "–", verdict_words(t.get("verdict"), margin)] for t in shown]
        more = len(terms) - len(shown)
        s.blocks.append(Table(["Terms", "Texts", "Term", "n", "Contexts", "Gap", "95% CI", "Towards", "Excess",
                               "q", "Verdict"], rows, title="CTF gap by term", small=True,
                              align=["L", "L", "L", "R", "R", "R", "R", "R", "R", "R", "L"],
                              note=("Gap: mean |change| over the pairs that swap the term in or out. Towards: mean "
                                    "change of the score when the term is swapped in. q: corrected p of 'differs'. "
                                    "Terms that differ first; label subsets only where a term differs. "
                                    + (f"{more:,} more term results are in the JSON document." if more > 0 else ""))))
    reasons = [f"{_split(r.get('terms', ''))}, {SUBSET_TITLE.get(r.get('subset'), r.get('subset'))}: "
               f"{r.get('reason')}" for r in doc.get("ctf_gap") or [] if r.get("reason")]
    for text in reasons:
        s.blocks.append(Paragraph(text, "bullet"))
    control = doc.get("control") or {}
    words = control.get("words_used") or []
    s.blocks.append(Paragraph(
        f"Control band over all control pairs: mean |change| {f3(control.get('mean_abs_change'))}, flip rate "
        f"{f3(control.get('flip_rate'))}; {len(words)} control words"
        + (f" ({', '.join(words[:24])}{', …' if len(words) > 24 else ''})" if words else "") + ".", "body"))
    if control.get("note"):
        s.blocks.append(Paragraph(control["note"], "note"))
    return s


def _pairs(doc: dict, k: int) -> Section:
    s = Section("pairs", "Flip rates per term pair", landscape=True)
    pairs = doc.get("pairs") or []
    for split in ("train", "held_out"):
        recs = [p for p in pairs if p.get("terms") == split]
        if not recs:
            continue
        # pairs with at least k texts first: a large mean change over a handful of texts is mostly noise
        recs = sorted(recs, key=lambda p: ((num(p.get("n")) or 0) < k, -(num(p.get("mean_abs_change")) or 0),
                                           p["term"], p["counterfactual_term"]))
        rows = [[p["term"], p["counterfactual_term"], count(p.get("n"), k), f3(p.get("mean_abs_change")),
                 signed(p.get("mean_change")), rate(p.get("flip_rate"), p.get("n"), k),
                 rate_ci(p.get("flip_ci_low"), p.get("flip_ci_high"), p.get("n"), k),
                 rate(p.get("flip_up_rate"), p.get("n"), k), rate(p.get("flip_down_rate"), p.get("n"), k),
                 count(p.get("reverse_n"), k), rate(p.get("reverse_flip_rate"), p.get("reverse_n"), k)]
                for p in recs[:MAX_PAIR_ROWS]]
        more = len(recs) - len(rows)
        s.blocks.append(Table(
            ["Term a", "Term a′", "n", "Mean |Δ|", "Mean Δ", "Flip a→a′", "95% CI", "Up", "Down", "n a′→a",
             "Flip a′→a"], rows,
            title=f"{cap(_split(split))}: the pairs with the largest mean change (pairs of at least {k} texts first)",
            small=True, align=["L", "L"] + ["R"] * 9,
            note=(f"Δ = f(x′) − f(x). Up: 0 → 1 at τ; down: 1 → 0. Rates over fewer than {k} texts are not shown. "
                  + (f"{more:,} more pairs are in the JSON document." if more > 0 else ""))))
    if not pairs:
        s.blocks.append(Paragraph("No identity pairs.", "note"))
    return s


def _groups(doc: dict, k: int) -> Section:
    s = Section("groups", "TPR and TNR by term (002 Table 3)")
    gr = doc.get("group_rates") or {}
    if not gr.get("terms"):
        s.blocks.append(Paragraph("No labels were given, so true-positive and true-negative rates per term were not "
                                  "computed.", "note"))
        return s
    rows = [[_split(g.get("terms", "")), f3(g.get("tpr_gap")), count(g.get("n_pairs_tpr"), k), f3(g.get("tnr_gap")),
             count(g.get("n_pairs_tnr"), k)] for g in gr.get("gaps") or []]
    s.blocks.append(Table(["Terms", "Mean TPR gap", "Term pairs", "Mean TNR gap", "Term pairs"], rows,
                          title=f"Mean gaps over term pairs at τ = {numbers.short(num(gr.get('threshold')) or 0.5)}",
                          align=["L", "R", "R", "R", "R"],
                          note="Term pairs: pairs of terms where both rates are estimable (a number of term pairs, "
                               "not of texts)."))
    # the largest gaps between two terms whose rates both rest on at least k texts (small cells are not shown)
    by_term = {(r.get("terms"), r.get("term")): r for r in gr["terms"]}
    denominators = {"tpr": "n_pos", "tnr": "n_neg"}
    candidates = []
    if "pair_gaps" in gr:
        for g in gr["pair_gaps"]:
            for which in ("tpr", "tnr"):
                if num(g.get(f"{which}_gap")) is not None:
                    candidates.append((g.get("terms"), which, g["term"], g["other_term"], num(g[f"{which}_gap"])))
    else:
        candidates = [(g.get("terms"), x.get("rate"), x.get("term"), x.get("other_term"), num(x.get("gap")))
                      for g in gr.get("gaps") or [] for x in g.get("largest") or []]
    shown = [c for c in candidates
             if all((num((by_term.get((c[0], t)) or {}).get(denominators.get(c[1], "n"))) or 0) >= k
                    for t in (c[2], c[3]))]
    shown.sort(key=lambda c: (-(c[4] or 0), c[0], c[1], c[2], c[3]))
    if shown:
        s.blocks.append(Table(["Terms", "Rate", "Term", "Other term", "Gap"],
                              [[_split(t), str(r).upper(), a, b, f3(g)] for t, r, a, b, g in shown[:10]],
                              title=f"The largest gaps between two terms (both rates over at least {k} texts)",
                              align=["L", "L", "L", "L", "R"]))
    # terms with enough texts first
    terms = sorted(gr["terms"], key=lambda r: ((num(r.get("n")) or 0) < k, r.get("terms", ""), r.get("term", "")))
    rows = [[_split(r.get("terms", "")), r.get("term", ""), count(r.get("n"), k), count(r.get("n_pos"), k),
             rate(r.get("tpr"), r.get("n_pos"), k),
             rate_ci(r.get("tpr_ci_low"), r.get("tpr_ci_high"), r.get("n_pos"), k),
             count(r.get("n_neg"), k), rate(r.get("tnr"), r.get("n_neg"), k),
             rate_ci(r.get("tnr_ci_low"), r.get("tnr_ci_high"), r.get("n_neg"), k)] for r in terms[:MAX_TERM_ROWS]]
    s.blocks.append(Table(["Terms", "Term", "n", "n label 1", "TPR", "95% CI", "n label 0", "TNR", "95% CI"], rows,
                          title="Rates per term", small=True, align=["L", "L"] + ["R"] * 7,
                          note=(f"Rates over fewer than {k} texts are not shown. "
                                + (f"{len(terms) - len(rows):,} more terms are in the JSON document."
                                   if len(terms) > len(rows) else ""))))
    return s


def _examples(doc: dict, k: int) -> Section:
    s = Section("examples", "Example pairs: the largest changes")
    ex = (doc.get("examples") or [])[:MAX_EXAMPLES]
    if not ex:
        s.blocks.append(Paragraph("No examples stored.", "note"))
        return s
    rows = [[e.get("text", ""), e.get("counterfactual", ""), f3(e.get("score")), f3(e.get("counterfactual_score")),
             signed((num(e.get("counterfactual_score")) or 0) - (num(e.get("score")) or 0)),
             "–" if e.get("label") is None else str(e.get("label"))] for e in ex]
    s.blocks.append(Table(["Text", "Counterfactual", "f(x)", "f(x′)", "Change", "Label"], rows,
                          widths=[3.2, 3.2, 0.8, 0.8, 0.9, 0.6], align=["L", "L", "R", "R", "R", "R"], small=True,
                          title="Original and counterfactual, by the size of the change"))
    return s


def _provenance(doc: dict, k: int) -> Section:
    s = Section("provenance", "Provenance")
    prov = doc.get("provenance") or {}
    model = doc.get("model") or {}
    data = doc.get("data") or {}
    rows = [["Audit date", report_date(prov)], ["Data", str(data.get("name", "–"))],
            ["Data SHA-256", str(prov.get("data_sha256") or data.get("sha256") or "–")],
            ["Text column", str(data.get("text_column") or "–")],
            ["Label column", str(data.get("label_column") or "–")],
            ["Model", str(model.get("name", "–"))], ["Model kind", str(model.get("kind", "–"))]]
    if model.get("method"):
        rows.append(["Training method", f"{model['method']}" + (f", λ = {numbers.short(num(model.get('lambda')))}, "
                                                                f"{model.get('pair_loss')} pairing"
                                                                if str(model["method"]).startswith("clp") else "")])
    for key, value in (prov.get("model_hashes") or {}).items():
        rows.append([f"Model hash ({key})", str(value)])
    for key, value in (prov.get("term_set_sha256") or {}).items():
        rows.append([f"Term set SHA-256 ({_split(key)})", str(value) or "–"])
    rows.append(["Seed", str(prov.get("seed", "–"))])
    rows.append(["Small-cell suppression", f"counts below {k} shown as “<{k}”"])
    versions = prov.get("versions") or {}
    rows += [[f"Version: {name}", str(v)] for name, v in versions.items()]
    s.blocks.append(Table(["Item", "Value"], rows, widths=[1.3, 3.7], align=["L", "L"], small=True))
    if doc.get("attribution"):
        s.blocks.append(Paragraph("Attribution", "subheading"))
        s.blocks.append(Paragraph(str(doc["attribution"]), "body"))
    return s


# --------------------------------------------------------------------------------------------------------------


def report_tree(doc: dict, settings) -> Report:
    """The report tree of a stored CTF document (``settings``: :class:`fairdesk.core.kinds.ReportSettings`)."""
    k = int(settings.suppress_k)
    model = doc.get("model") or {}
    data = doc.get("data") or {}
    sections = [board_section(board(doc, k), k), _summary(doc, k), _methods(doc, k), _gaps(doc, k), _pairs(doc, k), _groups(doc, k),
                _examples(doc, k), _provenance(doc, k)]
    return with_disclosure(Report(title="Counterfactual token fairness",
                  subtitle=f"{model.get('name') or 'model'} on {data.get('name') or 'data'}",
                  date=report_date(doc.get("provenance") or {}), suppress_k=k, sections=sections,
                  footer=f"FairDesk · counterfactual token fairness · counts below {k} shown as <{k}",
                  metadata={"title": "Counterfactual token fairness", "subject": "FairDesk CTF audit (METHODS §5)"}), doc)


def build_report(doc: dict, path: str | os.PathLike, settings) -> Path:
    """The registry's one report signature: the PDF of a stored ``ctf`` document at ``path``."""
    from fairdesk.core.reports.pdf import write_pdf

    return write_pdf(report_tree(doc, settings), path)
