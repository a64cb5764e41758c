"""A controlled image benchmark with EXACT counterfactuals (Morpho-MNIST-like synthetic "scans", METHODS §6).

Each image is a grey "organ" disc whose outer RIM is a bright ring; a lesion blob sits near the centre::

    A  (binary attribute, e.g. scanner or sex)  → rim thickness: THIN_RIM px (A = 0) or THICK_RIM px (A = 1)
    S  (severity, U(0, 1), independent of A)    → lesion amplitude; the disease label is Y = 1[S > 0.5]

The rim grows OUTWARD from a fixed inner radius, so the attribute changes only pixels at radius ≥ ``r_in`` and never
the central disc of radius :data:`CENTRE_RADIUS` (× size/32) where the lesion lives. A unit is its exogenous draw
``(A, centre, ellipticity, inner radius, rim jitter, organ intensity, lesion position, S, pixel noise)``;
``render(units, a)`` redraws the same unit with any attribute value, so a counterfactual differs from its original
only in the rim (tested), and flipping twice gives the original back bit for bit.

Several images belong to one patient (same A, anatomy and organ intensity; new lesion, pose jitter and noise), so
patient-disjoint splitting matters. ``shortcut`` > 0.5 makes Y agree with A more often than chance in the SAMPLE
(selection, not causation: A never causes S), which lets a classifier learn the rim as a shortcut.

:func:`train_pixel_classifier` fits the two reference classifiers the tests audit: trained on shortcut data over all
pixels it READS the attribute's feature; restricted to the central disc (``mask=central_mask(size)``) it IGNORES it
by construction. numpy only at module level; PIL and sklearn are imported inside functions.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from fairdesk.core.errors import DataError

THIN_RIM = 1.5
THICK_RIM = 3.5
CENTRE_RADIUS = 6.0   # at size 32; the rim's inner radius is ≥ 9
_REF = 32.0


@dataclass
class MorphoUnits:
    """Exogenous draws, one row per image. Lengths in pixels at the reference size 32 (scaled when rendering)."""

    a: np.ndarray            # 0/1 attribute
    severity: np.ndarray     # S in [0, 1]; Y = 1[S > 0.5]
    patient: np.ndarray      # integer patient index
    cx: np.ndarray
    cy: np.ndarray
    ratio: np.ndarray        # vertical squash of the organ
    r_in: np.ndarray         # inner radius of the rim
    rim_jitter: np.ndarray   # added to the attribute's rim thickness
    organ: np.ndarray        # organ fill intensity
    lx: np.ndarray           # lesion offset from the centre
    ly: np.ndarray
    noise_seed: np.ndarray   # seeds of the per-image pixel noise
    size: int = 32
    noise_sd: float = 0.04

    def __len__(self) -> int:
        return len(self.a)

    @property
    def y(self) -> np.ndarray:
        return (self.severity > 0.5).astype(int)

    def subset(self, idx) -> "MorphoUnits":
        idx = np.asarray(idx)
        kw = {k: getattr(self, k)[idx] for k in ("a", "severity", "patient", "cx", "cy", "ratio", "r_in",
                                                   "rim_jitter", "organ", "lx", "ly", "noise_seed")}
        return replace(self, **kw)


def sample_units(n: int, seed: int = 0, size: int = 32, p_a: float = 0.5, shortcut: float = 0.5,
                 images_per_patient: int = 2, noise_sd: float = 0.04) -> MorphoUnits:
    """Draw ``n`` images from ``ceil(n / images_per_patient)`` patients. ``shortcut`` = P(Y = A) in the sample."""
    if n < 1:
        raise DataError("The benchmark needs at least one image.")
    if not (0.0 <= shortcut <= 1.0 and 0.0 < p_a < 1.0):
        raise DataError("shortcut must be in [0, 1] and p_a in (0, 1).")
    if size < 16:
        raise DataError("Images must be at least 16×16 pixels.")
    rng = np.random.default_rng([int(seed), 7031])
    k = max(int(images_per_patient), 1)
    n_pat = -(-n // k)
    patient = np.repeat(np.arange(n_pat), k)[:n]
    a_p = (rng.random(n_pat) < p_a).astype(int)
    ratio_p = rng.uniform(0.85, 1.15, n_pat)
    rin_p = rng.uniform(9.0, 10.5, n_pat)
    organ_p = rng.uniform(0.25, 0.4, n_pat)
    a = a_p[patient]
    agree = rng.random(n) < shortcut
    y = np.where(agree, a, 1 - a)
    u = rng.random(n)
    severity = np.where(y == 1, 0.55 + 0.45 * u, 0.45 * u)
    return MorphoUnits(
        a=a, severity=severity, patient=patient,
        cx=rng.uniform(-1.0, 1.0, n), cy=rng.uniform(-1.0, 1.0, n), ratio=ratio_p[patient], r_in=rin_p[patient],
        rim_jitter=rng.uniform(-0.25, 0.25, n), organ=organ_p[patient],
        lx=rng.uniform(-2.0, 2.0, n), ly=rng.uniform(-2.0, 2.0, n),
        noise_seed=rng.integers(0, 2**31 - 1, n), size=int(size), noise_sd=float(noise_sd))


def rim_thickness(a) -> np.ndarray:
    return np.where(np.asarray(a) == 1, THICK_RIM, THIN_RIM)


def render(units: MorphoUnits, a=None) -> np.ndarray:
    """Images (n, size, size), float32 in [0, 1]. ``a`` (scalar or per unit) overrides the attribute: do(A = a)."""
    n, s = len(units), units.size
    a = units.a if a is None else np.broadcast_to(np.asarray(a).astype(int), (n,))
    scale = s / _REF
    coords = (np.arange(s) + 0.5 - s / 2) / scale  # pixel centres in reference units
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    out = np.empty((n, s, s), dtype=np.float32)
    thick = rim_thickness(a) + units.rim_jitter
    for i in range(n):
        dx = xx - units.cx[i]
        dy = (yy - units.cy[i]) / units.ratio[i]
        rho = np.sqrt(dx * dx + dy * dy)
        r_in, r_out = units.r_in[i], units.r_in[i] + thick[i]
        # anti-aliased coverage (1 px ramp, in reference units scaled to pixels)
        inside_out = np.clip((r_out - rho) * scale + 0.5, 0.0, 1.0)
        inside_in = np.clip((r_in - rho) * scale + 0.5, 0.0, 1.0)
        rim = inside_out - inside_in
        img = units.organ[i] * inside_in + 0.9 * rim
        d2 = (xx - units.cx[i] - units.lx[i]) ** 2 + (yy - units.cy[i] - units.ly[i]) ** 2
        img = img + 0.6 * units.severity[i] * np.exp(-d2 / (2 * 1.5 ** 2))
        noise = np.random.default_rng(int(units.noise_seed[i])).standard_normal((s, s)) * units.noise_sd
        out[i] = np.clip(img + noise, 0.0, 1.0)
    return out


def central_mask(size: int = 32) -> np.ndarray:
    """Boolean (size, size) mask of the central disc that the attribute never touches (radius CENTRE_RADIUS)."""
    scale = size / _REF
    coords = (np.arange(size) + 0.5 - size / 2) / scale
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    return np.sqrt(xx ** 2 + yy ** 2) <= CENTRE_RADIUS


@dataclass
class MorphoDataset:
    units: MorphoUnits
    images: np.ndarray = field(repr=False)

    @property
    def a(self) -> np.ndarray:
        return self.units.a

    @property
    def y(self) -> np.ndarray:
        return self.units.y

    @property
    def patient_id(self) -> np.ndarray:
        return np.array([f"P{p:05d}" for p in self.units.patient])

    def counterfactual(self, target=None) -> np.ndarray:
        """Exact counterfactual images under do(A = target) (default: the flipped attribute)."""
        return render(self.units, 1 - self.units.a if target is None else target)

    def exogenous(self) -> np.ndarray:
        """The A-independent exogenous features of each unit (the Z an oracle audit conditions on)."""
        u = self.units
        return np.column_stack([u.cx, u.cy, u.ratio, u.r_in, u.organ, u.lx, u.ly, u.severity])

    def subset(self, idx) -> "MorphoDataset":
        return MorphoDataset(self.units.subset(idx), self.images[np.asarray(idx)])


def make_morpho(n: int, seed: int = 0, size: int = 32, p_a: float = 0.5, shortcut: float = 0.5,
                images_per_patient: int = 2, noise_sd: float = 0.04) -> MorphoDataset:
    units = sample_units(n, seed, size, p_a, shortcut, images_per_patient, noise_sd)
    return MorphoDataset(units, render(units))


def write_folder(ds: MorphoDataset, folder: str | Path, bit_depth: int = 8) -> Path:
    """Write the images as PNG (8- or 16-bit) plus ``labels.csv`` (path, disease, attribute, patient_id)."""
    import pandas as pd
    from PIL import Image

    folder = Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, img in enumerate(ds.images):
        rel = f"images/img_{i:05d}.png"
        if bit_depth == 16:
            Image.fromarray(np.round(img * 65535).astype(np.uint16)).save(folder / rel)
        else:
            Image.fromarray(np.round(img * 255).astype(np.uint8)).save(folder / rel)
        rows.append({"Path": rel, "disease": int(ds.y[i]), "attribute": int(ds.a[i]),
                     "patient_id": ds.patient_id[i]})
    csv = folder / "labels.csv"
    from fairdesk.core.export import write_table

    write_table(pd.DataFrame(rows), csv)
    return csv


class PixelClassifier:
    """A logistic regression on (optionally masked) pixels; ``predict_proba(images) -> P(Y = 1)``."""

    def __init__(self, model, mask: np.ndarray | None) -> None:
        self.model = model
        self.mask = mask

    def features(self, images: np.ndarray) -> np.ndarray:
        x = np.asarray(images, dtype=float).reshape(len(images), -1)
        return x[:, self.mask.reshape(-1)] if self.mask is not None else x

    def predict_proba(self, images: np.ndarray) -> np.ndarray:
        return self.model.predict_proba(self.features(images))[:, 1]

    def __call__(self, images: np.ndarray) -> np.ndarray:
        return self.predict_proba(images)


def train_pixel_classifier(images: np.ndarray, y: np.ndarray, mask: np.ndarray | None = None, C: float = 0.05,
                           seed: int = 0) -> PixelClassifier:
    """Reference classifier: L2 logistic regression on pixels (inside ``mask`` only, if given)."""
    from sklearn.linear_model import LogisticRegression

    clf = PixelClassifier(None, mask)
    model = LogisticRegression(C=C, max_iter=2000, random_state=seed)
    model.fit(clf.features(images), np.asarray(y).astype(int))
    clf.model = model
    return clf
