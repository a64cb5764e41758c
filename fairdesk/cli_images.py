"""Imaging commands of ``fairdesk-cli`` (issue 4): ``audit cit`` and ``train generator``.

Wired into :mod:`fairdesk.cli` by ``add_image_commands(audit_subparsers, train_subparsers)``. Same conventions as
the rest of the CLI: exit 0 on success, user errors raise :class:`FairDeskError` (exit 2), cancel → 130.
The PDF report of the imaging audit is not written yet, so ``audit cit`` has no ``--pdf`` option.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from fairdesk.core.errors import FairDeskError


def _progress(quiet: bool):
    from fairdesk.cli import TerminalProgress

    return TerminalProgress(quiet)


def _split_list(values) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def _open(args, labels: tuple[str, ...] = ()):
    from fairdesk.core.data.images import ImageRoles, default_roles, open_image_folder

    import pandas as pd

    df = pd.read_csv(args.data)
    guessed = default_roles(df)
    roles = ImageRoles(path=args.path_column or guessed.path, labels=labels or guessed.labels,
                       attributes=(args.attribute,), patient_id=args.patient_id or guessed.patient_id)
    return open_image_folder(df, args.images, roles)


def _binary(values, column: str):
    import numpy as np

    vals = sorted(set(values.tolist()))
    if len(vals) != 2:
        raise FairDeskError(f"The attribute '{column}' must have exactly two values for this audit; it has "
                            f"{len(vals)} ({vals[:5]}).")
    return (values == vals[1]).astype(int).to_numpy(), [str(v) for v in vals]


def cmd_audit_cit(args: argparse.Namespace) -> int:
    import numpy as np

    from fairdesk.core import atomic
    from fairdesk.core.audits.cit_images import audit_with_generator
    from fairdesk.core.data.loaders import file_sha256
    from fairdesk.core.generation.images import load_generator
    from fairdesk.core.models.image_classifier import load_classifier

    gen = load_generator(args.generator)
    size = gen.config.image_size
    clf = load_classifier(args.classifier, image_size=args.image_size or size,
                          outputs=tuple(_split_list(args.outputs)) or None)
    labels = tuple(_split_list(args.labels))
    ds = _open(args, labels)
    part = ds.table.index.to_numpy()
    if args.split != "all":
        split = ds.split(seed=args.split_seed)
        part = np.flatnonzero(split.to_numpy() == args.split)
    if args.max_images and len(part) > args.max_images:
        part = np.sort(np.random.default_rng(args.seed).choice(part, args.max_images, replace=False))
    table = ds.table.iloc[part].reset_index(drop=True)
    if len(table) < 20:
        raise FairDeskError(f"Only {len(table)} readable images in the '{args.split}' split; the audit needs at "
                            "least 20.")
    a, values = _binary(table[args.attribute], args.attribute)
    progress = _progress(args.quiet)
    from fairdesk.core.data.images import read_image

    images = np.stack([read_image(f, size) for f in table["_file"]])
    lab = None
    if labels:
        names = list(clf.outputs)
        lab = {n: table[c].to_numpy(dtype=float) for n, c in zip(names, labels)}
        lab = {n: np.nan_to_num(v, nan=0.0) for n, v in lab.items()}
    control = load_classifier(args.control, image_size=args.image_size or size) if args.control else None
    if control is not None:
        control.name = f"negative control {Path(args.control).name}"
    prov = {"data_sha256": file_sha256(args.data), "dataset": Path(args.data).name,
            "classifier": str(args.classifier), "generator": str(args.generator), "attribute": args.attribute,
            "attribute_values": values, "split": args.split, "n_unreadable": len(ds.unreadable)}
    result, _ = audit_with_generator(images, a, clf, gen, labels=lab, control=control, steps=args.steps,
                                     strength=args.strength, guidance=args.guidance, margin=args.margin,
                                     alpha=args.alpha, seed=args.seed, provenance=prov, progress=progress)
    result.settings["unreadable"] = ds.unreadable
    progress.done()
    atomic.write_text(args.json, result.to_json())
    for row in result.table:
        print(f"{row['output']}: test p = {row['p']:.3g} (q = {row['q']:.3g}), DP p = {row['dp_p']:.3g}, "
              f"verdict: {row['verdict']}")
    if result.control_band is not None:
        print(f"negative-control band ±{result.control_band:.3g}")
    print(f"-> {args.json}")
    return 0


def cmd_train_generator(args: argparse.Namespace) -> int:
    import json

    import numpy as np

    from fairdesk.core import atomic
    from fairdesk.core.data.images import read_image
    from fairdesk.core.generation.images import GeneratorConfig, TrainSchedule, train_generator

    ds = _open(args)
    split = ds.split(seed=args.split_seed)
    train = ds.table[split.to_numpy() == "train"].reset_index(drop=True)
    a, values = _binary(train[args.attribute], args.attribute)
    images = np.stack([read_image(f, args.image_size) for f in train["_file"]])
    sizes = {"tiny": ((8, 16, 16), (32, 64)), "small": ((16, 32, 32), (64, 128)),
             "base": ((32, 64, 128, 128), (128, 256, 256))}
    vae_ch, unet_ch = sizes[args.size]
    config = GeneratorConfig(image_size=args.image_size, vae_channels=vae_ch, unet_channels=unet_ch,
                             default_steps=args.steps)
    schedule = TrainSchedule(vae_steps=args.vae_steps, unet_steps=args.unet_steps, batch_size=args.batch_size,
                             checkpoint_every=args.checkpoint_every, preview_every=args.preview_every,
                             seed=args.seed)
    preview = None
    if args.previews:
        from PIL import Image

        def preview(step, imgs, labels):
            row = np.concatenate(list(imgs), axis=1)
            Image.fromarray(np.round(row * 255).astype(np.uint8)).save(Path(args.previews) / f"step{step:06d}.png")

        Path(args.previews).mkdir(parents=True, exist_ok=True)
    progress = _progress(args.quiet)
    res = train_generator(images, a, config, schedule, out_dir=args.out, resume=args.resume, preview=preview,
                          progress=progress)
    progress.done()
    atomic.write_text(Path(args.out) / "attribute.json",
                      json.dumps({"attribute": args.attribute, "values": values, "n_train": int(len(a))}))
    print(f"generator trained ({len(res.unet_loss)} diffusion steps, last loss "
          f"{np.mean(res.unet_loss[-20:]) if res.unet_loss else float('nan'):.4f}) -> {args.out}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="CSV: one row per image (CheXpert / MIMIC-CXR style or mapped)")
    p.add_argument("--images", required=True, help="folder the CSV's paths are relative to")
    p.add_argument("--attribute", required=True, help="binary sensitive attribute column")
    p.add_argument("--path-column", help="image path column (default: Path/path/... as found)")
    p.add_argument("--patient-id", help="patient id column (default: patient_id/subject_id or parsed from paths)")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the patient-disjoint train/val/test split")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true")


def add_image_commands(audit_subparsers, train_subparsers) -> None:
    cit = audit_subparsers.add_parser("cit", help="counterfactual invariance of an image classifier (METHODS §6)")
    _common(cit)
    cit.add_argument("--classifier", required=True, help="classifier folder (config.json + safetensors) or "
                                                         "TorchScript file")
    cit.add_argument("--generator", required=True, help="generator folder written by 'train generator'")
    cit.add_argument("--json", required=True, help="write all results here")
    cit.add_argument("--labels", action="append", help="true-label columns, one per classifier output (for EO)")
    cit.add_argument("--outputs", action="append", help="output names of a TorchScript classifier")
    cit.add_argument("--image-size", type=int, help="input size of a TorchScript classifier (default: generator's)")
    cit.add_argument("--control", help="a classifier known to ignore the attribute: sets the negative-control band")
    cit.add_argument("--split", default="test", choices=["train", "val", "test", "all"],
                     help="which patient-disjoint split to audit")
    cit.add_argument("--max-images", type=int, default=0, help="audit a random subset of this size (0: all)")
    cit.add_argument("--steps", type=int, help="DDIM steps (default: the generator's)")
    cit.add_argument("--strength", type=float, default=1.0, help="share of the schedule to invert (partial noise)")
    cit.add_argument("--guidance", type=float, default=1.0, help="classifier-free guidance scale for a'")
    cit.add_argument("--margin", type=float, default=0.02, help="equivalence margin on the prediction shift")
    cit.add_argument("--alpha", type=float, default=0.05)
    cit.set_defaults(func=cmd_audit_cit)

    gen = train_subparsers.add_parser("generator", help="train the counterfactual image generator (CPU or GPU)")
    _common(gen)
    gen.add_argument("--out", required=True, help="generator folder (checkpoints are written here)")
    gen.add_argument("--image-size", type=int, default=32)
    gen.add_argument("--size", default="tiny", choices=["tiny", "small", "base"])
    gen.add_argument("--vae-steps", type=int, default=400)
    gen.add_argument("--unet-steps", type=int, default=1500)
    gen.add_argument("--batch-size", type=int, default=32)
    gen.add_argument("--steps", type=int, default=50, help="default DDIM steps stored with the generator")
    gen.add_argument("--checkpoint-every", type=int, default=250)
    gen.add_argument("--preview-every", type=int, default=0)
    gen.add_argument("--previews", help="folder for sample preview PNGs")
    gen.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    gen.set_defaults(func=cmd_train_generator)
