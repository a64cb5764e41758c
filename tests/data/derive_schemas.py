"""Derive one JSON schema per audit kind (``resources/schemas/<kind>.schema.json``) from real stored documents.

Not a test: run by hand when a kind's document changes, then review the diff of the schemas. Usage (from the
repository root): ``python tests/data/derive_schemas.py DOCS/*.<kind>.json ...`` where each file name ends in
``.<kind>.json``. The shipped schemas were derived from the document of every case of ``tests/test_one_path.py``
(both image routes), the demo's group audit, slice audits of every metric (with and without tasks, patients, a continuous attribute,
best-F1) and group audits of every gap rule (best-F1 and fixed thresholds, tasks,
a split, intersections, a continuous attribute, with and without calibration). Rules: each field's type as seen;
numbers in a table row may be null (NaN is stored as null); a top-level field seen in every document is required, nested fields only where FIX names them (what the code reads without a default, found by mutating every path of a real document); objects
whose keys are names from the data (``MAPS``) get one schema for all their values; ``FIX`` relaxes what older stored
formats lack (group audits before issue 9 and §8) and names the top-level fields read without a default.
"""
import json, glob, sys, re
from pathlib import Path

# paths (tuple of keys, '*' for list items and map values) whose object keys are data (names), not fields
MAPS = {
  "groups": ["thresholds", "provenance.model_hashes", "provenance.versions", "provenance.bootstrap", "plan.drop_groups"],
  "age_independence": ["methods", "methods.*.t_test", "methods.*.comparison", "methods.*.leakage.probes", "settings.margins",
                       "provenance.model_hashes", "provenance.versions"],
  "cit_images": ["effects", "scatter", "scatter.*", "table.*.nuisance_fit", "table.*.regressors_chosen", "scatter.*.flip",
                 "provenance.model_hashes", "provenance.versions", "dataset.labels", "dataset.n_per_group", "quality", "settings.quality"],
  "ctf": ["settings.term_sets", "counts.excluded_no_valid_counterfactual", "settings.synthetic.per_template",
          "provenance.model_hashes", "provenance.versions", "provenance.term_set_sha256"],
  "slices": ["thresholds", "searched_by_order", "slices.*.definition", "tasks.*.bins", "provenance.model_hashes",
             "provenance.versions"],
  "mlm_bias": ["method.groups", "method.multi_piece_words", "method.templates.counts", "provenance.model_hashes", "provenance.versions"],
  "note_classifiers": ["encoders", "encoders.*.model_hashes", "c_curves", "c_curves.*", "c_curves.*.*", "mlp_grids", "mlp_grids.*", "probe", "audits",
                       "audits.*.thresholds", "audits.*.provenance.model_hashes", "audits.*.provenance.versions",
                       "audits.*.provenance.bootstrap", "audits.*.plan.drop_groups", "provenance.model_hashes", "provenance.versions"],
}

def merge(a, b):
    if a is None: return b
    if b is None: return a
    out = {"types": a["types"] | b["types"], "n": a["n"] + b["n"]}
    if "const" in a or "const" in b:
        out["const"] = a.get("const", set()) | b.get("const", set())
    if "props" in a or "props" in b:
        pa, pb = a.get("props", {}), b.get("props", {})
        out["props"] = {k: merge(pa.get(k), pb.get(k)) for k in pa.keys() | pb.keys()}
        out["count"] = {k: a.get("count", {}).get(k, 0) + b.get("count", {}).get(k, 0) for k in out["props"]}
        out["nobj"] = a.get("nobj", 0) + b.get("nobj", 0)
    if "map" in a or "map" in b:
        out["map"] = merge(a.get("map"), b.get("map"))
    if "items" in a or "items" in b:
        out["items"] = merge(a.get("items"), b.get("items"))
    return out

def observe(v, path, maps):
    t = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null", list: "array", dict: "object"}[type(v)]
    node = {"types": {t}, "n": 1}
    if isinstance(v, str) and len(path) == 1 and path[0] in ("kind", "format", "card_format"):
        node["const"] = {v}
    if isinstance(v, dict):
        if ".".join(path) in maps:
            m = None
            for x in v.values(): m = merge(m, observe(x, path + ["*"], maps))
            node["map"] = m
        else:
            node["props"] = {k: observe(x, path + [k], maps) for k, x in v.items()}
            node["count"] = {k: 1 for k in v}
            node["nobj"] = 1
    if isinstance(v, list):
        it = None
        for x in v: it = merge(it, observe(x, path + ["*"], maps))
        node["items"] = it
    return node

def emit(node, cell=False, depth=0, prov=False):
    """cell: a value in a row of a table (a list of records): any scalar there may also be null (a missing value)."""
    if node is None:
        return {}
    types = set(node["types"])
    if "integer" in types and "number" in types:
        types.discard("integer")
    if (prov or (cell and LOOSE_CELLS)) and types <= {"number", "integer", "string", "boolean", "null"}:
        types.add("null")
    if types == {"null"}:
        return {}  # only ever seen empty: not constrained
    if "number" in types and cell:
        types.add("null")  # NaN and infinities in a table are stored as null (a column of whole numbers holds none)
    s = {"type": sorted(types) if len(types) > 1 else next(iter(types))}
    if "const" in node and len(node["const"]) == 1:
        s["enum"] = sorted(node["const"])
    if "props" in node:
        s["properties"] = {k: emit(v, cell=node.get("row", False), depth=depth + 1, prov=prov or k == "provenance")
                           for k, v in sorted(node["props"].items())}
        req = [k for k, c in node["count"].items() if c == node["nobj"] and "null" not in node["props"][k]["types"]
               and depth == 0 and k != "provenance"]  # nested: only what FIX names (read without a default)
        if req: s["required"] = sorted(req)
    if "map" in node:
        s["additionalProperties"] = emit(node["map"], depth=depth + 1, prov=prov)
    if "items" in node and node["items"] is not None:
        node["items"]["row"] = "props" in node["items"]
        s["items"] = emit(node["items"], cell=True, depth=depth + 1, prov=prov)
    return s

def _groups_fix(s, top=True):
    p = s["properties"]
    # documents stored before issue 9 and before §8: only plan, thresholds and provenance are read without a default
    if top:
        s["required"] = ["plan", "provenance", "thresholds"]
    p["plan"]["required"] = ["roles", "metrics", "bins"]  # the others have defaults (GroupAuditPlan)
    p["provenance"].pop("required", None)  # every other plan field has a default (GroupAuditPlan)
    p["plan"]["properties"]["threshold"]["type"] = ["number", "string"]  # a number or "best_f1"
    roles = p["plan"]["properties"]["roles"]
    roles["required"] = ["label", "score"]
    for name in ("task", "patient_id", "sample_id", "split"):
        roles["properties"][name] = {"type": ["string", "null"]}
    for name in ("attributes", "continuous_attributes"):
        roles["properties"][name] = {"type": "array", "items": {"type": "string"}}
    p["plan"]["properties"]["tasks"] = {"type": ["array", "null"], "items": {"type": "string"}}
    p["plan"]["properties"]["intersections"] = {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}
    p["plan"]["properties"]["drop_groups"] = {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}}
    p["plan"]["properties"]["bins"] = {"type": "array", "items": {"type": "integer"}}
    p["thresholds"]["additionalProperties"] = {"type": ["number", "null"]}
    p["plan"]["properties"]["calibration_slope_range"] = {"type": "array", "items": {"type": "number"}, "minItems": 2,
                                                          "maxItems": 2}
    for name in ("dropped", "delta_bins", "records", "groups", "summary", "tests", "calibration", "discrimination",
                 "curves"):
        p[name].setdefault("items", {})["type"] = "object"

def _notes_fix(s):
    _groups_fix(s["properties"]["audits"]["additionalProperties"], top=False)

def _required(*names):
    def fix(s):
        s["required"] = list(names)
    return fix


def _mlm_fix(s):
    s["required"] = ["records", "kind"]
    s["properties"]["method"]["properties"]["multi_piece_words"] = {
        "type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}}


def _notes_all(s):
    _notes_fix(s)
    s["required"] = ["audits", "results", "tasks", "kind"]
    p = s["properties"]
    p["tasks"] = {"type": "array", "items": {"type": "string"}}
    p["probe"]["additionalProperties"]["properties"]["classes"] = {"type": "array", "items": {"type": "string"}}


def _cit_fix(s):
    s["required"] = ["table"]
    p = s["properties"]
    p["control_band"] = {"type": ["number", "null"]}  # a float, or null without a negative-control classifier
    p["unreadable"] = {"type": "array", "items": {"type": "object"}}
    p["table"]["items"]["required"] = ["output"]  # the one field of a row read without a default


def _ctf_fix(s):
    s["required"] = ["ctf_gap"]
    p = s["properties"]
    p["pairs"]["items"]["required"] = ["term", "counterfactual_term"]
    p["group_rates"]["required"] = ["terms", "pair_gaps"]
    p["group_rates"]["properties"]["pair_gaps"]["items"]["required"] = ["term", "other_term", "tpr_gap", "tnr_gap"]


def _age_fix(s):
    s["required"] = ["methods", "settings", "provenance"]
    settings = s["properties"]["settings"]
    settings["required"] = ["folds", "repeats", "label", "attribute", "learner", "margins", "alpha"]
    learner = settings["properties"]["learner"]
    learner["required"] = sorted(learner["properties"])  # every learner setting is printed in the methods


def _slices_fix(s):
    s["required"] = ["kind", "plan", "slices", "searched", "split", "counts"]
    p = s["properties"]
    p["plan"]["required"] = ["roles", "metric", "margin"]
    p["plan"]["properties"]["threshold"]["type"] = ["number", "string"]  # a number or "best_f1"
    roles = p["plan"]["properties"]["roles"]
    roles["required"] = ["label", "score"]
    for name in ("task", "patient_id", "sample_id", "split"):
        roles["properties"][name] = {"type": ["string", "null"]}
    for name in ("attributes", "continuous_attributes"):
        roles["properties"][name] = {"type": "array", "items": {"type": "string"}}
    p["counts"]["required"] = ["differs", "equivalent", "inconclusive", "total"]
    p["split"]["required"] = ["fraction", "seed", "discovery_rows", "confirmation_rows"]
    row = p["slices"]["items"]
    row["required"] = ["definition", "metric", "n", "value", "rest_value", "gap", "ci_low", "ci_high", "p_value",
                       "q_value", "verdict"]
    row["properties"]["definition"] = {"type": "object", "additionalProperties": {"type": "string"}}
    row["properties"]["verdict"] = {"enum": ["differs", "equivalent", "inconclusive"]}
    row["properties"]["reason"] = {"type": ["string", "null"]}
    p["tasks"]["items"]["properties"]["bins"] = {"type": "object", "additionalProperties": {
        "type": "array", "items": {"type": "number"}}}


# the top-level fields read without a default (the others are read with .get(...) or a default)
FIX = {"groups": _groups_fix, "note_classifiers": _notes_all, "cit_images": _cit_fix,
       "ctf": _ctf_fix, "mlm_bias": _mlm_fix, "age_independence": _age_fix, "slices": _slices_fix}

docs = {}
for f in sys.argv[1:]:
    kind = Path(f).name.split(".")[-2]
    docs.setdefault(kind, []).append(json.load(open(f)))
for kind, ds in docs.items():
    LOOSE_CELLS = True  # any cell of a table may be empty (a test without df, a term without a control): null
    maps = set(MAPS.get(kind, []))
    node = None
    for d in ds: node = merge(node, observe(d, [], maps))
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"FairDesk stored audit document: {kind}"}
    schema.update(emit(node))
    FIX.get(kind, lambda s: None)(schema)
    Path(f"resources/schemas/{kind}.schema.json").write_text(json.dumps(schema, indent=1, ensure_ascii=False) + "\n")
    print(kind, len(json.dumps(schema)))
