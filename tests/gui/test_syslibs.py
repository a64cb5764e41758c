"""The window's system libraries: a machine without one of Qt's xcb libraries is told which package to install
instead of Qt aborting the process."""
from __future__ import annotations

import pytest

from fairdesk.gui import app, syslibs


@pytest.mark.parametrize("env, xcb", [
    ({"QT_QPA_PLATFORM": "xcb"}, True), ({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"}, False),
    ({"DISPLAY": ":0"}, True), ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"},
                                 False), ({}, False), ({"QT_QPA_PLATFORM": "xcb:dpi=96"}, True)])
def test_which_platform_is_xcb(monkeypatch, env, xcb):
    monkeypatch.setattr(syslibs.sys, "platform", "linux")
    assert syslibs.platform_is_xcb(env) is xcb


def test_missing_libraries_name_their_packages():
    gone = {"libxcb-icccm.so.4", "libxcb-keysyms.so.1"}
    missing = syslibs.missing_libraries(loads=lambda name: name not in gone)
    assert missing == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    sentence = syslibs.missing_sentence(missing)
    assert "apt-get install libxcb-icccm4 libxcb-keysyms1" in sentence
    assert "dnf install xcb-util-wm xcb-util-keysyms" in sentence
    assert "\n" not in sentence and sentence.count(". ") == 0


def test_the_loader_agrees_with_find_library():
    """The real check (dlopen by soname) against an independent one: ctypes.util.find_library's search."""
    import ctypes.util

    found = {name: ctypes.util.find_library(name[3:name.index(".so")]) is not None for name in syslibs.XCB_LIBRARIES}
    assert syslibs.missing_libraries() == [name for name, ok in found.items() if not ok]


def test_a_machine_without_them_gets_the_sentence(tmp_path):
    """On a machine that lacks some (this CI image lacks libxcb-icccm4 and libxcb-keysyms1), the real program
    exits with 3 and the sentence, where Qt alone aborted with 134."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    if not syslibs.missing_libraries():
        pytest.skip("every xcb library is installed here; the sentence is checked with a stand-in loader above")
    env = dict(os.environ, QT_QPA_PLATFORM="xcb", DISPLAY=":99", FAIRDESK_HOME=str(tmp_path / "home"),
               FAIRDESK_SETTINGS=str(tmp_path / "s.ini"), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = subprocess.run([sys.executable, "-c", "import sys; from fairdesk.gui.app import main; sys.exit(main([]))"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 3, out.stderr
    assert "apt-get install" in out.stderr and "dnf install" in out.stderr


def test_main_says_which_package_instead_of_aborting(monkeypatch, capsys):
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    monkeypatch.setattr(syslibs.sys, "platform", "linux")
    monkeypatch.setattr(syslibs, "missing_libraries", lambda: ["libxcb-cursor.so.0"])
    assert app.main([]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("fairdesk: the window needs system libraries") and "libxcb-cursor0" in err
    assert "xcb-util-cursor" in err and len(err.splitlines()) == 1


def test_readme_and_the_kit_list_every_package():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for doc in ("README.md", "packaging/README.md"):
        text = (root / doc).read_text(encoding="utf-8")
        missing = [p for pair in syslibs.XCB_LIBRARIES.values() for p in pair if p not in text]
        assert not missing, (doc, missing)
