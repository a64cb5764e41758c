"""The one training record every FairDesk trainer writes into the model folder it trains.

A model FairDesk trained — a text classifier (``train text-classifier``), a masked language model (``train mlm``), an
image classifier or a counterfactual generator (``train generator``), from the CLI or the GUI — carries
``fairdesk_training.json`` beside its weights::

    {"format": "fairdesk.training/1", "kind": "text_classifier", "parameters": {...},
     "model_sha256": "<the kind's own fingerprint of the folder>",
     "training_data": {"name": "notes.csv", "sha256": "<fingerprint of the data trained on>"},
     "trained_utc": "...", "fairdesk_version": "..."}

``model_sha256`` is the hash the audits of that kind record for the model (``model_hashes``): the text CNN's
fingerprint over config and weights, the masked LM's :func:`~fairdesk.core.models.mlm.model_fingerprint`, the image
models' hash over their folder (which leaves this file out). An audit reads the record with
:func:`training_record` and keeps it in its provenance (``provenance["training"][role]``) only when that hash is the
hash of the folder it audits, so a record never describes a model that was changed after training; the model card
(:mod:`fairdesk.core.model_card`) then states kind, parameters, hash and training data. Age-independent learners are
trained inside their audit, whose document records the same facts.

The file is written atomically (a JSON text, nothing pickled) after the model's own files.
"""
from __future__ import annotations

import json
from pathlib import Path

RECORD_FILE = "fairdesk_training.json"
FORMAT = "fairdesk.training/1"


def write_training_record(folder: str | Path, *, kind: str, parameters: dict, model_sha256: str,
                          data_name: str | None, data_sha256: str | None) -> dict:
    """Write the record of a model FairDesk just trained into its folder; returns it."""
    from fairdesk import version
    from fairdesk.core import atomic, provenance
    from fairdesk.core.jsonable import jsonable

    record = {"format": FORMAT, "kind": str(kind), "parameters": jsonable(dict(parameters)),
              "model_sha256": str(model_sha256),
              "training_data": {"name": None if data_name is None else str(data_name),
                                "sha256": None if data_sha256 is None else str(data_sha256)},
              "trained_utc": provenance.now_utc(), "fairdesk_version": version()}
    atomic.write_text(Path(folder) / RECORD_FILE, json.dumps(record, indent=1, allow_nan=False))
    return record


def training_record(folder: str | Path, model_sha256: str | None) -> dict | None:
    """The training record of a model folder if FairDesk trained exactly this model (the recorded hash is
    ``model_sha256``, the hash of the folder as it is now); None for a folder without one, with an unreadable
    one, or one whose model changed since."""
    file = Path(folder) / RECORD_FILE if Path(folder).is_dir() else None
    if file is None or not file.is_file():
        return None
    try:
        from fairdesk.core.jsonable import read_json_file
        record = read_json_file(file)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    if not model_sha256 or record.get("model_sha256") != model_sha256:
        return None
    return record


def array_sha256(*arrays) -> str:
    """A fingerprint of in-memory training data (image pixels as trained on and their labels): SHA-256 over each
    array's dtype, shape and bytes."""
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()
