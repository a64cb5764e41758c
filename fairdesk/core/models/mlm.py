"""Clinical masked language models (METHODS §7): load a local model folder, or train one from local notes —
optionally with adversarial debiasing whose reversed gradient really reaches the encoder.

Loading
    :func:`load_masked_lm` opens a Hugging Face folder (config.json, weights, tokenizer) with
    ``local_files_only=True`` and ``trust_remote_code=False``; FairDesk never downloads anything and never runs code
    from a model folder (:func:`refuse_custom_code` refuses one that needs it, before transformers is called).
    Every failure is a :class:`ModelError` saying what is missing and how to fix it. :func:`model_fingerprint` is
    the SHA-256 recorded in provenance.

Training (:func:`train_mlm`)
    1. Corpus: a CSV/TSV/Parquet table with a text column (and optionally a per-note protected attribute column),
       a ``.txt`` file (notes separated by blank lines) or a folder of ``.txt`` files (one note each).
    2. PHI placeholders ``[**…**]`` (MIMIC de-identification) become one special token per PHI type, decided by
       the placeholder's content (:data:`PHI_TOKENS`, :func:`phi_type`): dates (``2126-9-19``, ``Month (only) 11``,
       ``Year (4 digits) …``, holidays) → ``[PHI_DATE]``; names and initials → ``[PHI_NAME]``; hospitals, wards,
       addresses, states, countries, companies, universities → ``[PHI_LOCATION]``; telephone/fax, e-mail, URL,
       pager, contact info → ``[PHI_CONTACT]``; record, MD, SSN, serial, job, unit, provider, clip and numeric
       identifiers → ``[PHI_ID]``; ``Age over 90`` → ``[PHI_AGE]``; a bare number → ``[PHI_NUMBER]``;
       anything else → ``[PHI_OTHER]``.
    3. A WordPiece tokenizer (lower-cased, BERT pre-tokenisation) is trained on the corpus with the tokenizers
       library; the PHI tokens are special tokens, never split. That trainer breaks frequency ties in a
       process-random order, so two trainings of the tokenizer may differ slightly: its SHA-256 is recorded, and
       ``tokenizer_from`` (any folder with a tokenizer, e.g. an earlier model) reuses one — with a given tokenizer
       training is repeatable bit for bit. ``init_model`` continues pretraining a local BERT/RoBERTa masked LM
       instead (001: SciBERT further pretrained on notes); missing PHI tokens are added with new embeddings.
    4. Notes are split into sentences; short sentences are packed with their neighbours *from the same note* into
       sequences of at least ``min_sequence_tokens`` (20) word pieces, at most ``max_length``.
    5. A ``BertForMaskedLM`` of the chosen size (:data:`SIZES`, or explicit numbers) learns with whole-word masking
       (every piece of a chosen word is masked; 80 % [MASK], 10 % random, 10 % kept). ``focus_words`` are chosen
       with their own probability (e.g. gender words half the time), an option for probing experiments.
    6. Adversarial debiasing (``attribute_column``): ``L = L_MLM + L_adv(a(J(h_[CLS])), z)`` where ``J`` is a
       gradient-reversal layer (identity forward, −λ × gradient backward, λ = 1 by default) and ``a`` a 3-layer
       ReLU MLP discriminator with halving widths (H → H/2 → H/4 → classes). The discriminator's input is computed
       with gradients on (the authors' release computed it under ``torch.no_grad()``, so nothing reached the
       encoder); :func:`mlm_adversarial_losses` is the very function the trainer calls, and the tests check the
       encoder's gradient through it is non-zero and exactly reversed. The discriminator gets
       ``adversary_steps`` (default 5) updates per training step — one joint step with the encoder, the rest on
       the step's detached [CLS] vectors. With a single joint step (the paper's loop) the discriminator is
       outpaced: the encoder keeps it at chance by *rotating* the attribute inside [CLS], and a post-hoc probe
       recovers the attribute as well as, or better than, from the baseline. Measured on the planted corpus of the
       tests (gender in [CLS], logistic-regression probe on held-out notes): seed 0 — baseline 0.76, one step 1.00,
       five steps 0.57; seed 1 — baseline 0.995, five steps 0.57. Always check with :func:`attribute_probe`.
    7. Checkpoints (``save_pretrained``, safetensors, plus the discriminator and optimizer state) are written into a
       temporary folder and renamed into ``OUT/checkpoints/checkpoint-NNNNNNN`` — a checkpoint folder exists only
       complete. ``resume=True`` continues from the newest one; data order, masking and dropout are derived from
       (seed, step), so a resumed run gives the same weights as an uninterrupted one. Cancel stops at the next
       step, writes a checkpoint of the finished steps, and keeps earlier ones. The final model is published into
       ``OUT`` itself (``config.json`` last, so a half-published folder is never taken for a model).

Probing helpers: :func:`encode_cls` ([CLS] vectors) and :func:`attribute_probe` (cross-validated logistic
regression recovering a protected attribute from them, 001 Table D4). :func:`synthetic_notes` generates the
planted-association corpus used by the tests, the benchmark and demos.

torch, transformers, tokenizers, safetensors and sklearn are imported inside functions only.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fairdesk.core.errors import DataError, ModelError
from fairdesk.core.progress import CancelToken, Cancelled, ProgressFn, Reporter

# ==============================================================================================================
# Loading local models

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model")


def _quiet_transformers() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # pragma: no cover - logging is cosmetic
        pass


def check_model_folder(path: str | Path) -> Path:
    """Check that ``path`` looks like a local masked-LM folder; raise :class:`ModelError` saying what is missing."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelError(f"The model folder {p} does not exist. FairDesk never downloads models: choose a local "
                         "folder that holds config.json, the weights (model.safetensors) and the tokenizer files.")
    if not p.is_dir():
        raise ModelError(f"{p} is a file, not a model folder. Choose the folder that holds config.json, the weights "
                         "and the tokenizer files.")
    if not (p / "config.json").is_file():
        hint = " (it holds training checkpoints: the finished model appears here when training completes, or " \
               "choose one of the folders under checkpoints/)" if (p / "checkpoints").is_dir() else ""
        raise ModelError(f"{p} has no config.json, so it is not a Hugging Face model folder{hint}. Choose the "
                         "folder that holds config.json, the weights (model.safetensors) and the tokenizer.")
    if not any((p / f).is_file() for f in _WEIGHT_FILES):
        raise ModelError(f"{p} has no model weights (model.safetensors or pytorch_model.bin). Copy the weights into "
                         "the folder, or choose the complete model folder.")
    if not any((p / f).is_file() for f in _TOKENIZER_FILES):
        raise ModelError(f"{p} has no tokenizer (tokenizer.json or vocab.txt). A masked-LM audit needs the exact "
                         "tokenizer the model was trained with: copy its tokenizer files into the model folder.")
    refuse_custom_code(p, check_model_type=False)  # the model type needs transformers: checked when loading
    return p


# Passed to every transformers load: never run code shipped in a model folder, never look beyond the folder.
_SAFE_LOAD = {"local_files_only": True, "trust_remote_code": False}


def refuse_custom_code(folder: str | Path, *, check_model_type: bool = True) -> None:
    """Raise :class:`ModelError` if loading ``folder`` would need code from the folder (FairDesk never runs it).

    Decided from the JSON files alone, before transformers is called, so transformers never gets as far as asking
    "Do you wish to run the custom code? [y/N]" on stdin: an ``auto_map`` entry in config.json or
    tokenizer_config.json, or a ``model_type`` transformers does not know (only custom code could build it).
    """
    p = Path(folder)
    for name in ("config.json", "tokenizer_config.json"):
        file = p / name
        if not file.is_file():
            continue
        try:
            from fairdesk.core.jsonable import read_json_file
            doc = read_json_file(file)
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise ModelError(f"{file} cannot be read as JSON ({_short(err)}); the folder is damaged or not a "
                             "Hugging Face model, so export the model again with save_pretrained.") from None
        if not isinstance(doc, dict):
            raise ModelError(f"{file} is not a JSON object, so the folder is not a Hugging Face model; export the "
                             "model again with save_pretrained.")
        if "auto_map" in doc:
            code = sorted(f.name for f in p.glob("*.py"))
            shipped = f" (the folder ships {', '.join(code)})" if code else ""
            raise ModelError(f"{file} asks for custom code from the model folder{shipped}, and FairDesk never runs "
                             "code from a model folder; use a model of a standard transformers architecture "
                             "(e.g. BERT or RoBERTa) saved without auto_map.")
        if name == "config.json" and check_model_type:
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

            model_type = doc.get("model_type")
            if model_type is not None and model_type not in CONFIG_MAPPING_NAMES:
                raise ModelError(f"{file} names the model type '{model_type}', which transformers does not know "
                                 "(only custom code could build it), and FairDesk never runs code from a model "
                                 "folder; use a model of a standard architecture such as BERT or RoBERTa.")


def load_masked_lm(path: str | Path, device: str = "cpu"):
    """``(model, tokenizer)`` from a local folder; the model in eval mode. Raises :class:`ModelError`."""
    p = check_model_folder(path)
    refuse_custom_code(p)
    _quiet_transformers()
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(str(p), **_SAFE_LOAD)
    except Exception as err:  # noqa: BLE001 - any parse failure is the user's file
        raise ModelError(f"The model's config.json in {p} cannot be read ({_short(err)}). The folder is damaged or "
                         "not a Hugging Face model; export the model again with save_pretrained.") from err
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(p), **_SAFE_LOAD)
    except Exception as err:  # noqa: BLE001
        raise ModelError(f"The tokenizer in {p} cannot be loaded ({_short(err)}). Copy the tokenizer files the "
                         "model was trained with (tokenizer.json or vocab.txt with tokenizer_config.json).") from err
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"The tokenizer in {p} has no fast (Rust) version, which FairDesk needs to align word "
                         "pieces with the text. Save the tokenizer with tokenizer.json (any recent transformers "
                         "version writes it).")
    if tokenizer.mask_token is None or tokenizer.mask_token_id is None:
        raise ModelError(f"The tokenizer in {p} has no mask token, so this is not a masked language model. Choose a "
                         "BERT-family masked LM.")
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(str(p), output_loading_info=True, **_SAFE_LOAD)
    except Exception as err:  # noqa: BLE001
        raise ModelError(f"The weights in {p} cannot be loaded as a masked language model ({_short(err)}). The file "
                         f"may be truncated or corrupt, or the model type ({getattr(config, 'model_type', '?')}) "
                         "has no masked-LM head; copy the weights again or choose another model.") from err
    missing = [k for k in info.get("missing_keys", []) if not k.endswith("position_ids")]
    head_missing = [k for k in missing if any(s in k for s in ("cls.", "lm_head", "vocab_", "predictions"))]
    if head_missing or len(missing) > 0.5 * max(1, sum(1 for _ in model.state_dict())):
        raise ModelError(f"The weights in {p} lack {'the masked-LM head' if head_missing else 'most layers'} "
                         f"({len(missing)} missing tensors, e.g. {missing[0]}); its predictions would be random. "
                         "Choose a checkpoint saved from a masked-LM model (e.g. BertForMaskedLM).")
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        raise ModelError(f"The tokenizer in {p} has {len(tokenizer)} tokens but the model only "
                         f"{model.get_input_embeddings().weight.shape[0]} embeddings: they do not belong together. "
                         "Copy the tokenizer the model was trained with.")
    model.to(device)
    model.eval()
    return model, tokenizer


def _short(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:200] + ("…" if len(text) > 200 else "")


def model_fingerprint(path: str | Path) -> str:
    """SHA-256 over config.json, the weight files and the tokenizer files of a model folder (sorted by name)."""
    p = Path(path)
    digest = hashlib.sha256()
    names = sorted(f.name for f in p.iterdir() if f.is_file() and (
        f.name == "config.json" or f.name in _WEIGHT_FILES or f.suffix == ".safetensors"
        or f.name in _TOKENIZER_FILES or f.name in ("tokenizer_config.json", "merges.txt")))
    for name in names:
        digest.update(name.encode() + b"\0")
        with open(p / name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


# ==============================================================================================================
# Corpus: reading, PHI placeholders, sentences

PHI_TOKENS: dict[str, str] = {
    "date": "[PHI_DATE]", "name": "[PHI_NAME]", "location": "[PHI_LOCATION]", "contact": "[PHI_CONTACT]",
    "id": "[PHI_ID]", "age": "[PHI_AGE]", "number": "[PHI_NUMBER]", "other": "[PHI_OTHER]",
}
_PHI = re.compile(r"\[\*\*(.*?)\*\*\]", re.DOTALL)
_PHI_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("age", re.compile(r"\bage\b")),
    ("contact", re.compile(r"telephone|\bfax\b|e-?mail|\burl\b|pager|contact")),
    ("location", re.compile(r"hospital|\bward|location|address|street|\bstate\b|country|universit|college|"
                            r"company|po box|\bzip\b|\bcity\b")),
    ("name", re.compile(r"name|initial")),
    ("date", re.compile(r"date|month|year|\bday\b|holiday|season")),
    ("id", re.compile(r"number|identifier|\bmrn\b|\bssn\b|serial|\bid\b")),
    ("date", re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{1,2}-\d{1,2}(-\d{2,4})?$|^\d{1,2}/\d{1,2}(/\d{2,4})?$|"
                        r"^(1[89]|2[0-3])\d\d$")),
    ("number", re.compile(r"^[\d.,\s-]+$")),
)


def phi_type(content: str) -> str:
    """The PHI type of a placeholder's content, e.g. ``'2126-9-19'`` → ``'date'``, ``'Known lastname 123'`` →
    ``'name'``, ``'Hospital1 18'`` → ``'location'``, ``'Numeric Identifier 99'`` → ``'id'``, ``'12'`` →
    ``'number'``."""
    text = " ".join(content.lower().split())
    if not text:
        return "other"
    for kind, pattern in _PHI_RULES:
        if pattern.search(text):
            return kind
    return "other"


def replace_phi(text: str) -> str:
    """Replace every ``[**…**]`` placeholder by its PHI type's special token (surrounded by spaces)."""
    return _PHI.sub(lambda m: f" {PHI_TOKENS[phi_type(m.group(1))]} ", text)


_SENT_SPLIT = re.compile(r"(?<=[.!?;])\s+|\s*\n\s*")


def split_sentences(text: str) -> list[str]:
    """Split a note on line breaks and after ``. ! ? ;`` followed by white space; empty pieces are dropped."""
    return [s for s in (" ".join(p.split()) for p in _SENT_SPLIT.split(text)) if s]


@dataclass
class Corpus:
    notes: list[str]
    attributes: list[str | None] | None  # one per note when an attribute column was given
    source: str
    sha256: str


def read_corpus(path: str | Path, text_column: str = "text", attribute_column: str | None = None) -> Corpus:
    """Read notes from a table (CSV/TSV/Parquet), a ``.txt`` file (notes separated by blank lines) or a folder of
    ``.txt`` files (one note each). Raises :class:`DataError` with the reason and a fix."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"The corpus {p} does not exist. Choose a CSV file with a text column, a .txt file or a "
                        "folder of .txt files.")
    digest = hashlib.sha256()
    attributes: list[str | None] | None = None
    if p.is_dir():
        files = sorted(f for f in p.rglob("*.txt") if f.is_file())
        if not files:
            raise DataError(f"The folder {p} has no .txt files. Put one note per .txt file in it, or choose a CSV "
                            "file with a text column.")
        if attribute_column:
            raise DataError("A per-note attribute for adversarial debiasing needs a table (CSV/Parquet) with a text "
                            f"column and the attribute column '{attribute_column}'; a folder of .txt files has none.")
        notes = []
        for f in files:
            raw = _read_bytes(f)
            digest.update(f.relative_to(p).as_posix().encode() + b"\0" + raw)
            notes.append(raw.decode("utf-8", errors="replace"))
    elif p.suffix.lower() == ".txt":
        if attribute_column:
            raise DataError("A per-note attribute for adversarial debiasing needs a table (CSV/Parquet) with a text "
                            f"column and the attribute column '{attribute_column}'; a .txt file has none.")
        raw = _read_bytes(p)
        digest.update(raw)
        notes = [n for n in re.split(r"\n\s*\n", raw.decode("utf-8", errors="replace"))]
    else:
        from fairdesk.core.data.loaders import file_sha256, load_table

        df = load_table(p)
        if text_column not in df.columns:
            raise DataError(f"{p.name} has no text column '{text_column}'. Its columns are: "
                            f"{', '.join(map(str, df.columns[:20]))}. Choose the column that holds the notes.")
        if attribute_column and attribute_column not in df.columns:
            raise DataError(f"{p.name} has no attribute column '{attribute_column}'. Its columns are: "
                            f"{', '.join(map(str, df.columns[:20]))}.")
        keep = df[text_column].notna() & (df[text_column].astype(str).str.strip() != "")
        df = df[keep]
        notes = df[text_column].astype(str).tolist()
        if attribute_column:
            attributes = [None if (v is None or (isinstance(v, float) and math.isnan(v))) else str(v)
                          for v in df[attribute_column].tolist()]
        digest.update(file_sha256(p).encode())
    notes_attrs = [(n, attributes[i] if attributes is not None else None) for i, n in enumerate(notes) if n.strip()]
    if not notes_attrs:
        raise DataError(f"The corpus {p} holds no text. Check the file and the text column.")
    return Corpus([n for n, _ in notes_attrs], [a for _, a in notes_attrs] if attributes is not None else None,
                  str(p), digest.hexdigest())


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise DataError(f"Cannot read {path}: {err.strerror or err}. Check the file's permissions.") from err


# ==============================================================================================================
# Configuration

#: Model size presets: (hidden size, layers, attention heads). Intermediate size is 4 × hidden.
SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (96, 2, 4),       # minutes on one CPU core
    "mini": (256, 4, 4),      # BERT-mini
    "small": (512, 4, 8),     # BERT-small
    "base": (768, 12, 12),    # BERT-base, a GPU job
}


@dataclass
class MLMTrainConfig:
    """Everything that decides a training run (saved with every checkpoint and checked on resume)."""

    text_column: str = "text"
    attribute_column: str | None = None      # protected attribute per note → adversarial debiasing
    init_model: str | None = None            # a local BERT/RoBERTa masked-LM folder to continue pretraining
    tokenizer_from: str | None = None        # a local folder whose tokenizer to use instead of training one
    size: str | None = "tiny"                # a key of SIZES; explicit numbers below override it
    hidden_size: int | None = None
    num_layers: int | None = None
    num_heads: int | None = None
    intermediate_size: int | None = None
    vocab_size: int = 8000
    max_length: int = 128
    min_sequence_tokens: int = 20
    dropout: float = 0.1
    mlm_probability: float = 0.15
    focus_words: tuple[str, ...] = ()         # words masked with focus_probability instead (e.g. gender words)
    focus_probability: float = 0.5
    batch_size: int = 32
    max_steps: int = 1000
    learning_rate: float = 5e-4
    weight_decay: float = 0.01
    warmup_steps: int = 100
    schedule: str = "constant"               # "constant" or "linear" (linear decay to 0 after warm-up)
    adversary_lambda: float = 1.0
    adversary_weight: float = 1.0
    adversary_lr_scale: float = 1.0           # the discriminator's learning rate relative to the encoder's
    adversary_steps: int = 5                  # discriminator updates per step (1 joint + extra on detached [CLS])
    save_every: int = 500
    keep_checkpoints: int = 2
    log_every: int = 10
    seed: int = 0
    device: str = "cpu"                       # "cpu", "cuda" or "auto"

    def resolved(self) -> "MLMTrainConfig":
        if self.init_model:  # the architecture comes from the model folder
            return replace(self, focus_words=tuple(self.focus_words))._check_common()
        h, n_layers, heads = SIZES.get(self.size or "", (None, None, None)) if self.size else (None, None, None)
        if self.size and self.size not in SIZES:
            raise ModelError(f"Unknown model size '{self.size}'. Choose one of {', '.join(SIZES)} or give the hidden "
                             "size, number of layers and heads.")
        h = self.hidden_size or h
        n_layers = self.num_layers or n_layers
        heads = self.num_heads or heads
        if not (h and n_layers and heads):
            raise ModelError("Give a model size (tiny, mini, small, base) or all of hidden size, layers and heads.")
        if h % heads:
            raise ModelError(f"The hidden size ({h}) must be a multiple of the number of attention heads ({heads}).")
        cfg = replace(self, hidden_size=h, num_layers=n_layers, num_heads=heads,
                      intermediate_size=self.intermediate_size or 4 * h, focus_words=tuple(self.focus_words))
        return cfg._check_common()

    def _check_common(self) -> "MLMTrainConfig":
        cfg = self
        if cfg.max_length < cfg.min_sequence_tokens + 2 or cfg.max_length < 8:
            raise ModelError(f"max_length ({cfg.max_length}) must leave room for sequences of at least "
                             f"{cfg.min_sequence_tokens} tokens plus [CLS] and [SEP].")
        if cfg.schedule not in ("constant", "linear"):
            raise ModelError("schedule must be 'constant' or 'linear'.")
        if cfg.max_steps < 1 or cfg.batch_size < 1:
            raise ModelError("max_steps and batch_size must be positive.")
        if not (0 < cfg.mlm_probability < 1 and 0 < cfg.focus_probability <= 1):
            raise ModelError("The masking probabilities must lie in (0, 1).")
        return cfg

    def to_dict(self) -> dict:
        d = asdict(self)
        d["focus_words"] = list(self.focus_words)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "MLMTrainConfig":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known["focus_words"] = tuple(known.get("focus_words", ()))
        return cls(**known)


# Settings that may change on resume (everything else must match the checkpoint).
_RESUMABLE = {"max_steps", "save_every", "keep_checkpoints", "log_every", "device"}


# ==============================================================================================================
# Tokenizer and sequence packing

_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Masked-LM classes the trainer can continue: name -> attribute of the position-wise LM head
_TRAINABLE = {"BertForMaskedLM": "cls", "RobertaForMaskedLM": "lm_head", "XLMRobertaForMaskedLM": "lm_head",
              "CamembertForMaskedLM": "lm_head"}


def _load_tokenizer(path: str | Path):
    p = Path(path).expanduser()
    if not p.is_dir() or not any((p / f).is_file() for f in _TOKENIZER_FILES):
        raise ModelError(f"{p} holds no tokenizer (tokenizer.json or vocab.txt). Choose a model folder or a folder "
                         "saved with tokenizer.save_pretrained.")
    refuse_custom_code(p)
    _quiet_transformers()
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(p), **_SAFE_LOAD)
    except Exception as err:  # noqa: BLE001
        raise ModelError(f"The tokenizer in {p} cannot be loaded ({_short(err)}).") from err
    if not getattr(tok, "is_fast", False) or tok.mask_token is None:
        raise ModelError(f"The tokenizer in {p} needs a fast version (tokenizer.json) and a mask token.")
    return tok


def train_wordpiece_tokenizer(sentences, vocab_size: int = 8000, lowercase: bool = True):
    """A BERT-style WordPiece tokenizer trained locally (``PreTrainedTokenizerFast``), PHI tokens special."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, clean_text=True, handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = _SPECIALS + list(PHI_TOKENS.values())
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=specials,
                                        show_progress=False)
    tok.train_from_iterator(sentences, trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]",
                                   additional_special_tokens=list(PHI_TOKENS.values()))
    fast.model_max_length = 512
    return fast


def vocabulary_tokenizer(words, lowercase: bool = True):
    """A WordPiece tokenizer over a given word list (deterministic): the special and PHI tokens, the words, and
    every letter and digit alone and as a ``##`` continuation so that unknown words split instead of becoming
    [UNK]. For generated corpora, tests and benchmarks; ``save_pretrained`` it and pass ``tokenizer_from``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = _SPECIALS + list(PHI_TOKENS.values())
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    body = sorted({w.lower() if lowercase else w for w in words} | set(chars) | {f"##{c}" for c in chars}
                  | set(".,;:!?'()/-"))
    vocab = {t: i for i, t in enumerate(specials + [t for t in body if t not in specials])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]",
                                   additional_special_tokens=list(PHI_TOKENS.values()))
    fast.model_max_length = 512
    return fast


def corpus_words(texts) -> list[str]:
    """The distinct words of ``texts`` after PHI replacement and BERT pre-tokenisation (lower-cased)."""
    from tokenizers import normalizers, pre_tokenizers

    norm, pre = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words: set[str] = set()
    for t in texts:
        words.update(w for w, _ in pre.pre_tokenize_str(norm.normalize_str(_PHI.sub(" ", t))))
    return sorted(words)


@dataclass
class PackedData:
    ids: list[np.ndarray]        # with [CLS] … [SEP]
    words: list[np.ndarray]      # word index per position (-1 for [CLS]/[SEP])
    focus: list[np.ndarray]      # position belongs to a focus word
    z: np.ndarray                # attribute class per sequence (-1 = unknown / no adversary)
    classes: list[str]
    n_notes: int

    def __len__(self) -> int:
        return len(self.ids)


def pack_sequences(notes: list[str], tokenizer, min_tokens: int = 20, max_length: int = 128,
                   attributes: list[str | None] | None = None, focus_words=(), rep: Reporter | None = None
                   ) -> PackedData:
    """Sentences of each note packed into sequences of ≥ ``min_tokens`` pieces (never across notes)."""
    rep = rep or Reporter()
    backend = tokenizer.backend_tokenizer
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    cap = max_length - 2
    focus = {w.lower() for w in focus_words}
    classes = sorted({a for a in attributes if a is not None}) if attributes is not None else []
    index = {c: i for i, c in enumerate(classes)}
    ids_out, words_out, focus_out, z_out = [], [], [], []
    n_notes = len(notes)
    for k, note in enumerate(notes):
        if k % 200 == 0:
            rep(k / max(n_notes, 1), f"tokenizing note {k + 1} of {n_notes}")
        sentences = split_sentences(replace_phi(note))
        if not sentences:
            continue
        encs = backend.encode_batch(sentences, add_special_tokens=False)
        z = index.get(attributes[k], -1) if attributes is not None else -1
        start_of_note = len(ids_out)
        cur_ids: list[int] = []
        cur_words: list[int] = []
        cur_focus: list[bool] = []
        next_word = 0

        def emit():
            nonlocal cur_ids, cur_words, cur_focus, next_word
            if cur_ids:
                ids_out.append(np.array([cls_id] + cur_ids + [sep_id], dtype=np.int64))
                words_out.append(np.array([-1] + cur_words + [-1], dtype=np.int64))
                focus_out.append(np.array([False] + cur_focus + [False], dtype=bool))
                z_out.append(z)
            cur_ids, cur_words, cur_focus, next_word = [], [], [], 0

        for enc in encs:
            s_ids = list(enc.ids)
            if not s_ids:
                continue
            wids = [w if w is not None else -1 for w in enc.word_ids]
            # whole words of this sentence (for focus words, the word's text rebuilt from its pieces)
            word_text: dict[int, str] = {}
            for tok_text, w in zip(enc.tokens, wids):
                piece = tok_text[2:] if tok_text.startswith("##") else tok_text.lstrip("\u0120\u2581")
                word_text[w] = word_text.get(w, "") + piece
            s_focus = [word_text.get(w, "").lower() in focus for w in wids]
            # split an over-long sentence at word starts
            chunks = [(s_ids, wids, s_focus)]
            if len(s_ids) > cap:
                chunks, a = [], 0
                while a < len(s_ids):
                    b = min(a + cap, len(s_ids))
                    while b < len(s_ids) and b > a + 1 and wids[b] == wids[b - 1]:
                        b -= 1
                    chunks.append((s_ids[a:b], wids[a:b], s_focus[a:b]))
                    a = b
            for c_ids, c_w, c_f in chunks:
                if cur_ids and len(cur_ids) + len(c_ids) > cap:
                    emit()
                base = next_word - min(c_w)
                cur_ids += c_ids
                cur_words += [w + base for w in c_w]
                cur_focus += c_f
                next_word = max(cur_words) + 1
                if len(cur_ids) >= min_tokens:
                    emit()
        if cur_ids:  # a short remainder joins the note's previous sequence when it fits
            if len(ids_out) > start_of_note and len(ids_out[-1]) - 2 + len(cur_ids) <= cap:
                prev_ids, prev_w, prev_f = ids_out.pop(), words_out.pop(), focus_out.pop()
                z_out.pop()
                shift = int(prev_w.max()) + 1
                cur_ids = list(prev_ids[1:-1]) + cur_ids
                cur_words = list(prev_w[1:-1]) + [w + shift for w in cur_words]
                cur_focus = list(prev_f[1:-1]) + cur_focus
            emit()
    if not ids_out:
        raise DataError("The corpus produced no text to train on after tokenization. Check the text column.")
    return PackedData(ids_out, words_out, focus_out, np.asarray(z_out, dtype=np.int64), classes, n_notes)


def _collate(data: PackedData, order: np.ndarray, pad_id: int):
    n, T = len(order), max(len(data.ids[i]) for i in order)
    ids = np.full((n, T), pad_id, dtype=np.int64)
    words = np.full((n, T), -1, dtype=np.int64)
    focus = np.zeros((n, T), dtype=bool)
    for r, i in enumerate(order):
        L = len(data.ids[i])
        ids[r, :L], words[r, :L], focus[r, :L] = data.ids[i], data.words[i], data.focus[i]
    return ids, words, focus, data.z[order]


def whole_word_mask(ids: np.ndarray, words: np.ndarray, focus: np.ndarray, rng: np.random.Generator,
                    mask_id: int, random_ids: np.ndarray, mlm_probability: float = 0.15,
                    focus_probability: float = 0.5):
    """Whole-word masking of a padded batch: ``(input_ids, labels)`` with labels -100 where not predicted.

    Each word is chosen with ``mlm_probability`` (focus words with ``focus_probability``); at least one word per
    sequence. Every piece of a chosen word is predicted: 80 % replaced by [MASK], 10 % by a random token drawn from
    ``random_ids`` (the non-special vocabulary), 10 % kept.
    """
    B, T = ids.shape
    n_words = int(words.max()) + 1 if (words >= 0).any() else 1
    valid_w = np.zeros((B, n_words), dtype=bool)
    focus_w = np.zeros((B, n_words), dtype=bool)
    rows, cols = np.nonzero(words >= 0)
    valid_w[rows, words[rows, cols]] = True
    focus_w[rows, words[rows, cols]] |= focus[rows, cols]
    u = rng.random((B, n_words))
    p = np.where(focus_w, focus_probability, mlm_probability)
    chosen = (u < p) & valid_w
    none = ~chosen.any(axis=1) & valid_w.any(axis=1)
    if none.any():
        pick = np.argmin(np.where(valid_w[none], u[none], np.inf), axis=1)
        chosen[np.nonzero(none)[0], pick] = True
    pos = np.zeros((B, T), dtype=bool)
    pos[rows, cols] = chosen[rows, words[rows, cols]]
    labels = np.where(pos, ids, -100)
    r = rng.random((B, T))
    out = ids.copy()
    out[pos & (r < 0.8)] = mask_id
    rand_pos = pos & (r >= 0.8) & (r < 0.9)
    out[rand_pos] = random_ids[rng.integers(0, len(random_ids), size=int(rand_pos.sum()))]
    return out, labels


# ==============================================================================================================
# Adversarial debiasing


def _grl_class():
    import torch

    class _GradientReversal(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, lam):
            ctx.lam = float(lam)
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return -ctx.lam * grad, None

    return _GradientReversal


_GRL = None


def grad_reverse(x, lam: float = 1.0):
    """Gradient-reversal layer J: identity forward, −λ × gradient backward."""
    global _GRL
    if _GRL is None:
        _GRL = _grl_class()
    return _GRL.apply(x, lam)


def make_discriminator(hidden_size: int, n_classes: int):
    """3-layer ReLU MLP with halving widths: H → H/2 → H/4 → n_classes."""
    import torch.nn as nn

    h2, h4 = max(hidden_size // 2, 2), max(hidden_size // 4, 2)
    return nn.Sequential(nn.Linear(hidden_size, h2), nn.ReLU(), nn.Linear(h2, h4), nn.ReLU(),
                         nn.Linear(h4, n_classes))


def mlm_adversarial_losses(model, discriminator, input_ids, attention_mask, labels, z=None, lam: float = 1.0,
                           reverse: bool = True) -> dict:
    """The training losses: masked-LM cross-entropy on the predicted positions and, with a discriminator, the
    adversary's cross-entropy on ``a(J(h_[CLS]))`` for sequences with a known attribute (``z >= 0``).

    Gradients flow everywhere (no ``torch.no_grad``): through J the encoder receives −λ × the adversary's
    gradient. ``reverse=False`` skips J (used by the test comparing both gradients).
    """
    import torch
    import torch.nn.functional as F

    base = model.base_model
    hidden = base(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    sel = labels != -100
    head = getattr(model, _TRAINABLE.get(type(model).__name__, "cls"))
    logits = head(hidden[sel])
    mlm = F.cross_entropy(logits.float(), labels[sel]) if sel.any() else hidden.sum() * 0.0
    out = {"mlm": mlm, "adv": None, "adv_accuracy": None}
    if discriminator is not None and z is not None:
        known = z >= 0
        if known.any():
            h_cls = hidden[:, 0][known]
            h_in = grad_reverse(h_cls, lam) if reverse else h_cls
            adv_logits = discriminator(h_in)
            out["adv"] = F.cross_entropy(adv_logits.float(), z[known])
            out["cls"] = h_cls.detach()
            out["z_known"] = z[known]
            with torch.no_grad():  # the accuracy is a report only; the loss above keeps its graph
                out["adv_accuracy"] = float((adv_logits.argmax(1) == z[known]).float().mean())
    return out


# ==============================================================================================================
# Training


@dataclass
class MLMTrainResult:
    out_dir: Path
    steps: int
    resumed_from: int | None
    history: list[dict]
    n_notes: int
    n_sequences: int
    vocab_size: int
    classes: list[str]
    seconds: float
    provenance: dict = field(default_factory=dict)

    @property
    def final_loss(self) -> float | None:
        return self.history[-1]["mlm_loss"] if self.history else None


def _latest_checkpoint(out: Path) -> Path | None:
    ck = out / "checkpoints"
    if not ck.is_dir():
        return None
    done = sorted(d for d in ck.iterdir() if d.is_dir() and d.name.startswith("checkpoint-")
                  and (d / "trainer_state.json").is_file())
    return done[-1] if done else None


def _lr_at(cfg: MLMTrainConfig, step: int) -> float:
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "linear":
        span = max(cfg.max_steps - cfg.warmup_steps, 1)
        return cfg.learning_rate * max(0.0, 1.0 - (step - cfg.warmup_steps) / span)
    return cfg.learning_rate


def _resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError("A GPU (cuda) was requested but none is available. Choose 'auto' or 'cpu'.")
    if name != "cpu" and not name.startswith("cuda"):
        raise ModelError(f"Unknown device '{name}'. Use cpu, cuda or auto.")
    return name


def _save_checkpoint(out: Path, step: int, model, tokenizer, discriminator, optimizer, state: dict,
                     keep: int) -> Path:
    """Write a complete checkpoint into a temporary folder, then rename it into place (atomic on one disk)."""
    import torch
    from safetensors.torch import save_file

    ck_root = out / "checkpoints"
    ck_root.mkdir(parents=True, exist_ok=True)
    final = ck_root / f"checkpoint-{step:07d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-checkpoint-{step:07d}-", dir=ck_root))
    try:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        if discriminator is not None:
            save_file({k: v.detach().cpu().contiguous() for k, v in discriminator.state_dict().items()},
                      str(tmp / "discriminator.safetensors"))
        torch.save({"optimizer": optimizer.state_dict()}, str(tmp / "optimizer.pt"))
        (tmp / "trainer_state.json").write_text(json.dumps(state, indent=1, default=str), encoding="utf-8")
        if final.exists():  # the same step saved again (resume of a finished run): replace it
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    done = sorted(d for d in ck_root.iterdir() if d.is_dir() and d.name.startswith("checkpoint-"))
    for old in done[:-max(keep, 1)]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in ck_root.glob(".tmp-checkpoint-*"):  # left by a crash
        shutil.rmtree(stale, ignore_errors=True)
    from fairdesk.core.guard import record_checkpoint

    record_checkpoint(out)  # the checkpoint is FairDesk's even if the run is killed before it ends (resume)
    return final


def _publish(checkpoint: Path, out: Path, info: dict) -> None:
    """Copy the model and tokenizer files of ``checkpoint`` into ``out``; ``config.json`` goes last, so a folder
    interrupted half-way is never mistaken for a complete model."""
    (out / "config.json").unlink(missing_ok=True)
    skip = {"optimizer.pt", "trainer_state.json", "discriminator.safetensors", "config.json"}
    for f in sorted(checkpoint.iterdir()):
        if f.is_file() and f.name not in skip:
            tmp = out / f".{f.name}.tmp"
            shutil.copyfile(f, tmp)
            os.replace(tmp, out / f.name)
    from fairdesk.core import atomic

    atomic.write_text(out / "training_info.json", json.dumps(info, indent=1, default=str))
    tmp = out / ".config.json.tmp"
    shutil.copyfile(checkpoint / "config.json", tmp)
    os.replace(tmp, out / "config.json")


def train_mlm(corpus: str | Path | Corpus, out_dir: str | Path, config: MLMTrainConfig | None = None,
              resume: bool = False, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
              on_log: Callable[[dict], None] | None = None) -> MLMTrainResult:
    """Train a WordPiece tokenizer and a BERT masked LM on local notes; see the module docstring.

    ``on_log(record)`` receives ``{step, mlm_loss, adv_loss, adv_accuracy, lr, seconds}`` every ``log_every``
    steps (the GUI's live loss curve). Raises :class:`DataError` / :class:`ModelError` with a fix, and
    :class:`Cancelled` after writing a checkpoint of the finished steps. ``out_dir`` must be new, empty or a FairDesk
    folder (:func:`fairdesk.core.guard.owned_folder`); a run that fails before its first checkpoint leaves no new
    folder behind.
    """
    from fairdesk.core.guard import owned_folder

    out = Path(out_dir).expanduser()
    with owned_folder(out, "a FairDesk masked language model"):  # refuses a folder holding files FairDesk did not write
        return _train_mlm(corpus, out, config, resume, progress, cancel, on_log)


def _train_mlm(corpus, out: Path, config, resume, progress, cancel, on_log) -> MLMTrainResult:
    rep = Reporter(progress, cancel)
    cfg = (config or MLMTrainConfig()).resolved()
    started = time.monotonic()
    rep(0.0, "reading the corpus")
    corp = corpus if isinstance(corpus, Corpus) else read_corpus(corpus, cfg.text_column, cfg.attribute_column)
    if cfg.attribute_column and corp.attributes is None:
        raise DataError(f"The corpus has no attribute values for '{cfg.attribute_column}'.")

    latest = _latest_checkpoint(out) if out.exists() else None
    if out.exists() and not resume:
        if (out / "config.json").exists() or latest is not None:
            raise ModelError(f"{out} already holds a trained model or checkpoints. Choose an empty output folder, "
                             "or resume the earlier training.")
    if resume and latest is None:
        raise ModelError(f"There is no checkpoint to resume in {out / 'checkpoints'}. Start a new training instead.")

    _quiet_transformers()
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    device = _resolve_device(cfg.device)
    state: dict[str, Any] = {}
    if resume:
        from fairdesk.core.jsonable import read_json_file
        state = read_json_file(latest / "trainer_state.json")
        old = MLMTrainConfig.from_dict(state["config"]).resolved()
        changed = [k for k in cfg.__dataclass_fields__ if k not in _RESUMABLE
                   and getattr(old, k) != getattr(cfg, k)]
        if changed:
            raise ModelError(f"The checkpoint was trained with other settings ({', '.join(changed)}). Resume with "
                             "the same settings, or start a new training in an empty folder.")
        if state.get("corpus_sha256") != corp.sha256:
            raise ModelError("The checkpoint was trained on a different corpus (its SHA-256 differs). Resume with "
                             "the same corpus, or start a new training in an empty folder.")
        refuse_custom_code(latest)
        tokenizer = AutoTokenizer.from_pretrained(str(latest), **_SAFE_LOAD)
    elif cfg.init_model:
        rep(0.01, "loading the initial model")
        init_model, tokenizer = load_masked_lm(cfg.init_model)
        if type(init_model).__name__ not in _TRAINABLE:
            raise ModelError(f"Continued pretraining supports BERT and RoBERTa masked LMs; {cfg.init_model} is a "
                             f"{type(init_model).__name__}.")
        missing_phi = [t for t in PHI_TOKENS.values() if t not in tokenizer.get_vocab()]
        if missing_phi:  # one new special token per PHI type, with fresh embeddings
            tokenizer.add_special_tokens({"additional_special_tokens": missing_phi})
            init_model.resize_token_embeddings(len(tokenizer))
    elif cfg.tokenizer_from:
        tokenizer = _load_tokenizer(cfg.tokenizer_from)
    else:
        rep(0.01, "training the WordPiece tokenizer")
        sentences = (s for note in corp.notes for s in split_sentences(replace_phi(note)))
        tokenizer = train_wordpiece_tokenizer(sentences, cfg.vocab_size)
    rep.check()
    data = pack_sequences(corp.notes, tokenizer, cfg.min_sequence_tokens, cfg.max_length,
                          corp.attributes if cfg.attribute_column else None, cfg.focus_words, rep.sub(0.02, 0.05))
    adversary = bool(cfg.attribute_column)
    if adversary:
        if len(data.classes) < 2:
            raise DataError(f"The attribute column '{cfg.attribute_column}' has fewer than two values; adversarial "
                            "debiasing needs at least two groups.")
        if (data.z >= 0).sum() < 2 * cfg.batch_size // 4:
            raise DataError(f"Too few notes have a value in '{cfg.attribute_column}' for adversarial debiasing.")

    torch.manual_seed(cfg.seed)
    if resume:
        from transformers import AutoModelForMaskedLM

        model = AutoModelForMaskedLM.from_pretrained(str(latest), **_SAFE_LOAD)
    elif cfg.init_model:
        model = init_model
    else:
        bert_cfg = BertConfig(vocab_size=len(tokenizer), hidden_size=cfg.hidden_size,
                              num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
                              intermediate_size=cfg.intermediate_size, max_position_embeddings=max(cfg.max_length, 64),
                              hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout,
                              pad_token_id=tokenizer.pad_token_id)
        model = BertForMaskedLM(bert_cfg)
    limit = int(model.config.max_position_embeddings) - (2 if model.config.model_type in (
        "roberta", "xlm-roberta", "camembert") else 0)
    if cfg.max_length > limit:
        raise ModelError(f"max_length ({cfg.max_length}) exceeds what the model accepts ({limit}); lower it.")
    model.to(device)
    hidden = int(model.config.hidden_size)
    discriminator = make_discriminator(hidden, len(data.classes)).to(device) if adversary else None
    if resume and adversary:
        from safetensors.torch import load_file

        discriminator.load_state_dict(load_file(str(latest / "discriminator.safetensors")))
    groups = [{"params": list(model.parameters()), "lr_scale": 1.0}]
    if discriminator is not None:
        groups.append({"params": list(discriminator.parameters()), "lr_scale": cfg.adversary_lr_scale})
    optimizer = torch.optim.AdamW(groups, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    if resume:
        opt_state = torch.load(str(latest / "optimizer.pt"), map_location=device, weights_only=True)
        optimizer.load_state_dict(opt_state["optimizer"])

    step = start_step = int(state.get("step", 0))
    resumed_from = step if resume else None
    history: list[dict] = list(state.get("history", []))
    n = len(data)
    vocab = len(tokenizer)
    random_ids = np.setdiff1d(np.arange(vocab), np.asarray(tokenizer.all_special_ids, dtype=np.int64))
    mask_id, pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id
    per_epoch = max(n // cfg.batch_size, 1)
    train_rep = rep.sub(0.05, 1.0)

    def state_dict_now() -> dict:
        return {"step": step, "config": cfg.to_dict(), "corpus_sha256": corp.sha256, "corpus": corp.source,
                "classes": data.classes, "n_sequences": n, "history": history,
                "fairdesk_version": _fairdesk_version()}

    def checkpoint() -> Path:
        return _save_checkpoint(out, step, model, tokenizer, discriminator, optimizer, state_dict_now(),
                                cfg.keep_checkpoints)

    model.train()
    if discriminator is not None:
        discriminator.train()
    window: list[tuple[float, float | None, float | None]] = []
    try:
        while step < cfg.max_steps:
            rep.check()
            epoch, k = divmod(step, per_epoch)
            order = np.random.default_rng([cfg.seed, 7, epoch]).permutation(n)
            batch = order[k * cfg.batch_size:(k + 1) * cfg.batch_size]
            if len(batch) < min(cfg.batch_size, n):
                batch = order[:cfg.batch_size]
            ids, words, focus, z = _collate(data, batch, pad_id)
            rng = np.random.default_rng([cfg.seed, 11, step])
            inp, labels = whole_word_mask(ids, words, focus, rng, mask_id, random_ids, cfg.mlm_probability,
                                          cfg.focus_probability)
            torch.manual_seed(cfg.seed * 1_000_003 + step)  # dropout: a function of (seed, step) → resumable
            for g in optimizer.param_groups:
                g["lr"] = _lr_at(cfg, step) * g.get("lr_scale", 1.0)
            t_inp = torch.as_tensor(inp, device=device)
            losses = mlm_adversarial_losses(model, discriminator, t_inp,
                                            torch.as_tensor((ids != pad_id).astype(np.int64), device=device),
                                            torch.as_tensor(labels, device=device),
                                            torch.as_tensor(z, device=device) if adversary else None,
                                            cfg.adversary_lambda)
            loss = losses["mlm"] + (cfg.adversary_weight * losses["adv"] if losses["adv"] is not None else 0.0)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if losses["adv"] is not None and cfg.adversary_steps > 1:
                # extra discriminator-only updates on this batch's [CLS] vectors (the encoder is not touched)
                import torch.nn.functional as F

                for _ in range(cfg.adversary_steps - 1):
                    optimizer.zero_grad(set_to_none=True)
                    F.cross_entropy(discriminator(losses["cls"]).float(), losses["z_known"]).backward()
                    optimizer.step()
            step += 1
            adv_loss = None if losses["adv"] is None else float(losses["adv"].detach())
            window.append((float(losses["mlm"].detach()), adv_loss, losses["adv_accuracy"]))
            if step % cfg.log_every == 0 or step == cfg.max_steps:
                rec = {"step": step, "mlm_loss": float(np.mean([w[0] for w in window])),
                       "adv_loss": _mean_or_none([w[1] for w in window]),
                       "adv_accuracy": _mean_or_none([w[2] for w in window]),
                       "lr": _lr_at(cfg, step - 1), "seconds": round(time.monotonic() - started, 3)}
                window = []
                history.append(rec)
                if on_log is not None:
                    on_log(rec)
                msg = f"step {step}/{cfg.max_steps}: loss {rec['mlm_loss']:.3f}"
                if rec["adv_loss"] is not None:
                    msg += f", adversary {rec['adv_loss']:.3f} (accuracy {rec['adv_accuracy']:.2f})"
                train_rep.progress(train_rep.start + (train_rep.stop - train_rep.start) * step / cfg.max_steps, msg)
            if step % cfg.save_every == 0 and step < cfg.max_steps:
                checkpoint()
    except Cancelled:
        if step > start_step:  # keep the finished steps; earlier checkpoints stay as they were
            checkpoint()
        raise
    final = checkpoint()
    info = {"config": cfg.to_dict(), "steps": step, "resumed_from": resumed_from, "corpus": corp.source,
            "corpus_sha256": corp.sha256, "n_notes": data.n_notes, "n_sequences": n, "classes": data.classes,
            "adversarial": adversary, "phi_tokens": PHI_TOKENS, "history": history,
            "seconds": round(time.monotonic() - started, 2)}
    from fairdesk.core import provenance

    info["provenance"] = provenance.make(cfg.seed, corp.sha256, None, kind="masked_lm_training")
    _publish(final, out, info)
    info["provenance"]["model_hashes"] = {"masked_lm": model_fingerprint(out)}
    from fairdesk.core.models.training_record import write_training_record

    write_training_record(out, kind="masked_lm", model_sha256=info["provenance"]["model_hashes"]["masked_lm"],
                          data_name=corp.source, data_sha256=corp.sha256,
                          parameters={**cfg.to_dict(), "steps_done": step, "resumed_from": resumed_from})
    if (out / "tokenizer.json").is_file():
        info["tokenizer_sha256"] = hashlib.sha256((out / "tokenizer.json").read_bytes()).hexdigest()
    from fairdesk.core import atomic

    atomic.write_text(out / "training_info.json", json.dumps(info, indent=1, default=str))
    rep(1.0, f"trained {step} steps; model saved in {out}")
    model.eval()
    return MLMTrainResult(out, step, resumed_from, history, data.n_notes, n, vocab, data.classes,
                          time.monotonic() - started, info["provenance"])


def _mean_or_none(values):
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _fairdesk_version() -> str:
    from fairdesk import __version__

    return __version__


# ==============================================================================================================
# Probing [CLS] for a protected attribute (001 Table D4)


def encode_cls(model, tokenizer, texts: list[str], batch_size: int = 64, max_length: int = 128,
               layers: int = 1, rep: Reporter | None = None) -> np.ndarray:
    """[CLS] vectors of ``texts`` (PHI placeholders replaced as in training): the last layer, or with
    ``layers=4`` the concatenation of the last four layers (001 §4.1)."""
    import torch

    rep = rep or Reporter()
    model.eval()
    feats = []
    with torch.inference_mode():
        for a in range(0, len(texts), batch_size):
            rep(a / max(len(texts), 1), f"encoding {a} of {len(texts)} texts")
            enc = tokenizer([replace_phi(t) for t in texts[a:a + batch_size]], padding=True, truncation=True,
                            max_length=max_length, return_tensors="pt")
            dev = next(model.parameters()).device
            outs = model.base_model(input_ids=enc["input_ids"].to(dev), attention_mask=enc["attention_mask"].to(dev),
                                    output_hidden_states=layers > 1)
            if layers > 1:
                h = torch.cat([outs.hidden_states[-i][:, 0] for i in range(1, layers + 1)], dim=1)
            else:
                h = outs.last_hidden_state[:, 0]
            feats.append(h.float().cpu().numpy())
    return np.concatenate(feats) if feats else np.zeros((0, model.config.hidden_size), dtype=np.float32)


def attribute_probe(features: np.ndarray, labels, n_folds: int = 5, seed: int = 0, C: float = 1.0) -> dict:
    """How well a standardised logistic regression recovers ``labels`` from ``features`` (stratified K-fold):
    ``accuracy``, ``balanced_accuracy``, ``auroc`` (binary labels only) and the ``majority`` rate."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score, log_loss, roc_auc_score
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(labels)
    classes, y_idx = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise DataError("The attribute probe needs at least two groups.")
    X = np.asarray(features, dtype=float)
    pred = np.zeros(len(y_idx), dtype=int)
    prob = np.zeros(len(y_idx))
    proba = np.zeros((len(y_idx), len(classes)))
    folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    for tr, te in folds.split(X, y_idx):
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000))
        clf.fit(X[tr], y_idx[tr])
        pred[te] = clf.predict(X[te])
        proba[te] = clf.predict_proba(X[te])
        if len(classes) == 2:
            prob[te] = proba[te, 1]
    out = {"accuracy": float((pred == y_idx).mean()), "balanced_accuracy": float(balanced_accuracy_score(y_idx, pred)),
           "majority": float(np.bincount(y_idx).max() / len(y_idx)), "n": int(len(y_idx)),
           "classes": [str(c) for c in classes]}
    out["auroc"] = float(roc_auc_score(y_idx, prob)) if len(classes) == 2 else None
    out["log_loss"] = float(log_loss(y_idx, np.clip(proba, 1e-15, 1), labels=np.arange(len(classes))))
    return out


# ==============================================================================================================
# A generated corpus with a planted association (tests, benchmark, demos)

_FILLERS = (
    "vital signs stable .", "plan to continue current management .", "pt resting comfortably in bed .",
    "no acute distress noted .", "labs reviewed this morning .", "will follow up in clinic .",
    "tolerating diet without difficulty .", "family updated at bedside .", "pain controlled on current regimen .",
    "ambulating with assistance .", "afebrile overnight .", "lungs clear to auscultation .",
)


_PRONOUN_SENTENCES = (
    "{p} is resting comfortably .", "{p} tolerated the procedure well .", "{p} denies pain .",
    "{p} was seen by the team .", "{p} ate breakfast .", "{p} walked in the hallway .",
)


def synthetic_notes(n_notes: int = 4000, planted: dict[str, float] | None = None, seed: int = 0,
                    templates=None, n_fillers: tuple[int, int] = (1, 3), gendered_sentences: int = 0,
                    with_phi: bool = False):
    """Notes about patients of a recorded gender (``gender`` column: ``male``/``female``, half each).

    Each note has one sentence from the probe's own templates with a gendered word of the patient's gender (the
    word pair chosen at random) and an attribute phrase of a category, plus ``n_fillers`` gender-free sentences.
    Categories are drawn uniformly — except those in ``planted`` ({code: share of male notes among the notes that
    mention it}, e.g. ``{"HIV": 0.9}``), whose sentences occur that much more often in male notes. Without
    ``planted`` there is no association. ``gendered_sentences`` adds that many sentences with the group's second
    word as a pronoun ("he is resting comfortably .") — for probing [CLS] for the note's gender. Returns a
    DataFrame ``text, gender, category, attribute``.
    """
    import pandas as pd

    from fairdesk.core.text.templates import ATTR_SLOT, load_bias_templates

    tpl = templates or load_bias_templates()
    planted = dict(planted or {})
    unknown = set(planted) - set(tpl.codes)
    if unknown:
        raise DataError(f"Unknown categories to plant: {', '.join(sorted(unknown))}.")
    rng = np.random.default_rng(seed)
    groups = list(tpl.groups)[:2]
    cats = list(tpl.categories)
    base = np.full(len(cats), 1.0 / len(cats))
    rows = []
    for i in range(n_notes):
        g = i % 2  # 0 = first group (male), 1 = second (female)
        w = base.copy()
        for j, c in enumerate(cats):
            if c.code in planted:
                share = planted[c.code] if g == 0 else 1.0 - planted[c.code]
                w[j] = base[j] * 2.0 * share
        w /= w.sum()
        c = cats[rng.choice(len(cats), p=w)]
        template = c.templates[rng.integers(len(c.templates))]
        attribute = c.attributes[rng.integers(len(c.attributes))]
        words = tpl.groups[groups[g]]
        word = words[rng.integers(len(words))]
        sentence = template.replace(ATTR_SLOT, attribute).replace(tpl.slot_token, word)
        if not sentence.rstrip().endswith((".", "!", "?")):
            sentence += " ."
        k = rng.integers(n_fillers[0], n_fillers[1] + 1)
        fillers = [_FILLERS[j] for j in rng.choice(len(_FILLERS), size=k, replace=False)]
        if gendered_sentences:
            pronoun = words[1] if len(words) > 1 else words[0]
            fillers += [_PRONOUN_SENTENCES[j].format(p=pronoun)
                        for j in rng.choice(len(_PRONOUN_SENTENCES), size=gendered_sentences, replace=False)]
        if with_phi:
            fillers.append("seen on [**2126-9-19**] by dr. [**Last Name (NamePattern1) 123**] .")
        parts = [sentence] + fillers
        order = rng.permutation(len(parts))
        rows.append({"text": " ".join(parts[j] for j in order), "gender": groups[g], "category": c.code,
                     "attribute": attribute})
    return pd.DataFrame(rows)
