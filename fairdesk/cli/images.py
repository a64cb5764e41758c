"""Imaging commands of ``fairdesk-cli``: ``audit cit`` and ``train generator``.

Wired into :mod:`fairdesk.cli` by ``add_image_commands(audit_subparsers, train_subparsers)``. Same conventions as
the rest of the CLI: exit 0 on success, user errors raise :class:`FairDeskError` (exit 2), cancel → 130.
``audit cit`` and ``audit cit-predictions`` call the GUI's jobs (:func:`fairdesk.jobs.images.audit_cit`,
:func:`~fairdesk.jobs.images.audit_cit_predictions`) on ``--project`` or a scratch project and write the stored
document (``--pdf``: the report through ``export_report``), see :mod:`fairdesk.cli.outputs`.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from fairdesk.console import say
from fairdesk.core import numbers
from fairdesk.cli.args import add_html, add_release_json, split_list
from fairdesk.cli.progress import TerminalProgress


def _roles(args, labels: tuple[str, ...] = ()):
    """The image roles the options name, the rest guessed from the table's column names."""
    from fairdesk.core.data.images import ImageRoles, default_roles
    from fairdesk.core.data.loaders import load_table

    guessed = default_roles(load_table(args.data))
    return ImageRoles(path=args.path_column or guessed.path, labels=labels or guessed.labels,
                      attributes=(args.attribute,), patient_id=args.patient_id or guessed.patient_id)


def _open(args, labels: tuple[str, ...] = ()):
    from fairdesk.core.data.images import open_image_folder
    from fairdesk.core.data.loaders import load_table

    return open_image_folder(load_table(args.data), args.images, _roles(args, labels))


def _positive(args):
    values = split_list(getattr(args, "positive", None))
    return values or None


def cmd_audit_cit(args: argparse.Namespace) -> int:
    """The GUI's jobs on ``--project`` or a scratch project: :func:`~fairdesk.jobs.images.import_image_dataset`
    (the table first: its problems show before any model loads), then :func:`~fairdesk.jobs.images.audit_cit`."""
    from fairdesk.cli.outputs import audit_project
    from fairdesk.jobs.images import audit_cit, import_image_dataset

    _check(args, [("the data table (--data)", args.data), ("the images folder (--images)", args.images)],
           [("the classifier (--classifier)", args.classifier), ("the generator folder (--generator)", args.generator),
            ("the control classifier (--control)", args.control)])
    labels = tuple(split_list(args.labels))
    roles = _roles(args, labels)
    progress = TerminalProgress(args.quiet)
    with audit_project(args.project) as project:
        # a failed audit leaves the imported image table in --project, as importing it in the GUI does
        dataset_id = import_image_dataset(project, args.data, args.images, roles, name=Path(args.data).name,
                                          split_seed=args.split_seed, progress=lambda f, m: progress(0.1 * f, m))
        audit_id = audit_cit(project, dataset_id, args.classifier, args.generator, args.attribute,
                             labels=labels or None, control=args.control, split=args.split,
                             max_images=args.max_images, steps=args.steps, strength=args.strength,
                             guidance=args.guidance, margin=args.margin, alpha=args.alpha, seed=args.seed,
                             n_examples=args.examples, positive=_positive(args), full_quality=args.full_quality,
                             image_size=args.image_size, outputs=tuple(split_list(args.outputs)) or None,
                             progress=lambda f, m: progress(0.1 + 0.9 * f, m))
        progress.done()
        return _write_outputs(project, audit_id, args)


def cmd_audit_cit_predictions(args: argparse.Namespace) -> int:
    """The GUI's job :func:`~fairdesk.jobs.images.audit_cit_predictions` on ``--project`` or a scratch project."""
    from fairdesk.cli.outputs import audit_project
    from fairdesk.jobs.images import audit_cit_predictions

    _check(args, [("the predictions table (--predictions)", args.predictions)])
    progress = TerminalProgress(args.quiet)
    with audit_project(args.project) as project:
        audit_id = audit_cit_predictions(project, args.predictions, args.attribute, positive=_positive(args),
                                         margin=args.margin, alpha=args.alpha, seed=args.seed, progress=progress)
        progress.done()
        return _write_outputs(project, audit_id, args)


def _check(args: argparse.Namespace, inputs, model_folders=()) -> None:
    """Refuse --json/--pdf that would overwrite an input, the project, a model file or each other (before any
    work; :func:`~fairdesk.core.guard.guard_outputs`)."""
    from fairdesk.core.guard import guard_outputs

    guard_outputs([("--json", args.json), ("--release-json", args.release_json), ("--pdf", args.pdf), ("--html", args.html)], inputs=inputs,
                  models=model_folders,
                  project=("the project (--project)", args.project))


def _write_outputs(project: str, audit_id: int, args: argparse.Namespace) -> int:
    """The stored document as ``--json`` (atomic), a summary line per output and, with ``--pdf``, the report
    through ``export_report``."""
    from fairdesk.cli.outputs import release_of, stored_where, write_outputs, write_pdf

    doc = write_outputs(project, audit_id, args.json, suppress_k=args.suppress_k, release=release_of(args),
                        html_path=args.html)
    _print_summary(doc)
    say(f"-> {args.json}")
    if args.pdf:
        say(f"-> {write_pdf(project, audit_id, args.pdf, args.suppress_k)}")
    if args.project:
        say(stored_where(args.project, audit_id))
    return 0


def _print_summary(doc: dict) -> None:
    for row in doc["table"]:
        extra = f", DP {numbers.p_equals(row['dp_p'])}" if row.get("dp_p") is not None else ""
        say(f"{row['output']}: test {numbers.p_equals(row['p'])} ({numbers.p_equals(row['q'], 'q')}){extra}, "
            f"verdict: {row['verdict']}")
    if doc.get("control_band") is not None:
        say(f"negative-control band ±{numbers.fixed(doc['control_band'], 3)}")
    if doc.get("unreadable"):
        say(f"{len(doc['unreadable'])} unreadable image(s) left out (listed in the JSON)")


def cmd_train_generator(args: argparse.Namespace) -> int:
    import numpy as np

    from contextlib import nullcontext

    from fairdesk.core.guard import guard_outputs, owned_folder
    from fairdesk.jobs.images import fit_generator

    guard_outputs(folders=[("--out", args.out), ("--previews", args.previews)],
                  inputs=[("the data table (--data)", args.data), ("the images folder (--images)", args.images)])
    ds = _open(args)
    preview = None
    if args.previews:
        from PIL import Image

        def preview(step, imgs, labels):
            row = np.concatenate(list(imgs), axis=1)
            Image.fromarray(np.round(row * 255).astype(np.uint8)).save(Path(args.previews) / f"step{step:06d}.png")

    progress = TerminalProgress(args.quiet)
    with owned_folder(args.previews, "generator previews", "--previews") if args.previews else nullcontext():
        res, _ = fit_generator(ds, args.attribute, args.out, split_seed=args.split_seed, image_size=args.image_size,
                               size=args.size, vae_steps=args.vae_steps, unet_steps=args.unet_steps,
                               batch_size=args.batch_size, resume=args.resume, seed=args.seed, steps=args.steps,
                               checkpoint_every=args.checkpoint_every, preview_every=args.preview_every,
                               positive=_positive(args), mine_lambda=args.mine_lambda, mine_steps=args.mine_steps,
                               on_preview=preview, progress=progress)
    progress.done()
    say(f"generator trained ({len(res.unet_loss)} diffusion steps, last loss "
          f"{np.mean(res.unet_loss[-20:]) if res.unet_loss else float('nan'):.4f}) -> {args.out}")
    mine = res.generator.meta.get("mine")
    if mine:
        say(f"disentangling map λ={mine['lambda']:g}: held-out MINE estimate of I(z; a) {mine['mi_z0']:.4f} nats "
              f"-> I(φ(z); a) {mine['mi_phi_z0']:.4f} nats")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="CSV: one row per image (CheXpert / MIMIC-CXR style or mapped)")
    p.add_argument("--images", required=True, help="folder the CSV's paths are relative to")
    p.add_argument("--attribute", required=True, help="sensitive attribute column (two values, or use --positive)")
    p.add_argument("--positive", action="append",
                   help="attribute value(s) forming group 1 when the column has more than two values (one value vs "
                        "the rest; repeatable or comma-separated)")
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
    cit.add_argument("--json", required=True, help="write all results here (the document the project stores)")
    cit.add_argument("--pdf", help="also write the PDF report here")
    add_html(cit)
    cit.add_argument("--suppress-k", type=int, default=11, help="counts below k show as <k in the report")
    add_release_json(cit)
    cit.add_argument("--project", help="also store the image table and the audit in this project file")
    cit.add_argument("--examples", type=int, default=16,
                     help="example units kept with their images (largest prediction change; plus 4 random)")
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
    cit.add_argument("--full-quality", action="store_true",
                     help="also composition after 10 cycles and reversibility (on up to 32 images)")
    cit.add_argument("--alpha", type=float, default=0.05)
    cit.set_defaults(func=cmd_audit_cit)

    from fairdesk.core.audits.cit_images import PREDICTION_TABLE_COLUMNS

    cp = audit_subparsers.add_parser(
        "cit-predictions", help="counterfactual invariance from precomputed predictions on originals and "
                                "counterfactuals (no generator)",
        description=PREDICTION_TABLE_COLUMNS, formatter_class=argparse.RawDescriptionHelpFormatter)
    cp.add_argument("--predictions", required=True, help="CSV/Parquet table of predictions (columns below)")
    cp.add_argument("--attribute", required=True, help="sensitive attribute column")
    cp.add_argument("--positive", action="append", help="attribute value(s) forming group 1 (one value vs the rest)")
    cp.add_argument("--json", required=True)
    cp.add_argument("--pdf")
    add_html(cp)
    cp.add_argument("--suppress-k", type=int, default=11, help="counts below k show as <k in the report")
    add_release_json(cp)
    cp.add_argument("--project", help="also store the predictions table and the audit in this project file")
    cp.add_argument("--margin", type=float, default=0.02)
    cp.add_argument("--alpha", type=float, default=0.05)
    cp.add_argument("--seed", type=int, default=0)
    cp.add_argument("--quiet", action="store_true")
    cp.set_defaults(func=cmd_audit_cit_predictions)

    gen = train_subparsers.add_parser("generator", help="train the counterfactual image generator (CPU or GPU)")
    _common(gen)
    gen.add_argument("--out", required=True, help="generator folder (checkpoints are written here)")
    gen.add_argument("--image-size", type=int, default=32)
    gen.add_argument("--size", default="tiny", choices=["tiny", "small", "base"])
    gen.add_argument("--vae-steps", type=int, default=400)
    gen.add_argument("--unet-steps", type=int, default=1500)
    gen.add_argument("--batch-size", type=int, default=32)
    gen.add_argument("--steps", type=int, default=50, help="default DDIM steps stored with the generator")
    gen.add_argument("--checkpoint-every", type=int, default=250, metavar="N",
                     help="a checkpoint every N steps (default 250); the first one comes after the first 60 s "
                          "of training, so a cancel or crash never loses more than a minute (0: only at the end "
                          "of each phase)")
    gen.add_argument("--preview-every", type=int, default=0)
    gen.add_argument("--previews", help="folder for sample preview PNGs")
    gen.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    gen.add_argument("--mine-lambda", type=float, default=0.0,
                     help="λ of the MINE disentangling map φ(z) = z + λ·m(z)/‖m(z)‖ (004 §3.3; the paper uses 1e-3; "
                          "0: no map)")
    gen.add_argument("--mine-steps", type=int, default=200,
                     help="training steps of the disentangling map (5 statistics-network updates + 1 map update "
                          "each) between the autoencoder and diffusion phases")
    gen.set_defaults(func=cmd_train_generator)
