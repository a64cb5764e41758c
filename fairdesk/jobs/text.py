"""Job functions of the language-model audits: register or train a masked LM, run the bias probe.

Each is ``f(inputs..., progress, cancel) -> id`` like :mod:`fairdesk.jobs`; the GUI runs them on the worker
thread and the CLI could call them too. torch and transformers are imported inside the core functions they call.

Project records
    * model kind ``"masked_lm"``: ``info`` holds ``path`` (absolute folder), ``fingerprint``
      (:func:`fairdesk.core.models.mlm.model_fingerprint`), ``source`` (``"opened"`` or ``"trained"``), the
      architecture (``model_type``, ``architecture``, ``hidden_size``, ``num_layers``, ``vocab_size``,
      ``n_parameters``) and, for a trained model, ``training`` (steps, final losses, corpus hash, the history).
    * audit kind ``"mlm_bias"``: the document of :func:`fairdesk.core.audits.mlm_bias.mlm_audit_document` — the
      same JSON the CLI writes with ``--json``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from fairdesk.core.compute import set_torch_threads
from fairdesk.core.errors import ModelError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.project import Project

MODEL_KIND = "masked_lm"
AUDIT_KIND = "mlm_bias"


def _describe(folder: Path, model) -> dict:
    cfg = model.config
    return {"model_type": getattr(cfg, "model_type", None),
            "architecture": type(model).__name__,
            "hidden_size": getattr(cfg, "hidden_size", None),
            "num_layers": getattr(cfg, "num_hidden_layers", None),
            "vocab_size": getattr(cfg, "vocab_size", None),
            "max_positions": getattr(cfg, "max_position_embeddings", None),
            "n_parameters": int(sum(p.numel() for p in model.parameters()))}


def language_models(project: Project) -> list:
    """The project's masked-LM records (:class:`~fairdesk.core.project.ModelInfo`), oldest first."""
    return [m for m in project.models() if m.kind == MODEL_KIND]


def register_language_model(project_path: str | Path, folder: str | Path, name: str | None = None, *,
                            extra: dict | None = None, progress: ProgressFn | None = None,
                            cancel: CancelToken | None = None) -> int:
    """Check that ``folder`` is a local masked LM, and store it in the project (kind ``"masked_lm"``).

    The folder is loaded once with :func:`~fairdesk.core.models.mlm.load_masked_lm` (what the audit will do) so that
    a folder which is not a masked LM — no mask token, no LM head, a tokenizer that does not match — is refused now
    with the loader's :class:`ModelError`, and nothing is stored. The same folder with the same fingerprint is stored
    once: registering it again returns the existing id.
    """
    from fairdesk.core.models.mlm import check_model_folder, load_masked_lm, model_fingerprint

    rep = Reporter(progress, cancel)
    rep(0.0, "checking the folder")
    path = check_model_folder(folder).resolve()
    rep(0.1, "loading the model to check it")
    model, tokenizer = load_masked_lm(path)
    described = _describe(path, model)
    described["tokenizer_size"] = len(tokenizer)
    del model, tokenizer
    rep(0.7, "fingerprinting the weights")
    fingerprint = model_fingerprint(path)
    rep.check()
    project = Project(project_path)
    for m in language_models(project):
        if m.info.get("path") == str(path) and m.info.get("fingerprint") == fingerprint:
            rep(1.0, f"already in the project as model #{m.id}")
            return m.id
    info = {"path": str(path), "fingerprint": fingerprint, "source": "opened", **described, **(extra or {})}
    model_id = project.add_model(name or path.name, MODEL_KIND, info)
    rep(1.0, f"stored as model #{model_id}")
    return model_id


def train_language_model(project_path: str | Path, corpus: str | Path, out_dir: str | Path, config=None,
                         resume: bool = False, *, name: str | None = None,
                         on_log: Callable[[dict], None] | None = None, threads: int | None = None,
                         progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> int:
    """Train a masked LM (:func:`~fairdesk.core.models.mlm.train_mlm`) and store it in the project when training
    completes. ``on_log(record)`` gets each logged history record (the live loss curve). A cancelled or failed run
    stores nothing; its checkpoints stay in ``out_dir/checkpoints`` and ``resume=True`` continues from them."""
    from fairdesk.core.models.mlm import MLMTrainConfig, train_mlm

    rep = Reporter(progress, cancel)
    set_torch_threads(threads)
    cfg = config or MLMTrainConfig()
    result = train_mlm(corpus, out_dir, cfg, resume=resume, progress=rep.sub(0.0, 0.94), cancel=rep.cancel,
                       on_log=on_log)
    rep(0.95, "storing the model in the project")
    last = result.history[-1] if result.history else {}
    training = {"steps": result.steps, "resumed_from": result.resumed_from, "corpus": str(corpus),
                "corpus_sha256": result.provenance.get("data_sha256"), "n_notes": result.n_notes,
                "n_sequences": result.n_sequences, "classes": result.classes,
                "adversarial": bool(cfg.attribute_column), "attribute_column": cfg.attribute_column,
                "final_mlm_loss": last.get("mlm_loss"), "final_adv_accuracy": last.get("adv_accuracy"),
                "seconds": round(result.seconds, 2), "config": cfg.resolved().to_dict(), "history": result.history,
                "provenance": result.provenance}
    return register_language_model(project_path, result.out_dir, name or Path(result.out_dir).name,
                                   extra={"source": "trained", "training": training},
                                   progress=rep.sub(0.95, 1.0), cancel=rep.cancel)


def unique_names(names: list[str]) -> list[str]:
    """``["a", "a", "b"]`` -> ``["a", "a (2)", "b"]`` (model names are the keys of the audit document)."""
    out: list[str] = []
    for base in names:
        name, k = base, 2
        while name in out:
            name, k = f"{base} ({k})", k + 1
        out.append(name)
    return out


def audit_mlm_bias(project_path: str | Path, model_dirs: list, templates_path: str | Path | None = None,
                   options=None, completion: bool = False, *, names: list[str] | None = None,
                   completion_templates: str | Path | None = None, top_k: int = 5, name: str | None = None,
                   expected_fingerprints: list[str | None] | None = None,
                   threads: int | None = None, progress: ProgressFn | None = None,
                   cancel: CancelToken | None = None) -> int:
    """Run the log-probability bias probe on one model (or several: the first is the main one, the others are
    compared with it), optionally the sentence-completion probe on the first, and store the document of
    :func:`~fairdesk.core.audits.mlm_bias.mlm_audit_document` as audit kind ``"mlm_bias"``. Returns the audit id.
    Nothing is stored when it fails or is cancelled. ``expected_fingerprints`` (one per folder, e.g. those stored
    when the models were added to the project) make the audit refuse a folder whose files changed since."""
    from fairdesk.core.audits.mlm_bias import ProbeOptions, mlm_audit_document, run_mlm_bias_audit, \
        sentence_completion
    from fairdesk.core.models.mlm import load_masked_lm
    from fairdesk.core.text.templates import load_bias_templates

    if not model_dirs:
        raise ModelError("Choose at least one language model to audit.")
    rep = Reporter(progress, cancel)
    set_torch_threads(threads)
    opts = (options or ProbeOptions()).check()
    templates = load_bias_templates(templates_path)
    dirs = [str(Path(d)) for d in model_dirs]
    names = unique_names(list(names) if names else [Path(d).name or d for d in dirs])
    if len(names) != len(dirs):
        raise ModelError("Give one name per model folder.")
    results = {}
    span = 0.9 if completion else 1.0
    for i, (model_name, path) in enumerate(zip(names, dirs)):
        sub = rep.sub(span * i / len(dirs), span * (i + 1) / len(dirs))
        results[model_name] = run_mlm_bias_audit(path, templates, opts,
                                           progress=lambda f, m, s=sub, n=model_name: s(f, f"{n}: {m}"),
                                           cancel=rep.cancel)
        expected = (expected_fingerprints or [None] * len(dirs))[i]
        found = results[model_name].provenance.get("model_hashes", {}).get("masked_lm")
        if expected and found != expected:
            raise ModelError(f"The files of model '{model_name}' in {path} changed since it was added to the project "
                             "(its fingerprint differs). Open the folder again on the Model tab to audit it as it "
                             "is now.")
    done_completion = None
    if completion:
        rep(0.9, "sentence completion")
        model, tokenizer = load_masked_lm(dirs[0])
        done_completion = sentence_completion(model, tokenizer, completion_templates, top_k=top_k,
                                              progress=rep.sub(0.9, 0.99), cancel=rep.cancel)
    doc = mlm_audit_document(results, dict(zip(names, dirs)), done_completion)
    rep.check()
    title = name or ("Language-model bias: " + " vs ".join(names))
    audit_id = Project(project_path).add_audit(title, AUDIT_KIND, json.dumps(doc, ensure_ascii=False,
                                                                             allow_nan=False))
    rep(1.0, f"stored as audit #{audit_id}")
    return audit_id
