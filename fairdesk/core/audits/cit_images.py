"""Counterfactual-invariance audit of an image classifier (issue 4, METHODS §6), on predictions already computed.

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
        return cit._clean(asdict(self))

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
