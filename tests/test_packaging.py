"""Packaging: the wheel an installer builds carries the resources where an installed FairDesk looks for them; the
frozen build's spec is one program in one folder and leaves out only what FairDesk never loads; and a smoke test of a
frozen build (runs only after packaging/build.sh, FAIRDESK_PACKAGED=dist/FairDesk)."""
import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections import Counter
from pathlib import Path

import pytest

BUNDLE = os.environ.get("FAIRDESK_PACKAGED")
ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "packaging" / "fairdesk.spec"
frozen = pytest.mark.skipif(not BUNDLE, reason="no frozen build to test (run packaging/build.sh)")


def _spec() -> tuple[Counter, dict]:
    """The spec's calls by name and its top-level assignments that are literals (the exclusion lists)."""
    tree = ast.parse(SPEC.read_text(encoding="utf-8"))
    calls = Counter(ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call))
    lists = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            try:
                lists[n.targets[0].id] = ast.literal_eval(n.value)
            except ValueError:
                pass
    return calls, lists


def _left_out_modules(*, optional: bool = True) -> list[str]:
    """The modules the bundle lacks: the spec's trims (unused Qt modules, pyarrow's network parts, the diffusers
    sources it does not ship) and, with ``optional``, the test-only and optional packages it excludes as well
    (fairlearn: FairDesk adds its reference row only when it is installed)."""
    _, lists = _spec()
    mods = ["PySide6." + m for m in lists["QT_UNUSED_MODULES"]] + lists["ARROW_UNUSED"] + lists["OFFLINE_UNUSED"]
    mods += ["diffusers." + pattern.split("/")[0] for pattern in lists["DIFFUSERS_SOURCES_LEFT_OUT"]]
    return mods + (lists["excluded"] if optional else [])


def test_spec_builds_one_program_with_two_names_in_one_folder():
    calls, lists = _spec()
    # one analysis, one archive, ONE executable (each EXE embeds its own copy of the archive), one folder
    assert [calls[k] for k in ("Analysis", "PYZ", "EXE", "COLLECT", "MERGE")] == [1, 1, 1, 1, 0]
    assert calls["os.symlink"] == 1  # fairdesk-cli -> fairdesk
    text = SPEC.read_text(encoding="utf-8")
    assert 'os.symlink("fairdesk", cli_link)' in text and '"FairDesk" / "fairdesk-cli"' in text
    assert 'name="fairdesk"' in text and '"entry.py"' in text
    # what an offline CPU audit never needs is on the lists
    assert {"QtWebEngineCore", "Qt3DCore", "QtQuick", "QtQml"} <= set(lists["QT_UNUSED_MODULES"])
    assert {"torch/include/", "PySide6/Qt/translations/"} <= set(lists["DATA_FOLDERS_LEFT_OUT"])
    assert {".h", ".a", ".pyi"} <= set(lists["DATA_SUFFIXES_LEFT_OUT"])


def test_entry_runs_the_command_line_by_name_or_by_cli_and_the_window_otherwise(tmp_path):
    import fairdesk

    entry = ROOT / "packaging" / "entry.py"
    link = tmp_path / "fairdesk-cli"
    link.symlink_to(entry)
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    for argv, expected in (([str(link), "--version"], "fairdesk-cli"), ([str(entry), "cli", "--version"], "fairdesk-cli"),
                           ([str(entry), "--version"], "fairdesk")):
        out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=120)
        assert (out.returncode, out.stdout.strip()) == (0, f"{expected} {fairdesk.__version__}"), out.stderr


def _imported_names() -> set[str]:
    """Every module FairDesk's code imports (import statements) or names for importlib (dotted string constants)."""
    names = set()
    for path in (ROOT / "fairdesk").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
                names |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isascii() \
                    and node.value.replace(".", "").replace("_", "").isalnum() and "." in node.value:
                names.add(node.value)
    return names


def test_nothing_fairdesk_imports_is_left_out_of_the_bundle():
    names, left_out = _imported_names(), _left_out_modules(optional=False)
    assert {"PySide6.QtWidgets", "pyarrow.parquet", "diffusers.AutoencoderKL", "transformers"} <= names  # the scan sees
    hits = sorted(n for n in names for m in left_out if n == m or n.startswith(m + "."))
    assert not hits, f"the frozen bundle leaves these out but FairDesk imports them: {hits}"


def _needed(lib: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


@pytest.mark.skipif(shutil.which("readelf") is None or not sys.platform.startswith("linux"), reason="ELF only")
def test_left_out_libraries_are_loaded_only_by_left_out_modules():
    """No shared library or extension the bundle keeps (pyarrow's, torch's) links one the spec drops."""
    pa = pytest.importorskip("pyarrow")
    _, lists = _spec()
    dropped = tuple(lists["BINARIES_LEFT_OUT"])
    gone = {m.rsplit(".", 1)[1] for m in lists["ARROW_UNUSED"]}
    pa_dir = Path(pa.__file__).parent
    kept = [f for f in pa_dir.glob("*.so*") if f.name.split(".")[0] not in gone and not f.name.startswith(dropped)]
    torch_spec = importlib.util.find_spec("torch")  # torch's own libraries, without importing torch
    if torch_spec is not None and torch_spec.origin:
        kept += [f for f in (Path(torch_spec.origin).parent / "lib").glob("*.so*") if not f.name.startswith(dropped)]
    assert any(f.name.startswith("_dataset") for f in kept) and any(f.name.startswith("_parquet") for f in kept)
    links = {f.name: [n for n in _needed(f) if n.startswith(dropped)] for f in kept}
    assert not {k: v for k, v in links.items() if v}
    flight = next(pa_dir.glob("_flight*.so"), None)
    if flight is not None:  # the check reads NEEDED entries at all: the left-out module does need a dropped library
        assert any(n.startswith(dropped) for n in _needed(flight))


def _run_without_left_out(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter to which everything the bundle leaves out (transformers' modular_*/convert_*
    model files included) does not exist: every finder answers None for it, as the bundle's would, so an import
    raises ModuleNotFoundError and a probe (importlib.util.find_spec) sees nothing; and the source of a module the
    bundle keeps as bytecode only cannot be read (inspect raises OSError, as it does in the bundle)."""
    _, lists = _spec()
    guard = textwrap.dedent(f"""
        import inspect, sys
        LEFT_OUT = {_left_out_modules()!r}
        MODES = {lists["COLLECTION_MODES"]!r}
        def bytecode_only(path):
            parts = path.replace("\\\\", "/").removesuffix(".py").split("/")
            for start in range(len(parts)):
                name = ".".join(p for p in parts[start:] if p != "__init__")
                best = max((m for m in MODES if name == m or name.startswith(m + ".")), key=len, default=None)
                if best is not None:
                    return MODES[best] == "pyz"
            return False
        _findsource = inspect.findsource
        def findsource(obj):
            path = inspect.getsourcefile(obj) or ""
            if bytecode_only(path):
                raise OSError("could not get source code")
            return _findsource(obj)
        inspect.findsource = findsource
        def left_out(name):
            last = name.rsplit(".", 1)[-1]
            return any(name == m or name.startswith(m + ".") for m in LEFT_OUT) or (
                name.startswith("transformers.models.") and last.startswith(("modular_", "convert_")))
        class Hiding:
            def __init__(self, finder):
                self.finder = finder
            def find_spec(self, name, path=None, target=None):
                return None if left_out(name) else self.finder.find_spec(name, path, target)
            def __getattr__(self, attr):
                return getattr(self.finder, attr)
        sys.meta_path[:] = [Hiding(f) for f in sys.meta_path]
        for loaded in [m for m in sys.modules if left_out(m)]:
            del sys.modules[loaded]
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", guard + textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=600)


def test_parquet_reads_without_the_left_out_arrow_modules(tmp_path):
    pytest.importorskip("pyarrow")
    out = _run_without_left_out("""
        import numpy as np, pandas as pd, pyarrow.dataset as ds, pyarrow.parquet as pq
        df = pd.DataFrame({"y": [0, 1, 1, 0], "p": [0.1, 0.8, 0.6, 0.3], "sex": ["F", "M", "F", "M"]})
        df.to_parquet("t.parquet")
        back = pd.read_parquet("t.parquet")
        assert back.equals(df), back
        assert ds.dataset("t.parquet").to_table().num_rows == 4 == pq.read_table("t.parquet").num_rows
        assert "pyarrow._flight" not in sys.modules and "pyarrow._s3fs" not in sys.modules
        print("ok")
    """, tmp_path)
    assert out.returncode == 0 and out.stdout.split()[-1] == "ok", out.stderr[-3000:]


def test_generator_and_masked_lm_load_without_the_left_out_sources(tmp_path):
    """FairDesk's image generator (diffusers parts, no pipelines) trains, saves, loads and samples, and a local masked
    LM (transformers, without the modular/convert files) loads and runs, with everything the bundle leaves out
    unimportable and the sources it keeps as bytecode only unreadable."""
    pytest.importorskip("diffusers")
    out = _run_without_left_out("""
        import numpy as np, torch
        torch.set_num_threads(1)
        from fairdesk.core.generation.images import TrainSchedule, config_for_size, load_generator, train_generator
        images = np.random.default_rng(0).random((8, 8, 8)).astype("float32")
        train_generator(images, np.array([0, 1] * 4), config_for_size("tiny", 8),
                        TrainSchedule(vae_steps=2, unet_steps=2, batch_size=4), out_dir="gen")
        img = load_generator("gen").sample([0, 1], steps=2, seed=0)
        assert img.shape[0] == 2 and np.isfinite(img).all(), img.shape
        from transformers import BertConfig, BertForMaskedLM
        from fairdesk.core.models.mlm import load_masked_lm, vocabulary_tokenizer
        words = vocabulary_tokenizer(["the", "patient", "is", "calm"])
        BertForMaskedLM(BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=64, max_position_embeddings=64)).save_pretrained("mlm")
        words.save_pretrained("mlm")
        model, tok = load_masked_lm("mlm")
        with torch.no_grad():
            logits = model(**tok(["the patient is calm"], return_tensors="pt")).logits
        assert torch.isfinite(logits).all() and logits.shape[-1] == len(tok)
        assert not [m for m in sys.modules if m.startswith("diffusers.pipelines")]
        print("ok")
    """, tmp_path)
    assert out.returncode == 0 and out.stdout.split()[-1] == "ok", out.stderr[-3000:]


@frozen
def test_frozen_bundle_is_one_program_under_one_gigabyte():
    bundle = Path(BUNDLE)
    assert (bundle / "fairdesk-cli").is_symlink() and os.readlink(bundle / "fairdesk-cli") == "fairdesk"
    programs = sorted(p.name for p in bundle.iterdir() if p.is_file() and not p.is_symlink())
    assert programs == ["fairdesk"]
    size = sum((Path(d) / f).lstat().st_size for d, _, files in os.walk(bundle) for f in files)
    assert size <= 1_000_000_000, f"{size / 1e9:.2f} GB"


@frozen
def test_frozen_cli_runs_the_demo_and_trains_a_generator(tmp_path):
    exe = Path(BUNDLE) / "fairdesk-cli"
    proc = subprocess.run([str(exe), "demo", "--out", str(tmp_path), "--n-boot", "200", "--quiet"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "demo-audit.pdf").read_bytes().startswith(b"%PDF")
    assert json.loads((tmp_path / "demo-audit.json").read_text())["records"]
    assert (tmp_path / "demo-cit.pdf").read_bytes().startswith(b"%PDF")  # the imaging part, frozen
    images = tmp_path / "demo-images"
    proc = subprocess.run([str(exe), "train", "generator", "--data", str(images / "labels.csv"), "--images",
                           str(images), "--attribute", "sex", "--image-size", "16", "--vae-steps", "2",
                           "--unet-steps", "2", "--batch-size", "8", "--quiet", "--out", str(tmp_path / "gen")],
                          capture_output=True, text=True, timeout=900)  # torch and diffusers, frozen
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "gen" / "unet" / "config.json").is_file()


@frozen
def test_frozen_audits_write_pdfs_from_parquet_and_a_tiny_masked_lm(tmp_path):
    import numpy as np
    import pandas as pd
    from tiny_text import build_probe_mlm

    exe = Path(BUNDLE) / "fairdesk-cli"
    rng = np.random.default_rng(0)
    y = rng.binomial(1, 0.3, 400)
    df = pd.DataFrame({"y": y, "p": np.clip(0.3 + 0.3 * (y - 0.3) + rng.normal(0, 0.1, 400), 0.01, 0.99),
                       "sex": rng.choice(["F", "M"], 400)})
    df.to_parquet(tmp_path / "t.parquet")
    proc = subprocess.run([str(exe), "audit", "groups", str(tmp_path / "t.parquet"), "--label", "y", "--score", "p",
                           "--attribute", "sex", "--threshold", "0.4", "--n-boot", "100", "--json",
                           str(tmp_path / "g.json"), "--pdf", str(tmp_path / "g.pdf"), "--quiet"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and (tmp_path / "g.pdf").read_bytes().startswith(b"%PDF"), proc.stderr[-3000:]
    build_probe_mlm(tmp_path / "mlm")
    proc = subprocess.run([str(exe), "audit", "mlm-bias", "--model", str(tmp_path / "mlm"), "--json",
                           str(tmp_path / "m.json"), "--pdf", str(tmp_path / "m.pdf"), "--quiet"],
                          capture_output=True, text=True, timeout=900)  # torch and transformers, frozen
    assert proc.returncode == 0 and (tmp_path / "m.pdf").read_bytes().startswith(b"%PDF"), proc.stderr[-3000:]


@frozen
def test_frozen_gui_starts_offscreen_and_both_programs_know_their_version(tmp_path):
    import time

    import fairdesk

    for argv, name in ((["fairdesk-cli", "--version"], "fairdesk-cli"), (["fairdesk", "cli", "--version"], "fairdesk-cli"),
                       (["fairdesk", "--version"], "fairdesk")):
        out = subprocess.run([str(Path(BUNDLE) / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and out.stdout.strip() == f"{name} {fairdesk.__version__}", out.stderr
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", FAIRDESK_HOME=str(tmp_path / "home"))
    gui = subprocess.Popen([str(Path(BUNDLE) / "fairdesk"), str(tmp_path / "smoke.fairdesk")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (tmp_path / "smoke.fairdesk").exists() and gui.poll() is None:
            time.sleep(1)  # the window creates the project it was asked to open once it is up
        assert gui.poll() is None, gui.communicate()[1][-2000:]
        assert (tmp_path / "smoke.fairdesk").exists()
    finally:
        gui.terminate()
        gui.wait(timeout=60)


def test_installed_wheel_finds_its_resources(tmp_path):
    """Built from a copy of the checkout with the installed setuptools (no network, no build isolation), installed
    into a folder and asked from a process that cannot see the checkout."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("fairdesk", "resources"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(ROOT / "docs" / "guide", src / "docs" / "guide")  # Help › User guide ships as resources/guide
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "--no-index",
                    "-q", "-w", str(dist)], check=True, capture_output=True, cwd=tmp_path, timeout=300)
    wheel = next(dist.glob("fairdesk-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "resources").rglob("*") if p.is_file()}
    assert shipped and {f"fairdesk/{p}" for p in shipped} <= names  # every resource file, none left behind
    assert {f"fairdesk/resources/guide/{p.name}" for p in (ROOT / "docs" / "guide").glob("*.md")} <= names
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", str(wheel), "--no-deps", "--no-index", "-q", "--target",
                    str(site)], check=True, capture_output=True, cwd=tmp_path, timeout=300)
    code = ("import fairdesk.paths as p, fairdesk.core.model_card as m, fairdesk.core.text.templates as t; "
            "print(p.__file__); print(m.schema_path().is_file(), t.default_bias_templates_path().is_file())")
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
                         check=True, capture_output=True, text=True, cwd=tmp_path, timeout=120).stdout.split()
    assert out[0].startswith(str(site)) and out[1:] == ["True", "True"]
