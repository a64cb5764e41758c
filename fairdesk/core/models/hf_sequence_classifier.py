"""Local Hugging Face sequence-classification folders as scorers for the CTF audit (METHODS §5).

:func:`load_sequence_classifier` opens a folder (``config.json``, ``model.safetensors``, tokenizer files) with
``local_files_only=True`` and ``trust_remote_code=False`` — never downloaded, never running code from the folder,
weights only from safetensors (no pickles) — and returns a :class:`SequenceClassifier` whose ``predict_proba(texts)``
is the probability of the positive class, scored in batches: one logit → sigmoid; two → softmax column 1; more →
softmax column ``positive_label`` (an index or a label name of ``config.id2label``), which must then be given.
torch and transformers are imported inside functions.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fairdesk.core.errors import ModelError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

MODEL_KIND = "hf_sequence_classifier"


def is_hf_folder(folder: str | Path) -> bool:
    """A folder with a Hugging Face ``config.json`` (``model_type`` set) — not a FairDesk text CNN."""
    from fairdesk.core.jsonable import read_json_file

    cfg = Path(folder) / "config.json"
    try:
        data = read_json_file(cfg)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "model_type" in data and "format" not in data


class SequenceClassifier:
    """``predict_proba(texts) -> (n,)``: the positive class's probability, always batched."""

    def __init__(self, model, tokenizer, positive: int | None, folder: Path, max_length: int = 128) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.positive = positive
        self.folder = folder
        self.max_length = max_length

    @property
    def n_labels(self) -> int:
        return int(self.model.config.num_labels)

    def predict_proba(self, texts, batch_size: int = 64, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None) -> np.ndarray:
        import torch

        texts = [str(t) for t in texts]
        rep = Reporter(progress, cancel)
        out = np.empty(len(texts), dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                rep(start / max(len(texts), 1), f"scoring {start:,}/{len(texts):,}")
                batch = texts[start:start + batch_size]
                enc = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length,
                                     return_tensors="pt")
                logits = self.model(**enc).logits.double()
                if logits.shape[1] == 1:
                    p = torch.sigmoid(logits[:, 0])
                else:
                    p = torch.softmax(logits, dim=1)[:, self.positive]
                out[start:start + len(batch)] = p.numpy()
        return out

    def __call__(self, texts) -> np.ndarray:
        return self.predict_proba(texts)

    def unknown_terms(self, terms) -> list[str]:
        """Term forms the tokenizer reads only as its unknown token (swaps among them cannot move the score)."""
        from fairdesk.core.text.counterfactual import load_terms

        unk = self.tokenizer.unk_token_id
        if unk is None:
            return []
        out = []
        for forms in load_terms(terms).forms:
            for f in forms:
                ids = self.tokenizer(f, add_special_tokens=False)["input_ids"]
                if ids and all(i == unk for i in ids):
                    out.append(f)
        return out


def load_sequence_classifier(folder: str | Path, positive_label: str | int | None = None) -> SequenceClassifier:
    """Open a local sequence-classification folder (see the module docstring). Raises :class:`ModelError`."""
    from fairdesk.core.models.mlm import refuse_custom_code

    p = Path(folder).expanduser()
    if not p.is_dir() or not (p / "config.json").is_file():
        raise ModelError(f"{p} is not a model folder (it needs config.json, model.safetensors and the tokenizer).")
    if not (p / "model.safetensors").is_file():
        raise ModelError(f"{p} has no model.safetensors; FairDesk loads weights only from safetensors files (never "
                         "pickles). Save the model with save_pretrained(safe_serialization=True).")
    refuse_custom_code(p)
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(p), local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - any failure is the user's folder
        raise ModelError(f"The tokenizer in {p} cannot be loaded ({type(err).__name__}); copy the tokenizer files the "
                         "model was trained with into the folder.") from err
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            str(p), use_safetensors=True, output_loading_info=True, local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001
        raise ModelError(f"The weights in {p} cannot be loaded as a sequence classifier ({type(err).__name__}); "
                         "choose a folder saved from a ...ForSequenceClassification model.") from err
    missing = [k for k in info.get("missing_keys", []) if "classifier" in k or "score" in k or "head" in k]
    if missing:
        raise ModelError(f"The weights in {p} have no classification head ({missing[0]} is missing); its scores "
                         "would be random. Choose a fine-tuned sequence-classification model.")
    model.eval()
    n = int(model.config.num_labels)
    positive: int | None = None
    if n == 2:
        positive = 1
    elif n > 2:
        labels = {str(v).lower(): int(k) for k, v in (model.config.id2label or {}).items()}
        if positive_label is None:
            raise ModelError(f"The model in {p} has {n} classes ({', '.join(sorted(labels))}); say which one is the "
                             "positive class.")
        key = str(positive_label).lower()
        if key.isdigit() and int(key) < n:
            positive = int(key)
        elif key in labels:
            positive = labels[key]
        else:
            raise ModelError(f"'{positive_label}' is not a class of the model in {p} ({', '.join(sorted(labels))}).")
    return SequenceClassifier(model, tokenizer, positive, p)
