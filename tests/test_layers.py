"""Architecture rules checked mechanically: core never imports Qt; heavy modules stay out of module level."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fairdesk"
HEAVY = {"torch", "transformers", "diffusers", "scipy", "sklearn", "matplotlib", "reportlab"}
QT = {"PySide6", "pyqtgraph", "shiboken6"}


def _module_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in tree.body:  # module level only; imports inside functions are the lazy ones
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _all_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_and_jobs_never_import_qt():
    offenders = [str(p.relative_to(PKG)) for p in (PKG / "core").rglob("*.py") if _all_imports(p) & QT]
    offenders += [str(p.relative_to(PKG)) for p in (PKG / "jobs").rglob("*.py")
                  if p.name != "qt_bridge.py" and _all_imports(p) & QT]
    assert offenders == []


def test_heavy_libraries_are_imported_lazily():
    offenders = {str(p.relative_to(PKG)): sorted(_module_level_imports(p) & HEAVY) for p in PKG.rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}
