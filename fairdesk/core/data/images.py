"""Image datasets: a folder of images (PNG, JPEG, 16-bit PNG, DICOM) described by a CSV (Dataset tab).

The CSV may be in CheXpert style (``Path`` like ``CheXpert-v1.0/train/patient00001/study1/view1_frontal.jpg``,
one column per finding with 1/0/−1/blank, ``Sex``, ``Age``), MIMIC-CXR style (``subject_id``, ``study_id``,
``dicom_id``, optionally a path column) or anything mapped by hand with :class:`ImageRoles`. Unreadable or corrupt
files are listed with the reason and left out; they never stop the load. Splits are patient-disjoint
(:func:`fairdesk.core.data.splits.patient_disjoint_split`).

Pixels come back as float32 grey images in [0, 1]: 8-bit / 16-bit PNG and JPEG via Pillow (colour converted to
grey), DICOM via pydicom (rescale slope/intercept applied, MONOCHROME1 inverted, scaled by the stored bit depth
or the window when present). PIL and pydicom are imported inside functions.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".dicom", ".tif", ".tiff", ".bmp")
PATH_COLUMNS = ("Path", "path", "image", "image_path", "filepath", "file", "filename")
PATIENT_COLUMNS = ("patient_id", "PatientID", "subject_id", "patient")
CHEXPERT_FINDINGS = ("No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion",
                     "Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion",
                     "Pleural Other", "Fracture", "Support Devices")
_PATIENT_IN_PATH = re.compile(r"(patient\d+|p\d{8})", re.IGNORECASE)
#: the largest image FairDesk decodes (width × height, read from the header before any pixel is decoded): 8000 ×
#: 8000, twice a full-field mammogram; a larger "image" is refused as a likely decompression bomb
MAX_PIXELS = 64_000_000


@dataclass
class ImageRoles:
    path: str | None = None                 # column holding the image path (relative to the image folder)
    labels: tuple[str, ...] = ()            # disease outputs (0/1; CheXpert −1 "uncertain" and blanks → missing)
    attributes: tuple[str, ...] = ()        # sensitive attributes
    patient_id: str | None = None           # None: parsed from the path when it contains patientNNNNN / pNNNNNNNN

    def __post_init__(self) -> None:
        from fairdesk.core.data.schema import column_names

        self.labels = column_names(self.labels, "labels")  # a string is one column, never its letters
        self.attributes = column_names(self.attributes, "attributes")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ImageDataset:
    table: pd.DataFrame                     # rows whose image is readable; column "_file" = absolute path
    roles: ImageRoles
    root: Path
    unreadable: list[dict] = field(default_factory=list)   # {"path", "reason"}
    style: str = "custom"

    def __len__(self) -> int:
        return len(self.table)

    @property
    def files(self) -> list[Path]:
        return [Path(p) for p in self.table["_file"]]

    def load(self, size: int | tuple[int, int] | None = None, progress: ProgressFn | None = None,
             cancel: CancelToken | None = None) -> np.ndarray:
        """All images as (n, H, W) float32 in [0, 1] (resized to ``size`` if given; else all must agree)."""
        return load_images(self.files, size, progress, cancel)

    def subset(self, rows) -> "ImageDataset":
        """The dataset restricted to ``rows`` (positions or a boolean mask), index reset."""
        rows = np.asarray(rows)
        table = self.table[rows] if rows.dtype == bool else self.table.iloc[rows]
        return ImageDataset(table.reset_index(drop=True), self.roles, self.root, list(self.unreadable), self.style)

    def split(self, val_size: float = 0.15, test_size: float = 0.25, seed: int = 0) -> pd.Series:
        """"train" / "val" / "test" per row; no patient is in two splits."""
        from fairdesk.core.data.splits import patient_disjoint_split

        return patient_disjoint_split(self.table, "_patient", val_size, test_size, seed)


def _resize(arr: np.ndarray, size) -> np.ndarray:
    if size is None:
        return arr
    from PIL import Image

    h, w = (size, size) if isinstance(size, int) else size
    if arr.shape == (h, w):
        return arr
    return np.asarray(Image.fromarray(arr.astype(np.float32), mode="F").resize((w, h), Image.BILINEAR),
                      dtype=np.float32)


def _read_dicom(path: Path) -> np.ndarray:
    import pydicom

    ds = pydicom.dcmread(str(path))
    if "PixelData" not in ds:
        raise DataError("DICOM file has no pixel data")
    _check_pixels(int(getattr(ds, "Columns", 0) or 0), int(getattr(ds, "Rows", 0) or 0))
    arr = ds.pixel_array.astype(np.float64)
    if arr.ndim == 3 and arr.shape[-1] in (3, 4) and getattr(ds, "SamplesPerPixel", 1) > 1:
        arr = arr[..., :3].mean(axis=-1)
    elif arr.ndim == 3:  # multi-frame: first frame
        arr = arr[0]
    slope = float(getattr(ds, "RescaleSlope", 1) or 1)
    intercept = float(getattr(ds, "RescaleIntercept", 0) or 0)
    arr = arr * slope + intercept
    center, width = getattr(ds, "WindowCenter", None), getattr(ds, "WindowWidth", None)
    if center is not None and width is not None:
        c = float(center[0] if isinstance(center, pydicom.multival.MultiValue) else center)
        w = float(width[0] if isinstance(width, pydicom.multival.MultiValue) else width)
        lo, hi = c - w / 2, c + w / 2
    else:
        bits = int(getattr(ds, "BitsStored", 0) or 0)
        signed = int(getattr(ds, "PixelRepresentation", 0) or 0) == 1
        if bits and slope == 1 and intercept == 0 and not signed:
            lo, hi = 0.0, float(2 ** bits - 1)
        else:
            lo, hi = float(arr.min()), float(arr.max())
    arr = np.clip((arr - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    if str(getattr(ds, "PhotometricInterpretation", "")).upper() == "MONOCHROME1":
        arr = 1.0 - arr
    return arr.astype(np.float32)


def _check_pixels(width: int, height: int) -> None:
    """Refuse an image larger than :data:`MAX_PIXELS`, from its header, before decoding it."""
    if width * height > MAX_PIXELS:
        raise DataError(f"{width} × {height} pixels, more than the {MAX_PIXELS:,} FairDesk decodes (refused before "
                        "decoding)")


def read_image(path: str | Path, size: int | tuple[int, int] | None = None) -> np.ndarray:
    """One grey image as float32 in [0, 1]. Raises :class:`DataError` with the reason when it cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise DataError("file not found")
    suffix = path.suffix.lower()
    try:
        if suffix in (".dcm", ".dicom") or (suffix == "" and _is_dicom(path)):
            arr = _read_dicom(path)
        else:
            from PIL import Image, UnidentifiedImageError

            try:
                with Image.open(path) as im:  # reads the header only
                    _check_pixels(*im.size)
                    if im.format == "PNG":  # Pillow decodes a PNG cut after its pixel data: a cut file is unreadable
                        with Image.open(path) as whole:
                            whole.verify()  # every chunk's CRC, up to IEND (no decoding)
                    im.load()
                    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
                        raw = np.asarray(im, dtype=np.float64)
                        maxval = 65535.0 if im.mode.startswith("I;16") or raw.max() > 255 else 255.0
                        arr = raw / maxval
                    elif im.mode == "F":
                        arr = np.asarray(im, dtype=np.float64)
                    else:
                        arr = np.asarray(im.convert("L"), dtype=np.float64) / 255.0
            except UnidentifiedImageError:
                raise DataError("not an image file Pillow can read (corrupt or unsupported format)") from None
            except Image.DecompressionBombError:
                raise DataError(f"more than the {MAX_PIXELS:,} pixels FairDesk decodes (refused before decoding)"
                                ) from None
    except DataError:
        raise
    except Exception as err:  # truncated files, bad DICOM, decoder errors: reported, never fatal for the dataset
        raise DataError(f"{type(err).__name__}: {err}") from None
    arr = np.clip(arr, 0.0, 1.0).astype(np.float32)
    return _resize(arr, size)


def load_images(files, size: int | tuple[int, int] | None = None, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None) -> np.ndarray:
    """Images as (n, H, W) float32 in [0, 1] (resized to ``size`` if given; else all must agree in size)."""
    rep = Reporter(progress, cancel)
    files = list(files)
    out = []
    for i, f in enumerate(files):
        if i % 32 == 0:
            rep(i / max(len(files), 1), f"loading images {i}/{len(files)}")
        try:
            out.append(read_image(f, size))
        except DataError as err:
            raise DataError(f"The image '{f}' can no longer be read ({err}); it was readable when the dataset "
                            "was opened. Restore the file or open the folder again.") from None
    shapes = {im.shape for im in out}
    if len(shapes) > 1:
        raise DataError(f"Images have different sizes {sorted(shapes)[:3]}; choose a common size to resize to.")
    rep(1.0, "images loaded")
    return np.stack(out) if out else np.zeros((0, 1, 1), np.float32)


def binarise_attribute(values: pd.Series, column: str, positive=None) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Code a sensitive attribute 0/1 for the counterfactual-invariance audit.

    Returns ``(a, names, known)``: ``a`` (n,) int with 1 for the second / positive group, ``names`` = [label of 0,
    label of 1] and ``known`` (n,) bool, False where the attribute is missing (those rows cannot be audited).

    Why binary: the invariance tests (CIT-LR, GCM), the oriented shift a → a′ and the generator's counterfactual
    pairs are defined for two groups. An attribute with k > 2 values is audited ONE VALUE VS THE REST by naming
    ``positive`` (a value or a list of values forming group 1): each such audit asks "does the prediction change
    when a unit is moved into / out of this group", which keeps every test two-sample with the full sample size
    and needs a generator trained on the same binarisation. (Pairwise audits would need a k-class generator, k(k−1)
    directions and a multiplicity correction across them, with each test on two small groups only.)
    """
    known = values.notna().to_numpy()
    present = values[known]
    try:
        distinct = sorted(set(present.tolist()))
    except TypeError:
        distinct = sorted(set(present.tolist()), key=str)
    if positive is not None:
        pos = list(positive) if isinstance(positive, (list, tuple, set)) else [positive]
        as_text = {str(v) for v in pos}
        a_known = present.map(lambda v: str(v) in as_text).to_numpy()
        if not a_known.any():
            raise DataError(f"None of the rows has '{column}' in {sorted(as_text)}; its values are "
                            f"{distinct[:10]}.")
        if a_known.all():
            raise DataError(f"Every row has '{column}' in {sorted(as_text)}: there is no comparison group.")
        rest = [str(v) for v in distinct if str(v) not in as_text]
        names = [" / ".join(rest) if len(rest) <= 3 else f"not {' / '.join(sorted(as_text))}",
                 " / ".join(sorted(as_text))]
    else:
        if len(distinct) < 2:
            raise DataError(f"The attribute '{column}' has only {len(distinct)} value(s) ({distinct}) among the "
                            "readable images: there is nothing to compare. Choose another attribute or images that "
                            "include both groups.")
        if len(distinct) > 2:
            raise DataError(f"The attribute '{column}' has {len(distinct)} values ({distinct[:8]}); this audit "
                            "compares two groups. Choose the value(s) that form group 1 (one value vs the rest, "
                            f"e.g. positive='{distinct[0]}'), or recode the column into two groups.")
        a_known = (present == distinct[1]).to_numpy()
        names = [str(distinct[0]), str(distinct[1])]
    a = np.zeros(len(values), dtype=int)
    a[known] = a_known.astype(int)
    return a, names, known


def _is_dicom(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.seek(128)
            return fh.read(4) == b"DICM"
    except OSError:
        return False


def detect_style(df: pd.DataFrame) -> str:
    cols = set(df.columns)
    if "Path" in cols and len(cols & set(CHEXPERT_FINDINGS)) >= 3:
        return "chexpert"
    if {"subject_id", "study_id", "dicom_id"} <= cols:
        return "mimic-cxr"
    return "custom"


def default_roles(df: pd.DataFrame) -> ImageRoles:
    """Roles guessed from the column names (CheXpert / MIMIC-CXR conventions); the user can override every one."""
    style = detect_style(df)
    path = next((c for c in PATH_COLUMNS if c in df.columns), None)
    patient = next((c for c in PATIENT_COLUMNS if c in df.columns), None)
    labels: tuple[str, ...] = tuple(c for c in CHEXPERT_FINDINGS if c in df.columns)
    attrs = tuple(c for c in ("Sex", "sex", "gender", "race", "ethnicity", "AP/PA", "Frontal/Lateral")
                  if c in df.columns)
    return ImageRoles(path=path, labels=labels, attributes=attrs, patient_id=patient) if style != "custom" or path \
        else ImageRoles()


def _mimic_path(row) -> str:
    sid = str(int(row["subject_id"]))
    return f"files/p{sid[:2]}/p{sid}/s{int(row['study_id'])}/{row['dicom_id']}.dcm"


def open_image_folder(csv: str | Path | pd.DataFrame, root: str | Path, roles: ImageRoles | None = None,
                      check: bool = True, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None) -> ImageDataset:
    """Read the CSV, resolve every image path under ``root`` and (``check=True``) try to open each image.

    Rows whose image is missing or unreadable go to ``unreadable`` with the reason. Labels are coerced to 0/1
    with CheXpert's −1 ("uncertain") and blanks as missing. The patient of each row is in column ``_patient``.
    """
    rep = Reporter(progress, cancel)
    if isinstance(csv, pd.DataFrame):
        df = csv.copy()
    else:
        from fairdesk.core.data.loaders import load_table

        df = load_table(csv)
    if df.empty:
        raise DataError("The image table has no rows.")
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"The image folder '{root}' does not exist.")
    style = detect_style(df)
    roles = roles or default_roles(df)
    if roles.path is None:
        if style == "mimic-cxr":
            df["_relpath"] = df.apply(_mimic_path, axis=1)
            roles = ImageRoles("_relpath", roles.labels, roles.attributes, roles.patient_id or "subject_id")
        else:
            raise DataError("Which column holds the image paths? None of " + ", ".join(PATH_COLUMNS) +
                            " is in the table; map it by hand.")
    missing = [c for c in (roles.path, *roles.labels, *roles.attributes, roles.patient_id) if c and
               c not in df.columns]
    if missing:
        raise DataError(f"Column(s) {missing} are not in the table; available: {list(df.columns)[:20]}.")
    for col in roles.labels:
        vals = pd.to_numeric(df[col], errors="coerce")
        df[col] = vals.where(vals.isin([0, 1]))
    if roles.patient_id:
        df["_patient"] = df[roles.patient_id].astype(str)
    else:
        found = df[roles.path].astype(str).str.extract(_PATIENT_IN_PATH, expand=False)
        if found.isna().any():
            raise DataError("No patient id column was given and the paths do not name the patient (like "
                            "'patient00001'); choose the patient id column so that splits are patient-disjoint.")
        df["_patient"] = found.str.lower()
    files, bad, keep = [], [], []
    inside = root.resolve()
    for i, rel in enumerate(df[roles.path].astype(str)):
        if i % 64 == 0:
            rep(i / len(df), f"checking images {i}/{len(df)}")
        f = (root / rel)
        if not f.exists() and style == "chexpert" and "/" in rel:   # CheXpert paths start with the archive name
            alt = root / rel.split("/", 1)[1]
            f = alt if alt.exists() else f
        reason = None
        try:
            real = f.resolve()
        except (RuntimeError, OSError):  # a symbolic link loop (RuntimeError before Python 3.13, OSError after)
            real = None
        if real is None:
            reason = "a symbolic link that leads back to itself (a link loop); refused"
        elif not real.is_relative_to(inside):  # an absolute path, "..", or a link leading out of the folder
            reason = "outside the image folder (an absolute path, '..' or a link leading out); refused"
        elif not f.is_file():
            reason = "file not found"
        elif check:
            try:
                read_image(f)
            except DataError as err:
                reason = str(err)
        if reason is None:
            files.append(str(real))
            keep.append(i)
        else:
            bad.append({"row": int(i), "path": rel, "reason": reason})
    table = df.iloc[keep].reset_index(drop=True)
    table["_file"] = files
    rep(1.0, f"{len(table)} images readable, {len(bad)} not")
    return ImageDataset(table, roles, root, bad, style)
