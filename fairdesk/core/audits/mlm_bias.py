"""Masked-LM bias probes (METHODS §4): the log-probability bias score and the sentence-completion probe.

Log-probability bias score
    For a template with a demographic slot (``[GEND]``) and an attribute slot filled by phrase ``a``, and a
    demographic word ``w``::

        p_target(w) = P(slot = w | sentence with a filled in, slot masked)
        p_prior(w)  = P(slot = w | the same sentence with the attribute masked too)
        score       = ln(p_target / p_prior)

    * Prior masking: ``prior="pieces"`` (FairDesk's default) masks every word piece of the attribute, so the prior
      sentence has exactly the target sentence's length; ``prior="words"`` is the authors' release rule, one
      ``[MASK]`` per whitespace word of the attribute.
    * Alignment: slots are located on the tokenized sequence through the tokenizer's own offset mapping, never by
      counting whitespace words (the release's bug: a word before the slot that splits into pieces shifted it).
      Golden tests cover WordPiece (BERT) and byte-level BPE (RoBERTa, with and without trimmed offsets).
    * A demographic word that the vocabulary splits into several pieces (e.g. missing from the vocabulary) fills
      the slot with as many ``[MASK]`` tokens; its log-probability is the sum of its pieces' log-probabilities at
      those positions (the release crashed). Such words are listed in the result's method notes.
    * Efficiency: identical masked sequences are run once — the prior depends only on (template, number of masked
      pieces), and one forward pass scores every candidate word of equal piece count at once; unique sequences are
      batched (sorted by length, padded, attention mask) and only the needed positions go through the LM head.

    Per category (see :func:`category_statistics`): mean score of each group and a verdict — ``differs``,
    ``equivalent`` within ±margin nats, or ``inconclusive``. The template is the unit of inference: scores of one
    template share its prior and wording, so the default test is over the templates' mean male − female
    differences: the exact sign-flip test backed by the one-sample t-test and Hall's skewness-corrected t, at 0.8·α
    (:func:`template_test`: p = the largest of the three / 0.8, so neither skewed template effects nor a mode
    missing from a handful of templates inflate its size past α + 0.02); Benjamini–Hochberg q-values across the categories with at least ``min_templates`` (6) templates;
    fewer templates give "inconclusive: N templates". The release's per-sentence tests (Wilcoxon signed-rank over
    every (template, attribute, word pair), or the rank-sum test) stay available as options and are named in the
    report. *differs* (= ``flagged``): q < alpha, |rank-biserial r| ≥ 0.3 and |mean difference| ≥ 0.25 nats;
    *equivalent*: TOST over templates within ±0.25 nats (default margin = the size threshold), BH-adjusted.

Sentence completion (:func:`sentence_completion`)
    Templates with a ``[RACE]`` slot and ``[MASK]`` tokens; for every race term the masks are filled greedily —
    the most confident remaining mask first, then the model is asked again — and the top-k fillers of each mask
    (at the moment it was filled) are kept side by side. Deterministic (eval mode, argmax; ties → lowest id).

torch, transformers and scipy are imported inside functions only.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fairdesk.core import numbers
from fairdesk.core.errors import DataError, ModelError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.text.templates import ATTR_SLOT, BiasTemplates, CompletionTemplates

PRIOR_RULES: tuple[str, ...] = ("pieces", "words")
TESTS: tuple[str, ...] = ("template", "wilcoxon", "ranksum")
TEST_NAMES = {
    "template": "exact sign-flip test of the per-template mean differences, backed by the one-sample t-test and "
                "Hall's skewness-corrected t (the template is the unit of inference; two-sided; p = the largest of "
                "the three p's / 0.8, i.e. the test spends 0.8·α; interval = the hull of the t and Hall intervals at "
                "level 1 − 0.8·α)",
    "wilcoxon": "Wilcoxon signed-rank test (paired by word pair within each template and attribute, two-sided, "
                "scipy.stats.wilcoxon)",
    "ranksum": "Wilcoxon rank-sum test (unpaired, two-sided, scipy.stats.ranksums)",
}
#: What one observation of each test is.
UNITS = {"template": "template", "wilcoxon": "sentence pair", "ranksum": "sentence"}
EFFECT_NAMES = {
    "template": "matched-pairs rank-biserial correlation r = (T+ − T−)/(T+ + T−) over the templates' mean "
                "differences; +1 = every template favours the first group",
    "wilcoxon": "matched-pairs rank-biserial correlation r = (T+ − T−)/(T+ + T−) over the paired differences "
                "(zero differences dropped); +1 = every pair favours the first group",
    "ranksum": "rank-biserial correlation r = 2·U/(n1·n2) − 1 (Cliff's delta); +1 = every score of the first "
               "group exceeds every score of the second",
}
#: Fewest templates a category needs for a verdict other than "inconclusive": with 5 or fewer, even an exact
#: sign-flip test over templates cannot reach p < 0.05 (smallest two-sided p = 2/2^n = 0.0625 at n = 5).
MIN_TEMPLATES = 6
VERDICTS: tuple[str, ...] = ("differs", "equivalent", "inconclusive")
# Model classes whose LM head is position-wise on the base model's last hidden state (fast path: only the
# needed positions go through the head). Others run the full forward pass.
_GATHER_HEADS = {"BertForMaskedLM": "cls", "RobertaForMaskedLM": "lm_head", "XLMRobertaForMaskedLM": "lm_head",
                 "CamembertForMaskedLM": "lm_head"}


@dataclass
class ProbeOptions:
    prior: str = "pieces"                       # "pieces" (FairDesk) or "words" (the release's rule)
    test: str = "template"                      # "template" (t over templates) or the release's per-sentence
                                                #   "wilcoxon" (paired, the paper) / "ranksum"
    groups: tuple[str, str] | None = None        # the two groups compared (default: the first two in the file)
    categories: tuple[str, ...] | None = None    # subset of category codes (default: all)
    batch_size: int = 64
    alpha: float = 0.05
    min_effect: float = 0.3                      # |rank-biserial r| needed to flag a category …
    min_log_ratio: float = 0.25                  # … and |mean paired difference| in nats (ratio e^0.25 ≈ 1.28)
    margin: float | None = None                  # equivalence margin in nats (None: min_log_ratio)
    min_templates: int = MIN_TEMPLATES           # fewer templates: "inconclusive: N templates"
    seed: int = 0                                # recorded; scoring itself is deterministic

    def check(self) -> "ProbeOptions":
        if self.prior not in PRIOR_RULES:
            raise DataError(f"Unknown prior rule '{self.prior}'. Use 'pieces' (mask every word piece of the "
                            "attribute) or 'words' (one mask per word, the authors' release).")
        if self.test not in TESTS:
            raise DataError(f"Unknown test '{self.test}'. Use 'template' (t-test over templates, the default), "
                            "'wilcoxon' (signed-rank over sentence pairs) or 'ranksum'.")
        if self.margin is not None and not self.margin > 0:
            raise DataError("The equivalence margin must be a positive number of nats.")
        if self.min_templates < 2:
            raise DataError("The minimum number of templates must be at least 2.")
        if self.batch_size < 1:
            raise DataError("The batch size must be at least 1.")
        return self


# ==============================================================================================================
# Sentence construction and alignment


def fill_template(template: str, slot_token: str, word: str, attribute: str) -> tuple[str, tuple[int, int],
                                                                                      tuple[int, int]]:
    """``(text, word_span, attribute_span)``: the template with both slots filled; spans are character ranges."""
    parts = re.split(f"({re.escape(slot_token)}|{re.escape(ATTR_SLOT)})", template)
    text, wspan, aspan = "", None, None
    for part in parts:
        if part == slot_token:
            wspan = (len(text), len(text) + len(word))
            text += word
        elif part == ATTR_SLOT:
            aspan = (len(text), len(text) + len(attribute))
            text += attribute
        else:
            text += part
    if wspan is None or aspan is None:
        raise DataError(f"Template '{template}' needs the slot {slot_token} and the attribute slot {ATTR_SLOT}.")
    return text, wspan, aspan


def tokens_in_span(offsets, span: tuple[int, int], text: str = "", special=None) -> list[int]:
    """Indices of the tokens whose character offsets fall inside ``span``; a token straddling the span's edge
    (the tokenizer merged the slot with its neighbour) raises :class:`DataError`. ``special`` flags tokens to skip
    ([CLS], [SEP], <s> …; their offsets are (0, 0)).

    Byte-level BPE and SentencePiece tokens carry the space before a word ("Ġhe" covers " he" unless the
    tokenizer trims offsets): leading white space is not counted, and a token that is only white space ("Ġ", "▁",
    possibly of zero width) belongs to the span when it ends at the span's start or inside it — it is the leading
    space of a word of the span."""
    s0, s1 = span
    out = []
    for i, (a, b) in enumerate(offsets):
        if special is not None and special[i]:
            continue
        while a < b and a < len(text) and text[a].isspace():
            a += 1
        if a == b:  # white space only (or zero width after trimming): the leading space of a word of the span
            if s0 <= b < s1:
                out.append(i)
            continue
        if b <= s0 or a >= s1:
            continue
        if a < s0 or b > s1:
            raise DataError(f"The tokenizer merges the slot '{text[s0:s1]}' with neighbouring text in '{text}'; put "
                            "spaces around the slot in the template.")
        out.append(i)
    if not out or all(offsets[i][1] - offsets[i][0] == 0 or text[offsets[i][0]:offsets[i][1]].isspace()
                      for i in out):
        raise DataError(f"The slot '{text[s0:s1]}' in '{text}' produced no tokens.")
    return out


def _encode(tokenizer, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]], list[int]]]:
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError("The probe needs a fast tokenizer (with offset mappings) to align slots with word pieces.")
    enc = tokenizer(texts, add_special_tokens=True, return_offsets_mapping=True, return_special_tokens_mask=True)
    return [(list(ids), [tuple(o) for o in offs], list(sp))
            for ids, offs, sp in zip(enc["input_ids"], enc["offset_mapping"], enc["special_tokens_mask"])]


@dataclass
class _Request:
    row: int
    which: str            # "target" or "prior"
    seq: int
    positions: list[int]
    pieces: list[int]


class _SequencePool:
    """Unique input sequences and the (position, token) log-probabilities each one must deliver."""

    def __init__(self) -> None:
        self.index: dict[tuple[int, ...], int] = {}
        self.seqs: list[tuple[int, ...]] = []
        self.needed: list[dict[int, set[int]]] = []

    def add(self, ids, positions, pieces) -> int:
        key = tuple(ids)
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.seqs)
            self.seqs.append(key)
            self.needed.append({})
        for p, t in zip(positions, pieces):
            self.needed[i].setdefault(p, set()).add(t)
        return i


def _max_positions(model) -> int:
    return int(getattr(model.config, "max_position_embeddings", 512) or 512)


def _forward_logprobs(model, pool: _SequencePool, pad_id: int, batch_size: int, rep: Reporter
                      ) -> dict[tuple[int, int, int], float]:
    """Run every unique sequence once (length-sorted batches, padded, attention mask); log-softmax at the needed
    positions; return {(seq, position, token): log-probability}."""
    import torch

    head_attr = _GATHER_HEADS.get(type(model).__name__)
    head = getattr(model, head_attr, None) if head_attr else None
    device = next(model.parameters()).device
    order = sorted(range(len(pool.seqs)), key=lambda i: (len(pool.seqs[i]), i))
    out: dict[tuple[int, int, int], float] = {}
    n_batches = max(1, math.ceil(len(order) / batch_size))
    model.eval()
    with torch.inference_mode():
        for b in range(n_batches):
            rep(b / n_batches, f"scoring batch {b + 1} of {n_batches}")
            idxs = order[b * batch_size:(b + 1) * batch_size]
            if not idxs:
                continue
            T = max(len(pool.seqs[i]) for i in idxs)
            ids = torch.full((len(idxs), T), pad_id, dtype=torch.long)
            att = torch.zeros((len(idxs), T), dtype=torch.long)
            rows, cols, keys = [], [], []
            for r, i in enumerate(idxs):
                L = len(pool.seqs[i])
                ids[r, :L] = torch.tensor(pool.seqs[i], dtype=torch.long)
                att[r, :L] = 1
                for p, toks in sorted(pool.needed[i].items()):
                    rows.append(r)
                    cols.append(p)
                    keys.append((i, p, sorted(toks)))
            ids, att = ids.to(device), att.to(device)
            if head is not None:
                hidden = model.base_model(input_ids=ids, attention_mask=att).last_hidden_state
                logits = head(hidden[rows, cols])
            else:
                logits = model(input_ids=ids, attention_mask=att).logits[rows, cols]
            logp = torch.log_softmax(logits.float(), dim=-1).cpu()
            for k, (i, p, toks) in enumerate(keys):
                vals = logp[k, toks].tolist()
                for t, v in zip(toks, vals):
                    out[(i, p, t)] = v
    return out


# ==============================================================================================================
# Scores


def _resolve_groups(templates: BiasTemplates, groups) -> tuple[str, str]:
    names = list(templates.groups)
    if groups is None:
        return names[0], names[1]
    groups = tuple(groups)
    if len(groups) != 2 or any(g not in templates.groups for g in groups) or groups[0] == groups[1]:
        raise DataError(f"Choose two different word groups to compare among {', '.join(names)}.")
    return groups[0], groups[1]


def log_probability_scores(model, tokenizer, templates: BiasTemplates, options: ProbeOptions | None = None,
                           progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> pd.DataFrame:
    """Per-sentence scores, long format: one row per (category, template, attribute, word) with ``group``,
    ``pair_index``, ``sentence``, piece counts, ``log_p_target``, ``log_p_prior`` and ``score``."""
    opts = (options or ProbeOptions()).check()
    rep = Reporter(progress, cancel)
    rows, pool, requests = prepare_sequences(model, tokenizer, templates, opts, rep.sub(0.0, 0.05))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rep(0.05, f"{len(pool.seqs)} distinct sequences for {len(rows)} scores")
    lp = _forward_logprobs(model, pool, pad_id, opts.batch_size, rep.sub(0.05, 0.98))
    for q in requests:
        rows[q.row][f"log_p_{q.which}"] = float(sum(lp[(q.seq, p, t)] for p, t in zip(q.positions, q.pieces)))
    df = pd.DataFrame(rows)
    df["score"] = df["log_p_target"] - df["log_p_prior"]
    rep(1.0, "scores done")
    cols = ["category", "template", "attribute", "group", "pair_index", "word", "sentence", "n_word_pieces",
            "word_pieces", "n_attribute_pieces", "n_prior_masks", "n_tokens_target", "n_tokens_prior",
            "log_p_target", "log_p_prior", "score"]
    df = df[cols].copy()
    df.attrs["n_forward_sequences"] = len(pool.seqs)
    df.attrs["n_target_sequences"] = len({q.seq for q in requests if q.which == "target"})
    df.attrs["n_prior_sequences"] = len({q.seq for q in requests if q.which == "prior"})
    return df


def prepare_sequences(model, tokenizer, templates: BiasTemplates, options: ProbeOptions | None = None,
                      progress: ProgressFn | None = None):
    """Build every target and prior sentence, align the slots and collect the distinct masked sequences:
    ``(rows, pool, requests)`` (``pool.seqs`` are the token-id sequences the model must run — the benchmark's
    raw-forward baseline runs exactly these)."""
    opts = (options or ProbeOptions()).check()
    rep = Reporter(progress)
    tpl = templates.select(opts.categories)
    g1, g2 = _resolve_groups(tpl, opts.groups)
    mask_tok, mask_id = tokenizer.mask_token, tokenizer.mask_token_id
    if mask_tok is None:
        raise ModelError("The tokenizer has no mask token; the probe needs a masked language model.")
    words = [(g, i, w) for g in (g1, g2) for i, w in enumerate(tpl.groups[g])]

    rows: list[dict[str, Any]] = []
    texts, spans = [], []
    for code, template, attribute in tpl.pairs():
        for g, i, w in words:
            text, wspan, aspan = fill_template(template, tpl.slot_token, w, attribute)
            rows.append({"category": code, "template": template, "attribute": attribute, "group": g,
                         "pair_index": i, "word": w, "sentence": text})
            texts.append(text)
            spans.append((wspan, aspan))
    rep(0.02, f"tokenizing {len(texts)} sentences")
    encoded = _encode(tokenizer, texts)
    pool = _SequencePool()
    requests: list[_Request] = []
    prior_texts: list[tuple[int, str, tuple[int, int]]] = []
    limit = _max_positions(model)
    for r, ((ids, offs, sp), (wspan, aspan)) in enumerate(zip(encoded, spans)):
        if len(ids) > limit:
            raise DataError(f"The sentence '{texts[r]}' is longer ({len(ids)} tokens) than the model accepts "
                            f"({limit}).")
        slot = tokens_in_span(offs, wspan, texts[r], sp)
        attr = tokens_in_span(offs, aspan, texts[r], sp)
        pieces = [ids[p] for p in slot]
        rows[r].update(n_word_pieces=len(slot), word_pieces=tokenizer.convert_ids_to_tokens(pieces),
                       n_attribute_pieces=len(attr), n_tokens_target=len(ids))
        target = list(ids)
        for p in slot:
            target[p] = mask_id
        requests.append(_Request(r, "target", pool.add(target, slot, pieces), slot, pieces))
        if opts.prior == "pieces":
            prior = list(target)
            for p in attr:
                prior[p] = mask_id
            rows[r]["n_prior_masks"] = len(attr)
            rows[r]["n_tokens_prior"] = len(prior)
            requests.append(_Request(r, "prior", pool.add(prior, slot, pieces), slot, pieces))
        else:
            row = rows[r]
            n_words = len(row["attribute"].split())
            masked_attr = " ".join([mask_tok] * n_words)
            ptext, pwspan, _ = fill_template(row["template"], tpl.slot_token, row["word"], masked_attr)
            rows[r]["n_prior_masks"] = n_words
            prior_texts.append((r, ptext, pwspan))
    if prior_texts:
        for (r, ptext, pwspan), (ids, offs, sp) in zip(prior_texts,
                                                       _encode(tokenizer, [t for _, t, _ in prior_texts])):
            slot = tokens_in_span(offs, pwspan, ptext, sp)
            pieces = [ids[p] for p in slot]
            if pieces != [encoded[r][0][p] for p in tokens_in_span(encoded[r][1], spans[r][0], texts[r],
                                                                   encoded[r][2])]:
                raise DataError(f"The word '{rows[r]['word']}' tokenizes differently in '{ptext}' than in "
                                f"'{texts[r]}'; use the 'pieces' prior rule.")
            prior = list(ids)
            for p in slot:
                prior[p] = mask_id
            rows[r]["n_tokens_prior"] = len(prior)
            requests.append(_Request(r, "prior", pool.add(prior, slot, pieces), slot, pieces))
    rep(1.0, "sentences aligned")
    return rows, pool, requests


def score_sentence(model, tokenizer, template: str, attribute: str, word: str, slot_token: str = "[GEND]",
                   prior: str = "pieces") -> dict[str, float]:
    """One score with one forward pass per sentence (no batching, no caching, full LM head): the reference the
    batched path is tested against and the benchmark's naive loop."""
    import torch

    text, wspan, aspan = fill_template(template, slot_token, word, attribute)
    (ids, offs, sp), = _encode(tokenizer, [text])
    slot = tokens_in_span(offs, wspan, text, sp)
    pieces = [ids[p] for p in slot]
    target = list(ids)
    for p in slot:
        target[p] = tokenizer.mask_token_id
    if prior == "pieces":
        prior_ids, prior_slot = list(target), slot
        for p in tokens_in_span(offs, aspan, text, sp):
            prior_ids[p] = tokenizer.mask_token_id
    else:
        ptext, pwspan, _ = fill_template(template, slot_token, word,
                                         " ".join([tokenizer.mask_token] * len(attribute.split())))
        (prior_ids, poffs, psp), = _encode(tokenizer, [ptext])
        prior_slot = tokens_in_span(poffs, pwspan, ptext, psp)
        prior_ids = list(prior_ids)
        for p in prior_slot:
            prior_ids[p] = tokenizer.mask_token_id
    model.eval()
    out = {}
    with torch.inference_mode():
        for name, seq, pos in (("log_p_target", target, slot), ("log_p_prior", prior_ids, prior_slot)):
            logits = model(input_ids=torch.tensor([seq], device=next(model.parameters()).device)).logits[0]
            logp = torch.log_softmax(logits.float(), dim=-1)
            out[name] = float(sum(logp[p, t] for p, t in zip(pos, pieces)))
    out["score"] = out["log_p_target"] - out["log_p_prior"]
    return out


# ==============================================================================================================
# Statistics


def _rank_biserial_paired(d: np.ndarray) -> float:
    from scipy.stats import rankdata

    d = d[d != 0]
    if len(d) == 0:
        return 0.0
    ranks = rankdata(np.abs(d))
    t_plus, t_minus = ranks[d > 0].sum(), ranks[d < 0].sum()
    return float((t_plus - t_minus) / (t_plus + t_minus))


def _rank_biserial_unpaired(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([x, y]))
    u = ranks[:len(x)].sum() - len(x) * (len(x) + 1) / 2
    return float(2 * u / (len(x) * len(y)) - 1)


def _template_differences(df: pd.DataFrame, g1: str, g2: str) -> np.ndarray:
    """Per template: mean score of its ``g1`` sentences − mean of its ``g2`` sentences (over every attribute and
    word of the template; in the shipped, balanced design this is the mean of its paired differences)."""
    m = df.groupby(["template", "group"], sort=False)["score"].mean().unstack("group")
    if g1 not in m.columns or g2 not in m.columns:
        return np.array([], dtype=float)
    return (m[g1] - m[g2]).dropna().to_numpy(float)


def _hall_g(T, a: float):
    """Hall's (1992) skewness-removing transformation of a studentized mean, g(T) = T + a·T²/3 + a²·T³/27 + a/6
    with a = (sample skewness G1)/√n; monotone in T (g' = (1 + a·T/3)² ≥ 0), referred to t with n − 1 df."""
    T = np.asarray(T, float)
    return T + a * T * T / 3 + a * a * T ** 3 / 27 + a / 6


def _hall_g_inverse(g, a: float):
    """T with g(T) = g: g(T) − a/6 = ((1 + a·T/3)³ − 1)/a, so T = 3·(∛(1 + a·(g − a/6)) − 1)/a."""
    g = np.asarray(g, float)
    if a == 0:
        return g
    return 3 * (np.cbrt(1 + a * (g - a / 6)) - 1) / a


#: The share of α the template test spends: a category "differs" when max(sign-flip p, t p, Hall p) ≤ 0.8·α,
#: reported as ``p_value`` = that p / 0.8. With 6–15 templates a law whose mean is 0 can put a mode or a tail out of
#: the sample (a fifth of templates shifted is missing from 8 templates in 0.8⁸ = 17% of draws) and no statistic of
#: the sample can see it; 0.8 is what brings the worst laws measured (two-mode, gamma skewness 2.5, one in ten
#: templates at +4 SD) to α + 0.02 or below at every number of templates from 6 to 15 (docs/methods.md §4).
LEVEL_SHARE = 0.8


def sign_flip_p(d: np.ndarray) -> float:
    """Exact two-sided sign-flip p of mean(d) = 0: the share of the 2ⁿ sign vectors s with |Σ sᵢdᵢ| ≥ |Σ dᵢ|
    (ties count, so p ≥ 2/2ⁿ). Exact under H0 "the law of d is symmetric about 0". Meet in the middle (the signed
    sums of each half, sorted), so n up to 30 is exact in milliseconds; beyond, 2¹⁸ seeded random sign vectors
    (p = (1 + count)/(1 + draws)). Equals ``scipy.stats.permutation_test(..., permutation_type="samples")``
    with every sign vector (tested)."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    obs = abs(float(d.sum()))
    tol = 1e-9 * (float(np.abs(d).sum()) + 1e-300)        # sums equal up to rounding count as ties
    if n == 0:
        return 1.0
    if n > 30:
        rng = np.random.default_rng(0)
        draws, hits = 2 ** 18, 0
        for _ in range(draws // 2 ** 16):
            s = rng.choice([-1.0, 1.0], size=(2 ** 16, n))
            hits += int(np.sum(np.abs(s @ d) >= obs - tol))
        return (1 + hits) / (1 + draws)

    def sums(x):
        out = np.zeros(1)
        for v in x:
            out = np.concatenate([out + v, out - v])
        return out

    h = n // 2
    a, b = sums(d[:h]), np.sort(sums(d[h:]))
    # |a + b| ≥ obs  ⇔  b ≥ obs − a  or  b ≤ −obs − a
    upper = len(b) - np.searchsorted(b, obs - a - tol, side="left")
    lower = np.searchsorted(b, -obs - a + tol, side="right")
    both = np.minimum(upper + lower, len(b))          # obs = 0: every vector counts once
    return float(both.sum() / (len(a) * len(b)))


def template_test(d: np.ndarray, alpha: float, margin: float) -> dict[str, Any]:
    """Test of mean(d) = 0 over the templates' mean differences d; its interval; the TOST p of |mean(d)| < margin.
    Needs ≥ 2 values; with no spread at all the answer is exact.

    H0 is "the template law has mean 0". No test of a mean on 6–15 draws holds its size over every law with mean
    0 (a mode absent from the sample is invisible), so the test rests on three p's and a share of α:

    * the exact **sign-flip** randomisation test over templates (:func:`sign_flip_p`): exact whatever the law when
      the law is symmetric about 0 — heavy tails included;
    * Hall's (1992) skewness-corrected t (:func:`_hall_g`, the skewness from Johnson's unbiased third moment G1,
      ``scipy.stats.skew(bias=False)``): for skewed laws, where the sign-flip and the t-test are liberal;
    * the one-sample t-test (``scipy.stats.ttest_1samp``), so that the interval below (the hull of the t and Hall
      intervals) excludes 0 whenever the test rejects;

    ``p_value`` = max of the three / :data:`LEVEL_SHARE` (capped at 1): the test spends 0.8·α, the level at which
    the worst asymmetric laws measured stay within α + 0.02. The interval is the hull of the t and Hall intervals
    at level 1 − 0.8·α (it excludes 0 whenever p_value < α). The TOST is the larger of the t-test's and Hall's
    one-sided p's at ±margin (not rescaled)."""
    from scipy.special import stdtr, stdtrit   # the t distribution's CDF and quantile (ufuncs: fast in studies)
    from scipy.stats import skew

    n = len(d)
    out: dict[str, Any] = {"statistic": None, "statistic_skew": None, "p_value": None, "df": None, "ci_low": None,
                           "ci_high": None, "p_equivalence": None, "skewness": None, "p_sign_flip": None}
    if n < 2:
        return out
    mean, sd = float(np.mean(d)), float(np.std(d, ddof=1))
    out["df"] = n - 1
    if sd == 0.0:   # every template gives the same difference: nothing varies, the answer is exact
        out.update(p_value=1.0 if mean == 0 else 0.0, ci_low=mean, ci_high=mean,
                   p_equivalence=0.0 if abs(mean) < margin else 1.0, skewness=0.0,
                   p_sign_flip=sign_flip_p(d))
        return out
    se = sd / math.sqrt(n)
    # the skewness from Johnson's (1978) unbiased third moment and s (G1 = g1·√(n(n − 1))/(n − 2), scipy's
    # bias=False): the plug-in g1 shrinks towards 0 with few templates, and Hall's correction with it stays liberal
    gamma = float(skew(d, bias=n < 3))
    a = gamma / math.sqrt(n)
    # the studentized mean at 0, −margin and +margin (the one-sample t statistic of scipy.stats.ttest_1samp)
    T = (mean - np.array([0.0, -margin, margin])) / se
    G = _hall_g(T, a)
    p_sf = sign_flip_p(d)
    p = max(2 * stdtr(n - 1, -abs(T[0])), 2 * stdtr(n - 1, -abs(G[0])), p_sf) / LEVEL_SHARE
    c = float(stdtrit(n - 1, 1 - LEVEL_SHARE * alpha / 2))
    lo_g, hi_g = (float(x) for x in _hall_g_inverse(np.array([-c, c]), a))   # g(T) = ±c  ⇔  T = lo_g, hi_g
    ci_low = min(mean - c * se, mean - hi_g * se)
    ci_high = max(mean + c * se, mean - lo_g * se)
    p_low = max(stdtr(n - 1, -T[1]), stdtr(n - 1, -G[1]))    # H0: mean ≤ −margin
    p_high = max(stdtr(n - 1, T[2]), stdtr(n - 1, G[2]))     # H0: mean ≥ +margin
    out.update(statistic=float(T[0]), statistic_skew=float(G[0]), p_value=float(min(1.0, p)), ci_low=ci_low,
               ci_high=ci_high, p_equivalence=float(max(p_low, p_high)), skewness=gamma, p_sign_flip=p_sf)
    return out


def category_statistics(scores: pd.DataFrame, groups: tuple[str, str], test: str = "template",
                        alpha: float = 0.05, min_effect: float = 0.3, min_log_ratio: float = 0.25, *,
                        margin: float | None = None, min_templates: int = MIN_TEMPLATES) -> list[dict]:
    """One record per category with its verdict: ``differs``, ``equivalent`` (within ±margin nats) or
    ``inconclusive``.

    ``scores`` needs the columns ``category, template, attribute, group, pair_index, score`` (one row per scored
    sentence; :func:`log_probability_scores` or :func:`fairdesk.core.synthetic.mlm_sim.simulate_probe_scores`).

    **Unit of inference.** Scores of one template share its prior and its wording, so they are not independent:
    by default (``test="template"``) each template contributes one number — its mean ``g1`` − ``g2`` score
    difference D_t — and the test of mean(D_t) = 0 over the templates (two-sided) is :func:`template_test`: the
    exact sign-flip test over templates, the one-sample t-test (``scipy.stats.ttest_1samp``) and Hall's (1992)
    skewness-corrected t, p the largest of the three divided by 0.8 — with 6–15 templates the t-test alone rejects
    up to twice too often when template effects are skewed, and any test of the sample does when a mode of the
    template law is missing from it. For the balanced design of a template list (every template × every attribute ×
    every word pair) this is exactly the F-test of the fixed effect in the random-intercept mixed model with a
    template effect, so no mixed-model library is needed; its p is continuous (not floored like a rank test over a
    handful of templates), so it can pass the correction. The attribute list is fixed (it defines the category);
    inference generalises over template wordings. ``test="wilcoxon"`` (signed-rank over every (template,
    attribute, word pair), as the paper states) and ``test="ranksum"`` (unpaired, one release) are the release's
    per-sentence tests, kept for reproducing its numbers: they treat correlated scores as independent.

    **Too few templates.** A category with fewer than ``min_templates`` templates (default 6) is
    ``inconclusive`` whatever its p: with 5 or fewer templates even an exact sign-flip test cannot reach p < 0.05
    (its smallest two-sided p is 2/2^n = 0.0625 at n = 5), so any small p would rest wholly on the normality of a
    handful of template effects. Such categories keep their raw ``p_value`` but are left out of the correction
    family (``q_value`` None, ``in_family`` False).

    **Verdicts.** ``q_value`` is Benjamini–Hochberg across the categories in the family. ``differs``: q < alpha,
    |effect_size| ≥ min_effect and |difference| ≥ min_log_ratio nats (the flag rule; ``flagged`` = differs).
    ``equivalent``: the template-level TOST shows |mean(D_t)| < margin (default: min_log_ratio), its p's also
    BH-adjusted across the family (``q_equivalence`` < alpha) — the equivalence test is always over templates,
    whichever difference test is chosen. Otherwise ``inconclusive``; a non-significant difference is never
    "equivalent" by itself.

    Effect sizes: ``effect_size`` is the rank-biserial correlation matching the test (over the templates' D_t for
    the template test: the share of templates' rank mass leaning to one group minus the other; over the paired
    differences for the signed-rank test; Cliff's delta for the rank-sum test), ``mean_difference`` = mean
    ``g1`` − mean ``g2`` score in nats, ``d_z`` = mean / SD of the test's differences. Being scale-free, r alone
    calls a tiny but consistent shift "large" (an untrained model's 1e-4-nat differences can reach r ≈ 0.4), hence
    the nats threshold.
    """
    from scipy.stats import ranksums, wilcoxon

    from fairdesk.core.stats.multiple import benjamini_hochberg

    if test not in TESTS:
        raise DataError(f"Unknown test '{test}'. Use 'template' (t-test over templates), 'wilcoxon' (signed-rank over "
                        "sentence pairs) or 'ranksum'.")
    margin = float(min_log_ratio if margin is None else margin)
    if margin <= 0:
        raise DataError("The equivalence margin must be a positive number of nats.")
    if int(min_templates) < 2:
        raise DataError("A category needs at least 2 templates for a test over templates; set min_templates ≥ 2.")
    missing = {"category", "template", "group", "score"} - set(scores.columns)
    if missing:
        raise DataError(f"The score table lacks the column(s) {', '.join(sorted(missing))}.")
    g1, g2 = groups
    records = []
    for code, df in scores.groupby("category", sort=False):
        a = df[df["group"] == g1]
        b = df[df["group"] == g2]
        d_t = _template_differences(df, g1, g2)
        n_templates = int(df["template"].nunique())
        rec: dict[str, Any] = {"category": code, "groups": [g1, g2], f"mean_{g1}": float(a["score"].mean()),
                               f"mean_{g2}": float(b["score"].mean()), "test": TEST_NAMES[test],
                               "test_code": test, "unit": UNITS[test], "n_templates": n_templates,
                               "n_attributes": int(df["attribute"].nunique()) if "attribute" in df else None}
        tmpl = template_test(d_t, alpha, margin)
        rec["template_mean_difference"] = float(np.mean(d_t)) if len(d_t) else None
        rec.update(ci_low=tmpl["ci_low"], ci_high=tmpl["ci_high"], p_equivalence=tmpl["p_equivalence"])
        paired_ok = "pair_index" in df and a["pair_index"].nunique() == b["pair_index"].nunique()
        if test == "template":
            if paired_ok:
                key = ["template", "attribute", "pair_index"] if "attribute" in df else ["template", "pair_index"]
                rec["n"] = int(len(pd.MultiIndex.from_frame(a[key]).intersection(pd.MultiIndex.from_frame(b[key]))))
            else:
                rec["n"] = int(len(a) + len(b))
            rec.update(statistic=tmpl["statistic"], statistic_skew=tmpl["statistic_skew"], p_value=tmpl["p_value"],
                       df=tmpl["df"], n_units=int(len(d_t)), skewness=tmpl["skewness"],
                       p_sign_flip=tmpl["p_sign_flip"], n_leaning=int(np.sum(d_t != 0)))
            rec["effect_size"] = _rank_biserial_paired(d_t) if len(d_t) else None
            sd = float(np.std(d_t, ddof=1)) if len(d_t) > 1 else float("nan")
            rec["d_z"] = float(np.mean(d_t) / sd) if len(d_t) > 1 and sd > 0 else None
            diff_for_rule = rec["template_mean_difference"]
        elif test == "wilcoxon":
            if not paired_ok:
                raise DataError(f"The signed-rank test pairs the words of '{g1}' and '{g2}' position by position, but "
                                "the lists have different lengths. Give both groups the same number of words, or "
                                "use the rank-sum test or the test over templates.")
            key = ["template", "attribute", "pair_index"]
            paired = a.merge(b, on=key, suffixes=("_a", "_b"))
            d = (paired["score_a"] - paired["score_b"]).to_numpy()
            n = len(d)
            rec["n"] = rec["n_units"] = n
            if n == 0 or not np.any(d != 0):
                rec.update(statistic=None, p_value=1.0 if n else None)
            else:
                res = wilcoxon(paired["score_a"].to_numpy(), paired["score_b"].to_numpy(), alternative="two-sided",
                               zero_method="wilcox")
                rec.update(statistic=float(res.statistic), p_value=float(res.pvalue))
            rec["effect_size"] = _rank_biserial_paired(d) if n else None
            sd = float(np.std(d, ddof=1)) if n > 1 else float("nan")
            rec["d_z"] = float(np.mean(d) / sd) if n > 1 and sd > 0 else None
            rec["df"] = None
            diff_for_rule = None
        else:
            x, y = a["score"].to_numpy(), b["score"].to_numpy()
            rec["n"] = rec["n_units"] = int(len(x) + len(y))
            rec[f"n_{g1}"], rec[f"n_{g2}"] = int(len(x)), int(len(y))
            if len(x) and len(y):
                res = ranksums(x, y, alternative="two-sided")
                rec.update(statistic=float(res.statistic), p_value=float(res.pvalue),
                           effect_size=_rank_biserial_unpaired(x, y))
            else:
                rec.update(statistic=None, p_value=None, effect_size=None)
            rec["d_z"] = None
            rec["df"] = None
            diff_for_rule = None
        rec["mean_difference"] = rec[f"mean_{g1}"] - rec[f"mean_{g2}"]
        if diff_for_rule is None:
            diff_for_rule = rec["mean_difference"]
        rec["_diff_for_rule"] = diff_for_rule
        rec["probability_ratio"] = float(np.exp(rec["mean_difference"]))
        rec["effect_size_name"] = EFFECT_NAMES[test]
        rec["direction"] = g1 if rec["mean_difference"] > 0 else g2 if rec["mean_difference"] < 0 else "none"
        rec["in_family"] = bool(n_templates >= min_templates and rec["p_value"] is not None)
        rec.update(margin=margin, min_templates=int(min_templates), alpha=alpha)
        records.append(rec)
    fam = [r["in_family"] for r in records]
    q = benjamini_hochberg([r["p_value"] if ok else np.nan for r, ok in zip(records, fam)])
    qe = benjamini_hochberg([r["p_equivalence"] if ok and r["p_equivalence"] is not None else np.nan
                             for r, ok in zip(records, fam)])
    for r, qv, qev in zip(records, q, qe):
        r["q_value"] = None if np.isnan(qv) else float(qv)
        r["q_equivalence"] = None if np.isnan(qev) else float(qev)
        r["significant"] = r["q_value"] is not None and r["q_value"] < alpha
        diff = r.pop("_diff_for_rule")
        r["verdict"], r["verdict_text"], r["verdict_reason"] = _verdict(r, diff, alpha, min_effect, min_log_ratio,
                                                                         margin, min_templates, g1, g2)
        r["flagged"] = r["verdict"] == "differs"
    return records


def _verdict(r: dict, diff: float, alpha: float, min_effect: float, min_log_ratio: float, margin: float,
             min_templates: int, g1: str, g2: str) -> tuple[str, str, str]:
    """``(verdict, short text, reason)`` of one category record (see :func:`category_statistics`)."""
    n_t = r["n_templates"]
    if n_t < min_templates:
        return ("inconclusive", f"inconclusive: {n_t} template{'s' if n_t != 1 else ''}",
                f"{n_t} template{'s' if n_t != 1 else ''}, fewer than the {min_templates} needed to generalise "
                "over wordings; not tested against the other categories")
    if r["p_value"] is None:
        return "inconclusive", "inconclusive: no test", "the test could not be computed (no paired scores)"
    n_lean = r.get("n_leaning")
    if n_lean is not None and 2.0 / 2 ** n_lean / LEVEL_SHARE >= alpha:
        # the sign-flip test's smallest p is 2/2^k over the k templates that lean either way
        return ("inconclusive", "inconclusive: too few templates for this spread",
                f"only {n_lean} of {n_t} templates lean either way: no sign-flip test over them can reach "
                f"p < {alpha:g}, so a small p would rest on an assumed law of the template effects")
    big = (r["effect_size"] is not None and abs(r["effect_size"]) >= min_effect and diff is not None
           and abs(diff) >= min_log_ratio)
    if r["significant"] and big:
        lean = g1 if diff > 0 else g2
        return ("differs", f"differs ({lean}-leaning)",
                f"{numbers.p_equals(r['q_value'], 'q')} < {alpha:g}, |r| ≥ {min_effect:g} and |difference| ≥ {min_log_ratio:g} nats")
    if r["q_equivalence"] is not None and r["q_equivalence"] < alpha:
        return ("equivalent", f"equivalent (±{margin:g} nats)",
                f"the template-level mean difference lies within ±{margin:g} nats ({numbers.p_equals(r['q_equivalence'], 'TOST q')} "
                f"< {alpha:g})")
    if r["significant"]:
        return ("inconclusive", "inconclusive",
                f"significant ({numbers.p_equals(r['q_value'], 'q')}) but below the size thresholds, and not shown to lie within "
                f"±{margin:g} nats")
    return ("inconclusive", "inconclusive",
            f"neither a difference ({numbers.p_equals(r['q_value'], 'q')}) nor equivalence within ±{margin:g} nats "
            f"({numbers.p_equals(r['q_equivalence'], 'TOST q')}) is shown")


# ==============================================================================================================
# The audit


@dataclass
class MLMBiasResult:
    records: list[dict]              # one per category; each has "scores" (its per-sentence rows)
    scores: pd.DataFrame             # all per-sentence rows
    method: dict
    provenance: dict = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """The per-category table without the per-sentence scores (001 Table 3 layout plus q and effect)."""
        return pd.DataFrame([{k: v for k, v in r.items() if k != "scores"} for r in self.records])

    def to_dict(self) -> dict:
        return jsonable({"kind": "mlm_bias", "method": self.method, "records": self.records,
                         "provenance": self.provenance})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict) -> "MLMBiasResult":
        scores = pd.DataFrame([s for r in d["records"] for s in r.get("scores", [])])
        return cls(d["records"], scores, d.get("method", {}), d.get("provenance", {}))


def verdict_method(test: str = "template", alpha: float = 0.05, min_effect: float = 0.3,
                   min_log_ratio: float = 0.25, margin: float | None = None,
                   min_templates: int = MIN_TEMPLATES) -> dict:
    """The method fields that say how the verdicts were reached (stored in the audit's ``method``; the report's
    methods section quotes them)."""
    margin = float(min_log_ratio if margin is None else margin)
    return {
        "unit": UNITS[test],
        "unit_text": ("the template: each template contributes its mean score difference over all its attributes "
                      "and word pairs" if test == "template" else
                      f"the {UNITS[test]} (the release's per-sentence test: scores of one template are treated as "
                      "independent)"),
        "multiple_testing": (f"Benjamini–Hochberg across the categories with at least {min_templates} templates "
                             "(q_value); p_value is the raw p. Categories with fewer templates are not in the "
                             "family (q_value empty)."),
        "equivalence": (f"two one-sided tests (TOST) over the templates' mean differences, each the larger p of "
                        f"the t-test and Hall's skewness-corrected t (not the sign-flip test): equivalent when the mean lies within "
                        f"±{margin:g} nats, TOST p BH-adjusted across the same family (q_equivalence < {alpha:g})"),
        "margin": margin, "min_templates": int(min_templates),
        "min_templates_rule": (f"a category with fewer than {min_templates} templates is 'inconclusive: N "
                               "templates' — with 5 or fewer, even an exact sign-flip test over templates cannot "
                               "reach p < 0.05 (smallest two-sided p 2/2^n), so a small p would rest on the "
                               "normality of a handful of template effects"),
        "flag_rule": f"q < {alpha} ({TESTS_SHORT[test]}), |effect size| ≥ {min_effect} and |mean difference| ≥ "
                     f"{min_log_ratio} nats",
        "verdict_rule": (f"differs = the flag rule; equivalent = TOST q < {alpha} at ±{margin:g} nats; otherwise "
                         f"inconclusive (also every category with fewer than {min_templates} templates). "
                         "A non-significant difference alone is never read as equivalence."),
        "alpha": alpha, "min_effect": min_effect, "min_log_ratio": min_log_ratio,
    }


#: Short names of the tests (for one-line rules and the CLI).
TESTS_SHORT = {"template": "sign-flip, t and Hall's t over templates at 0.8·α", "wilcoxon": "signed-rank over sentence pairs",
               "ranksum": "rank-sum over sentences"}


def run_mlm_bias_audit(model, templates: BiasTemplates | str | Path | None = None,
                       options: ProbeOptions | None = None, tokenizer=None, progress: ProgressFn | None = None,
                       cancel: CancelToken | None = None) -> MLMBiasResult:
    """The log-probability bias audit. ``model`` is a local model folder (loaded with
    :func:`fairdesk.core.models.mlm.load_masked_lm`) or a loaded masked LM with its ``tokenizer``."""
    from fairdesk.core import provenance
    from fairdesk.core.models.mlm import load_masked_lm, model_fingerprint
    from fairdesk.core.models.training_record import training_record
    from fairdesk.core.text.templates import load_bias_templates

    opts = (options or ProbeOptions()).check()
    rep = Reporter(progress, cancel)
    tpl = templates if isinstance(templates, BiasTemplates) else load_bias_templates(templates)
    tpl = tpl.select(opts.categories)
    groups = _resolve_groups(tpl, opts.groups)
    model_hashes, model_name = {}, getattr(getattr(model, "config", None), "name_or_path", "") or "in-memory model"
    trained = None
    if isinstance(model, (str, Path)):
        rep(0.0, "loading the model")
        model_name = str(model)
        path = model
        model, tokenizer = load_masked_lm(path)
        model_hashes = {"masked_lm": model_fingerprint(path)}
        trained = training_record(path, model_hashes["masked_lm"])
    elif tokenizer is None:
        raise ModelError("Give the tokenizer together with a loaded model (or a model folder).")
    import torch

    torch.manual_seed(opts.seed)
    scores = log_probability_scores(model, tokenizer, tpl, opts, rep.sub(0.02, 0.95), None)
    rep(0.96, "statistics")
    records = category_statistics(scores, groups, opts.test, opts.alpha, opts.min_effect, opts.min_log_ratio,
                                  margin=opts.margin, min_templates=opts.min_templates)
    names = {c.code: c.name for c in tpl.categories}
    keep = ["template", "attribute", "group", "pair_index", "word", "sentence", "word_pieces", "n_prior_masks",
            "log_p_target", "log_p_prior", "score"]
    for r in records:
        r["name"] = names.get(r["category"], r["category"])
        sub = scores[scores["category"] == r["category"]][keep]
        r["scores"] = sub.to_dict(orient="records")
    multi = scores[scores["n_word_pieces"] > 1].drop_duplicates("word")
    method = {
        "name": "log-probability bias score (Kurita et al. 2019; Zhang et al. 2020, §4.3)",
        "score": "ln(p_target / p_prior)",
        "prior_rule": opts.prior,
        "prior_rule_text": ("every word piece of the attribute masked (prior and target sentences have the same "
                            "length)" if opts.prior == "pieces" else
                            "one [MASK] per whitespace word of the attribute (the authors' release)"),
        "test": TEST_NAMES[opts.test], "test_code": opts.test, "effect_size": EFFECT_NAMES[opts.test],
        **verdict_method(opts.test, opts.alpha, opts.min_effect, opts.min_log_ratio, opts.margin,
                         opts.min_templates),
        "n_forward_sequences": scores.attrs.get("n_forward_sequences"), "n_scores": int(len(scores)),
        "groups": {g: list(tpl.groups[g]) for g in groups}, "slot": tpl.slot,
        "multi_piece_words": {w: list(p) for w, p in zip(multi["word"], multi["word_pieces"])},
        "multi_piece_rule": "a word split into several pieces fills the slot with as many masks; its "
                            "log-probability is the sum over its pieces",
        "alignment": "slots located with the tokenizer's offset mapping",
        "templates": {"path": tpl.path, "sha256": tpl.sha256, "source": tpl.source, "counts": tpl.counts(),
                      "n_pairs": sum(tpl.counts().values())},
        "model": model_name,
        "notes": ([] if opts.test == "template" else [
                      "The release's per-sentence test treats the correlated scores of one template as independent "
                      "(pseudo-replication): its p-values are too small and it flags template noise in a third or "
                      "more of null runs. Prefer the default test over templates."]) + [
                  "A significant score is not proof of unwanted bias: conditions differ in prevalence between "
                  "groups (001 §4.3)."],
    }
    prov = provenance.make(opts.seed, tpl.sha256 or None, model_hashes, kind="mlm_bias", model=model_name,
                           **({"training": {"masked_lm": trained}} if trained else {}))
    rep(1.0, "done")
    return MLMBiasResult(records, scores, method, prov)


def compare_results(results: dict[str, MLMBiasResult]) -> pd.DataFrame:
    """Side by side per category (e.g. baseline vs debiased, 001 Table 3): for every model its group means, p, q,
    effect size, flag and verdict."""
    frames = []
    for name, res in results.items():
        t = res.table()
        g1, g2 = t["groups"].iloc[0]
        cols = {f"mean_{g1}": f"{name}: mean {g1}", f"mean_{g2}": f"{name}: mean {g2}", "p_value": f"{name}: p",
                "q_value": f"{name}: q", "effect_size": f"{name}: effect", "flagged": f"{name}: flagged",
                "verdict": f"{name}: verdict"}
        if "verdict" not in t.columns:   # a document stored before verdicts existed
            t["verdict"] = None
        frames.append(t.set_index("category")[list(cols)].rename(columns=cols))
    return pd.concat(frames, axis=1).reset_index()


# ==============================================================================================================
# Sentence completion


@dataclass
class CompletionResult:
    rows: list[dict]     # template, term, sentence, completed, fills: [{mask, order, token, prob, top_k}]
    top_k: int
    method: dict
    provenance: dict = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """One row per (template, term): the completed sentence and, per mask, its top-k fillers."""
        out = []
        for r in self.rows:
            row = {"template": r["template"], "term": r["term"], "completed": r["completed"]}
            for f in sorted(r["fills"], key=lambda f: f["mask"]):
                row[f"mask {f['mask'] + 1}"] = ", ".join(f"{t} ({p:.2f})" for t, p in f["top_k"])
            out.append(row)
        return pd.DataFrame(out)

    def to_dict(self) -> dict:
        return jsonable({"kind": "sentence_completion", "top_k": self.top_k, "method": self.method, "rows": self.rows,
                         "provenance": self.provenance})


def sentence_completion(model, tokenizer, templates: CompletionTemplates | str | Path | None = None,
                        top_k: int = 5, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                        batch_size: int = 64) -> CompletionResult:
    """Greedy fill of the ``[MASK]`` spans of every template for every race term, top-k fillers kept."""
    import torch

    from fairdesk.core import provenance
    from fairdesk.core.text.templates import load_completion_templates

    rep = Reporter(progress, cancel)
    tpl = templates if isinstance(templates, CompletionTemplates) else load_completion_templates(templates)
    if tokenizer.mask_token is None:
        raise ModelError("The tokenizer has no mask token; sentence completion needs a masked language model.")
    mask_id, pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id or 0
    banned = sorted(set(tokenizer.all_special_ids))
    device = next(model.parameters()).device
    rows = []
    model.eval()
    jobs = [(t, term) for t in tpl.templates for term in tpl.terms]
    for b in range(0, len(jobs), batch_size):
        chunk = jobs[b:b + batch_size]
        rep(b / len(jobs), f"completing {b + 1}–{b + len(chunk)} of {len(jobs)} sentences")
        texts = [t.replace(f"[{tpl.slot}]", term).replace(tpl.mask, tokenizer.mask_token) for t, term in chunk]
        seqs = [list(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]]
        masks = [[i for i, x in enumerate(s) if x == mask_id] for s in seqs]
        orig_masks = [list(m) for m in masks]
        fills: list[list[dict]] = [[] for _ in chunk]
        step = 0
        while any(masks):
            rep.check()
            T = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
            att = torch.zeros((len(seqs), T), dtype=torch.long)
            for r, s in enumerate(seqs):
                ids[r, :len(s)] = torch.tensor(s)
                att[r, :len(s)] = 1
            with torch.inference_mode():
                logits = model(input_ids=ids.to(device), attention_mask=att.to(device)).logits.float().cpu()
                logits[:, :, banned] = float("-inf")
                probs = torch.softmax(logits, dim=-1)
            for r, remaining in enumerate(masks):
                if not remaining:
                    continue
                best_p, best_pos = -1.0, remaining[0]
                for pos in remaining:
                    p = float(probs[r, pos].max())
                    if p > best_p:
                        best_p, best_pos = p, pos
                vals, idx = torch.topk(probs[r, best_pos], k=min(top_k, probs.shape[-1]))
                tok = int(torch.argmax(probs[r, best_pos]))
                seqs[r][best_pos] = tok
                remaining.remove(best_pos)
                fills[r].append({"mask": orig_masks[r].index(best_pos), "order": step,
                                 "token": tokenizer.convert_ids_to_tokens(tok), "prob": float(probs[r, best_pos, tok]),
                                 "top_k": [[tokenizer.convert_ids_to_tokens(int(i)), float(v)]
                                           for v, i in zip(vals, idx)]})
            step += 1
        for (t, term), text, s, f in zip(chunk, texts, seqs, fills):
            rows.append({"template": t, "term": term, "sentence": text,
                         "completed": tokenizer.decode(s, skip_special_tokens=True), "fills": f})
    method = {"name": "sentence completion (001 Fig. 1, App. B)", "fill": "greedy: most confident mask first, "
              "then ask again", "top_k": top_k, "terms": list(tpl.terms),
              "templates": {"path": tpl.path, "sha256": tpl.sha256, "source": tpl.source},
              "excluded_tokens": "special tokens are never proposed"}
    rep(1.0, "done")
    return CompletionResult(rows, top_k, method, provenance.make(None, tpl.sha256 or None, None,
                                                                 kind="sentence_completion"))


# ==============================================================================================================
# The stored / exported document


def mlm_audit_document(results: dict[str, MLMBiasResult], paths: dict[str, str] | None = None,
                       completion: CompletionResult | None = None) -> dict:
    """The one JSON document of a masked-LM audit, the same from the CLI (``--json``), the GUI and the project
    store (audit kind ``"mlm_bias"``): the first model's result at top level with ``model_name``; with several
    models, ``compared`` (the others, each with ``model_name`` and ``model``) and ``comparison`` (001 Table 3 side by
    side, :func:`compare_results`); with a completion probe, ``completion``."""
    names = list(results)
    if not names:
        raise ModelError("No masked-LM result to store.")
    paths = paths or {}
    doc = results[names[0]].to_dict()
    doc["model_name"] = names[0]
    if names[0] in paths:
        doc["model"] = str(paths[names[0]])
    if len(names) > 1:
        doc["compared"] = [{"model_name": n, "model": str(paths.get(n, n)), **results[n].to_dict()}
                           for n in names[1:]]
        doc["comparison"] = json.loads(compare_results(results).to_json(orient="records"))
    if completion is not None:
        doc["completion"] = completion.to_dict()
    return jsonable(doc)


def results_from_document(doc: dict) -> dict[str, MLMBiasResult]:
    """The per-model results of a document written by :func:`mlm_audit_document`, in order."""
    out = {doc.get("model_name") or "model": MLMBiasResult.from_dict(doc)}
    for other in doc.get("compared", []):
        out[other["model_name"]] = MLMBiasResult.from_dict(other)
    return out
