"""Packaging: the wheel an installer builds carries the resources where an installed FairDesk looks for them, and a
smoke test of a frozen build (runs only after packaging/build.sh, FAIRDESK_PACKAGED=dist/FairDesk)."""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

BUNDLE = os.environ.get("FAIRDESK_PACKAGED")


@pytest.mark.skipif(not BUNDLE, reason="no frozen build to test (run packaging/build.sh)")
def test_frozen_cli_runs_the_demo(tmp_path):
    exe = Path(BUNDLE) / "fairdesk-cli"
    proc = subprocess.run([str(exe), "demo", "--out", str(tmp_path), "--n-boot", "200", "--quiet"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "demo-audit.pdf").read_bytes().startswith(b"%PDF")
    assert json.loads((tmp_path / "demo-audit.json").read_text())["records"]
    assert (tmp_path / "demo-cit.pdf").read_bytes().startswith(b"%PDF")  # the imaging part, frozen


@pytest.mark.skipif(not BUNDLE, reason="no frozen build to test (run packaging/build.sh)")
def test_frozen_gui_starts_offscreen_and_both_programs_know_their_version(tmp_path):
    import time

    import fairdesk

    for name in ("fairdesk-cli", "fairdesk"):
        out = subprocess.run([str(Path(BUNDLE) / name), "--version"], capture_output=True, text=True, timeout=300)
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


ROOT = Path(__file__).resolve().parent.parent


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
