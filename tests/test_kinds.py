"""The kind registry (fairdesk/core/kinds.py): every reference resolves, every kind string the code stores is a row,
and the registry is what the project, the report route and the GUI read."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from fairdesk.core import kinds
from fairdesk.core.errors import DataError

ROOT = Path(__file__).resolve().parents[1] / "fairdesk"


@pytest.mark.parametrize("name", sorted(kinds.AUDIT_KINDS))
def test_every_reference_resolves(name):
    row = kinds.AUDIT_KINDS[name]
    for ref in (row.job, row.report) + ((row.parser,) if row.parser else ()):
        assert callable(kinds.resolve(ref)), ref
    params = list(inspect.signature(kinds.resolve(row.report)).parameters)
    assert params[:3] == ["doc", "path", "settings"], f"{name}: report builders take (doc, path, settings)"
    job = inspect.signature(kinds.resolve(row.job)).parameters
    assert list(job)[0] == "project_path" and {"name", "progress", "cancel"} <= set(job), name


def test_page_references_name_gui_classes():
    # resolved by the GUI tests (importing Qt here would slow every core test); here: the module and class exist
    for row in kinds.AUDIT_KINDS.values():
        module, _, cls = row.page.partition(":")
        path = ROOT.parent / (module.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert cls in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}, row.page


def _stored_kind_strings() -> set[str]:
    """Every string literal passed as the kind of add_audit / add_model / add_dataset in fairdesk/ (or held by a
    module constant used for it)."""
    found = set()
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        consts = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)
                  and isinstance(n.value.value, str)}
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr in ("add_audit", "add_model", "add_dataset")):
                continue
            args = list(call.args[1:2]) + [k.value for k in call.keywords if k.arg == "kind"]
            for a in args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    found.add((call.func.attr, a.value))
                elif isinstance(a, ast.Name) and a.id in consts:
                    found.add((call.func.attr, consts[a.id]))
    return found


def test_every_stored_kind_is_registered():
    table = {"add_audit": kinds.AUDIT_KINDS, "add_model": kinds.MODEL_KINDS, "add_dataset": kinds.DATASET_KINDS}
    missing = {(f, k) for f, k in _stored_kind_strings() if k not in table[f]}
    assert not missing, f"register these kinds in fairdesk/core/kinds.py: {sorted(missing)}"


def test_unknown_kind_and_bad_settings_are_clear_errors():
    with pytest.raises(DataError, match="not known"):
        kinds.audit_kind("astrology")
    for k in (0, -3, 2.5):
        with pytest.raises(DataError, match="at least 1"):
            kinds.ReportSettings(suppress_k=k)
