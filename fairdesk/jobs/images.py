"""Job functions of the imaging audit: what the GUI's Dataset / Model / Audit tabs and the CLI run.

Every function is ``f(inputs..., progress=None, cancel=None) -> result`` and runs on a worker thread; heavy modules
(torch, diffusers, sklearn, PIL) are imported inside. Records stored in the project:

* dataset, kind ``"images"``: the readable rows of the CSV plus ``_patient`` and ``split`` (patient-disjoint,
  deterministic in ``split_seed``); ``roles`` = :class:`~fairdesk.core.data.images.ImageRoles` as a dict;
  ``origin`` = ``{"images_root", "images_root_relative" (to the project file's folder), "csv", "csv_sha256", "images_sha256", "style", "unreadable": [{"row", "path",
  "reason"}], "split_seed", "val_size", "test_size", "n_csv_rows"}``. The images stay in their folder.
* model, kind ``"image_classifier"``: ``info["path"]`` (classifier folder or TorchScript file), ``arch``,
  ``image_size``, ``outputs``, ``sha256`` and, when trained here, ``labels``, ``history``, ``test_auc``.
* model, kind ``"image_generator"``: ``info["path"]`` (generator folder), ``attribute`` ``{"column", "values",
  "positive"}``, ``config``, ``schedule``, ``sha256``, ``step``, losses.
* audit, kind ``"cit_images"``: the document of :func:`fairdesk.core.audits.cit_images.run_cit_pipeline` (the same
  JSON that ``fairdesk-cli audit cit --json`` writes); its PDF via ``export_report`` in :mod:`fairdesk.jobs`.
"""
from __future__ import annotations

from pathlib import Path

from fairdesk.core.errors import DataError, ModelError
from fairdesk.core.models.training_record import array_sha256, training_record, write_training_record
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project, located, relative_to_project

IMAGES_KIND = "images"
CLASSIFIER_KIND = "image_classifier"
GENERATOR_KIND = "image_generator"
AUDIT_KIND = "cit_images"


# ==============================================================================================================
# Datasets


def import_image_dataset(project_path: str | Path, csv_path: str | Path, images_dir: str | Path,
                         roles=None, name: str | None = None, *, split_seed: int = 0, val_size: float = 0.15,
                         test_size: float = 0.25, progress: ProgressFn | None = None,
                         cancel: CancelToken | None = None) -> int:
    """Open an image folder described by a CSV, check every image, and store the table in the project.

    ``roles``: an :class:`~fairdesk.core.data.images.ImageRoles` (None: guessed from CheXpert / MIMIC-CXR column
    names). Unreadable files are listed in the record's ``origin["unreadable"]`` and left out, never fatal.
    Returns the dataset id."""
    import hashlib

    from fairdesk.core.data.images import open_image_folder
    from fairdesk.core.data.loaders import file_sha256, table_sha256

    rep = Reporter(progress, cancel)
    csv_path, images_dir = Path(csv_path), Path(images_dir)
    if not csv_path.is_file():
        raise DataError(f"The table '{csv_path}' does not exist.")
    from fairdesk.core.data.loaders import load_table

    df = load_table(csv_path)  # BOM, quoted headers, duplicate names, binary files: one sentence
    ds = open_image_folder(df, images_dir, roles, check=True, progress=rep.sub(0.0, 0.8), cancel=rep.cancel)
    if len(ds) == 0:
        raise DataError(f"None of the {len(df)} images listed in '{csv_path.name}' could be read under "
                        f"'{images_dir}' (first reason: {ds.unreadable[0]['reason'] if ds.unreadable else '?'}). "
                        "Check that the image folder is the one the paths are relative to.")
    rep(0.8, "patient-disjoint split")
    table = ds.table.copy()
    table["split"] = ds.split(val_size, test_size, split_seed).to_numpy()
    rep(0.85, "hashing the images")
    h = hashlib.sha256()
    for i, f in enumerate(table["_file"]):
        if i % 256 == 0:
            rep(0.85 + 0.13 * i / len(table), f"hashing images {i}/{len(table)}")
        h.update(Path(f).name.encode())
        h.update(Path(f).read_bytes())
    stored = table.drop(columns=["_file"])
    origin = {"images_root": str(images_dir.resolve()),
              "images_root_relative": relative_to_project(images_dir, project_path), "csv": str(csv_path.resolve()),
              "csv_sha256": file_sha256(csv_path), "images_sha256": h.hexdigest(), "style": ds.style,
              "unreadable": ds.unreadable, "split_seed": int(split_seed), "val_size": float(val_size),
              "test_size": float(test_size), "n_csv_rows": int(len(df))}
    rep(0.98, "saving into the project")
    return Project(project_path).add_dataset(name or f"Images: {csv_path.name}", stored, table_sha256(stored),
                                             kind=IMAGES_KIND, source=str(csv_path.resolve()),
                                             roles=ds.roles.to_dict(), origin=origin)


def image_dataset(project_path: str | Path, dataset_id: int, *, root: str | Path | None = None,
                  check: bool = False, progress: ProgressFn | None = None, cancel: CancelToken | None = None):
    """Re-open a stored image dataset: an :class:`~fairdesk.core.data.images.ImageDataset` whose ``table`` has the
    stored columns (``split``, ``_patient``) and ``_file`` (absolute path), ``roles``, ``root`` and ``unreadable``
    (those listed at import plus any file that has gone missing since). ``root`` overrides the stored folder (after
    moving it); ``check=True`` re-reads every image."""
    from fairdesk.core.data.images import ImageRoles, open_image_folder

    project = Project(project_path, create=False)
    info = project.dataset(dataset_id)
    if info.kind != IMAGES_KIND:
        raise DataError(f"Dataset {dataset_id} ('{info.name}') is a {info.kind} table, not an image dataset.")
    r = info.roles or {}
    roles = ImageRoles(path=r.get("path"), labels=tuple(r.get("labels") or ()),
                       attributes=tuple(r.get("attributes") or ()), patient_id=r.get("patient_id"))
    origin = info.origin or {}
    folder = (Path(root) if root is not None else
              located(origin.get("images_root", ""), origin.get("images_root_relative"), project_path))
    if not folder.is_dir():
        raise DataError(f"The image folder of '{info.name}' ({folder}) is not there any more. Reconnect it (choose "
                        "the folder's new location) or import the dataset again.")
    df = project.load_dataset(dataset_id)
    ds = open_image_folder(df, folder, roles, check=check, progress=progress, cancel=cancel)
    ds.unreadable = list(origin.get("unreadable", [])) + ds.unreadable
    ds.style = origin.get("style", ds.style)
    return ds


# ==============================================================================================================
# Classifiers


def _model(project: Project, model_id: int, kind: str):
    for m in project.models():
        if m.id == model_id:
            if m.kind != kind:
                raise ModelError(f"Model {model_id} ('{m.name}') is a {m.kind}, not a {kind.replace('_', ' ')}.")
            return m
    raise ModelError(f"Model {model_id} is not in project {project.name}.")


def _validate_classifier(clf) -> None:
    import numpy as np

    size = clf.config.image_size
    try:
        out = clf.predict_proba(np.full((2, size, size), 0.5, np.float32))
    except ModelError:
        raise
    except Exception as err:
        raise ModelError(f"The classifier fails on a {size}×{size} grey image ({type(err).__name__}: "
                         f"{str(err).splitlines()[0][:200] if str(err) else ''}). Check the input size and the "
                         "number of outputs.") from None
    if out.shape != (2, len(clf.outputs)) or not np.all(np.isfinite(out)):
        raise ModelError(f"The classifier returned {out.shape} values for 2 images and {len(clf.outputs)} output "
                         "name(s).")


def train_image_classifier(project_path: str | Path, dataset_id: int, label_columns, out_dir: str | Path, *,
                           arch: str = "small_cnn", epochs: int = 5, image_size: int = 32, seed: int = 0,
                           width: int = 16, batch_size: int = 64, lr: float = 3e-3, name: str | None = None,
                           progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Train a built-in CNN on the dataset's "train" split (validation AUROC per epoch on "val", test AUROC on
    "test"), save it to ``out_dir`` (config.json + model.safetensors) and store the model record. Returns its id."""
    import numpy as np

    from fairdesk.core.audits.cit_images import model_sha256
    from fairdesk.core.guard import guard_outputs, owned_folder
    from fairdesk.core.models.image_classifier import ClassifierConfig, train_cnn

    guard_outputs(folders=[("The classifier folder", out_dir)], project=("the project", project_path))  # first
    rep = Reporter(progress, cancel)
    label_columns = [label_columns] if isinstance(label_columns, str) else list(label_columns)
    if not label_columns:
        raise DataError("Choose at least one label column to train on.")
    ds = image_dataset(project_path, dataset_id)
    missing = [c for c in label_columns if c not in ds.table.columns]
    if missing:
        raise DataError(f"Label column(s) {missing} are not in the image table.")
    split = ds.table["split"].to_numpy()
    import pandas as pd

    # 0/1 labels; CheXpert's −1 ("uncertain"), blanks and anything else are missing (ignored in the loss)
    y = np.column_stack([pd.to_numeric(ds.table[c], errors="coerce").where(lambda v: v.isin([0, 1])).to_numpy(float)
                         for c in label_columns])
    parts = {}
    for k in ("train", "val", "test"):
        idx = np.flatnonzero(split == k)
        parts[k] = idx
    if len(parts["train"]) < 2:
        raise DataError("The training split has fewer than 2 readable images.")
    for j, c in enumerate(label_columns):
        vals = np.unique(y[parts["train"], j][~np.isnan(y[parts["train"], j])])
        if len(vals) < 2:
            raise DataError(f"The label '{c}' takes a single value ({vals.tolist()}) on the training images; nothing "
                            "can be learned.")
    rep(0.0, "loading images")
    imgs = {k: ds.subset(v).load(image_size, rep.sub(0.0, 0.15) if k == "train" else None, rep.cancel)
            for k, v in parts.items() if len(v)}
    config = ClassifierConfig(arch=arch, image_size=image_size, outputs=tuple(label_columns), width=width)
    val = (imgs["val"], y[parts["val"]]) if "val" in imgs else None
    clf, hist = train_cnn(imgs["train"], y[parts["train"]], config, epochs=epochs, batch_size=batch_size, lr=lr,
                          seed=seed, val=val, progress=rep.sub(0.15, 0.95), cancel=rep.cancel)
    test_auc = {}
    if "test" in imgs:
        from sklearn.metrics import roc_auc_score

        p = clf.predict_proba(imgs["test"])
        for j, c in enumerate(label_columns):
            yt = y[parts["test"], j]
            ok = ~np.isnan(yt)
            if len(np.unique(yt[ok])) == 2:
                test_auc[c] = float(roc_auc_score(yt[ok], p[ok, j]))
    rep(0.97, "saving the classifier")
    params = {"arch": arch, "image_size": image_size, "outputs": list(label_columns), "width": width,
              "epochs": epochs, "batch_size": batch_size, "lr": lr, "seed": seed}
    with owned_folder(out_dir, "a FairDesk image classifier"):  # the record is FairDesk's too
        folder = clf.save(out_dir)
        sha = model_sha256(folder)
        write_training_record(folder, kind=CLASSIFIER_KIND, parameters=params, model_sha256=sha,
                              data_name=Project(project_path).dataset(dataset_id).name,
                              data_sha256=array_sha256(imgs["train"], y[parts["train"]]))
    info = {"path": str(Path(folder).resolve()), "format": "safetensors", "arch": arch, "image_size": image_size,
            "outputs": list(label_columns), "labels": list(label_columns), "width": width, "epochs": epochs,
            "seed": seed, "history": {"loss": hist.loss, "val_auc": hist.val_auc}, "test_auc": test_auc,
            "sha256": sha, "n_train": int(len(parts["train"])), "params": params}
    return Project(project_path).add_model(name or f"{arch} on {', '.join(label_columns)}", CLASSIFIER_KIND, info,
                                           dataset_id=dataset_id)


def import_image_classifier(project_path: str | Path, path: str | Path, *, image_size: int | None = None,
                            outputs=None, name: str | None = None, progress: ProgressFn | None = None,
                            cancel: CancelToken | None = None) -> int:
    """Register a classifier under audit: a TorchScript file (give ``image_size`` and the ``outputs`` names) or a
    classifier folder (config.json + model.safetensors). It is loaded and run on two images before it is stored."""
    from fairdesk.core.audits.cit_images import model_sha256
    from fairdesk.core.models.image_classifier import load_classifier

    rep = Reporter(progress, cancel)
    path = Path(path)
    if not path.exists():
        raise ModelError(f"'{path}' does not exist.")
    rep(0.1, "loading the classifier")
    outputs = (outputs,) if isinstance(outputs, str) else (tuple(outputs) if outputs else None)
    clf = load_classifier(path, image_size=image_size, outputs=outputs)
    rep(0.6, "checking the classifier on test images")
    _validate_classifier(clf)
    info = {"path": str(path.resolve()), "format": "torchscript" if clf.config.arch == "torchscript" else
            "safetensors", "arch": clf.config.arch, "image_size": clf.config.image_size,
            "outputs": list(clf.outputs), "sha256": model_sha256(path)}
    rep(0.95, "saving into the project")
    return Project(project_path).add_model(name or path.name, CLASSIFIER_KIND, info)


def _load_classifier(project: Project, ref, image_size: int, outputs=None):
    """A classifier from a model id (stored record) or a path; returns (classifier, description dict).
    ``image_size`` and ``outputs`` are for a TorchScript file given by path (a folder's config names its own)."""
    from fairdesk.core.audits.cit_images import model_sha256
    from fairdesk.core.models.image_classifier import load_classifier

    if isinstance(ref, int) and not isinstance(ref, bool):
        m = _model(project, ref, CLASSIFIER_KIND)
        clf = load_classifier(m.info["path"], image_size=m.info.get("image_size"),
                              outputs=tuple(m.info.get("outputs") or ()) or None)
        return clf, {"model_id": m.id, "name": m.name, "path": m.info["path"], "sha256": model_sha256(m.info["path"])}
    clf = load_classifier(ref, image_size=image_size, outputs=tuple(outputs) if outputs else None)
    return clf, {"path": str(Path(ref).resolve()), "name": Path(ref).name, "sha256": model_sha256(ref)}


# ==============================================================================================================
# Generator


def train_generator_job(project_path: str | Path, dataset_id: int, attribute: str, out_dir: str | Path, *,
                        image_size: int = 32, size: str = "tiny", vae_steps: int = 400, unet_steps: int = 1500,
                        batch_size: int = 32, resume: bool = False, seed: int = 0, steps: int = 50,
                        checkpoint_every: int = 250, preview_every: int = 0, positive=None,
                        max_train_images: int = 0, name: str | None = None, mine_lambda: float = 0.0,
                        mine_steps: int = 200, on_metrics=None, on_preview=None,
                        progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Train the counterfactual generator on the dataset's "train" split for a binary attribute (or ``positive``
    value(s) vs the rest) and store the model record (kind "image_generator"). Returns the model id.

    ``on_metrics(dict)``: every step, ``{"phase", "step", "phase_step", "loss", "lr"}`` (worker thread).
    ``on_preview(step, images, labels)``: samples every ``preview_every`` diffusion steps. Checkpoints go to
    ``out_dir`` after the first minute of training, then every ``checkpoint_every`` steps; a cancelled run keeps the
    last one and ``resume=True`` continues.
    ``mine_lambda`` > 0 adds the MINE disentangling map (``mine_steps`` steps between the two phases; 004 §3.3)."""
    ds = image_dataset(project_path, dataset_id)
    res, attr = fit_generator(ds, attribute, out_dir, splits=ds.table["split"].to_numpy(), image_size=image_size,
                              size=size, vae_steps=vae_steps, unet_steps=unet_steps, batch_size=batch_size,
                              resume=resume, seed=seed, steps=steps, checkpoint_every=checkpoint_every,
                              preview_every=preview_every, positive=positive, max_train_images=max_train_images,
                              mine_lambda=mine_lambda, mine_steps=mine_steps,
                              on_metrics=on_metrics, on_preview=on_preview, progress=progress, cancel=cancel)
    from fairdesk.core.audits.cit_images import model_sha256

    gen = res.generator
    info = {"path": str(Path(out_dir).resolve()), "attribute": attr, "config": gen.config.to_dict(),
            "schedule": gen.meta.get("schedule"), "size": size, "seed": seed, "step": gen.meta.get("step"),
            "last_vae_loss": res.vae_loss[-1] if res.vae_loss else None,
            "last_unet_loss": res.unet_loss[-1] if res.unet_loss else None,
            "mine_lambda": gen.config.mine_lambda, "last_mine_dv": res.mine_dv[-1] if res.mine_dv else None,
            "mine": gen.meta.get("mine"),
            "checkpoints": res.checkpoints, "sha256": model_sha256(out_dir)}
    return Project(project_path).add_model(name or f"Generator for {attribute} ({size}, {image_size} px)",
                                           GENERATOR_KIND, info, dataset_id=dataset_id)


def fit_generator(ds, attribute: str, out_dir: str | Path, *, splits=None, split_seed: int = 0,
                  image_size: int = 32, size: str = "tiny", vae_steps: int = 400, unet_steps: int = 1500,
                  batch_size: int = 32, resume: bool = False, seed: int = 0, steps: int = 50,
                  checkpoint_every: int = 250, preview_every: int = 0, positive=None, max_train_images: int = 0,
                  mine_lambda: float = 0.0, mine_steps: int = 200, on_metrics=None, on_preview=None,
                  progress: ProgressFn | None = None, cancel: CancelToken | None = None):
    """Generator training on an open :class:`ImageDataset` (shared by the job and ``fairdesk-cli train
    generator``). Returns ``(TrainResult, attribute_record)``; writes ``attribute.json`` into ``out_dir``."""
    import json

    import numpy as np

    from fairdesk.core import atomic
    from fairdesk.core.data.images import binarise_attribute
    from fairdesk.core.generation.images import ATTRIBUTE_FILE, TrainSchedule, config_for_size, train_generator
    from fairdesk.core.guard import guard_outputs, owned_folder

    guard_outputs(folders=[("The generator folder", out_dir)])  # before any training, not at the first save
    rep = Reporter(progress, cancel)
    if attribute not in ds.table.columns:
        raise DataError(f"The attribute column '{attribute}' is not in the image table; available columns: "
                        f"{[c for c in ds.table.columns if not str(c).startswith('_')][:20]}.")
    if splits is None:
        splits = ds.split(seed=split_seed).to_numpy()
    a_all, names, known = binarise_attribute(ds.table[attribute], attribute, positive)
    rows = np.flatnonzero((np.asarray(splits, dtype=object) == "train") & known)
    if max_train_images and len(rows) > max_train_images:
        rows = np.sort(np.random.default_rng(seed).choice(rows, max_train_images, replace=False))
    if len(rows) < 8 or len(np.unique(a_all[rows])) < 2:
        raise DataError(f"The training split has {len(rows)} images with a known '{attribute}'"
                        f"{'' if len(rows) < 8 else ', all in one group'}; the generator needs at least 8 images "
                        "from both groups.")
    config = config_for_size(size, image_size, default_steps=steps)
    config.mine_lambda = float(mine_lambda)
    schedule = TrainSchedule(vae_steps=vae_steps, unet_steps=unet_steps, batch_size=batch_size,
                             checkpoint_every=checkpoint_every, preview_every=preview_every, seed=seed,
                             mine_steps=int(mine_steps))
    images = ds.subset(rows).load(image_size, rep.sub(0.0, 0.05), rep.cancel)
    attr = {"column": attribute, "values": names,
            "positive": None if positive is None else
            [str(v) for v in (positive if isinstance(positive, (list, tuple, set)) else [positive])]}
    with owned_folder(out_dir, "a FairDesk generator"):  # each save replaces only what FairDesk wrote there
        res = train_generator(images, a_all[rows], config, schedule, out_dir=out_dir, resume=resume, preview=on_preview,
                              metrics=on_metrics, attribute=attr, progress=rep.sub(0.05, 1.0), cancel=rep.cancel)
        atomic.write_text(Path(out_dir) / ATTRIBUTE_FILE,
                          json.dumps({"attribute": attribute, "values": names, "positive": attr["positive"],
                                      "n_train": int(len(rows))}, indent=1))
        from fairdesk.core.audits.cit_images import model_sha256

        write_training_record(out_dir, kind=GENERATOR_KIND, model_sha256=model_sha256(out_dir),
                              data_name=f"images in {Path(ds.root).name}", data_sha256=array_sha256(images, a_all[rows]),
                              parameters={"attribute": attribute, "positive": attr["positive"], "size": size,
                                          "image_size": image_size, "vae_steps": vae_steps, "unet_steps": unet_steps,
                                          "batch_size": batch_size, "seed": seed, "sampling_steps": steps,
                                          "mine_lambda": float(mine_lambda), "mine_steps": int(mine_steps),
                                          "resumed": bool(resume)})
    return res, attr


def _load_generator(project: Project, ref):
    from fairdesk.core.audits.cit_images import model_sha256
    from fairdesk.core.generation.images import load_generator

    if isinstance(ref, int) and not isinstance(ref, bool):
        m = _model(project, ref, GENERATOR_KIND)
        return load_generator(m.info["path"]), {"model_id": m.id, "name": m.name, "path": m.info["path"],
                                                "sha256": model_sha256(m.info["path"])}
    return load_generator(ref), {"path": str(Path(ref).resolve()), "name": Path(ref).name,
                                 "sha256": model_sha256(ref)}


# ==============================================================================================================
# Audit


def audit_cit(project_path: str | Path, dataset_id: int, classifier_model_id_or_path, generator_model_id_or_path,
              attribute: str, *, labels=None, control=None, split: str = "test", max_images: int = 0,
              steps: int | None = None, strength: float = 1.0, guidance: float = 1.0, margin: float = 0.02,
              alpha: float = 0.05, seed: int = 0, n_examples: int = 16, positive=None, quality: bool = True,
              full_quality: bool = False, image_size: int | None = None, outputs=None, name: str | None = None,
              progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Counterfactual-invariance audit of a classifier (model id or path) through a generator (model id or path)
    on a stored image dataset; stores the audit (kind "cit_images") and returns its id.

    ``labels``: true-label columns, one per classifier output in order, or a dict output → column (default:
    columns named like the outputs). ``control``: model id or path of a classifier known to ignore the attribute
    (the negative-control band). ``image_size`` / ``outputs``: input size (default: the generator's) and output
    names of a TorchScript classifier given by path. Other arguments as in
    :func:`fairdesk.core.audits.cit_images.run_cit_pipeline`."""
    import json

    from fairdesk.core.audits.cit_images import run_cit_pipeline

    rep = Reporter(progress, cancel)
    project = Project(project_path)
    info = project.dataset(dataset_id)
    rep(0.0, "loading the dataset and the models")
    ds = image_dataset(project_path, dataset_id)
    gen, gen_desc = _load_generator(project, generator_model_id_or_path)
    size = image_size or gen.config.image_size
    clf, clf_desc = _load_classifier(project, classifier_model_id_or_path, size, outputs)
    ctrl, ctrl_desc = (None, None)
    if control is not None:
        ctrl, ctrl_desc = _load_classifier(project, control, size)
        ctrl.name = f"negative control {ctrl_desc['name']}"
    hashes = {"classifier": clf_desc["sha256"], "generator": gen_desc["sha256"]}
    if ctrl_desc:
        hashes["control"] = ctrl_desc["sha256"]
    trained = {role: rec for role, desc in (("classifier", clf_desc), ("generator", gen_desc),
                                            ("control", ctrl_desc)) if desc
               and (rec := training_record(desc["path"], desc["sha256"])) is not None}
    origin = info.origin or {}
    prov = {"data_sha256": info.sha256, "model_hashes": hashes, "dataset": info.name, "dataset_id": dataset_id,
            "images_sha256": origin.get("images_sha256"), "csv_sha256": origin.get("csv_sha256"),
            "classifier": clf_desc, "generator": gen_desc, "control": ctrl_desc, "split": split,
            "split_seed": origin.get("split_seed"), **({"training": trained} if trained else {})}
    doc = run_cit_pipeline(ds, clf, gen, attribute, labels=labels, control=ctrl,
                           splits=ds.table["split"].to_numpy(), split=split, max_images=max_images,
                           positive=positive, steps=steps, strength=strength, guidance=guidance, margin=margin,
                           alpha=alpha, seed=seed, n_examples=n_examples, quality=quality,
                           full_quality=full_quality, provenance=prov,
                           progress=rep.sub(0.02, 0.98), cancel=rep.cancel)
    rep(0.99, "saving the audit")
    text = json.dumps(doc, allow_nan=False)
    return project.add_audit(name or f"Counterfactual invariance: {clf_desc['name']} / {attribute}", AUDIT_KIND,
                             text, dataset_id=dataset_id)


def load_cit_audit(project_path: str | Path, audit_id: int) -> tuple[dict, dict]:
    """``(doc, examples)``: the stored document and its example images decoded to float32 in [0, 1] —
    ``examples["original"|"null"|"cf"]`` (m, H, W) and ``examples["diff"]`` = cf − null (signed); row j belongs to
    ``doc["examples"]["items"][j]``."""
    import json

    from fairdesk.core.audits.cit_images import decode_examples

    project = Project(project_path, create=False)
    kind = next((a.kind for a in project.audits() if a.id == audit_id), None)
    if kind is None:
        raise DataError(f"Audit {audit_id} is not in project {project.name}.")
    if kind != AUDIT_KIND:
        raise DataError(f"Audit {audit_id} is a '{kind}' audit, not a counterfactual-invariance audit of images.")
    doc = project.audit_document(audit_id)
    return doc, decode_examples(doc)


def audit_cit_predictions(project_path: str | Path, csv_path: str | Path, attribute: str, *, positive=None,
                          margin: float = 0.02, alpha: float = 0.05, seed: int = 0, name: str | None = None,
                          progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """The "folder of predictions" route: a CSV of the classifier's outputs on originals and counterfactuals
    computed elsewhere (columns: :data:`fairdesk.core.audits.cit_images.PREDICTION_TABLE_COLUMNS`) is stored as a
    dataset (kind "cit_predictions") and audited without a generator. Returns the audit id (kind "cit_images")."""
    import json

    from fairdesk.core.audits.cit_images import audit_prediction_table
    from fairdesk.core.data.loaders import file_sha256, load_table

    rep = Reporter(progress, cancel)
    rep(0.0, "reading the predictions")
    df = load_table(csv_path)
    sha = file_sha256(csv_path)
    doc = audit_prediction_table(df, attribute, positive=positive, margin=margin, alpha=alpha, seed=seed,
                                 provenance={"data_sha256": sha, "dataset": Path(csv_path).name},
                                 progress=rep.sub(0.05, 0.95), cancel=rep.cancel)
    project = Project(project_path)
    rep(0.98, "saving the audit")
    with project.transaction():  # the table and its audit together or not at all
        did = project.add_dataset(f"Predictions: {Path(csv_path).name}", df, sha, kind="cit_predictions",
                                  source=str(Path(csv_path).resolve()), origin={"attribute": attribute})
        return project.add_audit(name or f"Counterfactual invariance (predictions table): {attribute}",
                                 AUDIT_KIND, json.dumps(doc, allow_nan=False), dataset_id=did)
