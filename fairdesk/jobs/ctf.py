"""Job functions of counterfactual token fairness (METHODS §5): train a text classifier with a remedy,
audit one, and the export / import path for models FairDesk cannot run.

Each job is ``job(project_path, ..., name=None, progress=None, cancel=None) -> id``, called by the CLI (on a
temporary project when no ``--project`` is given) and, later, by the GUI, so both store the same document.
Everything is computed before anything is stored, and the records of one job are stored in one transaction: a
cancelled or failed job leaves the project as it was. torch is imported by the core functions, inside functions.

Project records
    * model kind ``"text_classifier"``: ``info`` holds ``path`` (absolute folder), ``fingerprint`` and ``sha256``
      (of ``config.json`` and ``model.safetensors``), ``method``, ``lambda``, ``pair_loss``, ``seed``, ``epochs``,
      ``terms`` (name, kind, groups, sha256), ``data`` (name, sha256, columns, n), ``history`` (the training curve:
      loss and pairing loss per epoch), ``uses_madlibs``, ``resume`` (True when the run continued from a
      checkpoint), ``resumed_from_epoch`` and ``epochs_done``.
    * dataset kind ``"text"``: the table a model was trained on or an audit read (when given as a file).
    * dataset kind ``"ctf_pairs"``: the pairs exported for scoring elsewhere, or the scored pairs imported.
    * audit kind ``"ctf"``: :meth:`fairdesk.core.audits.ctf.CTFResult.to_dict` plus ``model``, ``data``,
      ``unknown_terms``, ``notes``, ``attribution`` and ``group_rates.pair_gaps`` (see :func:`audit_ctf`); the JSON
      ``fairdesk-cli audit ctf --json`` writes is this stored document.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

from fairdesk.core.errors import DataError, ModelError
from fairdesk.core.models.training_record import training_record, write_training_record
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project
from fairdesk.core.text.madlibs import SYNTHETIC_ROWS

MODEL_KIND = "text_classifier"
NOTE_MODEL_KIND = "note_mlp"  # note classifiers (fairdesk.core.models.note_classifier): not runnable here, see below
AUDIT_KIND = "ctf"
TEXT_DATASET = "text"
PAIRS_DATASET = "ctf_pairs"
#: the checkpoint folder inside a model's output folder (resume)
CHECKPOINT_SUBDIR = "checkpoints"
#: method names as the CLI spells them -> the core's
METHOD_ALIASES = {"clp-nontox": "clp_nontox"}


# ==============================================================================================================
# Inputs


def _threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(int(n))


def _file(data):
    """``data`` when it names a file (not a dataset id or a table in memory), else None."""
    return data if isinstance(data, (str, os.PathLike)) else None


def load_any_table(project: Project | None, data) -> tuple:
    """``(frame, sha256, name, dataset_id, source)`` of a table given as a file path or a project dataset id."""
    from fairdesk.core.data.loaders import file_sha256, load_table

    if isinstance(data, int) and not isinstance(data, bool):
        if project is None:
            raise DataError("A dataset id needs a project.")
        info = project.dataset(data)
        return project.load_dataset(info.id), info.sha256, info.name, info.id, None
    path = Path(data)
    df = load_table(path)
    return df, file_sha256(path), path.name, None, str(path.resolve())


def read_text_table(project: Project | None, data, text_col: str, label_col: str | None = None,
                    id_col: str | None = None) -> dict:
    """The texts (and 0/1 labels, ids) of a table given as a file path or a project dataset id, checked.

    Returns ``{"frame", "texts", "labels", "ids", "sha256", "name", "dataset_id", "source"}``.
    """
    import numpy as np
    import pandas as pd

    df, sha, name, dataset_id, source = load_any_table(project, data)
    for option, col in (("text", text_col), ("label", label_col), ("id", id_col)):
        if col is not None and col not in df.columns:
            shown = ", ".join(map(str, list(df.columns)[:12])) + (", …" if len(df.columns) > 12 else "")
            raise DataError(f"{name} has no column '{col}' (the {option} column); its columns are: {shown}.")
    texts = ["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in df[text_col]]
    if not any(t.strip() for t in texts):
        raise DataError(f"The text column '{text_col}' of {name} is empty in every row.")
    labels = None
    if label_col is not None:
        raw = pd.to_numeric(df[label_col], errors="coerce")
        bad = raw.isna() | ~raw.isin([0, 1])
        if bad.any():
            first = df[label_col][bad].iloc[0]
            raise DataError(f"The label column '{label_col}' of {name} must hold 0 or 1 in every row; {int(bad.sum())} "
                            f"row(s) do not (the first: '{first}').")
        labels = raw.to_numpy().astype(int)
    ids = list(df[id_col]) if id_col is not None else list(range(len(df)))
    if id_col is not None and len(set(map(str, ids))) != len(ids):
        raise DataError(f"The id column '{id_col}' of {name} repeats values; every row needs its own id.")
    return {"frame": df, "texts": texts, "labels": None if labels is None else np.asarray(labels), "ids": ids,
            "sha256": sha, "name": name, "dataset_id": dataset_id, "source": source}


def template_values(table: dict, template_col: str | None) -> list | None:
    """The values of the template column (``--template-col``) of a table read by :func:`read_text_table`, checked:
    every row needs one (the resampling unit of the CTF audit)."""
    if template_col is None:
        return None
    df = table["frame"]
    if template_col not in df.columns:
        shown = ", ".join(map(str, list(df.columns)[:12])) + (", …" if len(df.columns) > 12 else "")
        raise DataError(f"{table['name']} has no column '{template_col}' (--template-col); its columns are: {shown}.")
    values = df[template_col]
    empty = values.isna() | (values.astype(str).str.strip() == "")
    if empty.any():
        raise DataError(f"The template column '{template_col}' (--template-col) of {table['name']} is empty in "
                        f"{int(empty.sum())} row(s); give every row its template or leave the option out.")
    return values.astype(str).tolist()


def uses_madlibs(frame) -> bool:
    """Whether a table is (derived from) the madlibs template set: its ``template`` column names madlibs pairs."""
    from fairdesk.core.text.madlibs import TEMPLATE_PAIRS

    if "template" not in getattr(frame, "columns", ()):
        return False
    values = {str(v) for v in frame["template"].dropna().unique()}
    return bool(values) and values <= {p[0] for p in TEMPLATE_PAIRS}


def attribution(term_set_names, madlibs_data: bool) -> str | None:
    """The CC BY 4.0 attribution a result needs: the madlibs set or the Dixon et al. word lists were used."""
    from fairdesk.core.text.madlibs import MADLIBS_ATTRIBUTION

    dixon = any(str(n).startswith("dixon") for n in term_set_names)
    return MADLIBS_ATTRIBUTION if (madlibs_data or dixon) else None


def model_files_sha256(folder: str | Path) -> dict[str, str]:
    """SHA-256 of a text-classifier folder's files and one fingerprint over both."""
    folder = Path(folder)
    out = {}
    for name in ("config.json", "model.safetensors"):
        out[name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    out["fingerprint"] = hashlib.sha256((out["config.json"] + out["model.safetensors"]).encode()).hexdigest()
    return out


def _terms_record(terms) -> dict | None:
    if terms is None:
        return None
    d = terms.to_dict()
    return {k: d[k] for k in ("name", "kind", "groups", "sha256")}


def text_classifiers(project: Project) -> list:
    """The project's text-classifier records, oldest first."""
    return [m for m in project.models() if m.kind == MODEL_KIND]


# ==============================================================================================================
# Training


def train_text_classifier_job(project_path: str | Path, data, text_col: str, label_col: str, out_dir: str | Path, *,
                              method: str = "baseline", lam: float = 1.0, terms="dixon_train", pair_loss: str = "mse",
                              epochs: int = 5, batch_size: int = 64, lr: float = 2e-3, seed: int = 0,
                              threads: int | None = None, resume: bool = False, validation: float = 0.0,
                              name: str | None = None, on_epoch=None, progress: ProgressFn | None = None,
                              cancel: CancelToken | None = None) -> int:
    """Train a text CNN with a remedy (:func:`fairdesk.core.models.text_classifier.train_text_classifier`), save it
    in ``out_dir`` and store it in the project as model kind ``"text_classifier"``. Returns the model id.

    The folder's ``config.json`` records the term set for every method (baseline too: its vocabulary holds the
    terms), so ``audit ctf`` on the folder audits the same terms by default. A checkpoint is written after every
    epoch in ``out_dir/checkpoints`` (:data:`CHECKPOINT_SUBDIR`); a cancelled or failed run keeps it (the finished
    epochs) and stores nothing in the project; ``resume=True`` continues from it (same data and settings; more
    epochs allowed). After the model is saved the checkpoints are removed. ``on_epoch(record)`` is called from the
    worker with each epoch's loss (``epoch``, ``epochs``, ``loss``, ``pair_loss``, ``seconds``; ``restored`` for
    epochs read from a checkpoint) — the GUI's live loss curve. ``validation``: a share of the rows held out
    (stratified by label, seeded) and not trained on; the model's AUROC on them is recorded (``info["validation"]``).
    """
    from fairdesk.core.data.loaders import table_sha256
    from fairdesk.core.guard import guard_outputs, owned_folder
    from fairdesk.core.models.text_classifier import METHODS, clear_checkpoints, train_text_classifier
    from fairdesk.core.text.counterfactual import load_terms

    method = METHOD_ALIASES.get(method, method)
    if method not in METHODS:
        raise ModelError(f"Unknown method '{method}'; choose one of baseline, blindness, augmentation, clp, "
                         "clp-nontox.")
    if method in ("clp", "clp_nontox") and not (lam >= 0 and math.isfinite(lam)):
        raise ModelError(f"λ (--lambda) must be a number of at least 0, not {lam}.")
    if epochs < 1:
        raise ModelError("Train for at least one epoch.")
    if not (0 <= validation < 0.9):
        raise DataError(f"The validation share must lie in [0, 0.9) (0: train on every row), not {validation}.")
    guard_outputs(folders=[("The model folder", out_dir)], inputs=[("the texts", _file(data))],
                  project=("the project", project_path))
    rep = Reporter(progress, cancel)
    _threads(threads)
    project = Project(project_path)
    rep(0.0, "Reading the texts")
    table = read_text_table(project, data, text_col, label_col)
    if table["labels"] is None or len(set(table["labels"].tolist())) < 2:
        raise DataError(f"The label column '{label_col}' of {table['name']} needs both classes (0 and 1) to train.")
    term_set = load_terms(terms) if terms is not None else None
    folder = Path(out_dir).resolve()
    ckpt = folder / CHECKPOINT_SUBDIR
    train_texts, train_labels, val = table["texts"], table["labels"], None
    if validation:
        import numpy as np
        from sklearn.model_selection import train_test_split

        try:
            tr, va = train_test_split(np.arange(len(train_texts)), test_size=validation,
                                      random_state=int(seed) & 0xFFFF_FFFF, stratify=train_labels)
        except ValueError as err:
            raise DataError(f"A validation share of {validation:g} cannot be held out with both labels on each side "
                            f"({err}); use a smaller share or more rows.") from err
        tr, va = np.sort(tr), np.sort(va)
        val = ([train_texts[i] for i in va], train_labels[va])
        train_texts, train_labels = [train_texts[i] for i in tr], train_labels[tr]
    with owned_folder(folder, "a FairDesk text classifier"):  # new, empty or FairDesk's; removed if nothing is written
        clf = train_text_classifier(train_texts, train_labels, method=method, terms=term_set, lam=lam,
                                    pair_loss=pair_loss, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
                                    progress=rep.sub(0.02, 0.95), cancel=rep.cancel, checkpoint_dir=ckpt,
                                    resume=resume, on_epoch=on_epoch)
    if term_set is not None and clf.config.terms is None:
        clf.config.terms = term_set.to_dict()  # recorded for the audit's default; prediction blinds only for blindness
    val_rec = None
    if val is not None:
        rep(0.955, "Scoring the validation rows")
        perf = performance(clf.predict_proba(val[0]), val[1], over="the held-out validation rows")
        val_rec = {"fraction": float(validation), "n": perf["n"], "n_positive": perf["n_positive"],
                   "auroc": perf["auroc"], "accuracy": perf["accuracy"], "seed": int(seed)}
    rep(0.96, "Saving the model")
    rep.check()
    with owned_folder(folder, "a FairDesk text classifier"):  # what is written now is recorded as FairDesk's too
        clf.save(folder)
        hashes = model_files_sha256(folder)
        write_training_record(folder, kind=MODEL_KIND, model_sha256=hashes["fingerprint"], data_name=table["name"],
                              data_sha256=table["sha256"],
                              parameters={"method": method, "lambda": clf.config.lam, "pair_loss": pair_loss,
                                          "epochs": int(clf.config.epochs), "batch_size": int(batch_size),
                                          "lr": float(lr), "seed": int(seed), "vocab_size": len(clf.config.vocab),
                                          "terms": term_set.name if term_set is not None else None,
                                          "validation_share": float(validation), "text_column": text_col,
                                          "label_column": label_col})
    frame = table["frame"]
    madlibs_data = uses_madlibs(frame)
    info = {"path": str(folder), "fingerprint": hashes["fingerprint"], "sha256": {k: v for k, v in hashes.items()
                                                                                   if k != "fingerprint"},
            "method": method, "lambda": clf.config.lam, "pair_loss": pair_loss, "seed": int(seed),
            "epochs": int(clf.config.epochs), "batch_size": int(batch_size), "lr": float(lr),
            "vocab_size": len(clf.config.vocab),
            "terms": _terms_record(term_set),
            "data": {"name": table["name"], "sha256": table["sha256"], "text_column": text_col,
                     "label_column": label_col, "n": len(table["texts"]),
                     "n_positive": int(table["labels"].sum()), "n_trained_on": len(train_texts)},
            "validation": val_rec,
            "history": clf.config.history, "uses_madlibs": madlibs_data,
            "attribution": attribution([term_set.name] if term_set is not None else [], madlibs_data),
            "resume": clf.config.resumed_from > 0, "resumed_from_epoch": int(clf.config.resumed_from),
            "epochs_done": int(clf.config.epochs)}
    # no cancellation checks from here on: both records are written or neither
    with project.transaction():
        dataset_id = table["dataset_id"]
        if dataset_id is None:
            dataset_id = project.add_dataset(table["name"], frame, table_sha256(frame), kind=TEXT_DATASET,
                                             source=table["source"],
                                             roles={"text": text_col, "label": label_col},
                                             origin={"file_sha256": table["sha256"]})
        model_id = project.add_model(name or f"Text CNN ({method}) on {table['name']}", MODEL_KIND, info,
                                     dataset_id=dataset_id)
    clear_checkpoints(ckpt)  # the model is saved and stored: its checkpoints are no longer needed
    rep(1.0, f"stored as model #{model_id}")
    return model_id


# ==============================================================================================================
# Audit


def _model_folder(project: Project, model) -> tuple[Path, str | None]:
    """(folder, expected fingerprint) of a model given as a folder or a project model id."""
    if isinstance(model, int) and not isinstance(model, bool):
        for m in project.models():
            if m.id != model:
                continue
            if m.kind == MODEL_KIND:
                return Path(m.info["path"]), m.info.get("fingerprint")
            if m.kind == NOTE_MODEL_KIND:
                # a note_mlp record keeps the classifier's metrics, predictions and hash but not its weights
                raise ModelError(f"Model {model} is a note classifier (frozen encoder + MLP): FairDesk keeps its "
                                 "predictions but not its MLP weights, so it cannot score counterfactual texts; "
                                 "export the pairs (fairdesk-cli audit ctf-pairs), score them with it and import "
                                 "the scores (audit ctf-scores).")
        raise ModelError(f"Model {model} is not a text classifier of project {project.name}.")
    return Path(model), None


def load_scorer(folder: Path, positive_label=None) -> tuple:
    """``(scorer, model record, recorded term set or None)`` of a FairDesk text CNN folder or a local Hugging Face
    sequence-classification folder. ``scorer`` has ``predict_proba(texts)`` and ``unknown_terms(terms)``."""
    from fairdesk.core.models.hf_sequence_classifier import MODEL_KIND as HF_KIND
    from fairdesk.core.models.hf_sequence_classifier import is_hf_folder, load_sequence_classifier

    if is_hf_folder(folder):
        from fairdesk.core.models.mlm import model_fingerprint

        hf = load_sequence_classifier(folder, positive_label)
        cfg = hf.model.config
        record = {"kind": HF_KIND, "name": folder.name, "path": str(folder.resolve()),
                  "architecture": type(hf.model).__name__, "model_type": getattr(cfg, "model_type", None),
                  "num_labels": hf.n_labels, "positive_class": hf.positive,
                  "fingerprint": model_fingerprint(folder)}
        return hf, record, None
    from fairdesk.core.models.text_classifier import load_text_classifier

    clf = load_text_classifier(folder)
    hashes = model_files_sha256(folder)
    cfg = clf.config
    record = {"kind": MODEL_KIND, "name": folder.name, "path": str(folder.resolve()), "method": cfg.method,
              "lambda": cfg.lam, "pair_loss": cfg.pair_loss, "seed": cfg.seed, "epochs": cfg.epochs,
              "terms": (cfg.terms or {}).get("name"), "fingerprint": hashes["fingerprint"],
              "sha256": {k: v for k, v in hashes.items() if k != "fingerprint"}}
    return clf, record, cfg.terms


def pair_gaps(group_rates: dict) -> list[dict]:
    """Every pair of terms' TPR and TNR gap ``|rate_a − rate_b|`` per split (002 Table 3), from the per-term
    rates of the document (the core keeps the mean over pairs and the ten largest)."""
    out = []
    by_split: dict[str, list[dict]] = {}
    for rec in group_rates.get("terms") or []:
        by_split.setdefault(rec["terms"], []).append(rec)
    for split, recs in by_split.items():
        recs = sorted(recs, key=lambda r: r["term"])
        for i, a in enumerate(recs):
            for b in recs[i + 1:]:
                gap = {}
                for rate in ("tpr", "tnr"):
                    ra, rb = a.get(rate), b.get(rate)
                    gap[f"{rate}_gap"] = abs(ra - rb) if ra is not None and rb is not None else None
                if gap["tpr_gap"] is None and gap["tnr_gap"] is None:
                    continue
                out.append({"terms": split, "term": a["term"], "other_term": b["term"], **gap})
    return out


def performance(scores, labels, threshold: float = 0.5, over: str = "all audited texts") -> dict | None:
    """AUROC (sklearn) and accuracy at τ of the model's scores on the audited texts — the accuracy side of a remedy's
    trade-off. None without labels; AUROC None when only one class is present."""
    import numpy as np

    if labels is None:
        return None
    from sklearn.metrics import roc_auc_score

    y = np.asarray(labels).astype(int)
    p = np.asarray(scores, dtype=float)
    both = len(set(y.tolist())) == 2
    return {"auroc": float(roc_auc_score(y, p)) if both else None,
            "accuracy": float(((p >= threshold) == (y == 1)).mean()), "threshold": float(threshold),
            "n": int(len(y)), "n_positive": int(y.sum()), "over": over}


def _finish_document(doc: dict, *, model: dict, data: dict, unknown: dict, madlibs_data: bool,
                     synthetic: dict | None = None, synthetic_note: str | None = None) -> dict:
    """The stored document: the core's result plus what the report and the GUI need to say about it.
    ``synthetic``: the core's description of the synthetic template sample (its use needs the attribution)."""
    split_names = [v.get("name", "") for v in (doc.get("settings") or {}).get("term_sets", {}).values()]
    doc["model"] = model
    doc["data"] = data
    doc["unknown_terms"] = unknown
    notes = []
    for split, terms in unknown.items():
        if terms:
            notes.append(f"{len(terms)} {split.replace('_', '-')} term form(s) are outside the model's vocabulary "
                         f"({', '.join(terms[:8])}{', …' if len(terms) > 8 else ''}): the model reads them as an "
                         "unknown token, so swapping two of them cannot change its score and a gap of 0 between "
                         "them means nothing.")
    for rec in doc.get("ctf_gap") or []:
        # A model that reads every term of a set as the same unknown token cannot change its score when one is
        # swapped for another: a gap near 0 then says nothing about fairness, so it is never "equivalent".
        missing = unknown.get(rec.get("terms")) or []
        if missing and str(rec.get("verdict", "")).startswith("equivalent"):
            rec["verdict"] = "inconclusive"
            rec["reason"] = (f"{len(missing)} term form(s) of this set are outside the model's vocabulary: swapping "
                             "them cannot change the score, so a small gap is no evidence of equivalence")
    for rec in doc.get("term_gaps") or []:  # the same for a term the model cannot see
        missing = set(unknown.get(rec.get("terms")) or [])
        if rec.get("term") in missing and str(rec.get("verdict", "")).startswith("equivalent"):
            rec["verdict"] = "inconclusive"
            rec["reason"] = ("the term is outside the model's vocabulary: swapping it cannot change the score, so a "
                             "small gap is no evidence of equivalence")
    control = doc.get("control") or {}
    if control.get("note"):
        notes.append(control["note"])
    if synthetic and synthetic.get("note"):
        notes.append(synthetic["note"])
    if synthetic_note:
        notes.append(synthetic_note)
    doc["notes"] = notes
    synthetic_used = bool(synthetic) and not synthetic.get("note")
    doc["uses_madlibs"] = bool(madlibs_data or synthetic_used)
    doc["attribution"] = attribution(split_names, madlibs_data or synthetic_used)
    if doc.get("group_rates") is not None:
        doc["group_rates"]["pair_gaps"] = pair_gaps(doc["group_rates"])
    return doc


def _store_audit(project: Project, doc: dict, title: str, table: dict | None, kind_of_data: str,
                 roles: dict | None) -> int:
    from fairdesk.core.data.loaders import table_sha256

    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)
    with project.transaction():
        dataset_id = table["dataset_id"] if table else None
        if table is not None and dataset_id is None:
            frame = table["frame"]
            dataset_id = project.add_dataset(table["name"], frame, table_sha256(frame), kind=kind_of_data,
                                             source=table["source"], roles=roles,
                                             origin={"file_sha256": table["sha256"]})
        return project.add_audit(title, AUDIT_KIND, text, dataset_id=dataset_id)


def audit_ctf(project_path: str | Path, model, data, text_col: str, *, label_col: str | None = None,
              id_col: str | None = None, terms=None, held_out_terms=None, control_terms="control",
              max_tokens: int | None = 10, margin: float = 0.02, alpha: float = 0.05, n_boot: int = 2000,
              threshold: float = 0.5, k_control: int = 3, batch_size: int = 1024, seed: int = 0,
              positive_label: str | int | None = None, threads: int | None = None,
              synthetic: int | None = SYNTHETIC_ROWS, name: str | None = None, template_col: str | None = None,
              correction: str = "bh", progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """The CTF audit (:func:`fairdesk.core.audits.ctf.ctf_audit`) of a FairDesk text classifier (a folder or a
    project model id) or a local Hugging Face sequence-classification folder (``positive_label`` names its positive
    class when it has more than two) on a text table, stored as audit kind ``"ctf"``. Returns the audit id.

    ``terms`` None: the term set the model records (``config.json``), else ``dixon_train``. The document adds to
    the core's result: ``model`` (folder, method, λ, hashes), ``data`` (name, SHA-256, columns), ``unknown_terms``
    (per split, the term forms outside the model's vocabulary — swaps among them cannot move the score),
    ``notes`` (those and the control band's, in words), ``attribution`` (CC BY 4.0 when the madlibs set or the
    Dixon et al. lists were used) and ``group_rates.pair_gaps``.

    ``synthetic``: rows of the madlibs template set scored too, as CTF-gap records with subset ``"synthetic"``
    (default :data:`SYNTHETIC_ROWS`; None or 0: off; skipped with a note when the audited data is the madlibs set
    itself). Its use adds the CC BY 4.0 attribution. ``template_col``: a column naming each text's template, the
    unit the bootstrap resamples (default: the sentence without its identity terms). ``correction``: "bh" or
    "holm" over the per-term tests.
    """
    from fairdesk.core.audits.ctf import ctf_audit
    from fairdesk.core.text.counterfactual import TermSet, load_terms

    if not (0 < margin < 1):
        raise DataError(f"The margin must lie between 0 and 1 (a change in probability), not {margin}.")
    if n_boot < 100:
        raise DataError("Use at least 100 bootstrap replicates.")
    if max_tokens is not None and max_tokens < 1:
        raise DataError("--max-tokens must be at least 1.")
    if synthetic is not None and synthetic < 0:
        raise DataError(f"The synthetic template sample (--synthetic) must be 0 (off) or a number of rows, not "
                        f"{synthetic}.")
    rep = Reporter(progress, cancel)
    _threads(threads)
    project = Project(project_path)
    rep(0.0, "Reading the texts")
    table = read_text_table(project, data, text_col, label_col, id_col)  # the data first: its errors are cheapest
    templates = template_values(table, template_col)
    if correction not in ("bh", "holm"):
        raise DataError(f"Unknown correction '{correction}' (--correction); choose bh or holm.")
    madlibs_data = uses_madlibs(table["frame"])
    synthetic_note = None
    if synthetic and madlibs_data:
        synthetic, synthetic_note = None, ("The audited texts are the madlibs template set, so no separate synthetic "
                                           "subset was scored.")
    folder, expected = _model_folder(project, model)
    rep(0.02, "Loading the model")
    scorer, model_rec, recorded_terms = load_scorer(folder, positive_label)
    if expected and model_rec["fingerprint"] != expected:
        raise ModelError(f"The files of the model in {folder} changed since it was added to the project (its "
                         "fingerprint differs); train or add it again to audit it as it is now.")
    trained = training_record(folder, model_rec["fingerprint"])
    if terms is None:
        terms = TermSet.from_dict(recorded_terms) if recorded_terms else "dixon_train"
    train_set = load_terms(terms)
    held_set = load_terms(held_out_terms) if held_out_terms is not None else None
    unknown = {"train": scorer.unknown_terms(train_set)}
    if held_set is not None:
        unknown["held_out"] = scorer.unknown_terms(held_set)
    result = ctf_audit(table["texts"], scorer.predict_proba, table["labels"], terms=train_set,
                       held_out_terms=held_set, control_terms=control_terms, max_tokens=max_tokens, margin=margin,
                       alpha=alpha, n_boot=n_boot, threshold=threshold, k_control=k_control, batch_size=batch_size,
                       seed=seed, model_hashes={model_rec["kind"]: model_rec["fingerprint"]},
                       progress=rep.sub(0.03, 0.97), cancel=rep.cancel, synthetic=synthetic or None,
                       templates=templates, correction=correction)
    doc = result.to_dict()
    if trained is not None:
        doc["provenance"]["training"] = {"classifier": trained}
    rep.check()
    doc["performance"] = performance(scorer.predict_proba(table["texts"]), table["labels"], threshold)
    if isinstance(model, int) and not isinstance(model, bool):
        model_rec["model_id"] = model
    data_rec = {"name": table["name"], "sha256": table["sha256"], "text_column": text_col, "label_column": label_col,
                "id_column": id_col, "template_column": template_col, "n_rows": len(table["texts"])}
    doc = _finish_document(doc, model=model_rec, data=data_rec, unknown=unknown, madlibs_data=madlibs_data,
                           synthetic=(doc.get("settings") or {}).get("synthetic"), synthetic_note=synthetic_note)
    rep.check()
    roles = {"text": text_col, **({"label": label_col} if label_col else {}), **({"id": id_col} if id_col else {})}
    audit_id = _store_audit(project, doc, name or f"CTF: {folder.name} on {table['name']}", table, TEXT_DATASET,
                            roles)
    rep(1.0, f"stored as audit #{audit_id}")
    return audit_id


# ==============================================================================================================
# Models FairDesk cannot run: export the pairs, score them elsewhere, import the scores

PAIR_COLUMNS = ("id", "text", "counterfactual", "term", "counterfactual_term", "split", "kind")


def export_ctf_pairs(project_path: str | Path | None, data, text_col: str, out: str | Path, *,
                     label_col: str | None = None, id_col: str | None = None, terms="dixon_train",
                     held_out_terms=None, control_terms="control", max_tokens: int | None = 10, k_control: int = 3,
                     seed: int = 0, name: str | None = None, template_col: str | None = None,
                     progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> dict:
    """Write the identity and control pairs of a CTF audit as a table to score elsewhere
    (:data:`PAIR_COLUMNS`, plus ``label`` when a label column is given, plus empty ``score`` and
    ``counterfactual_score`` columns to fill: f(text) and f(counterfactual); with ``template_col`` that column
    too, for ``audit ctf-scores --template-col``). Written through
    :func:`fairdesk.core.export.write_table`. With a project the pairs are stored too (dataset kind
    ``"ctf_pairs"``). Returns ``{"rows", "identity", "control", "examples", "dataset_id"}``."""
    import numpy as np

    from fairdesk.core.audits.ctf import build_pairs
    from fairdesk.core.data.loaders import table_sha256
    from fairdesk.core.export import write_table
    from fairdesk.core.guard import guard_outputs

    guard_outputs([("The pairs file", out)], inputs=[("the texts", _file(data))],
                  project=("the project", project_path))
    rep = Reporter(progress, cancel)
    project = Project(project_path) if project_path is not None else None
    table = read_text_table(project, data, text_col, label_col, id_col)
    templates = template_values(table, template_col)
    pairs = build_pairs(table["texts"], terms, held_out_terms, control_terms, max_tokens, k_control, seed,
                        rep.sub(0.0, 0.9), rep.cancel)
    if not (pairs.kind == 0).any():
        raise DataError("No text mentions a term of the chosen term set within the token limit "
                        f"({max_tokens} tokens); choose another term set or raise --max-tokens.")
    frame = pairs.frame(table["ids"])
    if table["labels"] is not None:
        frame["label"] = table["labels"][pairs.example]
    if templates is not None:
        frame[template_col] = np.asarray(templates, dtype=object)[pairs.example]
    frame["score"] = np.nan
    frame["counterfactual_score"] = np.nan
    rep(0.92, "Writing the pairs")
    rep.check()
    write_table(frame, out)
    dataset_id = None
    if project is not None:
        dataset_id = project.add_dataset(name or f"CTF pairs of {table['name']}", frame, table_sha256(frame),
                                         kind=PAIRS_DATASET, source=str(Path(out).resolve()),
                                         origin={"data": table["name"], "data_sha256": table["sha256"],
                                                 "term_sets": {k: v.get("sha256") for k, v in
                                                               pairs.term_sets.items()}})
    rep(1.0, "pairs written")
    return {"rows": int(len(frame)), "identity": int((pairs.kind == 0).sum()),
            "control": int((pairs.kind == 1).sum()), "examples": int(len(set(pairs.example.tolist()))),
            "dataset_id": dataset_id}


def audit_ctf_scores(project_path: str | Path, scores, *, margin: float = 0.02, alpha: float = 0.05,
                     n_boot: int = 2000, threshold: float = 0.5, seed: int = 0, model_name: str | None = None,
                     name: str | None = None, template_col: str | None = None, correction: str = "bh",
                     progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """The CTF audit of pairs scored elsewhere: the table :func:`export_ctf_pairs` wrote with ``score`` and
    ``counterfactual_score`` filled (probabilities in [0, 1]); a ``label`` column (one value per id) gives the
    label subsets and the group rates. Stored as audit kind ``"ctf"`` with the pairs (dataset kind
    ``"ctf_pairs"``). ``template_col``: a column of the table naming each text's template (the resampling unit;
    default: the text without its identity terms). Returns the audit id."""
    import pandas as pd

    from fairdesk.core.audits.ctf import ctf_from_scored_pairs

    if not (0 < margin < 1):
        raise DataError(f"The margin must lie between 0 and 1 (a change in probability), not {margin}.")
    if n_boot < 100:
        raise DataError("Use at least 100 bootstrap replicates.")
    rep = Reporter(progress, cancel)
    project = Project(project_path)
    rep(0.0, "Reading the scored pairs")
    df, sha, table_name, dataset_id, source = load_any_table(project, scores)
    need = ["id", "text", "counterfactual", "term", "counterfactual_term", "score", "counterfactual_score"]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise DataError(f"{table_name} lacks column(s) {', '.join(missing)}; score the table written by "
                        "'fairdesk-cli audit ctf-pairs' and fill its score and counterfactual_score columns.")
    table = {"frame": df, "sha256": sha, "name": table_name, "dataset_id": dataset_id, "source": source}
    template_values(table, template_col)
    if correction not in ("bh", "holm"):
        raise DataError(f"Unknown correction '{correction}' (--correction); choose bh or holm.")
    for col in ("score", "counterfactual_score"):
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna() | (values < 0) | (values > 1)
        if bad.any():
            raise DataError(f"Column '{col}' of {table['name']} must hold a probability in [0, 1] in every row; "
                            f"{int(bad.sum())} row(s) do not (the first is row {int(bad.to_numpy().argmax()) + 2}).")
        df[col] = values
    for col in ("text", "counterfactual", "term", "counterfactual_term"):
        df[col] = df[col].fillna("").astype(str)
    labels_by_id = None
    if "label" in df.columns:
        lab = pd.to_numeric(df["label"], errors="coerce")
        if (lab.isna() | ~lab.isin([0, 1])).any():
            raise DataError(f"Column 'label' of {table['name']} must hold 0 or 1 in every row.")
        per_id = lab.groupby(df["id"]).nunique()
        if (per_id > 1).any():
            raise DataError(f"Id {per_id[per_id > 1].index[0]} of {table['name']} has two different labels.")
        labels_by_id = dict(zip(df["id"], lab.astype(int)))
    result = ctf_from_scored_pairs(df, labels_by_id, margin=margin, alpha=alpha, n_boot=n_boot,
                                   threshold=threshold, seed=seed, progress=rep.sub(0.05, 0.97), cancel=rep.cancel,
                                   template_col=template_col, correction=correction)
    result.provenance["data_sha256"] = table["sha256"]
    doc = result.to_dict()
    for split, rec in (doc["settings"].get("term_sets") or {}).items():  # the terms the imported pairs swap
        ident = df[(df.get("split", "train") == split) & (df.get("kind", "identity") == "identity")]
        rec["groups"] = sorted(set(ident["term"]) | set(ident["counterfactual_term"]))
    model_rec = {"kind": "imported scores", "name": model_name or "scored elsewhere", "source": table["name"]}
    data_rec = {"name": table["name"], "sha256": table["sha256"], "text_column": "text",
                "label_column": "label" if labels_by_id is not None else None, "id_column": "id",
                "template_column": template_col, "n_rows": int(len(df))}
    terms_used = set(df["term"]) | set(df["counterfactual_term"])
    from fairdesk.core.text.counterfactual import load_terms

    dixon = {t for t in load_terms("dixon").groups}
    doc = _finish_document(doc, model=model_rec, data=data_rec, unknown={}, madlibs_data=uses_madlibs(df))
    if labels_by_id is not None:  # f(x) of each text, from its identity rows
        ident = df[df.get("kind", "identity") == "identity"].drop_duplicates("id")
        doc["performance"] = performance(ident["score"].to_numpy(), [labels_by_id[i] for i in ident["id"]],
                                         threshold, over="the texts with a counterfactual (imported pairs)")
    if doc["attribution"] is None and terms_used & dixon and len(terms_used & dixon) >= 3:
        doc["attribution"] = attribution(["dixon"], False)
    rep.check()
    audit_id = _store_audit(project, doc, name or f"CTF: imported scores {table['name']}", table, PAIRS_DATASET,
                            {"text": "text", "score": "score"})
    rep(1.0, f"stored as audit #{audit_id}")
    return audit_id
