"""The PDF report of an age-independence audit (audit kind ``"age_independence"``).

:func:`build_age_report` turns the stored document (``{"methods", "settings", "provenance"}`` written by
:func:`fairdesk.jobs.age.train_age_independent`, the same the CLI's ``--json`` holds) into a
:class:`~fairdesk.core.reports.document.Report`; :func:`build_report` (the registry's one signature) renders it.
Sections:

1. summary — in words, for each learner against the DNN and each of accuracy, Δ^(2), Δ^(5), one of the three
   verdicts (differs / equivalent within ±margin / inconclusive) and the rule that decides it; how much age the
   DNN's representation and the learners' keep;
2. methods — architectures, losses, λ, K, K_D, λ_H, training, folds, thresholds, margins, caveats;
3. the 000 Tables 1–2 layout — mean ± SD over folds per method, then the one-tailed tests against the DNN (t, p,
   BH q, TOST p, verdict), titled with the test that ran (:func:`comparison_test_words`); held-out rows and participants per
   fold;
4. leakage — a fresh probe's R², MAE and AUROC of age from each representation;
5. the accuracy–fairness frontier (figure kind ``"age_frontier"``, registered here): Δ^(5) and leakage R²
   against accuracy, per learner as λ varies (the run's λ only when no sweep was stored);
6. provenance — seed, data hash, versions, device, per-fold model hashes.

Every count of people or rows prints as "<k" below ``settings.suppress_k``. matplotlib and reportlab are
imported inside functions (Agg backend); same document → same PDF bytes.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from fairdesk.core import numbers
from fairdesk.core import atomic
from fairdesk.core.errors import DataError
from fairdesk.core.reports.document import (with_disclosure, FigureSpec, Paragraph, Report, Section, Table, correction_words,
                                            join_words, report_date)
from fairdesk.core.reports.board import Board, are, board_section
from fairdesk.core.reports.figures import MINUS, fmt_count, fmt_p, fmt_signed, num

METRIC_NAMES = {"accuracy": "accuracy", "delta_eo_2": "Δ_eo^(2)", "delta_eo_5": "Δ_eo^(5)"}
METRIC_ORDER = ("accuracy", "delta_eo_2", "delta_eo_5")
LOSSES = [
    ["dnn", "64-32-8 ReLU, batch norm before the output", "Lc (cross-entropy)", "–"],
    ["simple", "I: x→64→32→z; C: z→16→2; A: z→16→1", "Lc − λ·La", "La = mean (A(z) − age)²"],
    ["autoencoder", "as simple, plus R: [z, age]→32→64→x̂ (000: R(z); the learner settings' "
     "reconstruct_with_age)", "Lc − λ·La + Lr", "La"],
    ["consensus", "M interpreters on a random feature split; D: z_m→16→M", "Lc − λ·La − λ·Ld",
     "Ld (D, K_D steps); La averaged over z_m"],
    ["entropy", "as autoencoder; A: z→16→B age groups (equal-frequency; the learner settings' age_bins, "
     "B = 2 is 000's age above the mean)", "Lc − λ·La + Lr", "La = CE(P, age group) + λ_H·H[P]"],
    ["entropy-binary", "as entropy", "Lc − λ·La + Lr", "CE term only"],
    ["entropy-h", "as entropy", "Lc − λ·La + Lr", "λ_H·H[P] only"],
]
#: the simple learner's networks with ``LearnerSettings.dnn_body``
DNN_BODY_NETWORKS = "I: the DNN's x→64→32→z (ReLU); C: the DNN's batch norm, z→2; A: standardised [z, label]→16→1"
#: how the chosen body of a fold is named in the words (``lambda_selection.folds[].body``)
BODY_WORDS = {"own": "own layers", "dnn": "DNN's layers"}
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
FRONTIER_COLUMNS = ["method", "label", "role", "lambda", "accuracy", "delta_eo_5", "leakage_r2"]
TABLE2_TESTS = {"corrected": "corrected resampled t-tests", "plain": "plain paired t-tests (anti-conservative)"}


# --------------------------------------------------------------------------------------------------------------
# Words


def _f(value, digits: int = 3) -> str:
    v = num(value)
    return "–" if v is None else f"{v:.{digits}f}".replace("-", MINUS)


def _pm(summary: dict | None, digits: int = 3) -> str:
    if not summary:
        return "–"
    band = summary.get("mean_band")  # a released document's band (fairdesk.core.disclosure)
    if isinstance(band, (list, tuple)) and len(band) == 2:
        return f"{_f(band[0], 2)} to {_f(band[1], 2)} (band)"
    return f"{_f(summary.get('mean'), digits)} ± {_f(summary.get('std'), digits)}"


def verdict_words(verdict: str | None, margin) -> str:
    """The verdict as the report prints it."""
    if verdict == "differs":
        return "differs (lower than the DNN)"
    if verdict in ("equivalent", "equivalent within margin"):
        return f"equivalent within ±{numbers.short(num(margin))}"
    if verdict == "inconclusive":
        return "inconclusive"
    return "–"


def _verdict_short(verdict: str | None, margin) -> str:
    if verdict == "differs":
        return "differs"
    if verdict in ("equivalent", "equivalent within margin"):
        return f"equivalent ±{numbers.short(num(margin))}"
    return verdict or "–"


def comparison_test(doc: dict) -> str:
    """The comparison test a document ran: "corrected" (Nadeau–Bengio) or "plain"; documents stored before the
    choice existed ran the plain paired t."""
    return str(doc["settings"].get("test") or "plain")


def comparison_test_words(doc: dict) -> str:
    """The test against the DNN, as the report names it."""
    if comparison_test(doc) == "corrected":
        ratio = num(doc["settings"].get("test_train_ratio"))
        extra = f", here {ratio:.2f}" if ratio is not None else ""
        return ("corrected resampled t-test (Nadeau and Bengio 2003: the variance is widened by 1/(R·k) plus the "
                f"ratio of held-out to training rows{extra})")
    return "plain paired t-test over folds (anti-conservative: the folds share training rows)"


def _adversary_words(L: dict) -> str:
    """The two departures from 000's objective, as run (documents stored before them ran 000's)."""
    bounded = L.get("adversary_term", "unbounded") == "bounded"
    conditional = bool(L.get("conditional", False))
    return (" " + ("In the interpreter's loss the adversary's error (and consensus's Ld) is capped at its value "
                   "for a guess that reads nothing from z: an adversary made worse than that guess exerts no pull "
                   "(000's −λ·La is unbounded)." if bounded else "The adversary term is 000's −λ·La (unbounded).")
            + (" The adversary also reads the label, so it removes the age beyond what the diagnosis implies "
               "(000's adversary reads z only)." if conditional else " The adversary reads z only (000)."))


def _label(doc: dict, m: str) -> str:
    return str(doc["methods"][m].get("label") or m)


def _compared(doc: dict) -> list[str]:
    return [m for m, e in doc["methods"].items() if e.get("comparison")]


def lambda_words(s: dict) -> str:
    """How λ was set: "λ chosen per learner and fold …" or "λ = 1"."""
    L = s["learner"]
    if s.get("select_lambda"):
        grid = ", ".join(f"{numbers.short(num(v))}" for v in s.get("lambda_grid") or [])
        # documents stored by an earlier version
        how = ("nested participant-grouped cross-validation (every training participant validates once)"
               if "pooled" in str(s.get("lambda_selection")) else "nested participant-disjoint validation")
        return (f"λ chosen per learner and fold from {{{grid}}} by {how} to reach "
                f"a probe R² ≤ {numbers.short(num(s.get('leakage_target')))} for the age beyond the label at the least accuracy cost (the "
                f"smallest such λ within one standard error of the best validation accuracy){_body_choice_words(s)}, "
                f"K = {L['k_adv']}")
    return f"λ = {numbers.short(num(L['lam']))}, K = {L['k_adv']}"


def _body_choice_words(s: dict) -> str:
    """With ``select_body``: how the learner's body was chosen alongside λ."""
    if not s.get("select_body"):
        return ""
    return ("; the learner's body chosen the same way from its own layers and the DNN's (the DNN's hidden and output "
            "layers, fitted with the DNN's seed of the fold): every (body, λ) validated alike, its own layers kept "
            "unless only the DNN's reach the target within one standard error of the best validation accuracy")


def _chosen(e: dict) -> str:
    """The λ chosen per fold ("0.3, 1, 0.3"); with the body chosen too, each with its body ("0.3 (DNN's layers)")."""
    sel = e.get("lambda_selection") or {}
    return ", ".join(f"{numbers.short(num(c['lambda']))}" + (f" ({BODY_WORDS[c['body']]})" if c.get("body") and
                                                  "bodies" in sel else "") for c in sel.get("folds") or [])


def beyond_label_r2(leak: dict | None) -> float | None:
    """The probe's held-out R² of the age beyond the label (what the verdict reads); documents stored before it
    was measured: the age R²."""
    leak = leak or {}
    if "beyond_label" in leak:
        return num((leak["beyond_label"] or {}).get("r2"))
    return num(leak.get("r2"))


def _age_r2_words(leak: dict) -> str:
    if "beyond_label" not in (leak or {}):
        return f"R² {_f(leak.get('r2'), 2)}"
    return f"R² {_f(beyond_label_r2(leak), 2)} for the age beyond the label (age itself: R² {_f(leak.get('r2'), 2)})"


def difference_words(c: dict) -> str:
    """The mean difference against the DNN with its confidence interval ("−0.067, 95% CI −0.15 to 0.02"), or the
    difference alone for documents stored before the interval was kept."""
    text = fmt_signed(c.get("mean_difference"))
    lo, hi, level = num(c.get("ci_low")), num(c.get("ci_high")), num(c.get("ci_level"))
    if lo is None or hi is None or level is None:
        return text
    return f"{text}, {numbers.short(100 * level)}% CI {fmt_signed(lo)} to {fmt_signed(hi)}"


def same_as_dnn_words(doc: dict, m: str) -> str | None:
    """Why a learner's held-out results are the DNN's, when they are in every fold (every metric of every fold equal
    to the DNN's) and the learner is the DNN plus an adversary (the DNN's layers and fit seed): at λ = 0 it *is* the
    DNN; otherwise its adversary never predicted age better than a guess that ignores the representation, and the
    bounded term pulls only while it does (docs/methods.md §3) — so "0.000, CI 0.000 to 0.000" does not read as a
    learner that was not run. None otherwise."""
    methods, s = doc["methods"], doc["settings"]
    base = methods.get(s.get("baseline", "dnn"))
    e = methods[m]
    if base is None or m == s.get("baseline", "dnn"):
        return None
    sel = e.get("lambda_selection") or {}
    folds = sel.get("folds") or []
    bodies = {c.get("body") for c in folds} if "bodies" in sel else {"dnn" if s["learner"].get("dnn_body") else "own"}
    if bodies != {"dnn"}:
        return None
    for metric in ("accuracy", "delta_eo_2", "delta_eo_5"):
        mine, theirs = (e.get(metric) or {}).get("folds"), (base.get(metric) or {}).get("folds")
        if not mine or mine != theirs:
            return None
    lams = [num(c["lambda"]) for c in folds] if folds else [num(s["learner"]["lam"])]
    if all(v == 0 for v in lams):
        return (f"{_label(doc, m)}'s held-out results are the DNN's in every fold: it is the DNN plus an adversary, "
                "and at λ = 0 the adversary has no weight.")
    if s["learner"].get("adversary_term", "bounded") != "bounded":  # 000's unbounded term always pulls: no reason
        return None
    return (f"{_label(doc, m)}'s held-out results are the DNN's in every fold: it is the DNN plus an adversary "
            "(the DNN's layers, fitted with its seed), and its adversary never predicted age better than a guess "
            "that ignores the representation, so the bounded adversary term never moved the network.")


def age_left_words(doc: dict, m: str) -> str | None:
    """In words, whether a learner's representation is age-independent by the leakage probe, and what to do if
    not ("age-indep-simple still carries age: R² 0.55 …; raise λ or …"), and why its results are the DNN's when they
    are (:func:`same_as_dnn_words`). None for methods without a verdict."""
    words = _age_left(doc, m)
    same = same_as_dnn_words(doc, m) if words else None
    return f"{words} {same}" if same else words


def _age_left(doc: dict, m: str) -> str | None:
    e = doc["methods"][m]
    verdict = (e.get("age_independence") or {}).get("verdict")
    if verdict is None or m == doc["settings"].get("baseline", "dnn"):
        return None
    leak = e.get("leakage") or {}
    target = num(e["age_independence"].get("target"))
    sel = e.get("lambda_selection")
    chosen = f" (λ chosen per fold: {_chosen(e)})" if sel else ""
    if sel and "bodies" in sel:  # the body chosen with λ: which, and why
        chosen = (f" (λ and body chosen per fold: {_chosen(e)}; the DNN's layers in "
                  f"{int(sel.get('dnn_body_in_folds', 0))} of {len(sel.get('folds') or [])} folds: taken where in validation "
                  "the learner's own layers reached the target less accurately by more than one standard error, or "
                  "held more age when no candidate reached it)")
    if verdict == "age-independent":
        return (f"{_label(doc, m)} removes age by the probe: held-out {_age_r2_words(leak)}, ≤ the target "
                f"{numbers.short(target)}{chosen}.")
    if verdict == "inconclusive":
        return f"{_label(doc, m)}: the probe could not be scored, so whether its representation holds age is unknown."
    text = (f"{_label(doc, m)} still carries age: {_age_r2_words(leak)} on held-out participants (target ≤ "
            f"{numbers.short(target)}){chosen}, so its representation is not age-independent")
    if sel:
        n_folds = len(sel.get("folds") or [])
        missed = n_folds - int(sel.get("reached_in_folds", 0))
        if missed:
            text += (f"; no λ up to {numbers.short(num(max(sel['grid'])))} reached the target in the validation of {missed} of "
                     f"{n_folds} folds")
        text += ("; raise λ (a larger grid, --lambda-grid), give the adversary more steps K (--k-adv), or use another "
                 "learner")
    else:
        text += "; raise λ or the adversary steps K, or let FairDesk choose λ (leave --lambda unset)"
    return text + "."


#: the measures in the board's words (the error spread Δ_eo is defined from page 2)
GRID_NAMES = {"accuracy": "accuracy", "delta_eo_2": "error spread over 2 bands",
              "delta_eo_5": "error spread over 5 bands"}


def board(doc: dict, k: int) -> Board:
    """What page 1 says of the age-independence comparison: a grid of learners × accuracy, the two error spreads
    and the age left in the representation, the comparisons that differ from the DNN in words (with intervals),
    what could not be told, what to check next."""
    methods, s = doc["methods"], doc["settings"]
    baseline = s.get("baseline", "dnn")
    entries, findings = [], []
    for m in _compared(doc):
        e = methods[m]
        for metric in METRIC_ORDER:
            c = (e.get("comparison") or {}).get(metric) or {}
            entries.append((_label(doc, m), GRID_NAMES[metric], c.get("verdict")))
            if c.get("verdict") == "differs":
                findings.append(f"{_label(doc, m)}: {GRID_NAMES[metric]} {_f(e[metric]['mean'])} against "
                                f"{_f(methods[baseline][metric]['mean'])} for the DNN (difference "
                                f"{difference_words(c)}): lower than the DNN's.")
        age = (e.get("age_independence") or {}).get("verdict")
        entries.append((_label(doc, m), "age removed", age))
        if age == "not age-independent":
            findings.append(f"{_label(doc, m)} still carries age ({_age_r2_words(e.get('leakage') or {})} on held-out "
                            "participants): its representation is not age-independent.")
    n_inc = sum(1 for _, _, v in entries if v == "inconclusive")
    untested = [f"{are(n_inc, 'comparison')} inconclusive: the {s['folds']} folds cannot tell; not evidence that a "
                "learner is as fair as the DNN."] if n_inc else []
    steps = ["Weigh any gain in fairness (lower error spread) against the accuracy given up, on the frontier "
             "figure (page 2 on).",
             "Before deployment, confirm the chosen learner on a new cohort."]
    return Board(question=(f"Do the age-independent learners predict '{s['label']}' as accurately as the DNN, with "
                           f"error rates that vary less with '{s['attribute']}'?"),
                 entries=entries, row_title="Learner", findings=findings,
                 no_findings="No learner differs from the DNN on any measure.",
                 untested=untested, next_steps=steps, plan="", more_where="the summary and tables")


def _summary_blocks(doc: dict, k: int) -> list:
    s = doc["settings"]
    methods = doc["methods"]
    baseline = s.get("baseline", "dnn")
    blocks = [Paragraph(
        f"{len(methods)} methods were trained and compared by {s['folds']}-fold participant-disjoint "
        f"cross-validation ({s['repeats']} repeat{'s' if s['repeats'] != 1 else ''}) on "
        f"{fmt_count(s.get('n_rows'), k)} rows of {fmt_count(s.get('n_participants'), k)} participants, "
        f"predicting '{s['label']}' with '{s['attribute']}' as the protected continuous attribute "
        f"({lambda_words(s)}). Each number is computed on the rows of "
        "a held-out fold (no participant is in two folds) and summarised as mean ± SD over folds. Fairness is "
        f"measured by the error spread Δ_eo^(2) and Δ_eo^(5): how much the model's error rates vary across 2 and 5 "
        f"equal-sized bands of '{s['attribute']}' (0: the same error rates in every band; lower is fairer).",
        "lead")]
    rule = Paragraph(
        "Verdict rule, for each method against the DNN and each of accuracy, Δ_eo^(2) and Δ_eo^(5), over the paired "
        f"per-fold values: differs — the one-tailed {comparison_test_words(doc)} (method lower than the DNN) is "
        f"significant at α = {numbers.short(num(s.get('alpha', 0.05)))} after the "
        f"{correction_words('bh', num(s.get('alpha', 0.05)) or 0.05)}, over every t-test of this audit; equivalent "
        "within ±margin — the paired TOST is significant after the same correction over every TOST; inconclusive — "
        "neither (the TOST uses the same test's variance). Margins: "
        + join_words([f"{METRIC_NAMES[m]} ±{numbers.short(num(v))}" for m, v in s["margins"].items()
                      if m in METRIC_NAMES and num(v) is not None])
        + ". Inconclusive means the folds cannot tell; it is never evidence that a method is as fair as, or "
          "fairer than, the DNN.", "note")
    for m in _compared(doc):
        e = methods[m]
        parts = []
        for metric in METRIC_ORDER:
            c = e["comparison"][metric]
            verdict = verdict_words(c.get("verdict"), c.get("margin"))
            parts.append(f"{METRIC_NAMES[metric]} {_f(e[metric]['mean'])} vs {_f(methods[baseline][metric]['mean'])} "
                         f"({difference_words(c)}): {verdict}")
        ref = " (external reference)" if e.get("external_reference") else ""
        if (e.get("age_independence") or {}).get("verdict") == "not age-independent":
            parts.append(f"its representation is not age-independent ({_age_r2_words(e['leakage'])})")
        blocks.append(Paragraph(f"{_label(doc, m)}{ref} against the DNN — " + "; ".join(parts) + ".", "bullet"))
    for m in _compared(doc):
        words = age_left_words(doc, m)
        if words:
            blocks.append(Paragraph(words, "finding"))
    leak = {m: e["leakage"] for m, e in methods.items() if e.get("leakage") and num(e["leakage"].get("r2")) is not None}
    if baseline in leak:
        others = {m: v for m, v in leak.items() if m != baseline}
        text = (f"Age left in the representation (a fresh probe trained after the fact, scored on held-out "
                f"participants): the "
                f"DNN's last hidden layer gives age R² {_f(leak[baseline]['r2'], 2)} (AUROC for age above the mean "
                f"{_f(leak[baseline].get('auroc'), 2)})")
        if others:
            lo = min(others, key=lambda m: others[m]["r2"])
            hi = max(others, key=lambda m: others[m]["r2"])
            text += (f"; the learners range from R² {_f(others[lo]['r2'], 2)} ({_label(doc, lo)}) to "
                     f"{_f(others[hi]['r2'], 2)} ({_label(doc, hi)})")
        text += ". R² at or below 0 means the probe predicts age no better than the mean age."
        if "beyond_label" in leak[baseline]:
            text += (" Beyond the label (the age left once each row's label's mean age is taken away — what a "
                     f"classifier can use without the diagnosis): the DNN R² {_f(beyond_label_r2(leak[baseline]), 2)}"
                     + (", the learners " + ", ".join(f"{_f(beyond_label_r2(v), 2)} ({_label(doc, m)})"
                                                      for m, v in others.items()) if others else "") + ".")
        floor = num(s.get("age_r2_from_label"))
        if floor is not None and floor > 0:
            text += (f" Here the label alone predicts held-out age with R² {_f(floor, 2)}: a representation that "
                     "predicts the label well carries age with it (older participants are more often impaired), "
                     "so the verdict reads the age beyond the label.")
        blocks.append(Paragraph(text, "finding"))
    blocks.append(rule)  # the verdicts first, then how they are reached
    return blocks


def _decay_words(learner: dict) -> str:
    """The weight decay of the predicting networks (documents stored before it existed trained without)."""
    wd = float(learner.get("weight_decay", 0.0))
    return (f", decoupled weight decay {numbers.short(num(wd))} (AdamW) on the weight matrices of the DNN's and the learners' "
            "predicting networks (I, C) alike" if wd else ", no weight decay")


def _networks_words(learner: dict, select_body: bool = False) -> str:
    """The learners' interpreter and classifier: their own, or the DNN's layers fitted with the DNN's seed
    (``dnn_body``; documents stored before it existed used their own), or per fold one of the two (``select_body``)."""
    hidden = '-'.join(map(str, learner['hidden']))
    if select_body:
        return ("per learner and fold one of two bodies, chosen with λ (below): its own interpreter I: x → z (hidden "
                f"{hidden}, z of dimension {learner['z_dim']}) and classifier C, or the DNN's hidden layers as I and "
                "its output layer as C, fitted with the DNN's seed of the fold (the adversary then reads its input "
                f"standardised); adversary A (hidden {learner['head_hidden']})")
    if learner.get("dnn_body"):
        return (f"interpreter I: x → z = the DNN's hidden layers (hidden {hidden}, z the post-ReLU layer of "
                f"dimension {learner['z_dim']}), classifier C = the DNN's output layer (batch norm, z → 2), each "
                "learner fitted with the DNN's seed of the fold (its initial weights and minibatches: at λ = 0 "
                f"age-indep-simple is the DNN), adversary A (hidden {learner['head_hidden']}, reading its input "
                "standardised over the minibatch)")
    return (f"interpreter I: x → z (hidden {hidden}, z of dimension {learner['z_dim']}), classifier C, adversary A "
            f"(hidden {learner['head_hidden']})")


def _methods_blocks(doc: dict) -> list:
    s = doc["settings"]
    L = s["learner"]
    run = s.get("methods_run") or list(doc["methods"])
    blocks = [Paragraph(
        f"Learners (PyTorch, device {doc['provenance'].get('device', '–')}): "
        f"{_networks_words(L, bool(s.get('select_lambda') and s.get('select_body')))}; batch norm "
        f"before each output layer; Adam, lr {numbers.short(num(L['lr']))}{_decay_words(L)}, "
        f"minibatches of "
        f"{L['batch_size']}, {L['epochs']} epochs, features standardised on the training rows. Per minibatch the "
        f"interpreter side takes one step, then the adversary takes K = {L['k_adv']} steps (the discriminator "
        f"K_D = {L['k_disc']}) on the fixed z (000 Algorithms 1–4). {lambda_words(s)} (λ: adversary strength; 000's "
        f"algorithms are λ = 1), λ_H = {numbers.short(num(L['lambda_h']))}, consensus-net M = {L['n_modalities']} modalities. "
        "The regression adversary predicts standardised age." + _adversary_words(L))]
    rows = [[r[0], DNN_BODY_NETWORKS, *r[2:]] if r[0] == "simple" and L.get("dnn_body") else r
            for r in LOSSES if r[0] in run]
    blocks.append(Table(["method", "networks", "interpreter side minimises", "adversary minimises"], rows,
                        title="Architectures and losses", widths=[1.1, 2.6, 1.6, 2.2], small=True))
    base = [m for m in ("svm", "rf", "adaboost") if m in run]
    if base:
        blocks.append(Paragraph("Other baselines (scikit-learn): " + join_words(
            [{"svm": "SVM (RBF, Platt scores)", "rf": "random forest (200 trees)",
              "adaboost": "AdaBoost (100 stumps)"}[m] for m in base]) + "."))
    ref = [m for m in run if doc["methods"].get(m, {}).get("external_reference")]
    if ref:
        blocks.append(Paragraph("External reference row: fairlearn's AdversarialFairnessClassifier (equalized-odds "
                                "adversary on the predictor's score, standardised age as the continuous sensitive "
                                "feature, α = λ), run on the same folds; it is not one of 000's learners."))
    blocks.append(Paragraph(
        f"Protocol: {s['folds']}-fold StratifiedGroupKFold by participant ('{s['group_id']}'), "
        f"{s['repeats']} repeat(s), seed {doc['provenance'].get('seed')}; threshold {numbers.short(num(s.get('threshold', 0.5)))}; "
        "per fold, Δ_eo^(N) on equal-frequency bins of the attribute within the held-out fold (bins merged until "
        "each holds both classes; the group audit's own Δ_eo). One-tailed tests against the DNN "
        f"(alternative 'less'): the {comparison_test_words(doc)}; TOST at the margins with the same variance; "
        f"Benjamini–Hochberg. {s.get('n_features', '–')} feature columns."))
    caveat = ("the corrected test widens the plain paired t's variance because the folds share training rows (and "
              "held-out rows across repeats), which the plain test ignores"
              if comparison_test(doc) == "corrected" else
              "the plain paired t-test ignores that the folds share training rows (and held-out rows across "
              "repeats): it overstates the evidence, the more so with repeats — the corrected resampled t-test "
              "(fairdesk-cli train age-independent --test corrected, the default) holds its size")
    blocks.append(Paragraph(
        f"Caveats: with {s['folds'] * s['repeats']} per-fold values the test has "
        f"{s['folds'] * s['repeats'] - 1} degrees of freedom, so large differences can stay inconclusive; "
        f"{caveat}. A classifier close to constant has a low Δ, so read a lower Δ beside the accuracy.", "note"))
    return blocks


def _tables_blocks(doc: dict, k: int) -> list:
    s = doc["settings"]
    rows = []
    for m, e in doc["methods"].items():
        rows.append([_label(doc, m), _pm(e.get("accuracy")), _pm(e.get("delta_eo_2")), _pm(e.get("delta_eo_5"))])
    blocks = [Table(["method", "accuracy", "Δ_eo^(2)", "Δ_eo^(5)"], rows,
                    title="Table 1: mean ± SD over folds", widths=[2.6, 1.3, 1.3, 1.3],
                    align=["L", "R", "R", "R"],
                    note="Held-out folds; SD with ddof = 1. Lower Δ_eo: errors spread more evenly over the attribute.")]
    trows = []
    for m in _compared(doc):
        e = doc["methods"][m]
        for metric in METRIC_ORDER:
            t, c = e["t_test"][metric], e["comparison"][metric]
            ci = (f"{fmt_signed(c['ci_low'])} to {fmt_signed(c['ci_high'])}"
                  if num(c.get("ci_low")) is not None and num(c.get("ci_high")) is not None else "–")
            trows.append([_label(doc, m), METRIC_NAMES[metric], fmt_signed(c.get("mean_difference")), ci,
                          _f(t.get("statistic"), 2), fmt_p(t.get("p")), fmt_p(c.get("p_bh")),
                          fmt_p(c.get("p_equivalence_bh")), _verdict_short(c.get("verdict"), c.get("margin"))])
    if trows:
        blocks.append(Table(["method", "metric", "difference", "95% CI", "t", "p (one-tailed)", "BH q", "TOST q",
                             "verdict"],
                            trows, title=f"Table 2: {TABLE2_TESTS[comparison_test(doc)]} against the DNN",
                            widths=[1.9, 0.9, 0.9, 1.4, 0.6, 0.9, 0.7, 0.7, 1.3],
                            align=["L", "L", "R", "R", "R", "R", "R", "R", "L"], small=True,
                            note="difference = method − DNN, mean over folds, with its two-sided 95% confidence "
                                 "interval from the same test's variance (for accuracy, minus the cost in points "
                                 "/ 100); alternative: method lower than the "
                                 f"DNN; test: {comparison_test_words(doc)}; TOST q: equivalence within the margin, "
                                 "BH-adjusted."))
    sizes = s.get("fold_sizes") or []
    if sizes:
        frows = [[str(z["repeat"] + 1), str(z["fold"] + 1), fmt_count(z["rows"], k), fmt_count(z["participants"], k),
                  fmt_count(z["positives"], k)] for z in sizes]
        blocks.append(Table(["repeat", "fold", "held-out rows", "participants", "label 1"], frows,
                            title="Held-out folds", widths=[1, 1, 1.4, 1.4, 1.4], align=["R"] * 5, small=True,
                            note=f"Small-cell suppression: counts below {k} shown as “<{k}”."))
    bins = [(m, metric, e[metric].get("bins_used")) for m, e in doc["methods"].items() for metric in ("delta_eo_5",)]
    fewer = sorted({_label(doc, m) for m, metric, used in bins if used and min(used) < 5})
    if fewer:
        blocks.append(Paragraph("Some folds used fewer than 5 bins for Δ_eo^(5) (bins merged until each holds both "
                                "classes): " + join_words(fewer) + ".", "note"))
    return blocks


def _leakage_blocks(doc: dict) -> list:
    rows = []
    for m, e in doc["methods"].items():
        leak = e.get("leakage")
        if not leak:
            rows.append([_label(doc, m), "–", "–", "–", "–", "–", "no representation", "–"])
            continue
        probes = leak.get("probes") or {}
        beyond = _f(beyond_label_r2(leak), 3) if "beyond_label" in leak else "–"
        rows.append([_label(doc, m), str(leak.get("probe", "–")), _f(leak.get("r2"), 3), beyond,
                     _f(leak.get("mae"), 2),
                     _f(leak.get("auroc"), 3),
                     ", ".join(f"{p} {_f(v.get('r2'), 2)}" for p, v in probes.items()) or "–",
                     (e.get("age_independence") or {}).get("verdict", "–")])
    thr = next((e["leakage"].get("age_threshold") for e in doc["methods"].values() if e.get("leakage")), None)
    target = num(doc["settings"].get("leakage_target"))
    rule = (f" A representation is called age-independent when its R² for the age beyond the label is at most "
            f"{numbers.short(target)} (the leakage target): age minus its label's mean training age, probed the same way. Older "
            "participants are more often impaired, so any representation that predicts the label carries that "
            "share of age (000 rejects demographic parity for this reason and measures equalized odds, Δ_eo)."
            if target is not None else "")
    return [
        Paragraph("How much age is left in each representation, measured after training by a fresh probe (not by "
                  "the training adversary's loss): ridge regression and gradient boosting learn age from the "
                  "representations of the fold's training rows (the same fitted model) plus part of the held-out "
                  "rows, and predict the other held-out participants (participant-disjoint inner folds), so every "
                  "held-out row gets an out-of-sample age prediction; pooled over folds. R² ≤ 0: no better than the "
                  "mean age." + rule),
        Table(["method", "probe", "age R²", "R² beyond label", "MAE (years)", "AUROC age > mean", "R² by probe",
               "representation"],
              rows, title="Leakage of age", widths=[1.8, 0.55, 0.6, 0.75, 0.7, 0.85, 1.3, 1.25],
              align=["L", "L", "R", "R", "R", "R", "L", "L"],
              small=True, note=(f"AUROC for age above {_f(thr, 1)} (the table's mean age)." if thr is not None
                                else "")),
    ]


def frontier_data(doc: dict) -> pd.DataFrame:
    """The points of the frontier figure: per learner one per λ (the stored sweep, or the run's λ), the DNN and the
    other methods at their single point."""
    s = doc["settings"]
    lam = None if s.get("select_lambda") else num(s["learner"]["lam"])
    rows = []
    for m, e in doc["methods"].items():
        role = ("dnn" if m == s.get("baseline", "dnn") else "reference" if e.get("external_reference")
                else "learner" if e.get("frontier") is not None or m in {r[0] for r in LOSSES[1:]} else "baseline")
        leak = e.get("leakage") or {}
        points = e.get("frontier") or [{"lambda": lam if role == "learner" else None,
                                        "accuracy": e["accuracy"]["mean"], "delta_eo_5": e["delta_eo_5"]["mean"],
                                        "leakage_r2": leak.get("r2")}]
        for p in points:
            rows.append({"method": m, "label": _label(doc, m), "role": role, "lambda": num(p.get("lambda")),
                         "accuracy": num(p.get("accuracy")), "delta_eo_5": num(p.get("delta_eo_5")),
                         "leakage_r2": num(p.get("leakage_r2"))})
    return pd.DataFrame(rows, columns=FRONTIER_COLUMNS)


def _frontier_blocks(doc: dict) -> list:
    data = frontier_data(doc)
    swept = any(e.get("frontier") for e in doc["methods"].values())
    lams = doc["settings"].get("frontier_lambdas")
    legend = ("The DNN is the black star, other baselines grey squares, an external reference a grey diamond. "
              "Lower and further right is better on both panels.")
    if swept:
        caption = (f"λ ∈ {{{', '.join(f'{numbers.short(num(v))}' for v in lams or [])}}}, same folds; each learner's points are "
                   "joined in order of λ and labelled with it. " + legend)
    else:
        at = ("the λ chosen per fold" if doc["settings"].get("select_lambda")
              else f"the run's λ = {numbers.short(num(doc['settings']['learner']['lam']))}")
        caption = (f"One point per method at {at}: no sweep over λ was run (fairdesk-cli train age-independent "
                   "--frontier 0,0.5,1,2 adds it). " + legend)
    return [FigureSpec("age_frontier", "Δ_eo^(5) and leakage against accuracy", data, caption=caption)]


def _provenance_blocks(doc: dict) -> list:
    from fairdesk.core.executor import executor_text

    prov = doc["provenance"]
    rows = [["seed", str(prov.get("seed"))], ["data (SHA-256)", str(prov.get("data_sha256"))],
            ["dataset", str(prov.get("dataset", "–"))], ["created (UTC)", str(prov.get("created_utc"))],
            ["device", str(prov.get("device", "–"))], ["executor", executor_text(prov)]]
    rows += [[name, str(v)] for name, v in (prov.get("versions") or {}).items()]
    hashes = [[key, str(h)[:16] + "…"] for key, h in (prov.get("model_hashes") or {}).items()]
    blocks = [Table(["", "value"], rows, title="Provenance", widths=[1.6, 5.0], small=True)]
    if hashes:
        blocks.append(Table(["fit (method/repeat/fold)", "model hash (SHA-256, first 16)"], hashes,
                            title="Fitted models", widths=[3.0, 3.0], small=True))
    return blocks


def build_age_report(doc: dict, suppress_k: int = 11) -> Report:
    """The report tree of an ``age_independence`` document (see the module docstring)."""
    k = int(suppress_k)
    s = doc["settings"]
    named = [s.get("baseline", "dnn"), *(s.get("methods_run") or [])]
    absent = [m for m in dict.fromkeys(named) if m not in doc["methods"]]
    for m, e in doc["methods"].items():  # every method's metrics; a compared method's tests of each metric
        parts = [e.get(metric) for metric in METRIC_ORDER]
        if e.get("comparison"):
            parts += [(e.get(t) or {}).get(metric) for t in ("comparison", "t_test") for metric in METRIC_ORDER]
        if any(not isinstance(x, dict) for x in parts) or any("mean" not in (e.get(x) or {}) for x in METRIC_ORDER):
            absent.append(m)
    if absent:  # the schema fixes each part's shape; that the parts name each other is checked here
        raise DataError(f"The stored document names method(s) {', '.join(map(repr, absent))} but holds no (or "
                        "incomplete) results for them; it is damaged. Run the audit again.")
    sections = [
        board_section(board(doc, k), k),
        Section("summary", "Summary", _summary_blocks(doc, k)),
        Section("methods", "Methods", _methods_blocks(doc)),
        Section("tables", "Accuracy and error spread (000 Tables 1–2)", _tables_blocks(doc, k)),
        # leakage opens a page and the frontier follows on it: a section that fills its page exactly (its trailing
        # spacer spilling over) followed by a new-page section leaves an empty page in the shared renderer
        Section("leakage", "Leakage of age from the representation", _leakage_blocks(doc)),
        Section("frontier", "Accuracy–fairness frontier", _frontier_blocks(doc), new_page=False),
        Section("provenance", "Provenance", _provenance_blocks(doc)),
    ]
    return Report(title="Age-independent representation learners",
                  subtitle=f"'{s['label']}' with '{s['attribute']}' as the protected attribute — "
                           f"{s['folds']}-fold participant-disjoint cross-validation",
                  date=report_date(doc["provenance"]), suppress_k=k, sections=sections,
                  footer=f"FairDesk · age-independent learners · counts below {k} suppressed",
                  metadata={"kind": "age_independence"})


# --------------------------------------------------------------------------------------------------------------
# The figure


def frontier_size(data: pd.DataFrame) -> tuple[float, float]:
    n = max(data["method"].nunique(), 1) if len(data) else 1
    return 6.7, 2.9 + 0.18 * ((n + 2) // 3)


def render_frontier_png(data: pd.DataFrame, buf, title: str) -> None:
    """Two panels, Δ_eo^(5) and leakage R² against accuracy; per method its points (learners joined over λ)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    w, h = frontier_size(data)
    fig = Figure(figsize=(w, h), dpi=100)
    FigureCanvasAgg(fig)
    fig.suptitle(title, fontsize=8.5, x=0.01, ha="left", y=0.985)
    legend_h = 0.18 * ((max(data["method"].nunique(), 1) + 2) // 3) + 0.25
    bottom = (legend_h + 0.45) / h
    axes = [fig.add_axes((0.08, bottom, 0.39, 0.86 - bottom)), fig.add_axes((0.585, bottom, 0.39, 0.86 - bottom))]
    handles, labels = [], []
    color_i = 0
    for m, g in data.groupby("method", sort=False):
        role = g["role"].iloc[0]
        if role == "dnn":
            style = dict(color="black", marker="*", markersize=9, linestyle="none")
        elif role == "learner":
            style = dict(color=COLORS[color_i % len(COLORS)], marker="o", markersize=4, linestyle="-", linewidth=1)
            color_i += 1
        else:
            style = dict(color="#8a8a8a", marker="s" if role == "baseline" else "D", markersize=4, linestyle="none")
        g = g.sort_values("lambda", na_position="first")
        line = None
        for ax, y in zip(axes, ("delta_eo_5", "leakage_r2")):
            ok = g[g["accuracy"].notna() & g[y].notna()]
            if ok.empty:
                continue
            (ln,) = ax.plot(ok["accuracy"], ok[y], **style)
            line = line or ln
            if role == "learner" and len(ok) > 1:
                for x_, y_, lam in zip(ok["accuracy"], ok[y], ok["lambda"]):
                    ax.annotate(f"{numbers.short(lam)}", (x_, y_), xytext=(2, 2), textcoords="offset points", fontsize=5.5,
                                color=style["color"])
        if line is not None:
            handles.append(line)
            labels.append(str(g["label"].iloc[0]))
    for ax, ylabel in zip(axes, ("Δ_eo^(5) (lower: more even errors)", "leakage: age R² of a fresh probe")):
        ax.set_xlabel("accuracy", fontsize=7)
        ax.set_ylabel(ylabel, fontsize=7)
        ax.tick_params(labelsize=6.5)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[1].axhline(0.0, color="#cccccc", lw=0.6, zorder=0)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=6.3, frameon=False,
                   bbox_to_anchor=(0.5, 0.0))
    fig.savefig(buf, format="png", dpi=150, metadata={"Software": None}, pil_kwargs={"compress_level": 1})


def register_figures() -> None:
    """Teach the shared PDF renderer this module's figure kind."""
    from fairdesk.core.reports.pdf import register_figure_kind

    register_figure_kind("age_frontier", render_frontier_png, frontier_size)


def render_age_bytes(report: Report) -> bytes:
    from fairdesk.core.reports.pdf import render_bytes

    register_figures()
    return render_bytes(report)


def report_tree(doc: dict, settings) -> Report:
    """The report of a stored document with the user's settings (:class:`fairdesk.core.kinds.ReportSettings`); its
    figure kind registered, so any renderer can draw it."""
    register_figures()
    return with_disclosure(build_age_report(doc, settings.suppress_k), doc)


def build_report(doc: dict, path: str | os.PathLike, settings) -> Path:
    """The registry's one report signature (``settings``: :class:`fairdesk.core.kinds.ReportSettings`)."""
    return atomic.write_bytes(Path(path), render_age_bytes(report_tree(doc, settings)))
