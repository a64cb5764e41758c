"""Architecture rules checked mechanically: core never imports Qt; heavy modules stay out of module level."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fairdesk"
HEAVY = {"torch", "transformers", "diffusers", "scipy", "sklearn", "matplotlib", "reportlab", "dask", "distributed"}
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


# ---------------------------------------------------------------------------------------------------------------
# The import contract (issue 11): ``gui | cli -> jobs -> core``, the two front ends never import each other, core's
# own layers point down, no import cycle anywhere, no private name imported from another module. The graph is built
# from every ``import`` / ``from ... import`` in the AST, function-level (lazy) imports included: a lazy import is
# still a dependency, it only moves the moment it is paid for.
#
# The allowlists below are the violations the code still has, each with why it is there and what removes it. They
# can only shrink: a test fails on a violation that is not listed AND on a listed one that has gone (delete its line).
# ---------------------------------------------------------------------------------------------------------------

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _fairdesk_imports(module: str) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) for every fairdesk import in ``module``, relative ones resolved."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "fairdesk"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] == "fairdesk":
                found += [(source, a.name) for a in node.names]
    return found


def _target(source: str, name: str | None) -> str:
    """The fairdesk module an import loads: ``from fairdesk import cli`` is the module ``fairdesk.cli``."""
    target = f"{source}.{name}" if name and f"{source}.{name}" in MODULES else source
    while target not in MODULES and "." in target:
        target = target.rpartition(".")[0]
    return target


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for source, name in _fairdesk_imports(module):
            target = _target(source, name)
            if target != module and target in MODULES:
                graph[module].add(target)
    return graph


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): every strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _top(module: str) -> str:
    """The layer of a module: ``core``, ``jobs``, ``cli``, ``gui``, or '' for the shared top-level modules
    (``fairdesk``, ``fairdesk.paths``, ``fairdesk._bootstrap``) every layer may use."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in {"core", "jobs", "cli", "gui"} else ""


# what each layer must never import: core is below jobs, jobs below the two front ends, which never import each other
FORBIDDEN = {"core": {"jobs", "cli", "gui"}, "jobs": {"cli", "gui"}, "cli": {"gui"}, "gui": {"cli"}}

# Layers inside core, highest first: a module may import its own layer and the ones below, never one above.
CORE_LAYERS = [
    {"validity", "demo", "synthetic", "reports", "model_card", "compare"},  # built on audits: benchmarks, the demo
    # cohort, the PDF reports, the model card and the comparison of two audits
    {"audits"},  # the audit families
    {"models", "generation"},  # classifiers, language models, the counterfactual image generator
    {"data", "text", "project"},  # tables, images, notes, templates, the project file
    # the base every layer uses; kinds imports only errors (it names the other layers' functions by string)
    {"stats", "progress", "provenance", "errors", "atomic", "export", "jsonable", "kinds", "compute", "guard",
     "scratch", "escape", "limits", "executor", "table_export", "disclosure", "numbers"},
]

# Known back-edges inside core (importer -> imported): none. (Issue 11 moved the encoder comparison to
# core/audits/encoders.py, the patient-disjoint split to core/data/splits.py and best_f1_threshold to
# core/stats/thresholds.py.)
CORE_LAYER_ALLOWLIST: set[tuple[str, str]] = set()

# Import cycles still present (each a sorted tuple of the modules of one strongly connected component): none.
CYCLE_ALLOWLIST: set[tuple[str, ...]] = set()

# Private names imported from another fairdesk module (importer, module imported from, name): none left.
PRIVATE_ALLOWLIST: set[tuple[str, str, str]] = set()


def _assert_matches_allowlist(found: set, allowed: set, what: str) -> None:
    new, gone = sorted(found - allowed), sorted(allowed - found)
    assert not new, f"{what} not in the allowlist (fix them; do not list them): {new}"
    assert not gone, f"allowlisted {what} no longer occur: delete these lines from the allowlist: {gone}"


def test_graph_sees_the_code():
    """The contract tests are only as good as the graph: it must hold the modules and resolve every import form."""
    graph = _graph()
    assert {"fairdesk.cli", "fairdesk.cli.progress", "fairdesk.jobs.groups", "fairdesk.core.audits.groups",
            "fairdesk.gui.app"} <= set(graph)
    assert "fairdesk.cli.progress" in graph["fairdesk.cli.groups"]  # module-level `from x import y`
    assert "fairdesk.core.audits.groups" in graph["fairdesk.cli.groups"]  # function-level import
    assert "fairdesk.core.kinds" in graph["fairdesk.core.project"]  # function-level
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []


def test_front_ends_sit_on_jobs_and_jobs_on_core():
    """``gui | cli -> jobs -> core``: core imports neither jobs nor a front end, jobs no front end, and the CLI and
    the GUI never import each other (each starts the other as a program: :func:`fairdesk.paths.run_program`)."""
    offenders = sorted(f"{a} -> {b}" for a, targets in _graph().items() for b in targets
                       if _top(b) in FORBIDDEN.get(_top(a), set()))
    assert offenders == []


def test_core_layers_point_down():
    """Inside core, audits sit on models, models on data; the known back-edges are listed and can only go."""
    layer_of = {name: i for i, layer in enumerate(CORE_LAYERS) for name in layer}
    core_parts = {m.split(".")[2] for m in MODULES if m.startswith("fairdesk.core.")}
    assert core_parts <= set(layer_of), f"place these core modules in CORE_LAYERS: {sorted(core_parts - set(layer_of))}"
    found = set()
    for a, targets in _graph().items():
        for b in targets:
            if a.startswith("fairdesk.core.") and b.startswith("fairdesk.core."):
                if layer_of[b.split(".")[2]] < layer_of[a.split(".")[2]]:  # b sits in a higher layer than a
                    found.add((a, b))
    _assert_matches_allowlist(found, CORE_LAYER_ALLOWLIST, "upward imports inside core")


def test_no_import_cycles():
    """No two fairdesk modules import each other, directly or around a loop (function-level imports count)."""
    found = {tuple(c) for c in _strongly_connected(_graph())}
    _assert_matches_allowlist(found, CYCLE_ALLOWLIST, "import cycles")


def test_no_private_names_across_modules():
    """``from fairdesk.x import _name`` from another module: a private name is that module's business."""
    found = set()
    for module in MODULES:
        for source, name in _fairdesk_imports(module):
            private = name and name.startswith("_") and not name.startswith("__")
            if private and f"{source}.{name}" not in MODULES and _target(source, None) != module:
                found.add((module, source, name))
    _assert_matches_allowlist(found, PRIVATE_ALLOWLIST, "private imports")


def test_building_the_cli_parser_imports_numpy_and_nothing_heavier():
    """``fairdesk-cli --help`` (and every command's start) builds the whole parser first: it loads numpy (the age
    learners' settings name their defaults) but not pandas, scipy, sklearn, torch or reportlab."""
    import os
    import subprocess
    import sys

    code = ("import sys, fairdesk.cli; fairdesk.cli.build_parser(); "
            "print(sorted({m.split('.')[0] for m in sys.modules}))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=PKG.parent, env={**os.environ, "PYTHONPATH": str(PKG.parent)})
    assert run.returncode == 0, run.stderr
    loaded = set(ast.literal_eval(run.stdout))
    assert "numpy" in loaded
    assert not loaded & (HEAVY | {"pandas", "pyarrow"} | QT)
