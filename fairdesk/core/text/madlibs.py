"""Synthetic text sets for counterfactual token fairness (METHODS §5): the "madlibs" template set and a generated
clinical-notes demo task.

* :func:`madlibs` — the synthetic set of Dixon et al. (2018) used by 002 ("NAME is a ADJECTIVE"-style sentences in
  which all toxicity is in the context, so every counterfactual is symmetric by design). It is the full Cartesian
  product of the 6 template pairs (non-toxic / toxic) over the word lists in
  ``resources/text/identity_terms/madlibs/`` and the 50 identity terms; with the published lists that is
  **76,564 rows, 38,282 per label**: per label verb_adj 4 × 50 = 200, am_hate_adj 50, being_adj 16 × 50 = 800,
  name_adj 45 × 16 × 50 = 36,000, you_are_adj 16 × 50 = 800, you_occupation 16 × 27 = 432. The word lists come
  from conversationai/unintended-ml-bias-analysis under CC BY 4.0 (attribution: :data:`MADLIBS_ATTRIBUTION`).
  Rows of the ``you_occupation`` template hold no identity term: ``term`` is empty and ``has_counterfactual`` False.
* :func:`clinical_notes_demo` — short generated triage notes whose label (needs review) comes from the finding, with
  some identity terms spuriously over-represented among positives, so a baseline classifier learns them and the
  remedies have something to remove.

Nothing here imports torch.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from fairdesk.core.errors import DataError

#: rows of the madlibs template set scored as the "synthetic" subset by default (see docs/methods.md §5: with the
#: Bonferroni-level interval, ~1,000 texts bound a typical CTF gap to about ±0.01, half the default margin, while
#: the scoring stays ~25 k texts for the 35 train terms — seconds for the CNN, minutes for a transformer on CPU)
SYNTHETIC_ROWS = 1000  # (a constant here, not in the job, so the CLI parser names it without pandas)

MADLIBS_ATTRIBUTION = (
    "Synthetic template set and word lists: Dixon, Li, Sorensen, Thain and Vasserman, \"Measuring and Mitigating "
    "Unintended Bias in Text Classification\" (AIES 2018), from github.com/conversationai/unintended-ml-bias-analysis "
    "(Jigsaw / Google), licensed CC BY 4.0 (creativecommons.org/licenses/by/4.0/). FairDesk regenerates the set as "
    "the Cartesian product of the published word lists; no change to the lists.")

#: (template pair name, non-toxic template, toxic template) — METHODS §5, in the release's order.
TEMPLATE_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("verb_adj", "{verb_positive} {identity}", "{verb_negative} {identity}"),
    ("am_hate_adj", "i am {identity}", "i hate {identity}"),
    ("being_adj", "Being {identity} is {adjective_positive}.", "Being {identity} is {adjective_negative}."),
    ("name_adj", "{name} is a {adjective_positive} {identity}", "{name} is a {adjective_negative} {identity}"),
    ("you_are_adj", "You are a {adjective_positive} {identity}", "You are a {adjective_negative} {identity}"),
    ("you_occupation", "You are a {adjective_positive} {occupation}", "You are a {adjective_negative} {occupation}"),
)
#: Published size of the set (bias_madlibs_77k) and per template pair and label.
PUBLISHED_ROWS = 76_564
PUBLISHED_PER_TEMPLATE = {"verb_adj": 200, "am_hate_adj": 50, "being_adj": 800, "name_adj": 36_000,
                          "you_are_adj": 800, "you_occupation": 432}
_LISTS = {"verb_positive": "verbs_positive.txt", "verb_negative": "verbs_negative.txt",
          "adjective_positive": "adjectives_positive.txt", "adjective_negative": "adjectives_negative.txt",
          "name": "names.txt", "occupation": "occupations.txt"}


def _read_list(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise DataError(f"Cannot read the word list {path}: {err.strerror or err}.") from err
    words = [" ".join(s.split()) for s in lines if s.strip() and not s.strip().startswith("#")]
    if not words:
        raise DataError(f"The word list {path.name} is empty.")
    return words


def word_lists(folder: str | Path | None = None, identity_terms: str | Path | None = None) -> dict[str, list[str]]:
    """The madlibs word lists (default: the shipped ones) plus ``identity`` (the 50 Dixon et al. terms)."""
    from fairdesk.core.text.counterfactual import terms_dir

    folder = Path(folder) if folder else terms_dir() / "madlibs"
    out = {slot: _read_list(folder / name) for slot, name in _LISTS.items()}
    out["identity"] = _read_list(Path(identity_terms) if identity_terms else terms_dir() / "dixon50.txt")
    return out


def madlibs(lists: dict[str, list[str]] | None = None):
    """The madlibs set as a DataFrame: text, label (0 non-toxic, 1 toxic), template, term, has_counterfactual."""
    import pandas as pd

    lists = lists or word_lists()
    rows = []
    for name, *templates in TEMPLATE_PAIRS:
        for label, template in enumerate(templates):
            slots = [s for s in _LISTS if "{" + s + "}" in template]
            uses_identity = "{identity}" in template
            ordered = (["name"] if "name" in slots else []) + [s for s in slots if s != "name"]
            choices = [lists[s] for s in ordered] + ([lists["identity"]] if uses_identity else [])
            keys = ordered + (["identity"] if uses_identity else [])
            for combo in itertools.product(*choices):
                fill = dict(zip(keys, combo))
                rows.append((template.format(**fill), label, name, fill.get("identity", ""), uses_identity))
    return pd.DataFrame(rows, columns=["text", "label", "template", "term", "has_counterfactual"])


# ==============================================================================================================
# Clinical-notes demo task

_FINDINGS_POS = ("crushing chest pain", "new onset confusion", "syncope at home", "fever and hypotension",
                 "sudden unilateral weakness", "dyspnea at rest", "melena and dizziness", "thunderclap headache")
_FINDINGS_NEG = ("mild cough", "ankle sprain", "medication refill", "seasonal allergies", "small skin rash",
                 "stable asthma follow-up", "sore throat", "minor finger cut")
_FINDINGS_AMBIGUOUS = ("abdominal pain", "back pain", "headache", "fatigue", "nausea", "dizziness", "palpitations",
                       "cough and fever")
#: Terms the demo makes spuriously predictive: over-represented among positive (needs review) notes.
DEMO_SPURIOUS_TRAIN = ("muslim", "gay", "hispanic", "elderly", "jewish")  # all in 002's training split
DEMO_SPURIOUS_HELD_OUT = ("black", "african", "christian", "deaf")  # all held out in 002


def clinical_notes_demo(n: int = 2000, seed: int = 0, spurious: float = 0.8, noise: float = 0.05,
                        identity_share: float = 0.85, ambiguous: float = 0.5):
    """Generated short triage notes (≤ 10 whitespace tokens, so the default CTF length limit keeps them all) with label 1 = needs urgent review.

    The label follows the finding (8 urgent, 8 routine findings) with ``noise`` flipped labels, except in a share
    ``ambiguous`` of notes whose finding (8 ambiguous ones, e.g. "abdominal pain") appears with either label. A share
    ``identity_share`` of notes mention one Dixon et al. identity term in the slot "{age} yo {adjective} {term}
    pt"; for positive notes the term is drawn from the spurious terms (:data:`DEMO_SPURIOUS_TRAIN` +
    :data:`DEMO_SPURIOUS_HELD_OUT`) with probability ``spurious`` and from all 47 single-token terms otherwise, so
    those terms carry label information a classifier can (wrongly) use. The adjective slot holds a control word
    (``resources/text/identity_terms/control.txt``) independent of the label. Columns: text, label, term, finding.
    """
    import pandas as pd

    from fairdesk.core.text.counterfactual import load_terms

    rng = np.random.default_rng(seed)
    single = [t for t in load_terms("dixon").groups if " " not in t]
    spur = list(DEMO_SPURIOUS_TRAIN + DEMO_SPURIOUS_HELD_OUT)
    controls = list(load_terms("control").groups)
    y = (rng.random(n) < 0.5).astype(int)
    rows = []
    for label in y:
        pool_f = _FINDINGS_AMBIGUOUS if rng.random() < ambiguous else (_FINDINGS_POS if label else _FINDINGS_NEG)
        finding = pool_f[int(rng.integers(8))]
        age = int(rng.integers(18, 90))
        adj = controls[int(rng.integers(len(controls)))]
        if rng.random() < identity_share:
            pool = spur if (label and rng.random() < spurious) else single
            term = pool[int(rng.integers(len(pool)))]
            text = f"{age} yo {adj} {term} pt with {finding}."
        else:
            term = ""
            text = f"{age} yo {adj} pt with {finding}."
        observed = int(label) if rng.random() >= noise else 1 - int(label)
        rows.append((text, observed, term, finding))
    return pd.DataFrame(rows, columns=["text", "label", "term", "finding"])
