"""The system libraries Qt's xcb platform plugin (the X11 window) loads, checked before the first Qt window.

Without one of them Qt aborts the process (exit 134) with a message that often names another library. FairDesk
tries to load each by its soname first (``ctypes.CDLL``: the dynamic loader's own search, the same Qt's plugin
loader does; ``ctypes.util.find_library`` runs ``ldconfig`` or a compiler and is slower and less faithful) and, when
any is missing, says in one sentence which packages to install on Debian/Ubuntu and on RHEL/Fedora.

The list is the plugin's own: ``readelf -d`` of PySide6's ``libqxcb.so`` and ``libQt6XcbQpa.so.6`` (Qt 6.x),
plus the libraries Qt's GUI module needs on every platform (GL, EGL, fontconfig).
"""
from __future__ import annotations

import os
import sys

#: soname -> (Debian/Ubuntu package, RHEL/Fedora package)
XCB_LIBRARIES = {
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
}


def platform_is_xcb(environ=None) -> bool:
    """True when Qt will open its xcb (X11) plugin: on Linux, ``QT_QPA_PLATFORM`` names xcb, or it is unset and
    an X display is set outside a Wayland session."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return False
    chosen = (env.get("QT_QPA_PLATFORM") or "").split(";")[0].split(":")[0].strip()
    if chosen:
        return chosen == "xcb"
    if env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE") == "wayland":
        return False
    return bool(env.get("DISPLAY"))


def _loads(soname: str) -> bool:
    import ctypes

    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def missing_libraries(loads=_loads) -> list[str]:
    """The sonames of :data:`XCB_LIBRARIES` the dynamic loader cannot load (empty when all are there)."""
    return [name for name in XCB_LIBRARIES if not loads(name)]


def missing_sentence(missing: list[str]) -> str:
    """One sentence: what is missing and the packages that bring it, for Debian/Ubuntu and RHEL/Fedora."""
    debian = " ".join(dict.fromkeys(XCB_LIBRARIES[m][0] for m in missing))
    rhel = " ".join(dict.fromkeys(XCB_LIBRARIES[m][1] for m in missing))
    return (f"fairdesk: the window needs system libraries that are not installed ({', '.join(missing)}): install "
            f"them with 'sudo apt-get install {debian}' on Debian/Ubuntu or 'sudo dnf install {rhel}' on "
            "RHEL/Fedora (or run 'fairdesk --headless' / fairdesk-cli without a window).")
