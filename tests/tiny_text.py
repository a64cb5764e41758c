"""Tiny masked language models and generated notes shared by the language-model tests.

Everything is built locally from the shipped template lists and FairDesk's own synthetic notes; nothing is
downloaded. Import inside tests (``from tiny_text import ...``): ``tests/`` is on ``sys.path`` through its conftest.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def probe_words(*, completion_templates: bool = False, drop: tuple[str, ...] = ()) -> list[str]:
    """The words of the shipped bias templates, attributes, word groups and completion terms (and, with
    ``completion_templates``, the completion templates' words), minus ``drop`` — a vocabulary in which the probe's
    sentences tokenize without [UNK]; a dropped word is spelled in pieces."""
    from fairdesk.core.text.templates import load_bias_templates, load_completion_templates

    tpl, comp = load_bias_templates(), load_completion_templates()
    words: set[str] = set()
    for c in tpl.categories:
        for t in c.templates:
            words |= set(t.replace("[GEND]", " ").replace("[ATTR]", " ").split())
        for a in c.attributes:
            words |= set(a.split())
    for g in tpl.groups.values():
        words |= set(g)
    if completion_templates:
        for t in comp.templates:
            words |= set(t.replace("[RACE]", " ").replace("[MASK]", " ").split())
    for term in comp.terms:
        words |= set(term.split())
    return sorted(words - set(drop))


def tiny_bert(n_vocab: int, seed: int = 0, *, layers: int = 1, max_positions: int = 64, **config):
    """A random BERT masked LM (hidden 32, 2 heads) in eval mode; ``config`` overrides BertConfig fields."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    cfg = dict(vocab_size=n_vocab, hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=max_positions)
    cfg.update(config)
    return BertForMaskedLM(BertConfig(**cfg)).eval()


def save_tiny_mlm(folder, tokenizer, seed: int = 0, **kw) -> str:
    """:func:`tiny_bert` over ``tokenizer``'s vocabulary, saved with it to ``folder``; returns the absolute path."""
    folder = Path(folder)
    tiny_bert(len(tokenizer), seed, **kw).save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    return str(folder.resolve())


def build_probe_mlm(folder, seed: int = 0) -> Path:
    """A random masked LM over :func:`probe_words` (wide initialisation, so scores vary), saved to ``folder``."""
    from fairdesk.core.models.mlm import vocabulary_tokenizer

    save_tiny_mlm(folder, vocabulary_tokenizer(probe_words()), seed, initializer_range=0.5)
    return Path(folder)


def labelled_notes(n: int = 320, seed: int = 0, *, numeric: bool = False):
    """Generated notes with a planted task: 'sepsis' is 1 exactly when the note says "pt has sepsis";
    'shuffled' is the same labels permuted (no signal). Two notes per patient (a patient's notes share the
    gender); 'age' and, with ``numeric``, a SAPS-II-like 'sapsii' column."""
    from fairdesk.core.models.mlm import synthetic_notes

    df = synthetic_notes(n, seed=seed, n_fillers=(1, 3))
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, len(df))
    df["text"] = [t + (" pt has sepsis ." if yi else " pt has fever .") for t, yi in zip(df["text"], y)]
    df["sepsis"] = y
    df["shuffled"] = rng.permutation(y)
    df["patient_id"] = [f"p{(i // 4) * 2 + i % 2}" for i in range(len(df))]
    df["age"] = rng.normal(60, 10, len(df)).round(1)
    if numeric:
        df["sapsii"] = rng.normal(35, 8, len(df)).round(0)
    return df


# Fixtures shared by the language-model job and GUI tests (import them into a test module to use them).
import pytest  # noqa: E402


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """Two random probe-vocabulary masked LMs saved to folders ("base", "other")."""
    root = tmp_path_factory.mktemp("tiny_mlms")
    return build_probe_mlm(root / "base", 0), build_probe_mlm(root / "other", 1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """80 generated notes (HIV planted with male words) as a CSV: a training corpus for a few steps."""
    from fairdesk.core.models.mlm import synthetic_notes

    path = tmp_path_factory.mktemp("corpus") / "notes.csv"
    synthetic_notes(80, {"HIV": 0.9}, seed=0, n_fillers=(1, 2)).to_csv(path, index=False)
    return path
