"""Session-wide test setup: offline, headless, isolated user folders.

* Every attempt to reach a network address (anything but an AF_UNIX socket) raises
  ``RuntimeError("network access attempted: ...")`` and is recorded in :data:`NETWORK_ATTEMPTS`
  (fixture ``network_attempts``). FairDesk is an offline app; tests/core/test_offline.py proves the guard works.
* Qt runs offscreen, FairDesk's data and cache folders point into a session temp dir, Hugging Face stays offline.
"""
from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis profiles: "ci" (the default, used by `make test`/.ci/run) is small and derandomised, so every run
# draws the same examples; "dev" is the longer local run: HYPOTHESIS_PROFILE=dev make test.
settings.register_profile("ci", max_examples=40, derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("dev", max_examples=500, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_SESSION_DIR = tempfile.mkdtemp(prefix="fairdesk-tests-")
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["FAIRDESK_HOME"] = os.path.join(_SESSION_DIR, "home")
os.environ["FAIRDESK_CACHE"] = os.path.join(_SESSION_DIR, "cache")
os.environ["HF_HUB_OFFLINE"] = "1"
if "torch" in sys.modules:  # never import torch here: it costs seconds
    sys.modules["torch"].set_num_threads(1)

NETWORK_ATTEMPTS: list[str] = []

_AF_UNIX = getattr(socket, "AF_UNIX", None)


def _refuse(what: str):
    NETWORK_ATTEMPTS.append(what)
    raise RuntimeError(f"network access attempted: {what}")


def _guard_method(original, name):
    def guarded(self, address, *args, **kwargs):
        if _AF_UNIX is not None and self.family == _AF_UNIX:
            return original(self, address, *args, **kwargs)
        _refuse(f"socket.{name}({address!r})")
    guarded.__name__ = name
    return guarded


def _guard_sendto(original):
    def sendto(self, data, *args):
        if _AF_UNIX is not None and self.family == _AF_UNIX:
            return original(self, data, *args)
        _refuse(f"socket.sendto({args[-1]!r})")
    return sendto


@pytest.fixture(scope="session", autouse=True)
def _no_network():
    mp = pytest.MonkeyPatch()
    mp.setattr(socket.socket, "connect", _guard_method(socket.socket.connect, "connect"))
    mp.setattr(socket.socket, "connect_ex", _guard_method(socket.socket.connect_ex, "connect_ex"))
    mp.setattr(socket.socket, "sendto", _guard_sendto(socket.socket.sendto))
    mp.setattr(socket, "create_connection",
               lambda address, *a, **k: _refuse(f"socket.create_connection({address!r})"))
    mp.setattr(socket, "getaddrinfo", lambda host, port, *a, **k: _refuse(f"socket.getaddrinfo({host!r}, {port!r})"))
    yield NETWORK_ATTEMPTS
    mp.undo()
    shutil.rmtree(_SESSION_DIR, ignore_errors=True)


@pytest.fixture
def network_attempts(_no_network) -> list[str]:
    """The list of refused network attempts so far (shared by the whole session)."""
    return _no_network
