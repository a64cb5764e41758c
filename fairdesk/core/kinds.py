"""The kind registry: every dataset, model and audit kind FairDesk knows, one row each.

An audit kind is one :class:`AuditKind` row naming, by ``"module:attribute"`` reference (never by import, so this
module stays import-light and the layers stay clean):

* ``job`` — the one function both front ends call: ``job(project_path, ..., name=None, progress=None,
  cancel=None) -> audit_id``. It runs the audit and stores its document in the project. The CLI runs it on a
  temporary project when no ``--project`` is given, so the CLI and the GUI store the same document.
* ``parser`` — ``parse(doc: dict) -> object``, the typed result of a stored document (``None``: the dict itself).
* ``report`` — ``build_report(doc: dict, path, settings: ReportSettings) -> Path``: the PDF, one signature for
  every kind, honouring every report setting (the small-cell k above all). Its module also has
  ``report_tree(doc, settings) -> Report``, which the HTML report (:func:`build_html`) and the GUI's findings render.
* ``page`` — the GUI page class showing the kind (it takes the main window).
* ``schema`` — the JSON Schema (draft 2020-12) of the kind's stored document, a file in ``resources/schemas/``.
  :func:`check_document` checks a document against it before any parser, report builder, model card or GUI page
  sees it (:meth:`fairdesk.core.project.Project.audit_document`). The schemas were derived from the documents the
  current code stores (every kind's case in ``tests/test_one_path.py``, the demo, group audits of every gap rule)
  and relaxed where older stored formats differ (group audits by earlier versions): they fix each field's
  type and the containers' shapes, allow null for any number (NaN and infinities are stored as null) and for any
  cell of a table (a list of records), and require only the fields the code reads without a default.

Who resolves what (so no layer reaches upward by import): core resolves ``parser`` and ``report``; ``fairdesk.jobs``
resolves ``job``; ``fairdesk.gui`` resolves ``page``. ``tests/test_kinds.py`` checks that every reference resolves and
that every kind string stored by the code is a row here.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from functools import lru_cache

from fairdesk.core.errors import DataError


@dataclass(frozen=True)
class ReportSettings:
    """Every setting a report builder takes. ``suppress_k``: the small-cell threshold k — counts below k print as
    "<k" everywhere (tables, figure labels, lists of dropped groups), and :func:`releasable` withholds every count
    that would give one back."""

    suppress_k: int = 11

    def __post_init__(self) -> None:
        if not isinstance(self.suppress_k, int) or self.suppress_k < 1:
            raise DataError("The small-cell threshold k must be a whole number of at least 1.")


@dataclass(frozen=True)
class AuditKind:
    name: str  # the kind string stored in the project
    title: str  # what a user reads
    job: str
    report: str
    page: str
    schema: str | None = None  # file name in resources/schemas/ (every shipped kind has one: tests/test_kinds.py)
    parser: str | None = None


@dataclass(frozen=True)
class DatasetKind:
    name: str
    title: str


@dataclass(frozen=True)
class ModelKind:
    name: str
    title: str


AUDIT_KINDS: dict[str, AuditKind] = {k.name: k for k in (
    AuditKind("groups", "Group performance gaps",
              job="fairdesk.jobs.groups:audit_groups",
              report="fairdesk.core.reports.groups:build_report",
              page="fairdesk.gui.tabs.audit:AuditTab",
              schema="groups.schema.json",
              parser="fairdesk.core.audits.groups:GroupAuditResult.from_dict"),
    AuditKind("slices", "Slices nobody named",
              job="fairdesk.jobs.slices:audit_slices",
              report="fairdesk.core.reports.slices:build_report",
              page="fairdesk.gui.tabs.slices:SlicesPage",
              schema="slices.schema.json"),
    AuditKind("mlm_bias", "Masked-language-model bias",
              job="fairdesk.jobs.text:audit_mlm_bias",
              report="fairdesk.core.reports.mlm_bias:build_report",
              page="fairdesk.gui.tabs.text_audit:MLMAuditPanel",
              schema="mlm_bias.schema.json"),
    AuditKind("note_classifiers", "Encoder comparison (note classifiers)",
              job="fairdesk.jobs.notes:compare_encoders_job",
              report="fairdesk.core.reports.encoders:build_report",
              page="fairdesk.gui.tabs.notes:NoteClassifierPanel",
              schema="note_classifiers.schema.json"),
    AuditKind("cit_images", "Counterfactual invariance (images)",
              job="fairdesk.jobs.images:audit_cit",
              report="fairdesk.core.reports.cit_images:build_report",
              page="fairdesk.gui.tabs.image_audit:ImageAuditPanel",
              schema="cit_images.schema.json"),
    AuditKind("age_independence", "Age-independent representation learners",
              job="fairdesk.jobs.age:train_age_independent",
              report="fairdesk.core.reports.age_independence:build_report",
              page="fairdesk.gui.tabs.age:AgeLearnersPage",
              schema="age_independence.schema.json"),
    AuditKind("ctf", "Counterfactual token fairness (text classifiers)",
              job="fairdesk.jobs.ctf:audit_ctf",
              report="fairdesk.core.reports.ctf:build_report",
              page="fairdesk.gui.tabs.ctf:CTFAuditPage",
              schema="ctf.schema.json"),
    AuditKind("monitor", "Fairness over time (monitor)",
              job="fairdesk.jobs.monitor:watch_model",
              report="fairdesk.core.reports.monitor:build_report",
              page="fairdesk.gui.tabs.monitor:MonitorPage",
              schema="monitor.schema.json"),
)}

DATASET_KINDS: dict[str, DatasetKind] = {k.name: k for k in (
    DatasetKind("predictions", "Predictions (label, score, group columns)"),
    DatasetKind("features", "Features table"),
    DatasetKind("images", "Image dataset"),
    DatasetKind("cit_predictions", "Counterfactual predictions (scored elsewhere)"),
    DatasetKind("text", "Texts (a text column, optional 0/1 label)"),
    DatasetKind("ctf_pairs", "Counterfactual text pairs (scored elsewhere)"),
)}

MODEL_KINDS: dict[str, ModelKind] = {k.name: k for k in (
    ModelKind("logistic_regression", "Logistic regression"),
    ModelKind("gradient_boosting", "Gradient boosting"),
    ModelKind("random_forest", "Random forest"),
    ModelKind("mlp", "Multilayer perceptron"),
    ModelKind("masked_lm", "Masked language model"),
    ModelKind("note_mlp", "Note classifier (frozen encoder + MLP)"),
    ModelKind("image_classifier", "Image classifier"),
    ModelKind("image_generator", "Counterfactual image generator"),
    ModelKind("age_independent", "Age-independent learners and baselines (cross-validated)"),
    ModelKind("text_classifier", "Text classifier (CNN, with a counterfactual remedy)"),
    ModelKind("hf_sequence_classifier", "Hugging Face sequence classifier (local folder)"),
)}


def audit_kind(name: str) -> AuditKind:
    try:
        return AUDIT_KINDS[name]
    except KeyError:
        raise DataError(f"Audits of kind '{name}' are not known to this version of FairDesk "
                        f"(known: {', '.join(AUDIT_KINDS)}).") from None


def resolve(ref: str):
    """The object a ``"package.module:attr.attr"`` reference names (imported on first use)."""
    module, _, attrs = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attrs.split("."):
        obj = getattr(obj, part)
    return obj


def parse_document(name: str, doc: dict):
    """The typed result of a stored audit document of kind ``name`` (the dict itself for kinds without a parser)."""
    kind = audit_kind(name)
    return resolve(kind.parser)(doc) if kind.parser else doc


@lru_cache(maxsize=None)
def document_schema(name: str) -> dict:
    """The JSON Schema of kind ``name``'s stored document (read once from ``resources/schemas/``)."""
    from fairdesk.paths import resources_dir

    path = resources_dir() / "schemas" / audit_kind(name).schema
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(f"The document schema {path} cannot be read ({err}); reinstall FairDesk.") from err


@lru_cache(maxsize=None)
def schema_digest(name: str) -> str:
    """SHA-256 of kind ``name``'s schema as validated (canonical JSON of :func:`document_schema`): a document checked
    against one schema is checked again when the schema changes
    (:meth:`fairdesk.core.project.Project.audit_document`)."""
    import hashlib

    return hashlib.sha256(json.dumps(document_schema(name), sort_keys=True).encode("utf-8")).hexdigest()


def schema_problems(instance, schema: dict, limit: int = 3) -> list[str]:
    """Up to ``limit`` ways ``instance`` breaks ``schema``, each "where: what" (``/records/0/gap: 'x' is not of
    type 'number', 'null'``), shallowest first; empty when it validates. One validator (jsonschema, draft 2020-12)
    for every schema FairDesk ships."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(instance), key=lambda e: (len(e.path), list(map(str, e.path))))
    return [f"/{'/'.join(map(str, e.path))}: {_short(e.message)}" for e in errors[:limit]]


def _short(message: str, limit: int = 160) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[:limit - 1] + "…"


def check_document(name: str, doc) -> list[str]:
    """How a stored document of kind ``name`` breaks its kind's schema (empty: it may be parsed and reported)."""
    if audit_kind(name).schema is None:
        return []
    return schema_problems(doc, document_schema(name))


def prepare_document(name: str, doc: dict, settings: ReportSettings) -> dict:
    """The document a report of kind ``name`` is built from, whatever its format: the one step before every PDF,
    HTML report and on-screen findings (a document-level release step belongs here, so that each format shows the
    same): its releasable copy (:func:`releasable`); a newer version's document without the keys this version does
    not know, which ``"ignored_keys"`` names (:func:`without_ignored_keys`)."""
    audit_kind(name)
    doc, ignored = without_ignored_keys(name, doc)  # a copy: the document as stored keeps what it holds
    out = releasable(name, doc, settings)
    if ignored:
        out = {**out, IGNORED_KEYS: ignored}
    return out


def report_tree(name: str, doc: dict, settings: ReportSettings | None = None):
    """The report tree (:class:`fairdesk.core.reports.document.Report`) of an audit document of kind ``name``: the
    ``report_tree`` of the module its ``report`` names, on the prepared document (:func:`prepare_document`)."""
    settings = settings or ReportSettings()
    module = audit_kind(name).report.partition(":")[0]
    return resolve(f"{module}:report_tree")(prepare_document(name, doc, settings), settings)


def build_report(name: str, doc: dict, path, settings: ReportSettings | None = None):
    """Write the PDF of an audit document of kind ``name``: the one route every front end uses."""
    settings = settings or ReportSettings()
    return resolve(audit_kind(name).report)(prepare_document(name, doc, settings), path, settings)


def build_html(name: str, doc: dict, path, settings: ReportSettings | None = None):
    """Write the self-contained HTML report of an audit document of kind ``name``: the same report tree as the PDF
    (:func:`report_tree`), rendered by :mod:`fairdesk.core.reports.html`."""
    return resolve("fairdesk.core.reports.html:write_html")(report_tree(name, doc, settings), path)


def releasable(name: str, doc: dict, settings: ReportSettings | None = None) -> dict:
    """The copy of an audit document of kind ``name`` that may leave the workstation: small cells withheld (and
    every count that would give one back), rates banded, numbers rounded, the rules applied recorded in
    ``doc["disclosure"]`` (:func:`fairdesk.core.disclosure.release`). Every shareable artefact is built from it."""
    from fairdesk.core.disclosure import release

    if isinstance(doc.get("disclosure"), dict) and doc["disclosure"].get("for_release"):
        return doc  # released already (at this or a stricter k: the caller's own choice)
    return release(name, doc, (settings or ReportSettings()).suppress_k)


#: the key of a prepared document (:func:`prepare_document`) naming the keys of a newer version's document that this
#: version ignored; the report's last note and the model card's limitations say so
IGNORED_KEYS = "ignored_keys"
#: top-level parts of a document that are open records (how it was made; the release rules the reader adds), whose
#: keys are never "unknown"
OPEN_PARTS = ("provenance", "disclosure", IGNORED_KEYS)


def newer_version(doc) -> str | None:
    """The FairDesk version that stored ``doc`` when it is newer than this one (its ``provenance.versions``),
    else None (this version, an older one, or not recorded)."""
    from fairdesk import __version__

    stored = ((doc.get("provenance") or {}).get("versions") or {}).get("fairdesk") if isinstance(doc, dict) else None
    if not isinstance(stored, str):
        return None
    mine, theirs = _release(__version__), _release(stored)
    return stored if mine is not None and theirs is not None and theirs > mine else None


def _release(text: str) -> tuple[int, ...] | None:
    import re

    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    return tuple(int(x) for x in m.group(1).split(".")[:4]) if m else None


def unknown_keys(name: str, doc) -> list[str]:
    """The keys of a document of kind ``name`` its kind's schema does not describe, as paths ("plan.x_new",
    "slices[].x_new"), each once, in document order. A key is unknown where an object's schema lists its
    ``properties`` and has no ``additionalProperties`` for the rest (an object whose keys are names, such as
    thresholds by task, has them and so has no unknown keys). Nothing is removed: code reads the keys it knows."""
    if not isinstance(doc, dict) or audit_kind(name).schema is None:
        return []
    found: dict[str, None] = {}
    _unknown(doc, document_schema(name), "", found, 0)
    return list(found)


def ignored_keys(name: str, doc) -> list[str]:
    """What a note says this version ignored in a document of kind ``name``: its :func:`unknown_keys` when a newer
    FairDesk stored it (a document of this or an earlier version has nothing a later version added; the schemas
    need not list every key this version writes)."""
    return unknown_keys(name, doc) if newer_version(doc) else []


def without_ignored_keys(name: str, doc) -> tuple[dict, list[str]]:
    """A newer version's document of kind ``name`` as this version reads it — a copy without the keys
    :func:`ignored_keys` names, which its ``"ignored_keys"`` lists — and those keys; any other document as it is,
    and no keys. (Reading its own result again gives it back with the same keys.)"""
    if not newer_version(doc) or not isinstance(doc, dict) or audit_kind(name).schema is None:
        return doc, []
    found: dict[str, None] = {}
    out = _unknown(doc, document_schema(name), "", found, 0, drop=True)
    if not found:
        return doc, [str(k) for k in doc.get(IGNORED_KEYS) or [] if isinstance(doc.get(IGNORED_KEYS), list)]
    return {**out, IGNORED_KEYS: list(found)}, list(found)


def _unknown(value, schema, path: str, found: dict, depth: int, drop: bool = False):
    """Collect in ``found`` the paths of keys ``schema`` does not describe; with ``drop``, return ``value``
    without them (copied only where something is left out)."""
    if not isinstance(schema, dict) or depth > 60:  # (documents are read with a depth limit well below this)
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        more = schema.get("additionalProperties")
        out, changed = {}, False
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            sub = None
            if depth == 0 and key in OPEN_PARTS:
                pass
            elif isinstance(props, dict) and key in props:
                sub = props[key]
            elif isinstance(more, dict):
                sub = more
            elif isinstance(props, dict) and more is None:
                found.setdefault(where)
                changed = True
                continue
            out[key] = _unknown(item, sub, where, found, depth + 1, drop) if sub is not None else item
            changed = changed or out[key] is not item
        return out if drop and changed else value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        out = [_unknown(item, schema["items"], f"{path}[]", found, depth + 1, drop) for item in value]
        return out if drop and any(a is not b for a, b in zip(out, value)) else value
    return value


def newer_keys_note(keys: list[str], what: str = "the stored document", version: str | None = None,
                    limit: int = 6) -> str:
    """The one note a report, a model card or a model folder's reader gives about keys this version does not
    know and ignored."""
    from fairdesk import __version__

    keys = [k if len(k) <= 80 else k[:60] + "…" + k[-12:] for k in map(str, keys)]  # a key is data: any length
    shown = ", ".join(keys[:limit]) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")
    by = f" (FairDesk {version}; this is {__version__})" if version else ""
    return f"Written by a newer FairDesk{by}? {what} holds keys this version does not know, ignored: {shown}."
