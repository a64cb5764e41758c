"""Small CNN text classifier and the training-time remedies of 002 (METHODS §5).

Architecture (002 trains "CNNs" without further detail; FairDesk's choice, small enough for CPU): a vocabulary
built locally from the training texts (lower-cased word and punctuation tokens, plus every token of the identity
terms so that counterfactuals are in vocabulary), an embedding (``embed_dim``), one 1-D convolution per kernel
size (``kernel_sizes``, ``filters`` each, ReLU), global max-pooling over positions, dropout and a dense layer to one
logit ``g(x)``; ``f(x) = σ(g(x))`` is the probability of label 1.

Methods (``method``):

* ``baseline`` — binary cross-entropy.
* ``blindness`` — every identity term (of the training term set) is replaced by one ``<identity>`` token, in
  training AND at prediction (the model folder records the terms, so a loaded model stays blind).
* ``augmentation`` — every counterfactual ``Φ(x)`` of every training example is added with the original label.
* ``clp`` — counterfactual logit pairing: ``mean_i BCE_i + λ · mean_{i ∈ P} L(g(x_i), g(x'_i))`` where ``x'_i`` is one
  counterfactual sampled per example per epoch by replacing each identity-term occurrence with a random other term
  (002's training generator; the gender set swaps all gendered words) and ``P`` is the set of examples that have
  one. 002 writes a sum over all examples with ``x'`` = ``x`` for examples without terms; averaging over ``P``
  instead keeps λ's scale independent of how many examples mention a term.
* ``clp_nontox`` — as ``clp`` with ``P`` restricted to label-0 examples.

Pairing losses ``L`` on LOGITS (not probabilities), each with a weight (TFMR's ``weight``): ``mse`` (default) = the
mean squared difference, ``abs`` = the mean absolute difference (002's |g(x) − g(x')|), ``cosine`` = mean over rows
of ``1 − cos(g(x), g(x'))``. Sign convention: FairDesk's cosine loss is a *distance* (0 for parallel logits, 2 for
opposite), whereas Keras/TFMR's cosine loss is ``−cos`` (−1 best); the two differ by the constant 1, so gradients
agree. For a binary classifier with one logit the cosine of two scalars is only their sign agreement, so the cosine
loss is meaningful for multi-output logits only. Golden values (TFMR unit tests, METHODS §5) are checked in
``tests/core/test_text_classifier.py``.

A model folder holds ``config.json`` (architecture, vocabulary, method, λ, loss, the term set used, training
history) and ``model.safetensors``; both written atomically; nothing is pickled. torch is imported inside functions.

Resume (``checkpoint_dir``, ``resume``): after every finished epoch a checkpoint folder ``epoch-NNNN`` is written in
``checkpoint_dir`` — ``weights.safetensors`` (the module), ``optimizer.safetensors`` (Adam's per-parameter tensors,
keyed ``"<param index>.<name>"``) and ``state.json`` (the epoch, the config with its history, Adam's param groups
and non-tensor state, the run's fingerprint). Nothing is pickled (``torch.save`` of an optimizer state would be a
pickle). The folder is written under a temporary name and renamed, so a checkpoint is complete or absent; older
epochs are then removed. All randomness of epoch ``e`` (counterfactual sampling, data order, dropout) is derived
from ``(seed, e)`` alone, so no RNG state needs saving and a resumed run gives the same weights as an uninterrupted
one. A checkpoint is used only by a run with the same data and settings (:func:`run_fingerprint`; the number of
epochs may grow).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from fairdesk.core import atomic
from fairdesk.core.errors import DataError, ModelError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

METHODS = ("baseline", "blindness", "augmentation", "clp", "clp_nontox")
PAIR_LOSSES = ("mse", "abs", "cosine")
SPECIALS = ("<pad>", "<unk>", "<identity>")
FORMAT = "fairdesk.text_cnn/1"
_TOKEN_RE = re.compile(r"<identity>|[a-z0-9]+(?:['-][a-z0-9]+)*|[^\sa-z0-9]")


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.lower())


@dataclass
class TextCNNConfig:
    vocab: list[str] = field(default_factory=list)
    embed_dim: int = 64
    filters: int = 64
    kernel_sizes: tuple[int, ...] = (2, 3, 4)
    dropout: float = 0.2
    max_len: int = 64
    method: str = "baseline"
    lam: float = 0.0
    pair_loss: str = "mse"
    terms: dict | None = None          # TermSet.to_dict() of the training term set (None: baseline w/o terms)
    seed: int = 0
    epochs: int = 0
    lr: float = 2e-3
    batch_size: int = 64
    history: list = field(default_factory=list)
    resumed_from: int = 0               # epochs restored from a checkpoint (0: trained from the start)
    format: str = FORMAT

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kernel_sizes"] = list(self.kernel_sizes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TextCNNConfig":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            stored = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise ModelError(f"config.json is not a FairDesk text CNN ('{stored}' is not '{FORMAT}').")
        from fairdesk.core.jsonable import config_from_dict

        try:
            return config_from_dict(cls, d, "config.json")
        except ValueError as err:
            raise ModelError(f"{err}; FairDesk writes config.json when it trains a text classifier, so train it "
                             "again or choose the folder it wrote.") from None


_CLASS: dict = {}


def _module_class():
    if _CLASS:
        return _CLASS["TextCNN"]
    import torch
    from torch import nn

    class TextCNN(nn.Module):
        def __init__(self, vocab_size: int, embed_dim: int, filters: int, kernel_sizes, dropout: float) -> None:
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
            self.convs = nn.ModuleList(nn.Conv1d(embed_dim, filters, k) for k in kernel_sizes)
            self.dropout = nn.Dropout(dropout)
            self.dense = nn.Linear(filters * len(kernel_sizes), 1)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (n, L) -> (n,) logits
            x = self.embedding(ids).transpose(1, 2)          # (n, E, L)
            lengths = (ids != 0).sum(dim=1, keepdim=True)     # padding never enters the max-pool, so a text's
            pooled = []                                       # score does not depend on its batch's width
            for conv in self.convs:
                h = torch.relu(conv(x))                       # (n, F, L - k + 1)
                k = conv.kernel_size[0]
                valid = torch.arange(h.shape[2], device=ids.device)[None, :] < (lengths - k + 1).clamp(min=1)
                pooled.append(h.masked_fill(~valid[:, None, :], float("-inf")).amax(dim=2))
            return self.dense(self.dropout(torch.cat(pooled, dim=1))).squeeze(1)

    _CLASS["TextCNN"] = TextCNN
    return TextCNN


def pairing_loss(logits, logits_cf, kind: str = "mse", weight: float = 1.0):
    """The CLP pairing term on logits (tensors of equal shape; rows = examples). See the module docstring."""
    import torch

    if kind not in PAIR_LOSSES:
        raise ModelError(f"Unknown pairing loss '{kind}'; choose one of {', '.join(PAIR_LOSSES)}.")
    a, b = logits, logits_cf
    if a.shape != b.shape:
        raise ModelError(f"Logit shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}.")
    if kind == "mse":
        value = ((a - b) ** 2).mean()
    elif kind == "abs":
        value = (a - b).abs().mean()
    else:
        a2, b2 = (a.reshape(-1, 1), b.reshape(-1, 1)) if a.dim() == 1 else (a, b)
        value = (1.0 - torch.nn.functional.cosine_similarity(a2, b2, dim=1, eps=1e-12)).mean()
    return value * float(weight)


class TextClassifier:
    """A trained text CNN: ``predict_proba(texts) -> (n,)`` probabilities of label 1, always batched."""

    def __init__(self, module, config: TextCNNConfig) -> None:
        self.module = module
        self.config = config
        self.index = {tok: i for i, tok in enumerate(config.vocab)}
        self._terms = None
        module.eval()

    @property
    def terms(self):
        if self._terms is None and self.config.terms:
            from fairdesk.core.text.counterfactual import TermSet

            self._terms = TermSet.from_dict(self.config.terms)
        return self._terms

    def preprocess(self, texts) -> list[str]:
        texts = [str(t) for t in texts]
        if self.config.method == "blindness" and self.terms is not None:
            from fairdesk.core.text.counterfactual import mask_terms

            return [mask_terms(t, self.terms) for t in texts]
        return texts

    def encode(self, texts):
        """Token ids ``(n, L)`` (int64 tensor), padded with 0, cut at ``max_len``, at least the widest kernel."""
        import torch

        unk = 1
        rows = [[self.index.get(tok, unk) for tok in tokenize(t)][: self.config.max_len] for t in texts]
        width = max([len(r) for r in rows] + [max(self.config.kernel_sizes)])
        arr = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            arr[i, :len(r)] = r
        return torch.from_numpy(arr)

    def logits(self, texts, batch_size: int = 1024, progress: ProgressFn | None = None,
               cancel: CancelToken | None = None) -> np.ndarray:
        import torch

        texts = self.preprocess(texts)
        rep = Reporter(progress, cancel)
        out = np.empty(len(texts), dtype=np.float64)
        self.module.eval()
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                rep(start / max(len(texts), 1), f"scoring {start:,}/{len(texts):,}")
                stop = min(start + batch_size, len(texts))
                out[start:stop] = self.module(self.encode(texts[start:stop])).double().numpy()
        return out

    def predict_proba(self, texts, batch_size: int = 1024, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.logits(texts, batch_size, progress, cancel)))

    def __call__(self, texts) -> np.ndarray:
        return self.predict_proba(texts)

    def unknown_terms(self, terms) -> list[str]:
        """Terms (of a term set, name or file) with a token outside the vocabulary: the model reads them as
        ``<unk>``, so counterfactuals between two of them cannot change its score (a gap of 0 there means nothing;
        an audit should say so)."""
        from fairdesk.core.text.counterfactual import load_terms

        ts = load_terms(terms)
        return [f for forms in ts.forms for f in forms if any(tok not in self.index for tok in tokenize(f))]

    def save(self, folder: str | Path) -> Path:
        from safetensors.torch import save

        from fairdesk.core.guard import owned_folder

        folder = Path(folder)
        state = {k: v.detach().cpu().contiguous() for k, v in self.module.state_dict().items()}
        with owned_folder(folder, "a FairDesk text classifier"):  # refuses a folder holding anything FairDesk did not write
            atomic.write_bytes(folder / "model.safetensors", save(state))
            atomic.write_text(folder / "config.json", json.dumps(self.config.to_dict(), indent=1))
        return folder


def build_module(config: TextCNNConfig):
    return _module_class()(len(config.vocab), config.embed_dim, config.filters, config.kernel_sizes, config.dropout)


def load_text_classifier(folder: str | Path) -> TextClassifier:
    """A model folder written by :meth:`TextClassifier.save` (config.json + model.safetensors)."""
    from safetensors.torch import load_file

    folder = Path(folder)
    cfg_file, weights = folder / "config.json", folder / "model.safetensors"
    if not cfg_file.is_file() or not weights.is_file():
        raise ModelError(f"'{folder}' is not a FairDesk text classifier folder (needs config.json and "
                         "model.safetensors).")
    try:
        from fairdesk.core.jsonable import read_json_file
        config = TextCNNConfig.from_dict(read_json_file(cfg_file))
    except (ValueError, TypeError) as err:
        raise ModelError(f"{cfg_file} cannot be read as a text classifier config: {err}.") from err
    module = build_module(config)
    try:
        module.load_state_dict(load_file(str(weights)))
    except RuntimeError as err:
        raise ModelError(f"The weights in {weights} do not fit the architecture in config.json.") from err
    return TextClassifier(module, config)


def build_vocab(texts, terms=None, max_size: int = 30_000, min_count: int = 1) -> list[str]:
    """Specials, then the identity terms' tokens, then training tokens by frequency (ties alphabetical)."""
    from collections import Counter

    counts = Counter(tok for t in texts for tok in tokenize(t))
    vocab = list(SPECIALS)
    seen = set(vocab)
    if terms is not None:
        for forms in terms.forms:
            for f in forms:
                for tok in tokenize(f):
                    if tok not in seen:
                        seen.add(tok)
                        vocab.append(tok)
    for tok, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= max_size:
            break
        if c >= min_count and tok not in seen:
            seen.add(tok)
            vocab.append(tok)
    return vocab


# ==============================================================================================================
# Checkpoints (resume)

CHECKPOINT_FORMAT = "fairdesk.text_cnn_checkpoint/1"
_CKPT_RE = re.compile(r"^epoch-(\d{4,})$")


def epoch_seeds(seed: int, epoch: int) -> tuple[np.random.Generator, int]:
    """The numpy generator (counterfactual sampling, data order) and the torch seed (dropout) of epoch ``epoch``
    (0-based), derived from ``(seed, epoch)`` only."""
    base = int(seed) & 0xFFFF_FFFF_FFFF_FFFF  # SeedSequence takes non-negative integers
    torch_seed = int(np.random.SeedSequence([base, int(epoch), 1]).generate_state(1, np.uint64)[0] >> 1)
    return np.random.default_rng([base, int(epoch)]), torch_seed


def run_fingerprint(texts, labels, config: "TextCNNConfig", term_set=None) -> str:
    """SHA-256 over the training data and every setting that changes the weights (not the number of epochs)."""
    import hashlib

    h = hashlib.sha256()
    for t in texts:
        h.update(str(t).encode("utf-8"))
        h.update(b"\x00")
    h.update(np.asarray(labels, dtype=np.int64).tobytes())
    settings = {k: getattr(config, k) for k in ("embed_dim", "filters", "dropout", "max_len", "method", "lam",
                                                 "pair_loss", "seed", "lr", "batch_size")}
    settings["kernel_sizes"] = list(config.kernel_sizes)
    settings["terms"] = term_set.to_dict().get("sha256") if term_set is not None else None
    h.update(json.dumps(settings, sort_keys=True).encode())
    return h.hexdigest()


def checkpoints(folder: str | Path) -> list[Path]:
    """The complete checkpoint folders in ``folder``, oldest epoch first (temporary folders are ignored)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir()
             if p.is_dir() and (m := _CKPT_RE.match(p.name)) and (p / "state.json").is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(folder: str | Path) -> Path | None:
    found = checkpoints(folder)
    return found[-1] if found else None


def checkpoint_info(folder: str | Path) -> dict | None:
    """``{"epoch", "epochs", "method", "lam", "pair_loss", "seed", "path"}`` of the newest checkpoint in
    ``folder`` (None: none)."""
    ck = latest_checkpoint(folder)
    if ck is None:
        return None
    try:
        from fairdesk.core.jsonable import read_json_file
        state = read_json_file(ck / "state.json")
        cfg = state["config"]
        return {"epoch": int(state["epoch"]), "epochs": int(state.get("epochs_planned", state["epoch"])),
                "method": cfg.get("method"), "lam": cfg.get("lam"), "pair_loss": cfg.get("pair_loss"),
                "seed": cfg.get("seed"), "path": str(ck)}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clear_checkpoints(folder: str | Path) -> None:
    """Remove a checkpoint folder (after the finished model is saved)."""
    shutil.rmtree(Path(folder), ignore_errors=True)


def save_checkpoint(folder: str | Path, epoch: int, module, optimizer, config: "TextCNNConfig",
                    fingerprint: str, epochs_planned: int) -> Path:
    """Write checkpoint ``epoch-NNNN`` (``epoch`` finished epochs) atomically: a temporary folder renamed."""
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"epoch-{epoch:04d}"
    tmp = folder / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        weights = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
        save_file(weights, str(tmp / "weights.safetensors"))
        sd = optimizer.state_dict()
        tensors, scalars = {}, {}
        for pid, st in sd["state"].items():
            for key, value in st.items():
                if torch.is_tensor(value):
                    tensors[f"{pid}.{key}"] = value.detach().cpu().contiguous()
                else:
                    scalars.setdefault(str(pid), {})[key] = value
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in sd["param_groups"]]
        state = {"format": CHECKPOINT_FORMAT, "epoch": int(epoch), "epochs_planned": int(epochs_planned),
                 "fingerprint": fingerprint, "config": config.to_dict(),
                 "optimizer": {"param_groups": groups, "scalars": scalars, "tuples": ["betas"]},
                 "rng": {"seed": int(config.seed), "derivation": "numpy default_rng([seed, epoch]); torch seed "
                                                                 "SeedSequence([seed, epoch, 1])"}}
        with open(tmp / "state.json", "w", encoding="utf-8") as handle:
            handle.write(json.dumps(state, indent=1))
            handle.flush()
            os.fsync(handle.fileno())
        if final.exists():  # the same epoch again (a re-run): move the old one aside first
            old = folder / f".old-{final.name}-{os.getpid()}"
            os.replace(final, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for older in checkpoints(folder):
        if older != final:
            shutil.rmtree(older, ignore_errors=True)
    from fairdesk.core.guard import record_checkpoint

    record_checkpoint(folder)  # FairDesk's even if the run is killed before it ends (resume)
    return final


def _load_checkpoint(ck: Path, module, optimizer) -> dict:
    from safetensors.torch import load_file

    try:
        from fairdesk.core.jsonable import read_json_file
        state = read_json_file(ck / "state.json")
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ModelError(f"{ck} is not a FairDesk text-CNN checkpoint.")
        module.load_state_dict(load_file(str(ck / "weights.safetensors")))
        tensors = load_file(str(ck / "optimizer.safetensors"))
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        raise ModelError(f"The checkpoint {ck} cannot be read ({err}); delete it to train from the start.") from err
    opt_state: dict = {}
    for key, value in tensors.items():
        pid, name = key.split(".", 1)
        opt_state.setdefault(int(pid), {})[name] = value
    for pid, extra in state["optimizer"].get("scalars", {}).items():
        opt_state.setdefault(int(pid), {}).update(extra)
    groups = []
    for g in state["optimizer"]["param_groups"]:
        g = dict(g)
        for k in state["optimizer"].get("tuples", []):
            if isinstance(g.get(k), list):
                g[k] = tuple(g[k])
        groups.append(g)
    try:
        optimizer.load_state_dict({"state": opt_state, "param_groups": groups})
    except (ValueError, KeyError) as err:
        raise ModelError(f"The optimizer state in {ck} does not fit the model ({err}); delete the checkpoint to "
                         "train from the start.") from err
    return state


# ==============================================================================================================
# Training


def train_text_classifier(texts, labels, method: str = "baseline", terms="dixon_train", lam: float = 1.0,
                          pair_loss: str = "mse", epochs: int = 5, batch_size: int = 64, lr: float = 2e-3,
                          seed: int = 0, config: TextCNNConfig | None = None, progress: ProgressFn | None = None,
                          cancel: CancelToken | None = None, checkpoint_dir: str | Path | None = None,
                          resume: bool = False, on_epoch=None) -> TextClassifier:
    """Train a text CNN with one of :data:`METHODS`. Progress per batch, history (loss per epoch) in the config.

    ``terms``: a term set name, file or :class:`TermSet` (used by every method except ``baseline``; recorded).
    ``lam``: λ of CLP (ignored by other methods). Cancel is checked every batch.
    ``checkpoint_dir``: write a checkpoint there after every epoch (see the module docstring); nothing is written
    without it. ``resume``: continue from its newest checkpoint (none: start from the beginning); the returned
    config's ``resumed_from`` says from which epoch. ``on_epoch(record)``: called after every epoch (and, when
    resuming, for every restored epoch, with ``"restored": True``) with the history record plus ``"epochs"``.
    """
    import torch

    from fairdesk.core.text.counterfactual import counterfactuals, load_terms, random_counterfactual

    if method not in METHODS:
        raise ModelError(f"Unknown method '{method}'; choose one of {', '.join(METHODS)}.")
    if pair_loss not in PAIR_LOSSES:
        raise ModelError(f"Unknown pairing loss '{pair_loss}'; choose one of {', '.join(PAIR_LOSSES)}.")
    texts = ["" if t is None else str(t) for t in texts]
    y = np.asarray(labels)
    if len(texts) != len(y):
        raise DataError(f"{len(texts)} texts but {len(y)} labels.")
    if len(texts) < 2:
        raise DataError("At least two training texts are needed.")
    if not np.isin(y, (0, 1)).all():
        raise DataError("Labels must be 0 or 1 (1 = the positive class, e.g. toxic).")
    y = y.astype(np.float32)
    term_set = load_terms(terms) if terms is not None else None
    if method != "baseline" and term_set is None:
        raise ModelError(f"Method '{method}' needs a term set.")
    rep = Reporter(progress, cancel)
    torch.manual_seed(seed)

    train_texts, train_y = list(texts), y
    if method == "blindness":
        from fairdesk.core.text.counterfactual import mask_terms

        train_texts = [mask_terms(t, term_set) for t in texts]
    elif method == "augmentation":
        extra_t, extra_y = [], []
        for t, lab in zip(texts, y):
            for cf in counterfactuals(t, term_set):
                extra_t.append(cf.text)
                extra_y.append(lab)
        train_texts = train_texts + extra_t
        train_y = np.concatenate([y, np.asarray(extra_y, dtype=np.float32)])
    config = config or TextCNNConfig()
    config.vocab = build_vocab(train_texts, term_set)
    config.method, config.lam = method, float(lam if method in ("clp", "clp_nontox") else 0.0)
    config.pair_loss, config.seed, config.lr, config.batch_size = pair_loss, int(seed), float(lr), int(batch_size)
    config.terms = term_set.to_dict() if term_set is not None and method != "baseline" else None
    config.history = []
    fingerprint = run_fingerprint(texts, y, config, term_set)
    module = build_module(config)
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    start = 0
    if resume and checkpoint_dir is not None and (ck := latest_checkpoint(checkpoint_dir)) is not None:
        from fairdesk.core.jsonable import read_json_file
        peek = read_json_file(ck / "state.json")
        if peek.get("fingerprint") != fingerprint:
            raise ModelError(f"The checkpoint in {checkpoint_dir} belongs to a run with other data or settings "
                             "(method, λ, seed, …); choose another output folder, or train without resume.")
        state = _load_checkpoint(ck, module, opt)
        config = TextCNNConfig.from_dict(state["config"])
        start = int(state["epoch"])
        for rec in config.history:
            if on_epoch is not None:
                on_epoch({**rec, "epochs": max(epochs, start), "restored": True})
    config.resumed_from = start
    clf = TextClassifier(module, config)
    # Texts are preprocessed (blinding) already above, so encode directly.
    ids_all = clf.encode(train_texts)
    yt = torch.from_numpy(train_y)
    bce = torch.nn.BCEWithLogitsLoss()
    pairing = method in ("clp", "clp_nontox")
    n = len(train_texts)
    n_batches = (n + batch_size - 1) // batch_size
    kmax = max(config.kernel_sizes)
    for epoch in range(start, epochs):
        t0 = time.perf_counter()
        rng, torch_seed = epoch_seeds(seed, epoch)
        torch.manual_seed(torch_seed)
        cf_ids = has_cf = None
        if pairing:
            cfs = [random_counterfactual(t, term_set, rng) for t in texts]
            has = np.array([c is not None for c in cfs])
            if method == "clp_nontox":
                has &= (y == 0)
            has_cf = torch.from_numpy(has)
            cf_ids = clf.encode([c if c is not None else t for c, t in zip(cfs, texts)])
        order = torch.from_numpy(rng.permutation(n))
        module.train()
        total, total_pair = 0.0, 0.0
        for b in range(n_batches):
            rep((epoch + b / n_batches) / epochs, f"epoch {epoch + 1}/{epochs}, batch {b + 1}/{n_batches}")
            idx = order[b * batch_size:(b + 1) * batch_size]
            logits = module(_trim(ids_all[idx], kmax))
            loss = bce(logits, yt[idx])
            if pairing:
                mask = has_cf[idx]
                if bool(mask.any()):
                    lo = logits[mask]
                    lc = module(_trim(cf_ids[idx[mask]], kmax))
                    pl = pairing_loss(lo, lc, pair_loss, 1.0)
                    loss = loss + config.lam * pl
                    total_pair += pl.item() * len(idx)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        module.eval()
        record = {"epoch": epoch + 1, "loss": total / n, "pair_loss": total_pair / n if pairing else None,
                  "seconds": time.perf_counter() - t0}
        config.history.append(record)
        config.epochs = epoch + 1
        if checkpoint_dir is not None:  # before the cancel check below: a cancel keeps every finished epoch
            save_checkpoint(checkpoint_dir, epoch + 1, module, opt, config, fingerprint, epochs)
        if on_epoch is not None:
            on_epoch({**record, "epochs": epochs})
        rep((epoch + 1) / epochs, f"epoch {epoch + 1}/{epochs}: loss {total / n:.4f}")
    config.epochs = max(start, epochs)
    return clf


def _trim(ids, min_width: int):
    """Drop all-padding columns at the right of a batch (keeps at least ``min_width`` for the widest kernel)."""
    nonzero = (ids != 0).any(dim=0).nonzero()
    width = max(int(nonzero.max()) + 1 if len(nonzero) else 0, min_width)
    return ids[:, :width]
