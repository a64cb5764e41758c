"""Counterfactual-invariance audit of an image classifier (METHODS §6), on predictions already computed.

The caller (CLI, job, test) runs the classifier on

* the originals ``x``                                         → ``pred[name]``           (n,)
* the counterfactuals ``x_cf`` under do(A = a′), a′ = 1 − a     → ``pred_cf[name]``        (n,)
* the null-intervention reconstructions (a′ = a), learned
  generators only                                             → ``pred_null[name]``      (n,)
* horizontally flipped originals (the null baseline)          → ``pred_flip[name]``      (n,)

and supplies a representation ``z`` of each unit (the generator's DDIM-inverted latent, or for an exact benchmark
its A-independent exogenous features). :func:`audit_images` then reports, per output:

* the default conditional-invariance test (weighted GCM of Ŷ ⟂ A | Z), the published CIT-LR (t, p) and the DP /
  EO Welch tests, each with Benjamini–Hochberg q across outputs (004 Tables 12–13 layout, via
  :func:`fairdesk.core.audits.cit.invariance_table`);
* the oriented prediction shift per direction a → a′ with its CI, the flip rate, and a TOST verdict at a
  user margin. The shift is f(x_cf) − f(x_ref) where x_ref is the original for exact counterfactuals and the
  null-intervention reconstruction for a learned generator, so reconstruction artefacts common to both cancel;
* the flip baseline: mean |f(flip x) − f(x)| with a CI (how much an attribute-irrelevant change moves the output);
* with a learned generator, the NEGATIVE-CONTROL BAND: the upper confidence bound of the mean |shift| that a
  classifier known to ignore the attribute shows through the same generator (``control``). A shift inside it is
  "inconclusive", never "dependent" ("biased"). Without a control, verdicts from a learned generator are marked
  provisional in the notes.

Everything in the result is JSON-serialisable and carries provenance. numpy at module level only.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from fairdesk.core import provenance as prov
from fairdesk.core.audits import cit
from fairdesk.core.errors import DataError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

GENERATOR_KINDS = ("exact", "learned")


@dataclass
class ImageAuditResult:
    table: list[dict]                 # one row per output: tests (t, p, q) + flip baseline + shift verdict
    effects: dict[str, dict]          # output → oriented_effect(...).to_dict()
    control_band: float | None
    control_effect: dict | None       # the control classifier's oriented effect through the generator
    scatter: dict[str, dict]          # output → {"a→a'": {"x": [...], "y": [...]}, "flip": {...}}
    settings: dict
    notes: list[str]
    provenance: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return jsonable(asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)

    def verdicts(self) -> dict[str, str]:
        return {name: eff["verdict"] for name, eff in self.effects.items()}


def _mean_abs_upper(d: np.ndarray, alpha: float) -> float:
    from scipy.stats import t as t_dist

    d = np.abs(np.asarray(d, float))
    if len(d) < 2:
        return float(d.mean()) if len(d) else float("nan")
    return float(d.mean() + t_dist.ppf(1 - alpha, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))


def control_band(ctrl_ref, ctrl_cf, a, alpha: float = 0.05) -> float:
    """The negative-control band: the largest (over directions a → a′) one-sided upper (1 − alpha) bound of the mean
    |f(x_cf) − f(x_ref)| of a classifier known to ignore the attribute, seen through the same generator."""
    ctrl_ref = cit._as_1d(ctrl_ref, "control pred_null")
    ctrl_cf = cit._as_1d(ctrl_cf, "control pred_cf")
    a = cit._binary_attr(a)
    cit._check_lengths(ref=ctrl_ref, cf=ctrl_cf, a=a)
    d = ctrl_cf - ctrl_ref
    return max(_mean_abs_upper(d[a == v], alpha) for v in np.unique(a))


def _flip_baseline(pred: np.ndarray, pred_flip: np.ndarray, alpha: float) -> dict:
    d = pred_flip - pred
    return {"flip_mean_abs_shift": float(np.abs(d).mean()), "flip_upper": _mean_abs_upper(d, alpha),
            "flip_mean_shift": float(d.mean())}


def _scatter(x: np.ndarray, y: np.ndarray, a: np.ndarray, max_points: int, seed: int) -> dict:
    out = {}
    rng = np.random.default_rng(seed)
    for v in np.unique(a):
        idx = np.flatnonzero(a == v)
        if len(idx) > max_points:
            idx = np.sort(rng.choice(idx, max_points, replace=False))
        out[f"{int(v)}->{int(1 - v)}"] = {"x": x[idx].tolist(), "y": y[idx].tolist(), "index": idx.tolist()}
    return out


def audit_images(pred: dict, pred_cf: dict, a, z, *, pred_null: dict | None = None, pred_flip: dict | None = None,
                 labels: dict | None = None, control: dict | None = None, generator: str = "exact",
                 margin: float = 0.02, alpha: float = 0.05, method: str = cit.DEFAULT_METHOD,
                 regressor: str = cit.DEFAULT_REGRESSOR, n_folds: int = 5, published: bool = True, seed: int = 0,
                 split: tuple | None = None, max_scatter: int = 500, provenance: dict | None = None,
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> ImageAuditResult:
    """Counterfactual-invariance audit of one classifier's outputs for a 0/1 attribute (see the module docstring).

    ``pred``, ``pred_cf``, ``pred_null``, ``pred_flip``: dicts output name → (n,) predictions (scores in [0, 1] or
    hard 0/1). ``labels``: output name → (n,) true labels, for EO. ``control``: ``{"pred_null": (n,), "pred_cf":
    (n,)}`` (optionally ``"pred"`` on the originals, which also runs the invariance test on the control, and
    ``"name"``) for a classifier known to ignore the attribute. ``generator``: "exact"
    (rendered counterfactuals; reference = originals) or "learned" (reference = ``pred_null``, required).
    ``split``: (train_idx, test_idx) for the published CIT-LR (use a patient-disjoint one).
    """
    rep = Reporter(progress, cancel)
    if generator not in GENERATOR_KINDS:
        raise DataError(f"generator must be one of {GENERATOR_KINDS}.")
    if not pred:
        raise DataError("No classifier outputs to audit.")
    a = cit._binary_attr(a)
    z = cit._as_2d(z)
    n = len(a)
    if z.shape[0] != n:
        raise DataError(f"z has {z.shape[0]} rows but there are {n} images.")
    names = list(pred)
    for d, what in ((pred_cf, "pred_cf"), (pred_null, "pred_null"), (pred_flip, "pred_flip")):
        if d is not None and set(d) != set(names):
            raise DataError(f"{what} must have the same outputs as pred: {sorted(names)}.")
    if pred_cf is None or set(pred_cf) != set(names):
        raise DataError("pred_cf (predictions on the counterfactuals) is required for every output.")
    if generator == "learned" and pred_null is None:
        raise DataError("With a learned generator, give predictions on the null-intervention reconstructions "
                        "(a' = a) so that generator artefacts are not mistaken for attribute dependence.")
    arrays = {}
    for name in names:
        arrays[name] = {k: cit._as_1d(src[name], f"{k}[{name}]")
                        for k, src in (("pred", pred), ("cf", pred_cf), ("null", pred_null), ("flip", pred_flip))
                        if src is not None}
        for k, arr in arrays[name].items():
            if len(arr) != n:
                raise DataError(f"{k}[{name}] has {len(arr)} values for {n} images.")

    notes: list[str] = []
    band = None
    control_eff = None
    if control is not None:
        c_ref = control.get("pred_null", control.get("pred"))
        band = control_band(c_ref, control["pred_cf"], a, alpha)
        control_eff = cit.oriented_effect(c_ref, control["pred_cf"], a, margin=margin, alpha=alpha).to_dict()
        control_eff["name"] = control.get("name", "negative control")
        if control.get("pred") is not None:
            ctest = cit.cit_test(cit._as_1d(control["pred"], "control pred"), a, z, method, regressor, n_folds, seed,
                                 cancel=rep.cancel)
            control_eff["test_p"] = ctest.p_value
            control_eff["test_statistic"] = ctest.statistic
            if ctest.p_value < alpha:
                notes.append(f"The invariance test also flags the negative control (p = {ctest.p_value:.3g}) with "
                             "this representation Z: conditioning on a learned latent that mixes the attribute and "
                             "the disease can create dependence (collider bias), so the test's p-values are not "
                             "evidence on their own here; rely on the shifts against the control band.")
        notes.append(f"Negative-control band ±{band:.3g}: the upper {100 * (1 - alpha):g}% bound of the mean "
                     f"|shift| of '{control_eff['name']}', a classifier known to ignore the attribute, through the "
                     "same generator. Shifts inside it are reported as inconclusive, never as dependence.")
    elif generator == "learned":
        notes.append("No negative control was given: with a learned generator, part of any shift may be a generator "
                     "artefact, so a 'dependent' verdict is provisional.")
    if generator == "exact":
        notes.append("Counterfactuals are exact (rendered from the known mechanism); shifts are measured against "
                     "the original images.")
    else:
        notes.append("Shifts are measured against the null-intervention reconstruction (a' = a), not the raw image.")

    rep(0.02, "invariance tests")
    table = cit.invariance_table({k: arrays[k]["pred"] for k in names}, a, z,
                                 y=None if labels is None else {k: labels[k] for k in names if k in labels},
                                 method=method, regressor=regressor, published=published, n_folds=n_folds, seed=seed,
                                 split=split, progress=rep.sub(0.02, 0.9), cancel=rep.cancel)
    effects: dict[str, dict] = {}
    scatter: dict[str, dict] = {}
    for row, name in zip(table, names):
        rep.check()
        arr = arrays[name]
        ref = arr["pred"] if generator == "exact" else arr["null"]
        eff = cit.oriented_effect(ref, arr["cf"], a, margin=margin, alpha=alpha, control_band=band)
        effects[name] = eff.to_dict()
        for e in eff.directions:
            key = f"{e.source}->{e.target}"
            row[f"shift_{key}"] = e.mean_shift
            row[f"shift_{key}_ci"] = [e.ci_low, e.ci_high]
            row[f"flip_rate_{key}"] = e.flip_rate
            row[f"p_tost_{key}"] = e.p_tost
        row["verdict"] = eff.verdict
        if "null" in arr:
            row["reconstruction_mean_abs_shift"] = float(np.abs(arr["null"] - arr["pred"]).mean())
        scatter[name] = _scatter(ref, arr["cf"], a, max_scatter, seed)
        if "flip" in arr:
            row.update(_flip_baseline(arr["pred"], arr["flip"], alpha))
            scatter[name]["flip"] = _scatter(arr["pred"], arr["flip"], a, max_scatter, seed)
    settings = {"generator": generator, "margin": margin, "alpha": alpha, "method": method, "regressor": regressor,
                "n_folds": n_folds, "published": published, "n": n, "z_dim": int(z.shape[1]),
                "outputs": names, "shift_reference": "original" if generator == "exact" else "null reconstruction"}
    record = prov.make(seed, (provenance or {}).get("data_sha256"), (provenance or {}).get("model_hashes"),
                       **{k: v for k, v in (provenance or {}).items() if k not in ("data_sha256", "model_hashes")})
    rep(1.0, "counterfactual-invariance audit done")
    return ImageAuditResult(table, effects, band, control_eff, scatter, settings, notes, record)


# ==============================================================================================================
# End to end: classifier + learned generator → audit


def pool_latent(z_t: np.ndarray, channels: int, size: int, pool: int = 4) -> np.ndarray:
    """Average-pool flattened latents (n, channels·size·size) to (n, channels·pool·pool): the representation Z."""
    z = np.asarray(z_t, dtype=float).reshape(len(z_t), channels, size, size)
    if pool >= size:
        return z.reshape(len(z), -1)
    f = size // pool
    return z[:, :, :f * pool, :f * pool].reshape(len(z), channels, pool, f, pool, f).mean(axis=(3, 5)).reshape(
        len(z), -1)


def audit_with_generator(images: np.ndarray, a, classifier, generator, labels: dict | None = None,
                         control=None, attribute_classifier=None, steps: int | None = None, strength: float = 1.0,
                         guidance: float = 1.0, margin: float = 0.02, alpha: float = 0.05, z_pool: int = 8,
                         seed: int = 0, provenance: dict | None = None, progress: ProgressFn | None = None,
                         cancel: CancelToken | None = None, **audit_kw) -> tuple[ImageAuditResult, dict]:
    """Generate counterfactuals (null intervention + flipped attribute, batched), run ``classifier`` (images →
    (n, k) probabilities; ``classifier.outputs`` names them, else "output_j") on originals, counterfactuals,
    reconstructions and flips, and audit with ``generator="learned"``. ``control``: a classifier known to ignore
    the attribute (images → (n,) or (n, 1)), for the negative-control band. ``attribute_classifier``: images →
    P(A = 1), for effectiveness. Z is the DDIM-inverted latent, average-pooled to ``z_pool``×``z_pool``.

    Returns the result and the images ``{"null", "cf"}`` (for the diff viewer and the report).
    """
    rep = Reporter(progress, cancel)
    a = cit._binary_attr(a)
    images = np.asarray(images, dtype=np.float32)
    cfg = generator.config
    out = generator.counterfactuals(images, a, targets=[0, 1], steps=steps, strength=strength, guidance=guidance,
                                    return_latent=True, progress=rep.sub(0.0, 0.7), cancel=rep.cancel)
    x_null = np.where(a[:, None, None] == 1, out[1], out[0])
    x_cf = np.where(a[:, None, None] == 1, out[0], out[1])
    z = pool_latent(out["z_T"], cfg.latent_channels, cfg.latent_size, z_pool)
    rep(0.72, "classifier predictions")

    def run(clf, imgs):
        p = np.asarray(clf(imgs), dtype=float)
        return p.reshape(len(imgs), -1)

    names = list(getattr(classifier, "outputs", ()))
    preds = {k: run(classifier, x) for k, x in (("pred", images), ("cf", x_cf), ("null", x_null),
                                                 ("flip", images[:, :, ::-1].copy()))}
    if not names:
        names = [f"output_{j}" for j in range(preds["pred"].shape[1])]
    if len(names) != preds["pred"].shape[1]:
        raise DataError(f"The classifier returns {preds['pred'].shape[1]} outputs for {len(names)} names.")
    as_dict = {k: {n: v[:, j] for j, n in enumerate(names)} for k, v in preds.items()}
    ctrl = None
    if control is not None:
        ctrl = {"pred_null": run(control, x_null)[:, 0], "pred_cf": run(control, x_cf)[:, 0],
                "pred": run(control, images)[:, 0],
                "name": getattr(control, "name", "negative-control classifier")}
    rep.check()
    result = audit_images(as_dict["pred"], as_dict["cf"], a, z, pred_null=as_dict["null"], pred_flip=as_dict["flip"],
                          labels=labels, control=ctrl, generator="learned", margin=margin, alpha=alpha, seed=seed,
                          provenance=provenance, progress=rep.sub(0.75, 1.0), cancel=rep.cancel, **audit_kw)
    quality = {"composition_l1_1": float(np.abs(x_null - images).mean())}
    if attribute_classifier is not None:
        p_cf = np.asarray(attribute_classifier(x_cf), float).reshape(-1)
        p_real = np.asarray(attribute_classifier(images), float).reshape(-1)
        quality["effectiveness"] = float(np.mean((p_cf > 0.5) == (1 - a)))
        quality["attribute_accuracy_real"] = float(np.mean((p_real > 0.5) == a))
    result.settings.update(steps=int(steps or cfg.default_steps), strength=strength, guidance=guidance,
                           z="DDIM-inverted latent z_T under the observed a, average-pooled to "
                             f"{min(z_pool, cfg.latent_size)}×{min(z_pool, cfg.latent_size)}",
                           quality=quality)
    return result, {"null": x_null, "cf": x_cf}


# ==============================================================================================================
# The whole pipeline on an image dataset (shared by ``fairdesk-cli audit cit`` and the project job), and the JSON
# document it produces: result + quality + examples with their images encoded inside the JSON.

#: How example images are stored in the document: a ZIP of ``.npy`` arrays (no pickles; ``np.load`` with
#: ``allow_pickle=False``), base64-encoded. Images are uint16 = round(pixel · 65535) (pixels in [0, 1]).
EXAMPLE_ENCODING = "npz+base64; images uint16 = round(pixel * 65535)"
_IMAGE_SCALE = 65535.0


def encode_arrays(arrays: dict[str, np.ndarray]) -> str:
    """A dict of plain numeric arrays → base64 of an ``.npz`` (deterministic bytes: fixed ZIP timestamps)."""
    import base64
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            arr = np.ascontiguousarray(arrays[name])
            if arr.dtype == object:
                raise DataError(f"Array '{name}' holds Python objects; only numeric arrays can be stored.")
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            member = io.BytesIO()
            np.lib.format.write_array(member, arr, allow_pickle=False)
            zf.writestr(info, member.getvalue())
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_arrays(text: str) -> dict[str, np.ndarray]:
    """Inverse of :func:`encode_arrays` (never unpickles)."""
    import base64
    import binascii
    import io

    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (binascii.Error, ValueError, OSError) as err:
        raise DataError(f"The example images stored with this audit are damaged ({type(err).__name__}: {err}). "
                        "Run the audit again.") from None


def to_uint16(images: np.ndarray) -> np.ndarray:
    return np.round(np.clip(np.asarray(images, np.float64), 0.0, 1.0) * _IMAGE_SCALE).astype(np.uint16)


def from_uint16(images: np.ndarray) -> np.ndarray:
    return (np.asarray(images, np.float64) / _IMAGE_SCALE).astype(np.float32)


def decode_examples(doc: dict) -> dict[str, np.ndarray]:
    """The example images of a ``cit_images`` document as float32 in [0, 1]: ``original``, ``null``, ``cf``
    (m, H, W) and ``diff`` = cf − null (signed; what the diff viewer shows), row j ↔ ``doc["examples"]["items"][j]``."""
    ex = doc.get("examples") or {}
    if not ex.get("npz_base64"):
        return {}
    arrays = decode_arrays(ex["npz_base64"])
    out = {k: from_uint16(v) for k, v in arrays.items() if v.dtype == np.uint16}
    out.update({k: v for k, v in arrays.items() if v.dtype != np.uint16})
    if "cf" in out and "null" in out:
        out["diff"] = out["cf"] - out["null"]
    return out


class AttributeProbe:
    """The attribute classifier for EFFECTIVENESS: an L2 logistic regression on the PCA features of the real
    training images (fitted here, offline). Its accuracy on held-out real images is reported beside the
    effectiveness, so a weak probe is visible."""

    def __init__(self, images: np.ndarray, a: np.ndarray, n_components: int = 32, seed: int = 0) -> None:
        from sklearn.linear_model import LogisticRegression

        from fairdesk.core.generation.images import PCAFeatures

        k = int(min(n_components, len(images) - 1, np.prod(np.asarray(images).shape[1:])))
        self.features = PCAFeatures(images, n_components=max(k, 1), seed=seed)
        self.model = LogisticRegression(C=1.0, max_iter=2000, random_state=seed)
        self.model.fit(self.features(images), np.asarray(a).astype(int))
        self.name = f"logistic regression on {self.features.components.shape[0]} PCA features of the real training images"

    def __call__(self, images: np.ndarray) -> np.ndarray:
        return self.model.predict_proba(self.features(images))[:, 1]


def _file_or_folder_sha256(path) -> str:
    """SHA-256 over a file, or over every file of a folder (relative names and bytes, sorted) but its training
    record (:mod:`fairdesk.core.models.training_record`, which states this hash) and FairDesk's manifest of the
    folder (:data:`fairdesk.core.guard.MARKER`, rewritten whenever FairDesk writes there)."""
    import hashlib
    from pathlib import Path

    from fairdesk.core.guard import MARKER
    from fairdesk.core.models.training_record import RECORD_FILE

    path = Path(path)
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.relative_to(path) not in (Path(RECORD_FILE),
                                                                                              Path(MARKER))) \
        if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def model_sha256(path) -> str:
    """Hash of a classifier / generator file or folder (weights and configuration), for provenance."""
    from pathlib import Path

    if not Path(path).exists():
        raise DataError(f"'{path}' does not exist.")
    return _file_or_folder_sha256(path)


def _pick_examples(change: np.ndarray, n_examples: int, n_random: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((np.arange(len(change)), -change))       # largest change first, ties by position
    top = order[:min(n_examples, len(change))]
    rest = np.setdiff1d(np.arange(len(change)), top)
    rnd = np.sort(np.random.default_rng(seed).choice(rest, min(n_random, len(rest)), replace=False)) \
        if len(rest) and n_random > 0 else np.zeros(0, int)
    return top, rnd


def run_cit_pipeline(ds, classifier, generator, attribute: str, *, labels: tuple[str, ...] | dict | None = None,
                     control=None, splits=None, split: str = "test", split_seed: int = 0, max_images: int = 0,
                     positive=None, steps: int | None = None, strength: float = 1.0, guidance: float = 1.0,
                     margin: float = 0.02, alpha: float = 0.05, seed: int = 0, n_examples: int = 16,
                     n_random_examples: int = 4, quality: bool = True, full_quality: bool = False,
                     max_train_images: int = 1000,
                     provenance: dict | None = None, progress: ProgressFn | None = None,
                     cancel: CancelToken | None = None) -> dict:
    """The counterfactual-invariance audit of an image dataset, end to end; returns the JSON document.

    ``ds``: an :class:`~fairdesk.core.data.images.ImageDataset` (readable images only). ``classifier``: images →
    (n, k) probabilities with ``.outputs`` (an :class:`~fairdesk.core.models.image_classifier.ImageClassifier`).
    ``generator``: a :class:`~fairdesk.core.generation.images.CounterfactualGenerator`. ``attribute``: the column
    (two values, or ``positive`` = the value(s) forming group 1 — one value vs the rest, see
    :func:`~fairdesk.core.data.images.binarise_attribute`). ``labels``: the true-label column per output (tuple in
    output order, or dict output → column; default: columns named like the outputs), used for EO; missing labels
    are left out of EO. ``control``: a classifier known to ignore the attribute (the negative-control band).
    ``splits``: train/val/test per row (default: the patient-disjoint split with ``split_seed``); the audit runs on
    ``split`` ("all" for every row), at most ``max_images`` of them (random, ``seed``), and the quality probes
    (attribute classifier for effectiveness, PCA features for the Fréchet distance) are fitted on the "train" rows.
    ``full_quality``: also composition after 10 cycles and reversibility (a → a′ → a), on at most 32 audited images
    (eleven more generator passes over them).

    The document is ``ImageAuditResult.to_dict()`` plus ``kind``, ``attribute``, ``dataset``, ``unreadable``,
    ``quality`` and ``examples`` (the ``n_examples`` units with the largest |prediction change| and
    ``n_random_examples`` random ones: predictions and images original / null reconstruction / counterfactual,
    encoded by :func:`encode_arrays`; decode with :func:`decode_examples`).
    """
    import pandas as pd

    from fairdesk.core.data.images import binarise_attribute, load_images
    from fairdesk.core.generation.images import PCAFeatures, frechet_distance

    rep = Reporter(progress, cancel)
    table = ds.table
    if attribute not in table.columns:
        raise DataError(f"The attribute column '{attribute}' is not in the image table; available columns: "
                        f"{[c for c in table.columns if not str(c).startswith('_')][:20]}.")
    outputs = list(getattr(classifier, "outputs", ()) or ())
    if not outputs:
        raise DataError("The classifier does not name its outputs.")
    if labels is None or (not isinstance(labels, dict) and not labels):
        label_map = {o: o for o in outputs if o in table.columns}
    elif isinstance(labels, dict):
        label_map = dict(labels)
    else:
        labels = list(labels)
        if len(labels) != len(outputs):
            raise DataError(f"{len(labels)} label column(s) for the classifier's {len(outputs)} output(s) "
                            f"{outputs}; give one label column per output, in order.")
        label_map = dict(zip(outputs, labels))
    missing = [c for c in label_map.values() if c not in table.columns]
    if missing:
        raise DataError(f"Label column(s) {missing} are not in the image table.")
    gen_attr = (generator.meta or {}).get("attribute") if hasattr(generator, "meta") else None

    rep(0.0, "choosing the images to audit")
    if splits is None:
        splits = ds.split(seed=split_seed)
    splits = np.asarray(splits, dtype=object)
    a_all, names, known = binarise_attribute(table[attribute], attribute, positive)
    if gen_attr and ((gen_attr.get("values") and list(gen_attr["values"]) != names) or
                     (gen_attr.get("column") and gen_attr["column"] != attribute)):
        raise DataError(f"The generator was trained on '{gen_attr.get('column')}' with groups "
                        f"{gen_attr.get('values')}, but the audit codes '{attribute}' as {names}. Use a generator "
                        "trained on the same attribute and grouping (if it is the same attribute under another "
                        "name, rename the column).")
    in_split = np.ones(len(table), bool) if split == "all" else splits == split
    if split != "all" and not in_split.any():
        raise DataError(f"No readable image is in the '{split}' split.")
    part = np.flatnonzero(in_split & known)
    n_missing_attr = int((in_split & ~known).sum())
    if max_images and len(part) > max_images:
        part = np.sort(np.random.default_rng(seed).choice(part, max_images, replace=False))
    if len(part) < 20:
        raise DataError(f"Only {len(part)} readable images with a known '{attribute}' in the '{split}' split; the "
                        "audit needs at least 20.")
    a = a_all[part]
    if len(np.unique(a)) < 2:
        raise DataError(f"All audited images are in one group of '{attribute}' ({names[int(a[0])]}); the audit needs "
                        "both groups in the audited split.")
    size = generator.config.image_size
    images = load_images(table["_file"].iloc[part], size, rep.sub(0.0, 0.05), rep.cancel)
    lab = None
    if label_map:
        lab = {o: np.asarray(pd.to_numeric(table[c].iloc[part], errors="coerce"), dtype=float)
               for o, c in label_map.items()}
        lab = {o: np.nan_to_num(v, nan=-1.0) for o, v in lab.items()}   # missing → not a positive, out of EO

    probe = feats = None
    train_rows = np.flatnonzero((splits == "train") & known)
    if quality and len(train_rows) >= 10 and len(np.unique(a_all[train_rows])) == 2:
        rep(0.05, "fitting the quality probes on the training split")
        if len(train_rows) > max_train_images:
            train_rows = np.sort(np.random.default_rng(seed + 1).choice(train_rows, max_train_images, replace=False))
        train_imgs = load_images(table["_file"].iloc[train_rows], size, rep.sub(0.05, 0.1), rep.cancel)
        probe = AttributeProbe(train_imgs, a_all[train_rows], seed=seed)
        feats = PCAFeatures(train_imgs, n_components=int(min(32, len(train_imgs) - 1)), seed=seed)

    prov_extra = dict(provenance or {})
    prov_extra.setdefault("attribute", attribute)
    prov_extra["attribute_values"] = names
    result, gen_images = audit_with_generator(
        images, a, classifier, generator, labels=lab, control=control, attribute_classifier=probe, steps=steps,
        strength=strength, guidance=guidance, margin=margin, alpha=alpha, seed=seed, provenance=prov_extra,
        progress=rep.sub(0.1, 0.95), cancel=rep.cancel)
    rep(0.95, "counterfactual quality and examples")
    x_null, x_cf = gen_images["null"], gen_images["cf"]
    q = result.settings.get("quality", {})
    if probe is not None:
        q["effectiveness_classifier"] = probe.name
    if feats is not None and len(images) > 2:
        q["frechet_cf"] = frechet_distance(feats, images, x_cf)["frechet_distance"]
        q["frechet_null"] = frechet_distance(feats, images, x_null)["frechet_distance"]
        q["frechet_feature_extractor"] = feats.name
    q["mean_abs_change_cf_vs_null"] = float(np.abs(x_cf - x_null).mean())
    if full_quality:
        from fairdesk.core.generation.images import composition, reversibility

        m = min(32, len(images))
        kw = dict(steps=steps, strength=strength, guidance=guidance)
        comp = composition(generator, images[:m], a[:m], cycles=(1, 10), cancel=rep.cancel, **kw)
        q["composition_l1_10"] = comp["l1_10"]
        q["reversibility_l1"] = reversibility(generator, images[:m], a[:m], cancel=rep.cancel, **kw)
        q["full_quality_n"] = m
    result.settings["quality"] = q

    # examples: the units with the largest |prediction change| (cf vs null) and a few random ones
    preds = {k: np.asarray(classifier(x), float).reshape(len(x), -1)
             for k, x in (("original", images), ("cf", x_cf), ("null", x_null))}
    change = np.abs(preds["cf"] - preds["null"]).max(axis=1)
    top, rnd = _pick_examples(change, n_examples, n_random_examples, seed)
    chosen = np.concatenate([top, rnd]).astype(int)
    items = []
    for j, i in enumerate(chosen):
        items.append({"slot": j, "index": int(i), "row": int(part[i]), "file": str(table["_file"].iloc[part[i]]),
                      "observed": int(a[i]), "target": int(1 - a[i]),
                      "observed_label": names[int(a[i])], "target_label": names[int(1 - a[i])],
                      "selected": "largest change" if j < len(top) else "random",
                      "max_abs_change": float(change[i]),
                      "predictions": {o: {k: float(preds[k][i, c]) for k in ("original", "null", "cf")}
                                      for c, o in enumerate(outputs)},
                      "l1_null_vs_original": float(np.abs(x_null[i] - images[i]).mean()),
                      "l1_cf_vs_null": float(np.abs(x_cf[i] - x_null[i]).mean())})
    enc = encode_arrays({"original": to_uint16(images[chosen]), "null": to_uint16(x_null[chosen]),
                         "cf": to_uint16(x_cf[chosen])}) if len(chosen) else ""
    doc = result.to_dict()
    doc["kind"] = "cit_images"
    doc["attribute"] = {"column": attribute, "values": names, "positive": None if positive is None else
                        [str(v) for v in (positive if isinstance(positive, (list, tuple, set)) else [positive])]}
    doc["dataset"] = {"n_readable": int(len(table)), "split": split, "n_audited": int(len(part)),
                      "n_missing_attribute": n_missing_attr, "labels": label_map,
                      "n_per_group": {names[v]: int((a == v).sum()) for v in (0, 1)}}
    doc["unreadable"] = list(ds.unreadable)
    doc["quality"] = q
    doc["examples"] = {"encoding": EXAMPLE_ENCODING, "npz_base64": enc, "items": items,
                       "shape": list(images.shape[1:])}
    rep(1.0, "counterfactual-invariance audit done")
    return jsonable(doc)


# ==============================================================================================================
# "Folder of predictions": the classifier's outputs computed elsewhere, audited without a generator

PREDICTION_TABLE_COLUMNS = """\
One row per audited unit (image). Columns:

* the attribute column (name given by the user; two values, or choose ``positive`` for one value vs the rest);
* per classifier output NAME: ``NAME`` = prediction on the original image (probability in [0, 1] or 0/1) and
  ``NAME__cf`` = prediction on its counterfactual under the flipped attribute; optionally ``NAME__null`` =
  prediction on the null-intervention reconstruction (a' = a; when present for every output, the counterfactuals
  are treated as coming from a LEARNED generator and shifts are measured against it), ``NAME__flip`` = prediction
  on the horizontally flipped original (the null baseline) and ``NAME__label`` = the true label (for EO);
* the representation the invariance tests condition on: one or more columns ``z_0``, ``z_1``, … (e.g. the
  generator's inverted latent, or known exogenous features of a simulation);
* optional ``control``, ``control__cf`` and ``control__null``: a classifier known to ignore the attribute (sets
  the negative-control band); optional ``patient_id`` and ``file`` (kept for reference).
"""


def _prediction_outputs(df) -> list[str]:
    suffixes = ("__cf", "__null", "__flip", "__label")
    names = [c[:-4] for c in df.columns if str(c).endswith("__cf") and c[:-4] != "control"]
    return [n for n in names if n in df.columns and not any(n.endswith(s) for s in suffixes)]


def audit_prediction_table(df, attribute: str, *, positive=None, margin: float = 0.02, alpha: float = 0.05,
                           seed: int = 0, provenance: dict | None = None, progress: ProgressFn | None = None,
                           cancel: CancelToken | None = None) -> dict:
    """Audit precomputed predictions on originals and counterfactuals (columns: :data:`PREDICTION_TABLE_COLUMNS`)
    with :func:`audit_images`; returns the same kind of document as :func:`run_cit_pipeline` (without example
    images and generator quality, which need the images)."""
    import pandas as pd

    from fairdesk.core.data.images import binarise_attribute

    if attribute not in df.columns:
        raise DataError(f"The attribute column '{attribute}' is not in the predictions table; available columns: "
                        f"{list(df.columns)[:20]}.")
    outputs = _prediction_outputs(df)
    if not outputs:
        raise DataError("No classifier output found: the predictions table needs, per output NAME, a column NAME "
                        "(prediction on the original) and NAME__cf (on the counterfactual). " +
                        PREDICTION_TABLE_COLUMNS.splitlines()[0])
    zcols = sorted((c for c in df.columns if str(c).startswith("z_")), key=lambda c: (len(str(c)), str(c)))
    if not zcols:
        raise DataError("The invariance tests condition on a representation Z of each unit: add columns z_0, "
                        "z_1, … (e.g. the generator's inverted latent, or the exogenous features of a "
                        "simulation).")
    a, names, known = binarise_attribute(df[attribute], attribute, positive)
    cols = [c for o in outputs for c in (o, f"{o}__cf", f"{o}__null", f"{o}__flip") if c in df.columns] + zcols
    num = df[cols].apply(pd.to_numeric, errors="coerce")
    ok = known & num.notna().all(axis=1).to_numpy()
    dropped = int((~ok).sum())
    d, a = df[ok].reset_index(drop=True), a[ok]
    num = num[ok].reset_index(drop=True)
    if len(d) < 20:
        raise DataError(f"Only {len(d)} rows have the attribute and every prediction; the audit needs at least 20.")
    learned = all(f"{o}__null" in df.columns for o in outputs)
    get = lambda suffix: {o: num[f"{o}{suffix}"].to_numpy(float) for o in outputs}  # noqa: E731
    pred, pred_cf = get(""), get("__cf")
    pred_null = get("__null") if learned else None
    pred_flip = get("__flip") if all(f"{o}__flip" in df.columns for o in outputs) else None
    labels = None
    if any(f"{o}__label" in df.columns for o in outputs):
        labels = {o: np.nan_to_num(pd.to_numeric(d[f"{o}__label"], errors="coerce").to_numpy(float), nan=-1.0)
                  for o in outputs if f"{o}__label" in df.columns}
    control = None
    if {"control", "control__cf"} <= set(df.columns):
        ref = "control__null" if learned and "control__null" in df.columns else "control"
        control = {"pred_null": pd.to_numeric(d[ref], errors="coerce").to_numpy(float),
                   "pred_cf": pd.to_numeric(d["control__cf"], errors="coerce").to_numpy(float),
                   "pred": pd.to_numeric(d["control"], errors="coerce").to_numpy(float),
                   "name": "control (from the predictions table)"}
        if not all(np.all(np.isfinite(v)) for k, v in control.items() if k != "name"):
            raise DataError("The control columns have missing values; fill them in or drop the control columns.")
    prov_extra = dict(provenance or {})
    prov_extra.update(attribute=attribute, attribute_values=names, source="predictions table")
    result = audit_images(pred, pred_cf, a, num[zcols].to_numpy(float), pred_null=pred_null, pred_flip=pred_flip,
                          labels=labels, control=control, generator="learned" if learned else "exact",
                          margin=margin, alpha=alpha, seed=seed, provenance=prov_extra, progress=progress,
                          cancel=cancel)
    result.settings["z"] = f"columns {', '.join(map(str, zcols[:6]))}{' …' if len(zcols) > 6 else ''} of the table"
    doc = result.to_dict()
    doc["kind"] = "cit_images"
    doc["attribute"] = {"column": attribute, "values": names, "positive": None if positive is None else
                        [str(v) for v in (positive if isinstance(positive, (list, tuple, set)) else [positive])]}
    doc["dataset"] = {"n_readable": int(len(df)), "split": "all", "n_audited": int(len(d)),
                      "n_missing_attribute": dropped, "labels": {o: f"{o}__label" for o in (labels or {})},
                      "n_per_group": {names[v]: int((a == v).sum()) for v in (0, 1)}}
    doc["unreadable"] = []
    doc["quality"] = {}
    doc["examples"] = {"encoding": EXAMPLE_ENCODING, "npz_base64": "", "items": [], "shape": []}
    if dropped:
        doc["notes"].append(f"{dropped} row(s) with a missing attribute or prediction were left out.")
    return jsonable(doc)
